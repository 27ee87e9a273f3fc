// How configuration reaches code that must not call getenv itself: entry points (the plugin's
// init, each binary's main) pass processEnv(); tests pass a lookup over a map, so they never
// touch the process environment.
#pragma once

#include <cstdlib>
#include <functional>

namespace atlas {

// The value of one environment variable, or nullptr when it is unset.
using EnvLookup = std::function<const char*(const char* name)>;

inline EnvLookup processEnv() {
    return [](const char* name) -> const char* { return std::getenv(name); };
}

}  // namespace atlas
