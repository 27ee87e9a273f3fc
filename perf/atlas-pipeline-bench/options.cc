#include "perf/atlas-pipeline-bench/options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace atlas::pipebench {
namespace {

constexpr const char* kUsage =
    R"(atlas-pipeline-bench: pipeline-parallel training without GPUs, through the Atlas plugin.

D pipelines x P stages run as separate processes (optionally each in a network namespace of
the WAN testbed). Every stage runs a GPipe or 1F1B schedule of forward/backward micro-batches:
compute is a timed busy period, activations and gradients move to the neighbouring stages
through libnccl-net-atlas.so (dlopen, ncclNet v11, as NCCL drives it). Reports iteration time
and per-stage busy and idle time (bubbles); --json and --trace (Chrome/Perfetto) add timelines.

usage: atlas-pipeline-bench [options]

  -D, --pipelines N      data-parallel pipelines (default 4)
  -P, --stages N         stages per pipeline (default 2)
  -M, --microbatches N   micro-batches per iteration (default 4, max 32)
      --iterations N     measured iterations (default 5)
      --warmup N         unmeasured iterations first (default 1)
      --schedule S       gpipe | 1f1b (default gpipe)
      --fwd-ms X         forward compute per micro-batch (default 20)
      --bwd-ms X         backward compute per micro-batch (default 2 x fwd)
      --stage-ms S:F:B   stage S computes F ms forward, B ms backward (repeatable)
      --act-bytes SIZE   activation per micro-batch, stage s -> s+1 (default 4M)
      --grad-bytes SIZE  gradient per micro-batch, s+1 -> s (default: --act-bytes)
      --netns NS,NS,...  network namespace per stage (/run/netns/NS or a path), e.g. the
                         testbed's DC<i>_NS; stage s uses entry s (the last entry repeats)
      --plugin PATH      the plugin (default: $ATLAS_PLUGIN, else the build tree's)
      --env K=V          environment of every stage process (repeatable), before the plugin
                         loads, e.g. ATLAS_SHARING=temporal, ATLAS_ARBITER=host:port
      --stage-env S:K=V  only for stage S (repeatable)
      --pipeline-env D:K=V  only for pipeline D (repeatable)
      --stage-cpus S:LIST  pin stage S's compute thread (of every pipeline) to these CPUs, e.g.
                         0:0 or 1:2-3,6 (repeatable; the plugin's threads stay unpinned, as
                         NCCL's run on host cores); to share a core on purpose
      --compute MODE     spin | yield | sleep | cuda (default spin: the CPU is really used;
                         cuda: cuBLAS GEMMs on GPU 0 for the period); a list MODE,MODE,...
                         gives stage s entry s (the last entry repeats), e.g. cuda,spin
      --cuda-ns-per-gemm NS  --compute cuda: skip the calibration, use this GEMM time (the
                         value a calibrating run printed), so compared runs do equal work
      --recv-post WHEN   ahead | needed (default ahead): post an iteration's receives at its
                         start, or each right before the compute that consumes it (as
                         Megatron's p2p_communicate does)
      --no-barrier       let iterations overlap (no per-iteration barrier of all stages)
      --no-traffic-class do not pass {pipeline, stage, direction} as NCCL trafficClass
                         (the plugin then derives the flow class itself)
      --dev N            plugin device (default 0)
      --timeout SEC      bound on the whole run (default 600)
      --label NAME       name of this run in the output
      --json FILE        results + per-stage timeline as JSON
      --trace FILE       Chrome trace (open in ui.perfetto.dev)
      --quiet            only the summary
  -h, --help           this text
)";

Status bad(const std::string& what) {
    return {Code::kInvalidArgument, what};
}

Result<int64_t> parseInt(const std::string& flag, const std::string& s, int64_t lo, int64_t hi) {
    if (s.empty() || s.size() > 12) {
        return bad(flag + ": expected an integer in " + std::to_string(lo) + ".." +
                   std::to_string(hi));
    }
    int64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') {
            return bad(flag + "='" + s + "': expected an integer in " + std::to_string(lo) + ".." +
                       std::to_string(hi));
        }
        v = v * 10 + (c - '0');
    }
    if (v < lo || v > hi) {
        return bad(flag + "='" + s + "' is out of range " + std::to_string(lo) + ".." +
                   std::to_string(hi));
    }
    return v;
}

Result<Nanos> parseMs(const std::string& flag, const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end == nullptr || *end != 0 || !std::isfinite(v) || v < 0 || v > 3.6e6) {
        return bad(flag + "='" + s + "': expected milliseconds in 0..3600000");
    }
    return static_cast<Nanos>(v * 1e6);
}

Status parseKeyValue(const std::string& flag, const std::string& s, EnvSetting* e) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) {
        return bad(flag + "='" + s + "': expected KEY=VALUE");
    }
    e->key = s.substr(0, eq);
    e->value = s.substr(eq + 1);
    return Status::ok();
}

}  // namespace

const char* scheduleName(Schedule s) {
    return s == Schedule::kGpipe ? "gpipe" : "1f1b";
}

const char* computeName(Compute c) {
    switch (c) {
        case Compute::kSpin:
            return "spin";
        case Compute::kYield:
            return "yield";
        case Compute::kSleep:
            return "sleep";
        case Compute::kCuda:
            return "cuda";
    }
    return "?";
}

std::string computeText(const BenchConfig& cfg) {
    if (cfg.stage_compute.empty()) {
        return computeName(cfg.compute);
    }
    std::string s;
    for (Compute c : cfg.stage_compute) {
        s += (s.empty() ? "" : ",") + std::string(computeName(c));
    }
    return s;
}

Result<std::vector<int>> parseCpuList(const std::string& flag, const std::string& text) {
    std::vector<int> cpus;
    std::stringstream ss(text);
    std::string item;
    auto fail = [&] { return bad(flag + ": '" + text + "' is not a CPU list such as 0-2,5"); };
    while (std::getline(ss, item, ',')) {
        const size_t dash = item.find('-');
        auto lo = parseInt(flag, item.substr(0, dash), 0, 4095);
        auto hi = dash == std::string::npos ? lo : parseInt(flag, item.substr(dash + 1), 0, 4095);
        if (!lo || !hi || hi.value() < lo.value()) {
            return fail();
        }
        for (int64_t cpu = lo.value(); cpu <= hi.value(); ++cpu) {
            cpus.push_back(static_cast<int>(cpu));
        }
    }
    if (cpus.empty() || text.back() == ',') {
        return fail();
    }
    return cpus;
}

const char* recvPostName(RecvPost r) {
    return r == RecvPost::kAhead ? "ahead" : "needed";
}

const char* usageText() {
    return kUsage;
}

int trafficClassOf(int pipeline, int stage, int direction) {
    return pipeline * 256 + stage * 2 + direction;
}

StageCost BenchConfig::cost(int stage) const {
    if (static_cast<size_t>(stage) < stage_costs.size() &&
        (stage_costs[static_cast<size_t>(stage)].fwd_ns > 0 ||
         stage_costs[static_cast<size_t>(stage)].bwd_ns > 0)) {
        return stage_costs[static_cast<size_t>(stage)];
    }
    return {fwd_ns, bwd_ns};
}

Compute BenchConfig::computeOf(int stage) const {
    if (stage_compute.empty()) {
        return compute;
    }
    return stage_compute[std::min(static_cast<size_t>(stage), stage_compute.size() - 1)];
}

Result<uint64_t> parseBytes(const std::string& text) {
    if (text.empty() || text.size() > 24) {
        return bad("size '" + text + "': expected bytes with an optional K, M or G suffix");
    }
    uint64_t mult = 1;
    std::string digits = text;
    const char last = text.back();
    if (last == 'K' || last == 'k') {
        mult = 1ull << 10;
    } else if (last == 'M' || last == 'm') {
        mult = 1ull << 20;
    } else if (last == 'G' || last == 'g') {
        mult = 1ull << 30;
    }
    if (mult != 1) {
        digits.pop_back();
    }
    if (digits.empty()) {
        return bad("size '" + text + "': no digits");
    }
    uint64_t v = 0;
    for (char c : digits) {
        if (c < '0' || c > '9') {
            return bad("size '" + text + "': expected bytes with an optional K, M or G suffix");
        }
        if (v > (1ull << 40)) {
            return bad("size '" + text + "' is too large");
        }
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    v *= mult;
    if (v > (1ull << 30)) {
        return bad("size '" + text + "' is above 1G (the plugin ABI reports sizes as int)");
    }
    return v;
}

Result<BenchConfig> parseArgs(const std::vector<std::string>& args) {
    BenchConfig c;
    bool bwd_given = false;
    std::vector<std::pair<int, StageCost>> costs;
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
        auto intArg = [&](int64_t lo, int64_t hi, int* out) -> Status {
            ATLAS_RETURN_IF_ERROR(value());
            auto r = parseInt(a, v, lo, hi);
            if (!r) {
                return r.status();
            }
            *out = static_cast<int>(r.value());
            return Status::ok();
        };
        if (a == "-h" || a == "--help") {
            c.help = true;
            return c;
        } else if (a == "-D" || a == "--pipelines") {
            ATLAS_RETURN_IF_ERROR(intArg(1, 64, &c.pipelines));
        } else if (a == "-P" || a == "--stages") {
            ATLAS_RETURN_IF_ERROR(intArg(1, 64, &c.stages));
        } else if (a == "-M" || a == "--microbatches") {
            ATLAS_RETURN_IF_ERROR(intArg(1, 32, &c.microbatches));
        } else if (a == "--iterations") {
            ATLAS_RETURN_IF_ERROR(intArg(1, 100000, &c.iterations));
        } else if (a == "--warmup") {
            ATLAS_RETURN_IF_ERROR(intArg(0, 100000, &c.warmup));
        } else if (a == "--schedule") {
            ATLAS_RETURN_IF_ERROR(value());
            if (v == "gpipe") {
                c.schedule = Schedule::kGpipe;
            } else if (v == "1f1b") {
                c.schedule = Schedule::k1f1b;
            } else {
                return bad("--schedule='" + v + "': expected gpipe or 1f1b");
            }
        } else if (a == "--fwd-ms") {
            ATLAS_RETURN_IF_ERROR(value());
            auto r = parseMs(a, v);
            if (!r) {
                return r.status();
            }
            c.fwd_ns = r.value();
        } else if (a == "--bwd-ms") {
            ATLAS_RETURN_IF_ERROR(value());
            auto r = parseMs(a, v);
            if (!r) {
                return r.status();
            }
            c.bwd_ns = r.value();
            bwd_given = true;
        } else if (a == "--stage-ms") {
            ATLAS_RETURN_IF_ERROR(value());
            const size_t c1 = v.find(':');
            const size_t c2 = c1 == std::string::npos ? c1 : v.find(':', c1 + 1);
            if (c2 == std::string::npos) {
                return bad("--stage-ms='" + v + "': expected STAGE:FWD_MS:BWD_MS");
            }
            auto s = parseInt(a, v.substr(0, c1), 0, 63);
            auto f = parseMs(a, v.substr(c1 + 1, c2 - c1 - 1));
            auto b = parseMs(a, v.substr(c2 + 1));
            if (!s || !f || !b) {
                return bad("--stage-ms='" + v + "': expected STAGE:FWD_MS:BWD_MS");
            }
            costs.push_back({static_cast<int>(s.value()), {f.value(), b.value()}});
        } else if (a == "--act-bytes" || a == "--grad-bytes") {
            ATLAS_RETURN_IF_ERROR(value());
            auto r = parseBytes(v);
            if (!r) {
                return r.status();
            }
            (a == "--act-bytes" ? c.act_bytes : c.grad_bytes) = r.value();
        } else if (a == "--netns") {
            ATLAS_RETURN_IF_ERROR(value());
            c.stage_netns.clear();
            std::stringstream ss(v);
            std::string item;
            while (std::getline(ss, item, ',')) {
                if (item.empty()) {
                    return bad("--netns='" + v + "': empty namespace name");
                }
                c.stage_netns.push_back(item);
            }
        } else if (a == "--plugin") {
            ATLAS_RETURN_IF_ERROR(value());
            c.plugin = v;
        } else if (a == "--env") {
            ATLAS_RETURN_IF_ERROR(value());
            EnvSetting e;
            ATLAS_RETURN_IF_ERROR(parseKeyValue(a, v, &e));
            c.env.push_back(e);
        } else if (a == "--stage-env" || a == "--pipeline-env") {
            ATLAS_RETURN_IF_ERROR(value());
            const size_t colon = v.find(':');
            if (colon == std::string::npos) {
                return bad(a + "='" + v + "': expected N:KEY=VALUE");
            }
            auto n = parseInt(a, v.substr(0, colon), 0, 63);
            if (!n) {
                return n.status();
            }
            EnvSetting e;
            ATLAS_RETURN_IF_ERROR(parseKeyValue(a, v.substr(colon + 1), &e));
            (a == "--stage-env" ? e.stage : e.pipeline) = static_cast<int>(n.value());
            c.env.push_back(e);
        } else if (a == "--stage-cpus") {
            ATLAS_RETURN_IF_ERROR(value());
            const size_t colon = v.find(':');
            if (colon == std::string::npos) {
                return bad(a + "='" + v + "': expected STAGE:CPU-LIST");
            }
            auto n = parseInt(a, v.substr(0, colon), 0, 63);
            if (!n) {
                return n.status();
            }
            auto cpus = parseCpuList(a, v.substr(colon + 1));
            if (!cpus) {
                return cpus.status();
            }
            c.stage_cpus.push_back({static_cast<int>(n.value()), cpus.value()});
        } else if (a == "--compute") {
            ATLAS_RETURN_IF_ERROR(value());
            c.stage_compute.clear();
            std::stringstream ss(v);
            std::string item;
            while (std::getline(ss, item, ',')) {
                if (item == "spin") {
                    c.stage_compute.push_back(Compute::kSpin);
                } else if (item == "yield") {
                    c.stage_compute.push_back(Compute::kYield);
                } else if (item == "sleep") {
                    c.stage_compute.push_back(Compute::kSleep);
                } else if (item == "cuda") {
                    c.stage_compute.push_back(Compute::kCuda);
                } else {
                    return bad("--compute='" + v +
                               "': expected spin, yield, sleep or cuda (or a list)");
                }
            }
            if (c.stage_compute.empty() || v.back() == ',') {
                return bad("--compute='" + v +
                           "': expected spin, yield, sleep or cuda (or a list)");
            }
            c.compute = c.stage_compute.front();
        } else if (a == "--cuda-ns-per-gemm") {
            ATLAS_RETURN_IF_ERROR(value());
            char* end = nullptr;
            c.cuda_ns_per_gemm = std::strtod(v.c_str(), &end);
            if (v.empty() || *end != 0 || !std::isfinite(c.cuda_ns_per_gemm) ||
                c.cuda_ns_per_gemm <= 0 || c.cuda_ns_per_gemm > 1e9) {
                return bad("--cuda-ns-per-gemm='" + v + "': expected nanoseconds in (0, 1e9]");
            }
        } else if (a == "--recv-post") {
            ATLAS_RETURN_IF_ERROR(value());
            if (v == "ahead") {
                c.recv_post = RecvPost::kAhead;
            } else if (v == "needed") {
                c.recv_post = RecvPost::kNeeded;
            } else {
                return bad("--recv-post='" + v + "': expected ahead or needed");
            }
        } else if (a == "--no-barrier") {
            c.barrier = false;
        } else if (a == "--no-traffic-class") {
            c.traffic_class = false;
        } else if (a == "--dev") {
            ATLAS_RETURN_IF_ERROR(intArg(0, 1024, &c.dev));
        } else if (a == "--timeout") {
            ATLAS_RETURN_IF_ERROR(intArg(1, 86400, &c.timeout_s));
        } else if (a == "--label") {
            ATLAS_RETURN_IF_ERROR(value());
            c.label = v;
        } else if (a == "--json") {
            ATLAS_RETURN_IF_ERROR(value());
            c.json_path = v;
        } else if (a == "--trace") {
            ATLAS_RETURN_IF_ERROR(value());
            c.trace_path = v;
        } else if (a == "--quiet") {
            c.quiet = true;
        } else {
            return bad("unknown option '" + a + "' (see --help)");
        }
    }
    if (!bwd_given) {
        c.bwd_ns = 2 * c.fwd_ns;
    }
    if (!costs.empty()) {
        c.stage_costs.assign(static_cast<size_t>(c.stages), StageCost{});
        for (auto& [s, cost] : costs) {
            if (s >= c.stages) {
                return bad("--stage-ms for stage " + std::to_string(s) + " but --stages is " +
                           std::to_string(c.stages));
            }
            c.stage_costs[static_cast<size_t>(s)] = cost;
        }
    }
    for (const StageCpus& sc : c.stage_cpus) {
        if (sc.stage >= c.stages) {
            return bad("--stage-cpus names stage " + std::to_string(sc.stage) +
                       " but --stages is " + std::to_string(c.stages));
        }
    }
    for (const EnvSetting& e : c.env) {
        if (e.stage >= c.stages || e.pipeline >= c.pipelines) {
            return bad("--stage-env/--pipeline-env names a stage or pipeline that does not exist");
        }
    }
    if (c.act_bytes == 0) {
        return bad("--act-bytes must be positive");
    }
    if (c.pipelines * c.stages > 256) {
        return bad("at most 256 stage processes");
    }
    return c;
}

}  // namespace atlas::pipebench
