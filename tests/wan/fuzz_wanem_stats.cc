// Fuzz target: atlas-wanem's stats document as its readers parse it (perf/atlas-wanem/
// stats_reader.h; atlas-pipeline-bench --link-stats reads another process's file). Whatever the
// bytes, parsing returns a snapshot or an error, and a parsed snapshot compares with itself.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "perf/atlas-wanem/stats_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace atlas::wanem;
    auto snap = parseLinkStats(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!snap) {
        return 0;
    }
    auto use = linkUse(*snap, *snap, 1'000'000);
    if (!use || use->size() != snap->dirs.size()) {
        std::abort();  // a snapshot always matches itself
    }
    for (const DirectionUse& u : *use) {
        if (u.wire_bytes != 0 || (u.utilization != -1 && u.utilization != 0)) {
            std::abort();
        }
    }
    return 0;
}
