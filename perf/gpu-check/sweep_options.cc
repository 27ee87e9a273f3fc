#include "perf/gpu-check/sweep_options.h"

#include <optional>
#include <sstream>
#include <string_view>

#include "options/help.h"
#include "options/table.h"
#include "options/value.h"

namespace atlas::gpucheck {
namespace {

constexpr const char* kPreamble =
    R"(atlas-nccl-sweep: an nccl-tests-style sweep of NCCL collectives through Atlas and through
NCCL's socket transport, two ranks on one GPU (docs/gpu-check.md, "atlas-nccl-sweep").

Each net runs two rank processes with different NCCL_HOSTID (so every byte crosses the
network transport), optionally each in its own network namespace. Every point is run once
with fresh data and every element of every rank's result is checked; then timed. Prints
nccl-tests' table per op and net, a comparison of the first two nets, and JSON.
Exit status: 0 every check passed, 1 a check failed, 2 setup problem (no GPU, no NCCL).

usage: atlas-nccl-sweep [options]

)";

// The flags as a table (options/table.h): --help and docs/gpu-check.md's table come from
// it. Lists that need their own messages (--net, --ops, --netns, --sim-corrupt) are read as
// text here and parsed in parseSweepArgs.
struct Flags {
    SweepOptions o;
    std::string net = "atlas,socket";
    std::string ops = "all";
    std::string netns;
    std::string sim_corrupt;
    double target_ms = 200;
};

// KEY=VALUE with a non-empty KEY, for --env.
struct KeyValue : options::kinds::Base {
    using Value = std::pair<std::string, std::string>;
    static constexpr const char* kType = "string";
    static constexpr bool kRepeat = true;
    static std::optional<Value> parse(std::string_view t) {
        const size_t eq = t.find('=');
        if (eq == std::string_view::npos || eq == 0) {
            return std::nullopt;
        }
        return Value(std::string(t.substr(0, eq)), std::string(t.substr(eq + 1)));
    }
    static std::string accepted(int, int) { return "KEY=VALUE, repeatable"; }
    template <typename C>
    static std::string format(const C& v) {
        std::string s;
        for (const auto& [k, val] : v) {
            s += (s.empty() ? "" : " ") + k + "=" + val;
        }
        return s;
    }
};

using namespace options::kinds;
constexpr uint64_t kMaxSweepBytes = 4ull << 30;

#define ATLAS_SWEEP_OPTIONS(X)                                                                     \
    X("--net", String, net, 0, 0, "LIST",                                                          \
      "nets in order, comma-separated: atlas | socket | socket:TxS (sets NCCL_SOCKET_NTHREADS=T, " \
      "NCCL_NSOCKS_PERTHREAD=S; 1 <= T <= 16, T x S <= 64)")                                       \
    X("--ops", String, ops, 0, 0, "LIST",                                                          \
      "all_reduce,all_gather,reduce_scatter,sendrecv,alltoall or all")                             \
    X("--minbytes", Size, o.min_bytes, 1, kMaxSweepBytes, "N", "smallest size")                    \
    X("--maxbytes", Size, o.max_bytes, 1, kMaxSweepBytes, "N", "largest size")                     \
    X("--stepfactor", Uint, o.step_factor, 2, 1024, "N", "size multiplier")                        \
    X("--warmup", Uint, o.warmup, 0, 100, "N",                                                     \
      "runs per op at the largest and the smallest size first")                                    \
    X("--target-ms", Double, target_ms, 0, 600000, "MS",                                           \
      "time the timed iterations of a point aim for")                                              \
    X("--max-iters", Uint, o.iter_plan.max_iters, 0, 10000, "N",                                   \
      "timed iterations per point at most")                                                        \
    X("--budget-s", Double, o.budget_s, 0, 86400, "SEC",                                           \
      "per net: points that would end later are skipped (0: none)")                                \
    X("--timeout", Uint, o.timeout_s, 10, 86400, "SEC",                                            \
      "per net: ranks still running after it are killed")                                          \
    X("--plugin", Path, o.plugin, 0, 0, "PATH",                                                    \
      "libnccl-net-atlas.so for atlas nets (default: $ATLAS_PLUGIN, next to this program, then "   \
      "the build tree's)")                                                                         \
    X("--nccl", Path, o.nccl_lib, 0, 0, "LIB",                                                     \
      "the NCCL library to dlopen (LD_LIBRARY_PATH decides which)")                                \
    X("--netns", String, netns, 0, 0, "NS0,NS1",                                                   \
      "network namespace of rank 0 and rank 1 (/run/netns/NS or a path)")                          \
    X("--addr", Path, o.addr, 0, 0, "ADDR", "rank 0's address, the bootstrap root (NCCL_COMM_ID)") \
    X("--ifname", Path, o.ifname, 0, 0, "IF", "NCCL_SOCKET_IFNAME and ATLAS_SOCKET_IFNAME")        \
    X("--env", KeyValue, o.env, 0, 0, "K=V", "environment of every rank")                          \
    X("--device", Uint, o.device, 0, 1023, "N", "CUDA device")                                     \
    X("--logdir", Path, o.logdir, 0, 0, "DIR",                                                     \
      "NCCL logs: nccl-<net>-rank<r>.log (default: a fresh /tmp directory)")                       \
    X("--json", Path, o.json_path, 0, 0, "FILE",                                                   \
      "every point, skipped point and log check as JSON")                                          \
    X("--simulate", Switch, o.simulate, 0, 0, "",                                                  \
      "no GPU, no NCCL: each rank returns what a correct collective returns and reports a "        \
      "modelled time (--sim-gbps, --sim-rtt-ms); exercises everything else")                       \
    X("--sim-gbps", Double, o.sim_link.gbps, 0.001, 1e6, "X", "--simulate link rate")              \
    X("--sim-rtt-ms", Double, o.sim_link.rtt_ms, 0, 1e5, "X", "--simulate latency per op")         \
    X("--sim-corrupt", String, sim_corrupt, 0, 0, "LIST",                                          \
      "--simulate: ops whose result gets one wrong element (a test seam)")                         \
    X("--print-env", Int, o.print_env_rank, 0, 1, "R",                                             \
      "print rank R's environment for the first --net (KEY=VALUE and -KEY lines, without "         \
      "NCCL_COMM_ID) and exit: what another NCCL program needs to use the same transport")         \
    X("--help", Switch, o.help, 0, 0, "", "this text")

#define ATLAS_SWEEP_ALIASES(X)     \
    X("-b", "--minbytes", false)   \
    X("-e", "--maxbytes", false)   \
    X("-f", "--stepfactor", false) \
    X("-w", "--warmup", false)     \
    X("-h", "--help", false)

const options::Table<Flags>& flagTable() {
    static const auto t = ATLAS_OPTIONS_TABLE(Flags, ATLAS_SWEEP_OPTIONS, ATLAS_SWEEP_ALIASES);
    return t;
}

Status bad(const std::string& what) {
    return {Code::kInvalidArgument, what};
}

// Strict (options/value.h): no sign games, spaces, hex, trailing text, nan or inf.
Result<long> parseLong(const std::string& flag, const std::string& s, long lo, long hi) {
    const std::optional<int64_t> v = options::parseSigned(s);
    if (!v || *v < lo || *v > hi) {
        return bad(flag + "='" + s + "': expected an integer in " + std::to_string(lo) + ".." +
                   std::to_string(hi));
    }
    return static_cast<long>(*v);
}

std::vector<std::string> splitComma(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    std::string item;
    while (std::getline(ss, item, ',')) {
        out.push_back(item);
    }
    return out;
}

}  // namespace

std::string NetSpec::label() const {
    if (kind == Kind::kAtlas) {
        return "atlas";
    }
    if (socket_threads == 0) {
        return "socket";
    }
    return "socket:" + std::to_string(socket_threads) + "x" + std::to_string(socks_per_thread);
}

Result<NetSpec> parseNetSpec(const std::string& text) {
    NetSpec n;
    if (text == "atlas") {
        return n;
    }
    n.kind = NetSpec::Kind::kSocket;
    if (text == "socket") {
        return n;
    }
    const std::string prefix = "socket:";
    const size_t x = text.find('x', prefix.size());
    if (text.rfind(prefix, 0) != 0 || x == std::string::npos) {
        return bad("net '" + text + "': expected atlas, socket or socket:TxS");
    }
    auto t = parseLong("--net " + text, text.substr(prefix.size(), x - prefix.size()), 1, 16);
    auto s = parseLong("--net " + text, text.substr(x + 1), 1, 64);
    if (!t || !s) {
        return bad("net '" + text + "': socket:TxS needs 1 <= T <= 16 threads and S >= 1");
    }
    if (t.value() * s.value() > 64) {
        return bad("net '" + text + "': NCCL allows at most 64 sockets (T x S)");
    }
    n.socket_threads = static_cast<int>(t.value());
    n.socks_per_thread = static_cast<int>(s.value());
    return n;
}

Result<SweepOptions> parseSweepArgs(const std::vector<std::string>& args) {
    options::Parsed<Flags> p;
    options::readArgs(flagTable(), args, &p);
    for (const std::string& w : p.positional) {
        p.errors.push_back("unexpected argument '" + w + "' (see --help)");
    }
    ATLAS_RETURN_IF_ERROR(p.status());
    SweepOptions o = p.config.o;
    if (o.help) {
        return o;
    }
    o.iter_plan.target_s = p.config.target_ms / 1e3;
    o.nets.clear();
    for (const std::string& item : splitComma(p.config.net)) {
        auto n = parseNetSpec(item);
        if (!n) {
            return n.status();
        }
        o.nets.push_back(n.value());
    }
    if (o.nets.empty()) {
        return bad("--net: empty list");
    }
    auto ops = parseOps(p.config.ops);
    if (!ops) {
        return Status(Code::kInvalidArgument, "--ops: " + ops.status().message());
    }
    o.ops = ops.value();
    if (p.has("--netns")) {
        o.netns = splitComma(p.config.netns);
        if (o.netns.size() != 2 || o.netns[0].empty() || o.netns[1].empty()) {
            return bad("--netns='" + p.config.netns + "': expected two namespaces NS0,NS1");
        }
    }
    if (p.has("--sim-corrupt")) {
        auto corrupt = parseOps(p.config.sim_corrupt);
        if (!corrupt) {
            return Status(Code::kInvalidArgument, "--sim-corrupt: " + corrupt.status().message());
        }
        o.sim_corrupt = corrupt.value();
    }
    auto sizes = sweepSizes(o.min_bytes, o.max_bytes, o.step_factor);
    if (!sizes) {
        return sizes.status();
    }
    if (!o.sim_corrupt.empty() && !o.simulate) {
        return bad("--sim-corrupt needs --simulate");
    }
    return o;
}

std::string sweepUsage() {
    return kPreamble + options::flagHelp(flagTable());
}

std::string sweepFlagsMarkdown() {
    return options::markdown(flagTable());
}

RankEnv rankEnvironment(const SweepOptions& opts, const NetSpec& net, int rank, int port,
                        const std::string& plugin_path, const std::string& log_path) {
    RankEnv e;
    auto set = [&](const std::string& k, const std::string& v) { e.set.emplace_back(k, v); };
    // Rank 0 runs the bootstrap root at NCCL_COMM_ID, so no unique id has to be exchanged;
    // different host ids make NCCL treat the ranks as two hosts: no P2P/SHM, every byte goes
    // through the network transport (design notes, nccl-net-abi.md 5.2).
    set("NCCL_COMM_ID", opts.addr + ":" + std::to_string(port));
    set("NCCL_HOSTID", rank == 0 ? "hostA" : "hostB");
    set("NCCL_DEBUG", "INFO");
    set("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV");
    set("NCCL_DEBUG_FILE", log_path);
    set("NCCL_SOCKET_IFNAME", opts.ifname);
    // Each rank is its own "GPU" for the plugin's per-rank resources (the bubble channel).
    set("ATLAS_LOCAL_RANK", std::to_string(rank));
    if (net.kind == NetSpec::Kind::kAtlas) {
        set("NCCL_NET_PLUGIN", plugin_path);
        set("NCCL_NET", "Atlas");               // fail instead of falling back to IB or Socket
        set("NCCL_NET_PLUGIN_REF_COUNT", "1");  // NCCL 2.28's unload/reload bug (nccl#1978)
        set("ATLAS_SOCKET_IFNAME", opts.ifname);
        e.unset = {"NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"};
    } else {
        set("NCCL_NET", "Socket");
        e.unset.push_back("NCCL_NET_PLUGIN");
        if (net.socket_threads > 0) {
            set("NCCL_SOCKET_NTHREADS", std::to_string(net.socket_threads));
            set("NCCL_NSOCKS_PERTHREAD", std::to_string(net.socks_per_thread));
        } else {
            e.unset.push_back("NCCL_SOCKET_NTHREADS");
            e.unset.push_back("NCCL_NSOCKS_PERTHREAD");
        }
    }
    for (const auto& kv : opts.env) {
        set(kv.first, kv.second);
    }
    return e;
}

std::string envFileText(const SweepOptions& opts, int rank, const std::string& plugin_path,
                        const std::string& log_path) {
    const RankEnv e = rankEnvironment(opts, opts.nets.front(), rank, 0, plugin_path, log_path);
    std::string s = "-NCCL_COMM_ID\n";
    for (const std::string& k : e.unset) {
        s += "-" + k + "\n";
    }
    for (const auto& [k, v] : e.set) {
        if (k != "NCCL_COMM_ID") {
            s += k + "=" + v + "\n";
        }
    }
    return s;
}

std::string ncclLogPath(const std::string& dir, const NetSpec& net, int rank) {
    std::string label = net.label();
    for (char& c : label) {
        c = c == ':' ? '-' : c;
    }
    return dir + "/nccl-" + label + "-rank" + std::to_string(rank) + ".log";
}

std::string expectedNetworkLine(const NetSpec& net) {
    return net.kind == NetSpec::Kind::kAtlas ? "Using network Atlas" : "Using network Socket";
}

}  // namespace atlas::gpucheck
