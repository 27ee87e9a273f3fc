#include "perf/atlas-net-perf/options.h"

#include <cctype>
#include <limits>

namespace atlas::netperf {

namespace {

Status bad(const std::string& msg) {
    return Status(Code::kInvalidArgument, msg);
}

Result<int> parsePositiveInt(const std::string& what, const std::string& text, int min, int max) {
    if (text.empty() || text.size() > 9) {
        return bad(what + ": expected an integer in " + std::to_string(min) + ".." +
                   std::to_string(max) + ", got '" + text + "'");
    }
    long v = 0;
    for (char c : text) {
        if (c < '0' || c > '9') {
            return bad(what + ": expected an integer, got '" + text + "'");
        }
        v = v * 10 + (c - '0');
    }
    if (v < min || v > max) {
        return bad(what + ": " + text + " is outside " + std::to_string(min) + ".." +
                   std::to_string(max));
    }
    return static_cast<int>(v);
}

bool validEnvKey(const std::string& k) {
    if (k.empty() || (std::isdigit(static_cast<unsigned char>(k[0])) != 0)) {
        return false;
    }
    for (char c : k) {
        if (!(std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_')) {
            return false;
        }
    }
    return true;
}

}  // namespace

Result<size_t> parseSize(const std::string& text, size_t max) {
    if (text.empty() || text.size() > 32) {
        return bad("size: empty or too long: '" + text + "'");
    }
    size_t i = 0;
    uint64_t v = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])) != 0) {
        uint64_t d = static_cast<uint64_t>(text[i] - '0');
        if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) {
            return bad("size: overflow in '" + text + "'");
        }
        v = v * 10 + d;
        ++i;
    }
    if (i == 0) {
        return bad("size: expected digits in '" + text + "'");
    }
    std::string suffix = text.substr(i);
    for (char& c : suffix) {
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    unsigned shift = 0;
    if (suffix.empty() || suffix == "B") {
        shift = 0;
    } else if (suffix == "K" || suffix == "KB" || suffix == "KIB") {
        shift = 10;
    } else if (suffix == "M" || suffix == "MB" || suffix == "MIB") {
        shift = 20;
    } else if (suffix == "G" || suffix == "GB" || suffix == "GIB") {
        shift = 30;
    } else {
        return bad("size: unknown suffix in '" + text + "' (use K, M or G)");
    }
    if (v > (std::numeric_limits<uint64_t>::max() >> shift)) {
        return bad("size: overflow in '" + text + "'");
    }
    v <<= shift;
    if (v > max) {
        return bad("size: '" + text + "' exceeds the limit of " + std::to_string(max) + " B");
    }
    return static_cast<size_t>(v);
}

Result<std::vector<size_t>> parseSizeList(const std::string& text) {
    std::vector<size_t> out;
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        std::string item =
            text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        Result<size_t> s = parseSize(item);
        if (!s.isOk()) {
            return s.status();
        }
        out.push_back(*s);
        if (out.size() > 256) {
            return bad("--sizes: more than 256 sizes");
        }
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    return out;
}

Result<std::vector<size_t>> sizeSweep(size_t min, size_t max, size_t factor) {
    if (factor < 2) {
        return bad("--factor must be at least 2");
    }
    if (min > max) {
        return bad("--min is larger than --max");
    }
    std::vector<size_t> out;
    size_t v = min;
    while (true) {
        out.push_back(v);
        if (v == 0) {
            v = 1;  // 0 * factor would loop forever; continue from 1
        } else if (v > max / factor) {
            break;
        } else {
            v *= factor;
        }
        if (v > max || out.size() > 256) {
            break;
        }
    }
    return out;
}

Result<ConfigSpec> parseConfig(const std::string& text) {
    size_t colon = text.find(':');
    ConfigSpec c;
    c.name = text.substr(0, colon);
    if (c.name.empty() || c.name.size() > 64) {
        return bad("--config '" + text + "': expected NAME:K=V,... with a non-empty NAME");
    }
    for (char ch : c.name) {
        if (std::isprint(static_cast<unsigned char>(ch)) == 0 || ch == ',' || ch == ' ') {
            return bad("--config '" + text + "': NAME must be printable, without spaces/commas");
        }
    }
    if (colon == std::string::npos || colon + 1 == text.size()) {
        return c;
    }
    std::string rest = text.substr(colon + 1);
    size_t start = 0;
    while (start <= rest.size()) {
        size_t comma = rest.find(',', start);
        std::string item =
            rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (item == "raw") {
            c.kind = Kind::kRawTcp;
            c.raw_streams = 1;
        } else if (item.rfind("raw=", 0) == 0) {
            Result<int> n = parsePositiveInt("--config raw=N", item.substr(4), 1, 64);
            if (!n.isOk()) {
                return n.status();
            }
            c.kind = Kind::kRawTcp;
            c.raw_streams = *n;
        } else {
            size_t eq = item.find('=');
            if (eq == std::string::npos || !validEnvKey(item.substr(0, eq))) {
                return bad("--config '" + text + "': '" + item + "' is not K=V");
            }
            c.env.emplace_back(item.substr(0, eq), item.substr(eq + 1));
        }
        if (c.env.size() > 64) {
            return bad("--config '" + text + "': too many variables");
        }
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    return c;
}

Result<std::pair<std::string, uint16_t>> parseHostPort(const std::string& text) {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) {
        return bad("expected HOST:PORT, got '" + text + "'");
    }
    std::string host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    Result<int> port = parsePositiveInt("port", text.substr(colon + 1), 1, 65535);
    if (!port.isOk()) {
        return port.status();
    }
    return std::make_pair(host, static_cast<uint16_t>(*port));
}

const char* usage() {
    return R"(atlas-net-perf: bandwidth and latency of libnccl-net-atlas.so, driven like NCCL does.

Usage:
  atlas-net-perf local  [options]                     fork a server and a client process
  atlas-net-perf server --bootstrap HOST:PORT [opts]  wait for one client on HOST:PORT
  atlas-net-perf client --bootstrap HOST:PORT [opts]  connect to the server and measure

Sweep:
  --sizes LIST            e.g. 8,1K,64K,1M,64M (suffixes K/M/G are binary)
  --min S --max S --factor F   geometric sweep (default: 8,1K,64K,1M,16M,64M)
  --iters N               timed messages per size (default 20)
  --warmup N              untimed messages per size first (default 5)
  --window W              messages in flight per direction (default 8, like NCCL steps)
  --direction uni|bidir   client->server only, or both ways at once (default uni)
  --latency               8-byte (or --sizes) ping-pong; reports p50/p99/mean round trip
  --check                 fill and verify every message (slower; for correctness runs)
  --dev N                 plugin device index (default 0)

What to measure:
  --plugin PATH           the plugin .so (default: ../../plugin/libnccl-net-atlas.so next
                          to this executable, else $ATLAS_PLUGIN)
  --raw-tcp [--streams N] plain TCP sockets instead of the plugin (N streams, even split)
  --config NAME:K=V,...   (local, repeatable) run the sweep once per config in fresh
                          processes with these env vars; 'raw' or 'raw=N' in the list
                          makes it a plain-TCP config. Example:
                            --config atlas: --config one:ATLAS_NSTREAMS=1 --config tcp:raw
  --baseline NAME         ratio column relative to this config (default: the first)

Output and limits:
  --json FILE             also write the results as JSON
  --timeout SEC           bound on one configuration's run (default 300)
  --server-netns NAME     (local) setns() the server into /run/netns/NAME
  --client-netns NAME     (local) setns() the client into /run/netns/NAME
  --raw-host ADDR         (local) address the raw-TCP server advertises
  --quiet                 only the final table
)";
}

Result<Options> parseOptions(const std::vector<std::string>& args) {
    Options o;
    if (args.empty()) {
        return bad("missing mode (local, server or client); see --help");
    }
    size_t i = 0;
    if (args[0] == "--help" || args[0] == "-h") {
        o.help = true;
        return o;
    }
    if (args[0] == "local") {
        o.role = Role::kLocal;
    } else if (args[0] == "server") {
        o.role = Role::kServer;
    } else if (args[0] == "client") {
        o.role = Role::kClient;
    } else {
        return bad("unknown mode '" + args[0] + "' (local, server or client)");
    }
    ++i;
    std::string sizes_text;
    std::string min_text;
    std::string max_text;
    std::string factor_text;
    bool raw = false;
    int streams = 1;
    bool streams_given = false;
    auto value = [&](const std::string& flag) -> Result<std::string> {
        if (i + 1 >= args.size()) {
            return bad(flag + " needs a value");
        }
        return args[++i];
    };
#define NETPERF_VALUE(flag, var)              \
    do {                                      \
        Result<std::string> v_ = value(flag); \
        if (!v_.isOk()) {                     \
            return v_.status();               \
        }                                     \
        var = *v_;                            \
    } while (0)
    for (; i < args.size(); ++i) {
        const std::string& a = args[i];
        std::string v;
        if (a == "--help" || a == "-h") {
            o.help = true;
        } else if (a == "--sizes") {
            NETPERF_VALUE(a, sizes_text);
        } else if (a == "--min") {
            NETPERF_VALUE(a, min_text);
        } else if (a == "--max") {
            NETPERF_VALUE(a, max_text);
        } else if (a == "--factor") {
            NETPERF_VALUE(a, factor_text);
        } else if (a == "--iters" || a == "--warmup" || a == "--window" || a == "--dev" ||
                   a == "--timeout" || a == "--streams") {
            NETPERF_VALUE(a, v);
            int lo =
                a == "--iters" || a == "--window" || a == "--timeout" || a == "--streams" ? 1 : 0;
            int hi = a == "--window" ? 32 : a == "--streams" ? 64 : a == "--dev" ? 1024 : 100000000;
            Result<int> n = parsePositiveInt(a, v, lo, hi);
            if (!n.isOk()) {
                return n.status();
            }
            if (a == "--iters") {
                o.plan.iters = *n;
            } else if (a == "--warmup") {
                o.plan.warmup = *n;
            } else if (a == "--window") {
                o.plan.window = *n;
            } else if (a == "--dev") {
                o.plan.dev = *n;
            } else if (a == "--timeout") {
                o.timeout_s = *n;
            } else {
                streams = *n;
                streams_given = true;
            }
        } else if (a == "--direction") {
            NETPERF_VALUE(a, v);
            if (v == "uni") {
                o.plan.direction = Direction::kUni;
            } else if (v == "bidir") {
                o.plan.direction = Direction::kBidir;
            } else {
                return bad("--direction: expected uni or bidir, got '" + v + "'");
            }
        } else if (a == "--latency") {
            o.plan.measure = Measure::kLatency;
        } else if (a == "--check") {
            o.plan.check = true;
        } else if (a == "--raw-tcp") {
            raw = true;
        } else if (a == "--plugin") {
            NETPERF_VALUE(a, o.plugin);
        } else if (a == "--bootstrap") {
            NETPERF_VALUE(a, o.bootstrap);
        } else if (a == "--config") {
            NETPERF_VALUE(a, v);
            Result<ConfigSpec> c = parseConfig(v);
            if (!c.isOk()) {
                return c.status();
            }
            for (const ConfigSpec& other : o.configs) {
                if (other.name == c->name) {
                    return bad("--config: duplicate name '" + c->name + "'");
                }
            }
            o.configs.push_back(*c);
        } else if (a == "--baseline") {
            NETPERF_VALUE(a, o.baseline);
        } else if (a == "--json") {
            NETPERF_VALUE(a, o.json_path);
        } else if (a == "--server-netns") {
            NETPERF_VALUE(a, o.server_netns);
        } else if (a == "--client-netns") {
            NETPERF_VALUE(a, o.client_netns);
        } else if (a == "--raw-host") {
            NETPERF_VALUE(a, o.raw_host);
        } else if (a == "--quiet") {
            o.quiet = true;
        } else {
            return bad("unknown option '" + a + "'; see --help");
        }
    }
#undef NETPERF_VALUE
    if (o.help) {
        return o;
    }
    if (!sizes_text.empty() && (!min_text.empty() || !max_text.empty())) {
        return bad("use either --sizes or --min/--max/--factor");
    }
    if (!sizes_text.empty()) {
        Result<std::vector<size_t>> s = parseSizeList(sizes_text);
        if (!s.isOk()) {
            return s.status();
        }
        o.plan.sizes = *s;
    } else if (!min_text.empty() || !max_text.empty()) {
        Result<size_t> lo = parseSize(min_text.empty() ? "8" : min_text);
        Result<size_t> hi = parseSize(max_text.empty() ? "64M" : max_text);
        Result<size_t> f = parseSize(factor_text.empty() ? "2" : factor_text);
        if (!lo.isOk() || !hi.isOk() || !f.isOk()) {
            return !lo.isOk() ? lo.status() : !hi.isOk() ? hi.status() : f.status();
        }
        Result<std::vector<size_t>> s = sizeSweep(*lo, *hi, *f);
        if (!s.isOk()) {
            return s.status();
        }
        o.plan.sizes = *s;
    } else if (o.plan.measure == Measure::kLatency) {
        o.plan.sizes = {8};
    } else {
        o.plan.sizes = {8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
    }
    if (raw && !o.configs.empty()) {
        return bad("with --config, select plain TCP per config ('NAME:raw' or 'NAME:raw=N')");
    }
    if (raw) {
        o.plan.kind = Kind::kRawTcp;
        o.plan.raw_streams = streams;
    } else if (streams_given) {
        return bad("--streams only applies to --raw-tcp");
    }
    if (o.role != Role::kLocal) {
        if (o.bootstrap.empty()) {
            return bad("server and client need --bootstrap HOST:PORT");
        }
        Result<std::pair<std::string, uint16_t>> hp = parseHostPort(o.bootstrap);
        if (!hp.isOk()) {
            return hp.status();
        }
        if (!o.configs.empty() || !o.server_netns.empty() || !o.client_netns.empty()) {
            return bad("--config and --*-netns are for local mode");
        }
    }
    if (o.role == Role::kLocal && !o.bootstrap.empty()) {
        return bad("--bootstrap is for server/client mode");
    }
    if (!o.baseline.empty()) {
        bool found = false;
        for (const ConfigSpec& c : o.configs) {
            found |= c.name == o.baseline;
        }
        if (!found) {
            return bad("--baseline '" + o.baseline + "' names no --config");
        }
    }
    if (o.plan.direction == Direction::kBidir && o.plan.measure == Measure::kLatency) {
        return bad("--latency is a ping-pong; --direction does not apply");
    }
    return o;
}

std::string formatSize(size_t bytes) {
    const char* units[] = {"", "K", "M", "G"};
    int u = 0;
    while (u < 3 && bytes != 0 && bytes % 1024 == 0) {
        bytes /= 1024;
        ++u;
    }
    return std::to_string(bytes) + units[u];
}

const char* kindName(Kind kind) {
    return kind == Kind::kPlugin ? "plugin" : "raw-tcp";
}

const char* directionName(Direction d) {
    return d == Direction::kUni ? "uni" : "bidir";
}

}  // namespace atlas::netperf
