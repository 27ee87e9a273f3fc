// Command line and environment of the atlas-arbiter daemon. Flags win over the environment,
// which uses the same variables as the plugin so one environment file configures both:
// ATLAS_ARBITER (listen address), ATLAS_SHARING, ATLAS_SLOT_MS, ATLAS_AUTH_KEY[_FILE].
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "arbiter/server.h"

namespace atlas::arbiter {

struct DaemonOptions {
    ServerConfig server;
    std::string port_file;  // write the bound port here (for --listen HOST:0)
    bool help = false;
    bool quiet = false;
    bool verbose = false;
};

using EnvFn = std::function<const char*(const char*)>;

// Strict parsing: unknown flags, bad numbers and out-of-range values are errors that name
// the flag and the accepted range.
Result<DaemonOptions> parseOptions(const std::vector<std::string>& args, const EnvFn& env);
const char* usageText();

// "HOST:PORT", "[V6]:PORT"; PORT 0..65535.
Status parseHostPort(const std::string& text, std::string* host, uint16_t* port);

}  // namespace atlas::arbiter
