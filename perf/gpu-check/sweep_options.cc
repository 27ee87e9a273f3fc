#include "perf/gpu-check/sweep_options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace atlas::gpucheck {
namespace {

constexpr const char* kUsage =
    R"(atlas-nccl-sweep: an nccl-tests-style sweep of NCCL collectives through Atlas and through
NCCL's socket transport, two ranks on one GPU (docs/gpu-check.md, "atlas-nccl-sweep").

Each net runs two rank processes with different NCCL_HOSTID (so every byte crosses the
network transport), optionally each in its own network namespace. Every point is run once
with fresh data and every element of every rank's result is checked; then timed. Prints
nccl-tests' table per op and net, a comparison of the first two nets, and JSON.

usage: atlas-nccl-sweep [options]

  --net LIST         nets in order, comma-separated: atlas | socket | socket:TxS (sets
                     NCCL_SOCKET_NTHREADS=T, NCCL_NSOCKS_PERTHREAD=S) (default atlas,socket)
  --ops LIST         all_reduce,all_gather,reduce_scatter,sendrecv,alltoall or all (default all)
  -b, --minbytes N   smallest size (default 8)
  -e, --maxbytes N   largest size (default 256M)
  -f, --stepfactor N size multiplier (default 2)
  -w, --warmup N     runs per op at the largest and the smallest size first (default 1)
  --target-ms MS     time the timed iterations of a point aim for (default 200)
  --max-iters N      timed iterations per point at most (default 20)
  --budget-s SEC     per net: points that would end later are skipped (default 0: none)
  --timeout SEC      per net: ranks still running after it are killed (default 300)
  --plugin PATH      libnccl-net-atlas.so for atlas nets (default: $ATLAS_PLUGIN, next to
                     this program, then the build tree's)
  --nccl LIB         the NCCL library to dlopen (default libnccl.so.2: LD_LIBRARY_PATH decides)
  --netns NS0,NS1    network namespace of rank 0 and rank 1 (/run/netns/NS or a path)
  --addr ADDR        rank 0's address, the bootstrap root (NCCL_COMM_ID) (default 127.0.0.1)
  --ifname IF        NCCL_SOCKET_IFNAME and ATLAS_SOCKET_IFNAME (default lo)
  --env K=V          environment of every rank (repeatable)
  --device N         CUDA device (default 0)
  --logdir DIR       NCCL logs: nccl-<net>-rank<r>.log (default a fresh /tmp directory)
  --json FILE        every point, skipped point and log check as JSON
  --simulate         no GPU, no NCCL: each rank returns what a correct collective returns and
                     reports a modelled time (--sim-gbps, --sim-rtt-ms); exercises everything
                     else (processes, checks, iteration plan, budget, tables, JSON)
  --sim-gbps X       --simulate link rate (default 1)
  --sim-rtt-ms X     --simulate latency per op (default 50)
  --sim-corrupt LIST --simulate: ops whose result gets one wrong element (a test seam)
  --print-env R      print rank R's environment for the first --net (KEY=VALUE and -KEY
                     lines, without NCCL_COMM_ID) and exit: what another NCCL program (the
                     PyTorch pipeline run) needs to use the same transport the same way
  -h, --help         this text
Exit status: 0 every check passed, 1 a check failed, 2 setup problem (no GPU, no NCCL).
)";

Status bad(const std::string& what) {
    return {Code::kInvalidArgument, what};
}

Result<long> parseLong(const std::string& flag, const std::string& s, long lo, long hi) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || end == nullptr || *end != 0 || errno != 0 || v < lo || v > hi) {
        return bad(flag + "='" + s + "': expected an integer in " + std::to_string(lo) + ".." +
                   std::to_string(hi));
    }
    return v;
}

Result<double> parseDouble(const std::string& flag, const std::string& s, double lo, double hi) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end == nullptr || *end != 0 || !std::isfinite(v) || v < lo || v > hi) {
        return bad(flag + "='" + s + "': expected a number in " + std::to_string(lo) + ".." +
                   std::to_string(hi));
    }
    return v;
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
    SweepOptions o;
    o.nets = {NetSpec{}, NetSpec{NetSpec::Kind::kSocket, 0, 0}};
    o.ops.assign(kAllOps.begin(), kAllOps.end());
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        std::string v;
        auto value = [&]() -> Status {
            if (i + 1 >= args.size()) {
                return bad(a + " needs a value");
            }
            v = args[++i];
            return Status::ok();
        };
        auto intArg = [&](long lo, long hi, int* out) -> Status {
            ATLAS_RETURN_IF_ERROR(value());
            auto r = parseLong(a, v, lo, hi);
            if (!r) {
                return r.status();
            }
            *out = static_cast<int>(r.value());
            return Status::ok();
        };
        auto sizeArg = [&](size_t* out) -> Status {
            ATLAS_RETURN_IF_ERROR(value());
            auto r = parseByteSize(v);
            if (!r) {
                return Status(Code::kInvalidArgument, a + ": " + r.status().message());
            }
            *out = r.value();
            return Status::ok();
        };
        auto numArg = [&](double lo, double hi, double* out) -> Status {
            ATLAS_RETURN_IF_ERROR(value());
            auto r = parseDouble(a, v, lo, hi);
            if (!r) {
                return r.status();
            }
            *out = r.value();
            return Status::ok();
        };
        if (a == "-h" || a == "--help") {
            o.help = true;
            return o;
        } else if (a == "--net") {
            ATLAS_RETURN_IF_ERROR(value());
            o.nets.clear();
            for (const std::string& item : splitComma(v)) {
                auto n = parseNetSpec(item);
                if (!n) {
                    return n.status();
                }
                o.nets.push_back(n.value());
            }
            if (o.nets.empty()) {
                return bad("--net: empty list");
            }
        } else if (a == "--ops") {
            ATLAS_RETURN_IF_ERROR(value());
            auto ops = parseOps(v);
            if (!ops) {
                return Status(Code::kInvalidArgument, "--ops: " + ops.status().message());
            }
            o.ops = ops.value();
        } else if (a == "-b" || a == "--minbytes") {
            ATLAS_RETURN_IF_ERROR(sizeArg(&o.min_bytes));
        } else if (a == "-e" || a == "--maxbytes") {
            ATLAS_RETURN_IF_ERROR(sizeArg(&o.max_bytes));
        } else if (a == "-f" || a == "--stepfactor") {
            ATLAS_RETURN_IF_ERROR(intArg(2, 1024, &o.step_factor));
        } else if (a == "-w" || a == "--warmup") {
            ATLAS_RETURN_IF_ERROR(intArg(0, 100, &o.warmup));
        } else if (a == "--target-ms") {
            double ms = 0;
            ATLAS_RETURN_IF_ERROR(numArg(0, 600000, &ms));
            o.iter_plan.target_s = ms / 1e3;
        } else if (a == "--max-iters") {
            ATLAS_RETURN_IF_ERROR(intArg(0, 10000, &o.iter_plan.max_iters));
        } else if (a == "--budget-s") {
            ATLAS_RETURN_IF_ERROR(numArg(0, 86400, &o.budget_s));
        } else if (a == "--timeout") {
            ATLAS_RETURN_IF_ERROR(intArg(10, 86400, &o.timeout_s));
        } else if (a == "--plugin") {
            ATLAS_RETURN_IF_ERROR(value());
            o.plugin = v;
        } else if (a == "--nccl") {
            ATLAS_RETURN_IF_ERROR(value());
            o.nccl_lib = v;
        } else if (a == "--netns") {
            ATLAS_RETURN_IF_ERROR(value());
            o.netns = splitComma(v);
            if (o.netns.size() != 2 || o.netns[0].empty() || o.netns[1].empty()) {
                return bad("--netns='" + v + "': expected two namespaces NS0,NS1");
            }
        } else if (a == "--addr") {
            ATLAS_RETURN_IF_ERROR(value());
            o.addr = v;
        } else if (a == "--ifname") {
            ATLAS_RETURN_IF_ERROR(value());
            o.ifname = v;
        } else if (a == "--env") {
            ATLAS_RETURN_IF_ERROR(value());
            const size_t eq = v.find('=');
            if (eq == std::string::npos || eq == 0) {
                return bad("--env='" + v + "': expected KEY=VALUE");
            }
            o.env.emplace_back(v.substr(0, eq), v.substr(eq + 1));
        } else if (a == "--device") {
            ATLAS_RETURN_IF_ERROR(intArg(0, 1023, &o.device));
        } else if (a == "--logdir") {
            ATLAS_RETURN_IF_ERROR(value());
            o.logdir = v;
        } else if (a == "--json") {
            ATLAS_RETURN_IF_ERROR(value());
            o.json_path = v;
        } else if (a == "--simulate") {
            o.simulate = true;
        } else if (a == "--sim-gbps") {
            ATLAS_RETURN_IF_ERROR(numArg(0.001, 1e6, &o.sim_link.gbps));
        } else if (a == "--sim-rtt-ms") {
            ATLAS_RETURN_IF_ERROR(numArg(0, 1e5, &o.sim_link.rtt_ms));
        } else if (a == "--sim-corrupt") {
            ATLAS_RETURN_IF_ERROR(value());
            auto ops = parseOps(v);
            if (!ops) {
                return Status(Code::kInvalidArgument, "--sim-corrupt: " + ops.status().message());
            }
            o.sim_corrupt = ops.value();
        } else if (a == "--print-env") {
            ATLAS_RETURN_IF_ERROR(intArg(0, 1, &o.print_env_rank));
        } else {
            return bad("unknown option '" + a + "' (see --help)");
        }
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

const char* sweepUsage() {
    return kUsage;
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
