#include "perf/atlas-pipeline-bench/options.h"

#include <algorithm>

#include "options/help.h"

namespace atlas::pipebench {
namespace {

using namespace options::kinds;

constexpr const char* kPreamble =
    R"(atlas-pipeline-bench: pipeline-parallel training without GPUs, through the Atlas plugin.

D pipelines x P stages run as separate processes (optionally each in a network namespace of
the WAN testbed). Every stage runs a GPipe or 1F1B schedule of forward/backward micro-batches:
compute is a timed busy period, activations and gradients move to the neighbouring stages
through libnccl-net-atlas.so (dlopen, ncclNet v11, as NCCL drives it). Reports iteration time
and per-stage busy and idle time (bubbles); --json and --trace (Chrome/Perfetto) add timelines.

usage: atlas-pipeline-bench [options]

)";

// "0-2,5" -> {0, 1, 2, 5}; CPUs 0..4095.
std::optional<std::vector<int>> cpuList(std::string_view text) {
    std::vector<int> cpus;
    for (std::string_view item : options::split(text, ',')) {
        const size_t dash = item.find('-');
        const auto lo = options::parseUnsigned(item.substr(0, dash));
        const auto hi =
            dash == std::string_view::npos ? lo : options::parseUnsigned(item.substr(dash + 1));
        if (!lo || !hi || *hi < *lo || *hi > 4095) {
            return std::nullopt;
        }
        for (uint64_t cpu = *lo; cpu <= *hi; ++cpu) {
            cpus.push_back(static_cast<int>(cpu));
        }
    }
    return cpus;
}

// "N:REST" with N in 0..63.
std::optional<std::pair<int, std::string_view>> indexed(std::string_view t) {
    const size_t colon = t.find(':');
    const auto n = options::parseUnsigned(t.substr(0, colon));
    if (colon == std::string_view::npos || !n || *n > 63) {
        return std::nullopt;
    }
    return std::make_pair(static_cast<int>(*n), t.substr(colon + 1));
}

std::optional<EnvSetting> keyValue(std::string_view t) {
    const size_t eq = t.find('=');
    if (eq == std::string_view::npos || eq == 0) {
        return std::nullopt;
    }
    return EnvSetting{-1, -1, std::string(t.substr(0, eq)), std::string(t.substr(eq + 1))};
}

struct EnvKind : Base {
    using Value = EnvSetting;
    static constexpr const char* kType = "KEY=VALUE";
    static std::optional<EnvSetting> parse(std::string_view t) { return keyValue(t); }
    static std::string accepted(int, int) { return "KEY=VALUE"; }
    static std::string format(const EnvSetting& e) { return e.key + "=" + e.value; }
};
// N:KEY=VALUE for stage N (PerPipeline = false) or pipeline N.
template <bool PerPipeline>
struct IndexedEnvKind : EnvKind {
    static std::optional<EnvSetting> parse(std::string_view t) {
        auto n = indexed(t);
        auto e = n ? keyValue(n->second) : std::nullopt;
        if (e) {
            (PerPipeline ? e->pipeline : e->stage) = n->first;
        }
        return e;
    }
    static std::string accepted(int, int) { return "N:KEY=VALUE with N in 0..63"; }
};

struct StageCpusKind : Base {
    using Value = StageCpus;
    static constexpr const char* kType = "STAGE:CPUS";
    static std::optional<StageCpus> parse(std::string_view t) {
        auto n = indexed(t);
        auto cpus = n ? cpuList(n->second) : std::nullopt;
        return cpus ? std::optional<StageCpus>(StageCpus{n->first, *cpus}) : std::nullopt;
    }
    static std::string accepted(int, int) {
        return "STAGE:CPU-LIST such as 0:0 or 1:2-3,6 (stage 0..63, CPUs 0..4095)";
    }
    static std::string format(const StageCpus& c) { return std::to_string(c.stage) + ":..."; }
};

struct StageMsKind : Base {
    using Value = StageMs;
    static constexpr const char* kType = "STAGE:FWD:BWD";
    static std::optional<StageMs> parse(std::string_view t) {
        auto n = indexed(t);
        const auto parts = n ? options::split(n->second, ':') : std::vector<std::string_view>{};
        if (parts.size() != 2) {
            return std::nullopt;
        }
        const auto f = Millis::parse(parts[0]);
        const auto b = Millis::parse(parts[1]);
        if (!f || !b || !Millis::inRange(*f, 0, 3.6e6) || !Millis::inRange(*b, 0, 3.6e6)) {
            return std::nullopt;
        }
        return StageMs{n->first, {*f, *b}};
    }
    static std::string accepted(int, int) {
        return "STAGE:FWD_MS:BWD_MS (stage 0..63, milliseconds 0..3600000)";
    }
    static std::string format(const StageMs& s) { return std::to_string(s.stage) + ":..."; }
};

// PID:FILE, a running atlas-wanem and its --stats file.
struct LinkSourceKind : Base {
    using Value = wanem::LinkSource;
    static constexpr const char* kType = "PID:FILE";
    static std::optional<wanem::LinkSource> parse(std::string_view t) {
        const size_t colon = t.find(':');
        const auto pid = options::parseUnsigned(t.substr(0, colon));
        if (colon == std::string_view::npos || !pid || *pid < 1 || *pid > 0x3fffffff ||
            colon + 1 == t.size()) {
            return std::nullopt;
        }
        return wanem::LinkSource{static_cast<int>(*pid), std::string(t.substr(colon + 1))};
    }
    static std::string accepted(int, int) {
        return "an atlas-wanem pid and its --stats file (scripts/wan-up exports "
               "LINK_DC<i>_DC<j>_PID and LINK_DC<i>_DC<j>_STATS)";
    }
    static std::string format(const wanem::LinkSource& s) {
        return std::to_string(s.pid) + ":" + s.path;
    }
};

using ScheduleKind = NamedEnum<Schedule, &scheduleName, Schedule::kGpipe, Schedule::k1f1b>;
using ComputeKind = NamedEnum<Compute, &computeName, Compute::kSpin, Compute::kYield,
                              Compute::kSleep, Compute::kCuda>;
using RecvPostKind = NamedEnum<RecvPost, &recvPostName, RecvPost::kAhead, RecvPost::kNeeded>;

#define ATLAS_PIPEBENCH_OPTIONS(X)                                                                 \
    X("--pipelines", Uint, pipelines, 1, 64, "N", "data-parallel pipelines")                       \
    X("--stages", Uint, stages, 1, 64, "N", "stages per pipeline")                                 \
    X("--microbatches", Uint, microbatches, 1, 32, "N", "micro-batches per iteration")             \
    X("--iterations", Uint, iterations, 1, 100000, "N", "measured iterations")                     \
    X("--warmup", Uint, warmup, 0, 100000, "N", "unmeasured iterations first")                     \
    X("--schedule", ScheduleKind, schedule, 0, 0, "S", "pipeline schedule")                        \
    X("--fwd-ms", Millis, fwd_ns, 0, 3.6e6, "X", "forward compute per micro-batch")                \
    X("--bwd-ms", Optional<Millis>, bwd_flag_ns, 0, 3.6e6, "X",                                    \
      "backward compute per micro-batch (default: 2 x --fwd-ms)")                                  \
    X("--stage-ms", Repeat<StageMsKind>, stage_ms, 0, 0, "S:F:B",                                  \
      "stage S computes F ms forward, B ms backward")                                              \
    X("--act-bytes", Size, act_bytes, 1, options::kGiB, "SIZE",                                    \
      "activation per micro-batch, stage s -> s+1 (at most 1G: the plugin ABI reports sizes "      \
      "as int)")                                                                                   \
    X("--grad-bytes", Size, grad_bytes, 0, options::kGiB, "SIZE",                                  \
      "gradient per micro-batch, s+1 -> s (0: --act-bytes)")                                       \
    X("--netns", List<Path>, stage_netns, 0, 0, "NS,NS,...",                                       \
      "network namespace per stage (/run/netns/NS or a path), e.g. the testbed's DC<i>_NS; "       \
      "stage s uses entry s (the last entry repeats)")                                             \
    X("--plugin", Path, plugin, 0, 0, "PATH", "the plugin (default: the build tree's)")            \
    X("--env", Repeat<EnvKind>, env, 0, 0, "K=V",                                                  \
      "environment of every stage process, before the plugin loads, e.g. "                         \
      "ATLAS_SHARING=temporal, ATLAS_ARBITER_CONNECT=host:port")                                   \
    X("--stage-env", Repeat<IndexedEnvKind<false>>, env, 0, 0, "S:K=V", "only for stage S")        \
    X("--pipeline-env", Repeat<IndexedEnvKind<true>>, env, 0, 0, "D:K=V", "only for pipeline D")   \
    X("--stage-cpus", Repeat<StageCpusKind>, stage_cpus, 0, 0, "S:LIST",                           \
      "pin stage S's compute thread (of every pipeline) to these CPUs (the plugin's threads "      \
      "stay unpinned, as NCCL's run on host cores); to share a core on purpose")                   \
    X("--compute", List<ComputeKind>, stage_compute, 0, 0, "MODE[,MODE...]",                       \
      "how compute burns its time: spin (the CPU is really used; the default), yield, sleep, or "  \
      "cuda (cuBLAS GEMMs on GPU 0 for the period); a list gives stage s entry s (the last entry " \
      "repeats), e.g. cuda,spin")                                                                  \
    X("--cuda-ns-per-gemm", Double, cuda_ns_per_gemm, 1e-9, 1e9, "NS",                             \
      "--compute cuda: skip the calibration, use this GEMM time (the value a calibrating run "     \
      "printed), so compared runs do equal work (0: calibrate)")                                   \
    X("--recv-post", RecvPostKind, recv_post, 0, 0, "WHEN",                                        \
      "post an iteration's receives at its start (ahead), or each right before the compute "       \
      "that consumes it (needed, as Megatron's p2p_communicate does)")                             \
    X("--no-barrier", Off, barrier, 0, 0, "",                                                      \
      "let iterations overlap (no per-iteration barrier of all stages)")                           \
    X("--no-traffic-class", Off, traffic_class, 0, 0, "",                                          \
      "do not pass {pipeline, stage, direction} as NCCL trafficClass (the plugin then derives "    \
      "the flow class itself)")                                                                    \
    X("--dev", Uint, dev, 0, 1024, "N", "plugin device")                                           \
    X("--timeout", Uint, timeout_s, 1, 86400, "SEC", "bound on the whole run")                     \
    X("--link-stats", Repeat<LinkSourceKind>, link_stats, 0, 0, "PID:FILE",                        \
      "an emulated link's atlas-wanem pid and --stats file: report each direction's utilization "  \
      "(bytes carried / what its rate could carry) over each measured iteration")                  \
    X("--label", String, label, 0, 0, "NAME", "name of this run in the output")                    \
    X("--json", Path, json_path, 0, 0, "FILE", "results + per-stage timeline as JSON")             \
    X("--trace", Path, trace_path, 0, 0, "FILE", "Chrome trace (open in ui.perfetto.dev)")         \
    X("--quiet", Switch, quiet, 0, 0, "", "only the summary")                                      \
    X("--help", Switch, help, 0, 0, "", "this text")

#define ATLAS_PIPEBENCH_ALIASES(X)   \
    X("-D", "--pipelines", false)    \
    X("-P", "--stages", false)       \
    X("-M", "--microbatches", false) \
    X("-h", "--help", false)         \
    X("ATLAS_PLUGIN", "--plugin", false)

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

const char* recvPostName(RecvPost r) {
    return r == RecvPost::kAhead ? "ahead" : "needed";
}

Result<std::vector<int>> parseCpuList(const std::string& flag, const std::string& text) {
    auto cpus = cpuList(text);
    if (!cpus) {
        return Status(Code::kInvalidArgument,
                      flag + ": '" + text + "' is not a CPU list such as 0-2,5");
    }
    return *cpus;
}

const options::Table<BenchConfig>& optionTable() {
    static const auto table =
        ATLAS_OPTIONS_TABLE(BenchConfig, ATLAS_PIPEBENCH_OPTIONS, ATLAS_PIPEBENCH_ALIASES);
    return table;
}

std::string usageText() {
    return kPreamble + options::flagHelp(optionTable()) + "\nenvironment:\n" +
           options::envHelp(optionTable());
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

Result<BenchConfig> parseArgs(const std::vector<std::string>& args, const EnvLookup& env) {
    options::Parsed<BenchConfig> p;
    if (env) {
        options::readEnv(optionTable(), env, &p);
    }
    options::readArgs(optionTable(), args, &p);
    BenchConfig& c = p.config;
    if (c.help) {
        return c;
    }
    for (const std::string& word : p.positional) {
        p.errors.push_back("unexpected argument '" + word + "' (see --help)");
    }
    c.bwd_ns = c.bwd_flag_ns.value_or(2 * c.fwd_ns);
    if (!c.stage_compute.empty()) {
        c.compute = c.stage_compute.front();
    }
    if (!c.stage_ms.empty()) {
        c.stage_costs.assign(static_cast<size_t>(c.stages), StageCost{});
    }
    for (const StageMs& s : c.stage_ms) {
        if (s.stage >= c.stages) {
            p.errors.push_back("--stage-ms for stage " + std::to_string(s.stage) +
                               " but --stages is " + std::to_string(c.stages));
        } else {
            c.stage_costs[static_cast<size_t>(s.stage)] = s.cost;
        }
    }
    for (const StageCpus& sc : c.stage_cpus) {
        if (sc.stage >= c.stages) {
            p.errors.push_back("--stage-cpus names stage " + std::to_string(sc.stage) +
                               " but --stages is " + std::to_string(c.stages));
        }
    }
    for (const EnvSetting& e : c.env) {
        if (e.stage >= c.stages || e.pipeline >= c.pipelines) {
            p.errors.push_back(
                "--stage-env/--pipeline-env names a stage or pipeline that does not exist");
        }
    }
    if (c.pipelines * c.stages > 256) {
        p.errors.push_back("at most 256 stage processes");
    }
    ATLAS_RETURN_IF_ERROR(p.status());
    return c;
}

}  // namespace atlas::pipebench
