#include "arbiter/options.h"

#include <fstream>
#include <sstream>

#include "options/help.h"
#include "scheduler/link_policy.h"

namespace atlas::arbiter {
namespace {

using namespace options::kinds;
using Policy = NamedEnum<sched::PolicyKind, &sched::policyKindName, sched::PolicyKind::kFair,
                         sched::PolicyKind::kTemporal, sched::PolicyKind::kWorkload>;

#define ATLAS_ARBITER_OPTIONS(X)                                                                   \
    X("--listen", Address, listen, 0, 0, "HOST:PORT",                                              \
      "address to listen on; PORT 0 picks a free port (see --port-file)")                          \
    X("--sharing", Policy, server.core.policy, 0, 0, "POLICY",                                     \
      "fair: every flow sends at once (no gating; the baseline); temporal: one transfer at a "     \
      "time, first come first served; workload: temporal in a learned periodic order")             \
    X("--slot-ms", WholeMillis, server.core.policy_config.max_slot_ns, 0, 3600000, "MS",           \
      "longest slot one grant carries; 0 = a transfer keeps the link until it drains")             \
    X("--max-wait-ms", WholeMillis, server.core.policy_config.max_wait_ns, 0, 3600000, "MS",       \
      "a flow waiting this long is served next whatever its priority (the starvation bound); "     \
      "0 = 20 slots")                                                                              \
    X("--lease-ms", WholeMillis, server.lease_ns, 10, 3600000, "MS",                               \
      "a session silent this long loses its grants")                                               \
    X("--heartbeat-ms", Optional<WholeMillis>, heartbeat_ns, 1, 3600000, "MS",                     \
      "how often clients must ping (default: lease / 5; at most the lease)")                       \
    X("--auth-key-file", Path, auth_key_file, 0, 0, "FILE",                                        \
      "shared key file (trailing newline stripped): the same key as the plugins' data path")       \
    X("--max-sessions", Uint, server.max_sessions, 1, 1000000, "N",                                \
      "sessions served at once; more are refused")                                                 \
    X("--port-file", Path, port_file, 0, 0, "FILE", "write the bound port to FILE once listening") \
    X("--quiet", Switch, quiet, 0, 0, "", "log WARN only, on stderr")                              \
    X("--verbose", Switch, verbose, 0, 0, "", "log TRACE too, on stderr (default: INFO)")          \
    X("--help", Switch, help, 0, 0, "", "this text")                                               \
    X("ATLAS_AUTH_KEY", Secret, auth_key, 0, 0, "",                                                \
      "shared key itself (prefer a key file: the environment is visible in /proc)")

#define ATLAS_ARBITER_ALIASES(X)                     \
    X("-h", "--help", false)                         \
    X("ATLAS_ARBITER_LISTEN", "--listen", false)     \
    X("ATLAS_ARBITER", "ATLAS_ARBITER_LISTEN", true) \
    X("ATLAS_SHARING", "--sharing", false)           \
    X("ATLAS_SLOT_MS", "--slot-ms", false)           \
    X("ATLAS_MAX_WAIT_MS", "--max-wait-ms", false)   \
    X("ATLAS_AUTH_KEY_FILE", "--auth-key-file", false)

constexpr const char* kPreamble =
    R"(atlas-arbiter: DC-wide WAN link arbiter for the Atlas NCCL plugin.

Plugins connect when ATLAS_ARBITER_CONNECT=host:port is set in their environment and ask for
the link before each WAN transfer; the arbiter grants it per link ("dcA->dcB") with the policy
below. The same port answers HTTP GET /metrics (Prometheus text). docs/arbitration.md.

usage: atlas-arbiter [options]

)";

Status readKeyFile(const std::string& path, std::string* key) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        return {Code::kInvalidArgument, "--auth-key-file: cannot read '" + path + "'"};
    }
    std::stringstream ss;
    ss << f.rdbuf();
    std::string k = ss.str();
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r')) {
        k.pop_back();
    }
    if (k.empty()) {
        return {Code::kInvalidArgument, "--auth-key-file: '" + path + "' is empty"};
    }
    *key = k;
    return Status::ok();
}

}  // namespace

const options::Table<DaemonOptions>& optionTable() {
    static const auto table =
        ATLAS_OPTIONS_TABLE(DaemonOptions, ATLAS_ARBITER_OPTIONS, ATLAS_ARBITER_ALIASES);
    return table;
}

std::string usageText() {
    return kPreamble + options::flagHelp(optionTable()) + "\nenvironment:\n" +
           options::envHelp(optionTable());
}

Result<DaemonOptions> parseOptions(const std::vector<std::string>& args, const EnvLookup& env,
                                   std::vector<std::string>* warnings) {
    options::Parsed<DaemonOptions> from_env;
    options::readEnv(optionTable(), env, &from_env);
    options::Parsed<DaemonOptions> p;  // the flags, over what the environment set
    p.config = from_env.config;
    p.errors = from_env.errors;
    p.warnings = from_env.warnings;
    options::readArgs(optionTable(), args, &p);
    if (warnings != nullptr) {
        *warnings = p.warnings;
    }
    DaemonOptions& o = p.config;
    if (o.help) {
        return o;
    }
    for (const std::string& word : p.positional) {
        p.errors.push_back("unexpected argument '" + word + "' (see --help)");
    }
    o.server.host = o.listen.host;
    o.server.port = o.listen.port;
    o.server.heartbeat_ns = o.heartbeat_ns.value_or(o.server.lease_ns / 5);
    if (o.server.heartbeat_ns > o.server.lease_ns) {
        p.errors.push_back("--heartbeat-ms must not exceed --lease-ms");
    }
    // A key file given as a flag beats ATLAS_AUTH_KEY; both from the environment conflict.
    if (!o.auth_key_file.empty() && !o.auth_key.empty() && !p.has("--auth-key-file")) {
        p.errors.push_back("ATLAS_AUTH_KEY and ATLAS_AUTH_KEY_FILE are both set; use one");
    } else if (!o.auth_key_file.empty()) {
        Status st = readKeyFile(o.auth_key_file, &o.server.auth_key);
        if (!st.isOk()) {
            p.errors.push_back(st.message());
        }
    } else {
        o.server.auth_key = o.auth_key;
    }
    ATLAS_RETURN_IF_ERROR(p.status());
    ATLAS_RETURN_IF_ERROR(validate(o.server));
    return o;
}

}  // namespace atlas::arbiter
