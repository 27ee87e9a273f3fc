// libFuzzer target for the plugin's text parsers: ATLAS_* values (every registered kind,
// through the same readEnv the plugin's init runs), the ATLAS_SOCKET_IFNAME matcher and the
// sysfs speed parser. Input: byte 0 picks the variable, the rest is its value. Invariants:
// errors name the variable; an accepted value of an exact kind formats back to text that
// parses to the same value.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "options/value.h"
#include "plugin/devices.h"
#include "plugin/params.h"

using namespace atlas::plugin;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) {
        return 0;
    }
    const auto& specs = paramTable().options;
    const ParamSpec& spec = specs[data[0] % specs.size()];
    const std::string key(spec.name);
    const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);

    if (!text.empty() && text.find('\0') == std::string::npos) {
        atlas::options::Parsed<Params> parsed;
        atlas::options::readEnv(
            paramTable(),
            [&](const char* name) -> const char* { return key == name ? text.c_str() : nullptr; },
            &parsed);
        if (!parsed.errors.empty()) {
            if (parsed.errors.size() != 1 || parsed.errors[0].find(key) == std::string::npos) {
                std::abort();  // one error, naming its variable
            }
        } else {
            const std::string type = spec.type;
            const std::string shown = spec.show(parsed.config);
            if (type == "unsigned" || type == "size" || type == "bool" || type == "enum" ||
                type == "integer") {
                Params again;
                if (!spec.set(shown, again).empty() || spec.show(again) != shown) {
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
    (void)atlas::options::parseSize(text);
    (void)atlas::options::parseDouble(text);
    (void)atlas::options::parseSigned(text);
    return 0;
}
