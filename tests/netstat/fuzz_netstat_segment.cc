// libFuzzer target: the stats segment reader (netstat/reader.h) over arbitrary images. The
// bytes are copied into an 8-byte-aligned buffer, as a mapping would be.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "netstat/reader.h"
#include "netstat/render.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<uint64_t> image((size + 7) / 8 + 1);
    if (size > 0) {
        std::memcpy(image.data(), data, size);  // data may be NULL when size is 0
    }
    auto p = atlas::netstat::parseSegment(image.data(), size);
    if (p.isOk()) {
        // Whatever the reader accepted must render without tripping a sanitizer.
        (void)atlas::netstat::renderTable({p.value()}, 0);
        (void)atlas::netstat::renderPrometheus({p.value()});
    }
    return 0;
}
