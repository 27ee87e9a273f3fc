// Command line and environment of the atlas-arbiter daemon: one options table
// (arbiter/options.cc, ATLAS_ARBITER_OPTIONS) that also produces --help and the flag table
// of docs/arbitration.md. Flags win over the environment, which uses the plugin's variables
// where they mean the same thing (ATLAS_SHARING, ATLAS_SLOT_MS, ATLAS_AUTH_KEY[_FILE]) so one
// environment file configures both, and ATLAS_ARBITER_LISTEN for the listen address
// (ATLAS_ARBITER, which the plugin reads as the address to connect to, is a deprecated
// alias). Defaults (sharing, slot) are the scheduler's (scheduler/link_policy.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "arbiter/server.h"
#include "atlas/common/env.h"
#include "options/table.h"

namespace atlas::arbiter {

struct DaemonOptions {
    ServerConfig server;
    options::HostPort listen{"0.0.0.0", 7450};  // PORT 0: ephemeral (see port_file)
    std::optional<Nanos> heartbeat_ns;          // unset: lease / 5
    std::string auth_key_file;
    std::string auth_key;
    std::string port_file;  // write the bound port here (for --listen HOST:0)
    bool help = false;
    bool quiet = false;
    bool verbose = false;
};

const options::Table<DaemonOptions>& optionTable();

// Strict parsing: unknown flags, bad numbers and out-of-range values are errors that name
// the flag (or variable) and the accepted range; all of them at once. Warnings (deprecated
// names) go to `warnings` when given.
Result<DaemonOptions> parseOptions(const std::vector<std::string>& args, const EnvLookup& env,
                                   std::vector<std::string>* warnings = nullptr);
std::string usageText();

}  // namespace atlas::arbiter
