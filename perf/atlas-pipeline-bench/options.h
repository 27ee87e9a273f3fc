// atlas-pipeline-bench configuration and command line (docs/arbitration.md, "Pipeline
// benchmark"): one options table (options.cc) that also produces --help and the docs' flag
// table. Pure parsing, no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/env.h"
#include "atlas/common/status.h"
#include "options/table.h"
#include "perf/atlas-wanem/stats_reader.h"

namespace atlas::pipebench {

enum class Schedule : uint8_t { kGpipe, k1f1b };
// How a compute period burns its time: spin on the clock (CPU really used, the default),
// spin with sched_yield (CPU used but given up to other runnable threads), sleep (no CPU;
// for small machines where spinning stages would starve the network stack), or cuda (real
// GPU work: cuBLAS GEMMs calibrated to the period, cuda_compute.h).
enum class Compute : uint8_t { kSpin, kYield, kSleep, kCuda };
// When a stage posts its receives: all of an iteration's at its start (a framework that
// enqueues every p2p op of a step at once; NCCL's proxy then posts them ahead of the kernels),
// or each one right before the compute that consumes it (Megatron's p2p_communicate: post,
// then wait, then compute), which is when the GPU really starts waiting.
enum class RecvPost : uint8_t { kAhead, kNeeded };

const char* scheduleName(Schedule s);
const char* computeName(Compute c);
const char* recvPostName(RecvPost r);

struct StageCost {
    Nanos fwd_ns = 0;
    Nanos bwd_ns = 0;
    bool operator==(const StageCost&) const = default;
};

// An environment variable for some of the stage processes (-1 = any).
struct EnvSetting {
    int stage = -1;
    int pipeline = -1;
    std::string key;
    std::string value;
    bool operator==(const EnvSetting&) const = default;
};

// CPUs one stage process is pinned to (sched_setaffinity), for every pipeline.
struct StageCpus {
    int stage = 0;
    std::vector<int> cpus;
    bool operator==(const StageCpus&) const = default;
};

// "0-2,5" -> {0, 1, 2, 5}. Errors name the flag.
Result<std::vector<int>> parseCpuList(const std::string& flag, const std::string& text);

// --stage-ms S:F:B: stage S computes F ms forward, B ms backward.
struct StageMs {
    int stage = 0;
    StageCost cost;
    bool operator==(const StageMs&) const = default;
};

struct BenchConfig {
    int pipelines = 4;     // D: data-parallel replicas, one pipeline each
    int stages = 2;        // P: stages per pipeline, one process each
    int microbatches = 4;  // M per pipeline per iteration
    int iterations = 5;    // measured
    int warmup = 1;        // run first, not measured
    Schedule schedule = Schedule::kGpipe;
    Nanos fwd_ns = 20 * kNsPerMs;          // per micro-batch, unless stage_costs says otherwise
    Nanos bwd_ns = 40 * kNsPerMs;          // after parsing: --bwd-ms, else 2 x fwd_ns
    std::optional<Nanos> bwd_flag_ns;      // --bwd-ms as given
    std::vector<StageMs> stage_ms;         // --stage-ms as given
    std::vector<StageCost> stage_costs;    // empty, or one per stage (from stage_ms)
    uint64_t act_bytes = 4ull << 20;       // activation per micro-batch, stage s -> s+1
    uint64_t grad_bytes = 0;               // gradient per micro-batch, s+1 -> s; 0 = act_bytes
    std::vector<std::string> stage_netns;  // per stage: /run/netns name or path; empty = none
    std::string plugin;                    // empty: next to the executable, then $ATLAS_PLUGIN
    std::vector<EnvSetting> env;
    std::vector<StageCpus> stage_cpus;
    Compute compute = Compute::kSpin;    // the first entry of --compute
    std::vector<Compute> stage_compute;  // --compute LIST: stage s uses entry s (last repeats)
    double cuda_ns_per_gemm = 0;         // --compute cuda: 0 = calibrate at start
    RecvPost recv_post = RecvPost::kAhead;
    bool barrier = true;        // iterations end with a barrier of every stage (DP sync)
    bool traffic_class = true;  // tell the plugin {pipeline, stage, direction} (v11 config)
    int dev = 0;
    int timeout_s = 600;
    // --link-stats: emulated links whose counters give the link utilization per iteration.
    std::vector<wanem::LinkSource> link_stats;
    std::string label;  // names the run in the table and the JSON
    std::string json_path;
    std::string trace_path;
    bool quiet = false;
    bool help = false;

    StageCost cost(int stage) const;
    Compute computeOf(int stage) const;
    uint64_t gradBytes() const { return grad_bytes == 0 ? act_bytes : grad_bytes; }
};

// The flag registry (options/table.h).
const options::Table<BenchConfig>& optionTable();
// argv without the program name; `env` (ATLAS_PLUGIN for --plugin) when given. Every
// problem is reported at once.
Result<BenchConfig> parseArgs(const std::vector<std::string>& args, const EnvLookup& env = {});
std::string usageText();
// The --compute list as given ("cuda,spin"), for tables and JSON.
std::string computeText(const BenchConfig& cfg);

// trafficClass = pipeline * 256 + stage * 2 + direction (the plugin's documented encoding).
int trafficClassOf(int pipeline, int stage, int direction);

}  // namespace atlas::pipebench
