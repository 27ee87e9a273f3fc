#include "arbiter/options.h"

#include <fstream>
#include <sstream>

namespace atlas::arbiter {
namespace {

constexpr const char* kUsage = R"(atlas-arbiter: DC-wide WAN link arbiter for the Atlas NCCL plugin.

Plugins connect when ATLAS_ARBITER=host:port is set in their environment and ask for the
link before each WAN transfer; the arbiter grants it per link ("dcA->dcB") with the policy
below. The same port answers HTTP GET /metrics (Prometheus text). docs/arbitration.md.

usage: atlas-arbiter [options]

  --listen HOST:PORT   address to listen on (default: $ATLAS_ARBITER, else 0.0.0.0:7450;
                       PORT 0 picks a free port, see --port-file)
  --sharing POLICY     fair | temporal | workload (default: $ATLAS_SHARING, else temporal).
                       fair: every flow sends at once (no gating; the baseline)
  --slot-ms MS         longest slot one grant carries, 0 = a transfer keeps the link until
                       it drains (default: $ATLAS_SLOT_MS, else 250)
  --lease-ms MS        a session silent this long loses its grants (default 500)
  --heartbeat-ms MS    how often clients must ping (default lease/5)
  --auth-key-file F    shared key file (default: $ATLAS_AUTH_KEY or $ATLAS_AUTH_KEY_FILE);
                       the same key as the plugins' data path
  --max-sessions N     (default 1024)
  --port-file FILE     write the bound port to FILE once listening
  --quiet | --verbose  log WARN only | log TRACE too (default INFO), on stderr
  -h, --help           this text
)";

Status bad(const std::string& what) {
    return {Code::kInvalidArgument, what};
}

Status parseUint(const std::string& flag, const std::string& text, uint64_t lo, uint64_t hi,
                 uint64_t* out) {
    if (text.empty() || text.size() > 12) {
        return bad(flag + "='" + text + "': expected an integer in " + std::to_string(lo) + ".." +
                   std::to_string(hi));
    }
    uint64_t v = 0;
    for (char c : text) {
        if (c < '0' || c > '9') {
            return bad(flag + "='" + text + "': expected an integer in " + std::to_string(lo) +
                       ".." + std::to_string(hi));
        }
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    if (v < lo || v > hi) {
        return bad(flag + "='" + text + "' is out of range " + std::to_string(lo) + ".." +
                   std::to_string(hi));
    }
    *out = v;
    return Status::ok();
}

Status readKeyFile(const std::string& path, std::string* key) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        return bad("cannot read key file '" + path + "'");
    }
    std::stringstream ss;
    ss << f.rdbuf();
    std::string k = ss.str();
    while (!k.empty() && (k.back() == '\n' || k.back() == '\r')) {
        k.pop_back();
    }
    if (k.empty()) {
        return bad("key file '" + path + "' is empty");
    }
    *key = k;
    return Status::ok();
}

}  // namespace

const char* usageText() {
    return kUsage;
}

Status parseHostPort(const std::string& text, std::string* host, uint16_t* port) {
    std::string h;
    std::string p;
    if (!text.empty() && text[0] == '[') {
        const size_t close = text.find(']');
        if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
            return bad("'" + text + "': expected [IPV6]:PORT");
        }
        h = text.substr(1, close - 1);
        p = text.substr(close + 2);
    } else {
        const size_t colon = text.rfind(':');
        if (colon == std::string::npos || colon == 0) {
            return bad("'" + text + "': expected HOST:PORT");
        }
        h = text.substr(0, colon);
        p = text.substr(colon + 1);
    }
    uint64_t v = 0;
    ATLAS_RETURN_IF_ERROR(parseUint("port", p, 0, 65535, &v));
    *host = h;
    *port = static_cast<uint16_t>(v);
    return Status::ok();
}

Result<DaemonOptions> parseOptions(const std::vector<std::string>& args, const EnvFn& env) {
    DaemonOptions o;
    auto envOr = [&](const char* key) -> std::string {
        const char* v = env(key);
        return v == nullptr ? std::string() : std::string(v);
    };
    std::string listen = envOr("ATLAS_ARBITER");
    std::string sharing = envOr("ATLAS_SHARING");
    std::string slot = envOr("ATLAS_SLOT_MS");
    std::string key_file = envOr("ATLAS_AUTH_KEY_FILE");
    std::string key = envOr("ATLAS_AUTH_KEY");
    std::string lease;
    std::string heartbeat;
    std::string max_sessions;
    bool flag_key_file = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&](std::string* dst) -> Status {
            if (i + 1 >= args.size()) {
                return bad(a + " needs a value");
            }
            *dst = args[++i];
            return Status::ok();
        };
        if (a == "-h" || a == "--help") {
            o.help = true;
            return o;
        } else if (a == "--listen") {
            ATLAS_RETURN_IF_ERROR(value(&listen));
        } else if (a == "--sharing") {
            ATLAS_RETURN_IF_ERROR(value(&sharing));
        } else if (a == "--slot-ms") {
            ATLAS_RETURN_IF_ERROR(value(&slot));
        } else if (a == "--lease-ms") {
            ATLAS_RETURN_IF_ERROR(value(&lease));
        } else if (a == "--heartbeat-ms") {
            ATLAS_RETURN_IF_ERROR(value(&heartbeat));
        } else if (a == "--auth-key-file") {
            ATLAS_RETURN_IF_ERROR(value(&key_file));
            flag_key_file = true;
        } else if (a == "--max-sessions") {
            ATLAS_RETURN_IF_ERROR(value(&max_sessions));
        } else if (a == "--port-file") {
            ATLAS_RETURN_IF_ERROR(value(&o.port_file));
        } else if (a == "--quiet") {
            o.quiet = true;
        } else if (a == "--verbose") {
            o.verbose = true;
        } else {
            return bad("unknown option '" + a + "' (see --help)");
        }
    }
    if (listen.empty()) {
        listen = "0.0.0.0:7450";
    }
    ATLAS_RETURN_IF_ERROR(parseHostPort(listen, &o.server.host, &o.server.port));
    if (sharing.empty()) {
        sharing = "temporal";
    }
    auto kind = sched::parsePolicyKind(sharing);
    if (!kind) {
        return bad("sharing policy: " + kind.status().message());
    }
    o.server.core.policy = kind.value();
    uint64_t v = 0;
    if (!slot.empty()) {
        ATLAS_RETURN_IF_ERROR(parseUint("--slot-ms", slot, 0, 3600000, &v));
        o.server.core.policy_config.max_slot_ns = static_cast<Nanos>(v) * kNsPerMs;
    } else {
        o.server.core.policy_config.max_slot_ns = 250 * kNsPerMs;
    }
    if (!lease.empty()) {
        ATLAS_RETURN_IF_ERROR(parseUint("--lease-ms", lease, 10, 3600000, &v));
        o.server.lease_ns = static_cast<Nanos>(v) * kNsPerMs;
    }
    o.server.heartbeat_ns = o.server.lease_ns / 5;
    if (!heartbeat.empty()) {
        ATLAS_RETURN_IF_ERROR(parseUint("--heartbeat-ms", heartbeat, 1, 3600000, &v));
        o.server.heartbeat_ns = static_cast<Nanos>(v) * kNsPerMs;
        if (o.server.heartbeat_ns > o.server.lease_ns) {
            return bad("--heartbeat-ms must not exceed --lease-ms");
        }
    }
    if (!max_sessions.empty()) {
        ATLAS_RETURN_IF_ERROR(parseUint("--max-sessions", max_sessions, 1, 1000000, &v));
        o.server.max_sessions = v;
    }
    if (flag_key_file || key.empty()) {
        if (!key_file.empty()) {
            ATLAS_RETURN_IF_ERROR(readKeyFile(key_file, &o.server.auth_key));
        }
    } else {
        if (!key_file.empty()) {
            return bad("ATLAS_AUTH_KEY and ATLAS_AUTH_KEY_FILE are both set; use one");
        }
        o.server.auth_key = key;
    }
    ATLAS_RETURN_IF_ERROR(validate(o.server));
    return o;
}

}  // namespace atlas::arbiter
