#include "perf/atlas-net-perf/options.h"

#include <cctype>
#include <limits>

#include "options/help.h"

namespace atlas::netperf {

namespace {

using namespace options::kinds;

Status bad(const std::string& msg) {
    return Status(Code::kInvalidArgument, msg);
}

constexpr uint64_t kMaxMessage = uint64_t{1} << 30;  // the plugin ABI reports sizes as int

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

// --config NAME:K=V,...
struct ConfigKind : Base {
    using Value = ConfigSpec;
    static constexpr const char* kType = "config";
    static std::optional<ConfigSpec> parse(std::string_view t) {
        auto c = parseConfig(std::string(t));
        return c.isOk() ? std::optional<ConfigSpec>(c.value()) : std::nullopt;
    }
    static std::string accepted(int, int) {
        return "NAME:K=V,... (NAME printable, no spaces or commas; 'raw' or 'raw=N' for plain "
               "TCP)";
    }
    static std::string format(const ConfigSpec& c) { return c.name; }
};

// HOST:PORT, kept as written (server mode listens on it, so "*:PORT" is allowed).
struct BootstrapKind : String {
    static constexpr const char* kType = "address";
    static std::optional<std::string> parse(std::string_view t) {
        const auto hp = options::parseHostPort(t);
        return hp && hp->port != 0 ? std::optional<std::string>(std::string(t)) : std::nullopt;
    }
    static std::string accepted(int, int) { return "HOST:PORT or [IPV6]:PORT with PORT 1..65535"; }
};

using DirectionKind = NamedEnum<Direction, &directionName, Direction::kUni, Direction::kBidir>;
using PollKind = NamedEnum<Poll, &pollName, Poll::kYield, Poll::kSpin, Poll::kSleep>;

#define ATLAS_NETPERF_OPTIONS(X)                                                                   \
    X("--sizes", List<Size>, plan.sizes, 0, kMaxMessage, "LIST",                                   \
      "message sizes in bytes, e.g. 8,1K,64K,1M,64M (K, M, G binary; at most 1G: the plugin ABI "  \
      "reports sizes as int). Default sweep: 8,1K,64K,1M,16M,64M; with --latency: 8")              \
    X("--min", Size, sweep_min, 0, kMaxMessage, "S",                                               \
      "geometric sweep from S (with --max, --factor)")                                             \
    X("--max", Size, sweep_max, 0, kMaxMessage, "S", "geometric sweep up to S")                    \
    X("--factor", Uint, sweep_factor, 2, kMaxMessage, "F",                                         \
      "geometric sweep: min, min*F, ... <= max")                                                   \
    X("--iters", Uint, plan.iters, 1, 100000000, "N", "timed messages per size")                   \
    X("--warmup", Uint, plan.warmup, 0, 100000000, "N",                                            \
      "untimed messages per size before the barrier")                                              \
    X("--window", Uint, plan.window, 1, 32, "W",                                                   \
      "messages in flight per direction (8 is NCCL's NCCL_STEPS; 32 is the ABI's request limit)")  \
    X("--direction", DirectionKind, plan.direction, 0, 0, "DIR",                                   \
      "uni: client -> server; bidir: both directions at once, each with its own window")           \
    X("--latency", SetTo<Measure::kLatency>, plan.measure, 0, 0, "",                               \
      "ping-pong: the client sends size bytes, the server sends them back; every round trip is "   \
      "one sample (p50/p99/mean)")                                                                 \
    X("--poll", PollKind, plan.poll, 0, 0, "MODE",                                                 \
      "how both sides wait between test() calls that found nothing done: yield (sched_yield, "     \
      "as NCCL's proxy thread), spin (busy loop, no syscall) or sleep (nanosleep 20 us)")          \
    X("--check", Switch, plan.check, 0, 0, "",                                                     \
      "fill every message with a position-dependent pattern and verify every received byte "       \
      "(slower, inside the timed region; for correctness runs)")                                   \
    X("--dev", Uint, plan.dev, 0, 1024, "N", "plugin device index")                                \
    X("--plugin", Path, plugin, 0, 0, "PATH",                                                      \
      "the plugin (default: ../../plugin/libnccl-net-atlas.so next to this executable)")           \
    X("--raw-tcp", Switch, raw_tcp, 0, 0, "",                                                      \
      "plain TCP sockets instead of the plugin: --streams connections, each message split "        \
      "evenly across them (as NCCL's socket transport), one thread per stream and direction")      \
    X("--streams", Uint, plan.raw_streams, 1, 64, "N", "streams of --raw-tcp")                     \
    X("--config", Repeat<ConfigKind>, configs, 0, 0, "NAME:K=V,...",                               \
      "(local) run the sweep once per configuration in fresh processes with these environment "    \
      "variables set before the plugin loads; NAME: alone changes nothing; raw or raw=N makes it " \
      "plain TCP with N streams. Example: --config atlas: --config one:ATLAS_NSTREAMS=1 --config " \
      "tcp:raw")                                                                                   \
    X("--baseline", String, baseline, 0, 0, "NAME",                                                \
      "the configuration the ratio column refers to (default: the first)")                         \
    X("--bootstrap", BootstrapKind, bootstrap, 0, 0, "HOST:PORT",                                  \
      "(server, client) the plain TCP connection that carries handles, the plan and barriers")     \
    X("--json", Path, json_path, 0, 0, "FILE", "also write the results as JSON")                   \
    X("--timeout", Uint, timeout_s, 1, 100000000, "SEC",                                           \
      "bound on one configuration's run: every wait in both processes has this deadline")          \
    X("--server-netns", Path, server_netns, 0, 0, "NAME",                                          \
      "(local) setns() the server into /run/netns/NAME")                                           \
    X("--client-netns", Path, client_netns, 0, 0, "NAME",                                          \
      "(local) setns() the client into /run/netns/NAME")                                           \
    X("--raw-host", String, raw_host, 0, 0, "ADDR",                                                \
      "address the raw-TCP server advertises (default 127.0.0.1, with --server-netns the "         \
      "ATLAS_SOCKET_IFNAME address in the namespace; server mode: the bootstrap's address)")       \
    X("--quiet", Switch, quiet, 0, 0, "", "only the final table")                                  \
    X("--help", Switch, help, 0, 0, "", "this text")

#define ATLAS_NETPERF_ALIASES(X) \
    X("-h", "--help", false)     \
    X("ATLAS_PLUGIN", "--plugin", false)

constexpr const char* kPreamble =
    R"(atlas-net-perf: bandwidth and latency of libnccl-net-atlas.so, driven like NCCL does.

Usage:
  atlas-net-perf local  [options]                     fork a server and a client process
  atlas-net-perf server --bootstrap HOST:PORT [opts]  wait for one client on HOST:PORT
  atlas-net-perf client --bootstrap HOST:PORT [opts]  connect to the server and measure

Options:
)";

}  // namespace

Result<size_t> parseSize(const std::string& text, size_t max) {
    const auto v = options::parseSize(text);
    if (!v) {
        return bad("size " + options::quote(text) +
                   " is invalid: expected bytes with an optional K, M or G suffix");
    }
    if (*v > max) {
        return bad("size " + options::quote(text) + " exceeds the limit of " + std::to_string(max) +
                   " B");
    }
    return static_cast<size_t>(*v);
}

Result<std::vector<size_t>> parseSizeList(const std::string& text) {
    std::vector<size_t> out;
    for (std::string_view item : options::split(text, ',')) {
        Result<size_t> s = parseSize(std::string(item));
        if (!s.isOk()) {
            return s.status();
        }
        out.push_back(*s);
        if (out.size() > 256) {
            return bad("--sizes: more than 256 sizes");
        }
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
            const auto n = options::parseUnsigned(item.substr(4));
            if (!n || *n < 1 || *n > 64) {
                return bad("--config raw=N: expected N in 1..64, got '" + item.substr(4) + "'");
            }
            c.kind = Kind::kRawTcp;
            c.raw_streams = static_cast<int>(*n);
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
    const auto hp = options::parseHostPort(text);
    if (!hp || hp->port == 0) {
        return bad("expected HOST:PORT with PORT 1..65535, got " + options::quote(text));
    }
    return std::make_pair(hp->host, hp->port);
}

const options::Table<Options>& optionTable() {
    static const auto table =
        ATLAS_OPTIONS_TABLE(Options, ATLAS_NETPERF_OPTIONS, ATLAS_NETPERF_ALIASES);
    return table;
}

std::string usage() {
    return kPreamble + options::flagHelp(optionTable()) + "\nenvironment:\n" +
           options::envHelp(optionTable());
}

Result<Options> parseOptions(const std::vector<std::string>& args, const EnvLookup& env) {
    options::Parsed<Options> p;
    if (env) {
        options::readEnv(optionTable(), env, &p);
    }
    options::readArgs(optionTable(), args, &p);
    Options& o = p.config;
    if (o.help) {
        return o;
    }
    const std::vector<std::string>& words = p.positional;
    if (words.empty()) {
        p.errors.push_back("missing mode (local, server or client); see --help");
    } else if (words[0] == "local" || words[0] == "server" || words[0] == "client") {
        o.role = words[0] == "local"    ? Role::kLocal
                 : words[0] == "server" ? Role::kServer
                                        : Role::kClient;
    } else {
        p.errors.push_back("unknown mode '" + words[0] + "' (local, server or client)");
    }
    for (size_t i = 1; i < words.size(); ++i) {
        p.errors.push_back("unexpected argument '" + words[i] + "'; see --help");
    }
    ATLAS_RETURN_IF_ERROR(p.status());
    for (size_t i = 0; i < o.configs.size(); ++i) {
        for (size_t j = 0; j < i; ++j) {
            if (o.configs[j].name == o.configs[i].name) {
                return bad("--config: duplicate name '" + o.configs[i].name + "'");
            }
        }
    }
    const bool sweep = p.has("--min") || p.has("--max") || p.has("--factor");
    if (p.has("--sizes") && sweep) {
        return bad("use either --sizes or --min/--max/--factor");
    }
    if (o.plan.sizes.size() > 256) {
        return bad("--sizes: more than 256 sizes");
    }
    if (sweep) {
        Result<std::vector<size_t>> s = sizeSweep(o.sweep_min, o.sweep_max, o.sweep_factor);
        if (!s.isOk()) {
            return s.status();
        }
        o.plan.sizes = *s;
    } else if (!p.has("--sizes")) {
        o.plan.sizes = o.plan.measure == Measure::kLatency
                           ? std::vector<size_t>{8}
                           : std::vector<size_t>{8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
    }
    if (o.raw_tcp && !o.configs.empty()) {
        return bad("with --config, select plain TCP per config ('NAME:raw' or 'NAME:raw=N')");
    }
    if (o.raw_tcp) {
        o.plan.kind = Kind::kRawTcp;
    } else if (p.has("--streams")) {
        return bad("--streams only applies to --raw-tcp");
    }
    if (o.role != Role::kLocal) {
        if (o.bootstrap.empty()) {
            return bad("server and client need --bootstrap HOST:PORT");
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

const char* pollName(Poll p) {
    switch (p) {
        case Poll::kSpin:
            return "spin";
        case Poll::kSleep:
            return "sleep";
        case Poll::kYield:
            break;
    }
    return "yield";
}

}  // namespace atlas::netperf
