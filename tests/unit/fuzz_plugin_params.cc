// libFuzzer target for the plugin's text parsers: ATLAS_* values (every registered kind),
// the ATLAS_SOCKET_IFNAME matcher and the sysfs speed parser. Input: byte 0 picks the
// variable, the rest is its value. Invariants: errors name the variable; an accepted value
// of an exact kind formats back to text that parses to the same value.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "plugin/devices.h"
#include "plugin/params.h"

using namespace atlas::plugin;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) {
        return 0;
    }
    const auto& specs = paramSpecs();
    const ParamSpec& spec = specs[data[0] % specs.size()];
    std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

    if (!text.empty()) {
        Params p;
        atlas::Status st = spec.parse(text, p);
        if (!st.isOk()) {
            if (st.message().find(spec.key) == std::string::npos) {
                std::abort();  // every error must name its variable
            }
        } else {
            std::string type = spec.type;
            std::string shown = spec.format(p);
            if (type == "unsigned" || type == "size" || type == "bool" || type == "enum") {
                Params again;
                if (!spec.parse(shown, again).isOk() || spec.format(again) != shown) {
                    std::abort();  // formatting must round-trip
                }
            }
        }
    }

    IfnameMatcher m = IfnameMatcher::parse(text);
    for (const char* name : {"eth0", "lo", "docker0", "", "ib"}) {
        bool hit = m.matches(name);
        if (m.empty() && hit != m.exclude()) {
            std::abort();  // no names: include matches nothing, exclude matches everything
        }
    }
    int speed = parseSpeedMbps(text);
    if (speed <= 0) {
        std::abort();
    }
    (void)parseSizeText(text);
    (void)parseDoubleText(text);
    (void)parseSignedText(text);
    return 0;
}
