// atlas-sim configuration: the job, the cluster, the parallel layout, the WAN transport and
// link policy, BubbleTea and the plan search, parsed from JSON (docs/atlas-sim.md is the
// reference for every key).
//
// Parsing is strict: unknown keys, wrong types and out-of-range values are errors that name
// the offending path (a typo must not silently fall back to a default). Every size that
// drives an allocation is bounded by validation, so a hostile or mistyped file cannot make
// the simulator allocate without limit.
//
// Units inside the structs: time in int64 nanoseconds (Nanos) or seconds where noted, rates
// in bytes per second, sizes in bytes. JSON uses the units in the key names (_ms, _us,
// gbps, _bytes).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "atlas/common/status.h"
#include "scheduler/bubble_pipeline.h"
#include "scheduler/link_policy.h"
#include "scheduler/traffic_priority.h"

namespace atlas::sim {

enum class Schedule : uint8_t { kGpipe, k1f1b };
// Where pipeline stages go. kAtlas: whole stages per DC, largest DC first. kSequential: the
// DC-unaware Varuna-style layout (stage-major rank order over the DCs as listed; a stage's
// replicas may straddle DCs). kPipelineMajor: each pipeline contiguous (DP crosses DCs).
// kManual: placement.stage_dcs.
enum class PlacementKind : uint8_t { kAtlas, kSequential, kPipelineMajor, kManual };
// kSingle: one TCP stream per transfer. kMulti: `streams` parallel streams. kIdeal: the link
// rate whatever the RTT and loss.
enum class TransportKind : uint8_t { kSingle, kMulti, kIdeal };
enum class WindowSource : uint8_t { kOracle, kPredicted };
enum class PromptDist : uint8_t { kFixed, kUniform, kLognormal };

const char* scheduleName(Schedule s);
const char* placementName(PlacementKind p);
const char* transportName(TransportKind t);
const char* windowSourceName(WindowSource w);

struct GpuSpec {
    std::string name = "A100";
    double peak_flops = 312e12;  // dense bf16 FLOP/s
    double efficiency = 0.5;     // achieved fraction of peak for training kernels
    double memory_bytes = 80e9;
};

// Looks up "A100", "H100", "H200" (case-insensitive).
Result<GpuSpec> gpuPreset(std::string_view name);

struct ModelSpec {
    int layers = 0;
    int hidden = 0;
    int seq_len = 0;
    int vocab = 0;  // 0: no embedding / LM head accounted
};

// Per-stage costs given directly (mirrors a benchmark with fixed compute per micro-batch).
struct StageOverride {
    Nanos forward_ns = 0;
    Nanos backward_ns = 0;
    uint64_t activation_bytes = 0;  // sent to the next stage per micro-batch (and the same
                                    // gradient size comes back)
    uint64_t grad_bytes = 0;        // this stage's gradients, all-reduced across DP replicas
};

struct JobSpec {
    bool has_model = false;
    ModelSpec model;
    std::vector<StageOverride> stages;  // empty when costs come from `model`; else 1 or pp
    int micro_batch_size = 1;
    int micro_batches = 8;  // per pipeline per iteration
    int dtype_bytes = 2;
    Schedule schedule = Schedule::k1f1b;
};

struct DcSpec {
    std::string name;
    int gpus = 0;
};

struct WanPath {
    double bytes_per_sec = 0.0;  // link capacity, each direction
    Nanos rtt_ns = 0;
    double loss = 0.0;  // packet loss probability (Mathis bound)
    // The bottleneck's drop-tail buffer in link time (0: not modelled, no contention loss).
    Nanos buffer_ns = 0;
};

struct ClusterSpec {
    std::vector<DcSpec> dcs;
    std::vector<WanPath> wan;           // dcs.size()^2, row = from, column = to (diagonal unused)
    double intra_bytes_per_sec = 25e9;  // per GPU, for stage-to-stage and all-reduce
    Nanos intra_latency_ns = 5 * kNsPerUs;

    const WanPath& path(int from, int to) const {
        return wan[static_cast<size_t>(from) * dcs.size() + static_cast<size_t>(to)];
    }
};

struct ParallelSpec {
    int dp = 1;
    int pp = 1;
    int tp = 1;
};

struct PlacementSpec {
    PlacementKind kind = PlacementKind::kAtlas;
    std::vector<int> stage_dcs;  // kManual: DC index per stage
    bool order_chain = true;     // kAtlas: order the chosen DCs to minimise summed RTT
};

struct NetworkSpec {
    TransportKind transport = TransportKind::kMulti;
    int streams = 64;
    double tcp_window_bytes = 3.0 * 1024 * 1024;
    double mss_bytes = 1448;
    // Header bytes every segment of mss_bytes carries on the link (TCP/IPv4 with timestamps:
    // 52); the link carries mss / (mss + header) of its rate as payload. 0: none.
    double header_bytes = 0;
    // The standing queue concurrent TCP flows keep at a shared bottleneck, in BDPs (BBR: its
    // inflight cap of 2 BDP plus a quarter BDP while it probes at 1.25x). A link whose
    // buffer_ns is set and below it drops under fair contention (wan.h).
    double contention_queue_bdp = 1.5;
    sched::PolicyKind policy = sched::PolicyKind::kWorkload;
    sched::PolicyConfig policy_config;
    // Which traffic kind waits less on a shared link (sched::admissionPriority): pipeline
    // activations and gradients, or the data-parallel all-reduce. `equal` (the default here,
    // unlike the plugin's ATLAS_TRAFFIC_PRIORITY) keeps arrival order, so configs written
    // before priorities existed reproduce their published results bit for bit.
    sched::PriorityOrder traffic_priority = sched::PriorityOrder::kEqual;
};

struct JitterSpec {
    double compute = 0.0;  // each task's time is scaled by 1 + U(-compute, +compute)
};

struct PromptSpec {
    PromptDist dist = PromptDist::kUniform;
    int fixed = 2048;
    int min = 256;
    int max = 4096;
    double median = 1024;  // lognormal
    double sigma = 0.8;
};

struct BubbleTeaSpec {
    bool enabled = false;
    WindowSource windows = WindowSource::kPredicted;
    double arrival_rate_per_s = 10.0;  // Poisson, whole cluster
    PromptSpec prompt;
    // Prefill cost of one stage group (its TP GPUs run the prefill tensor-parallel):
    // seconds = (linear_flops_per_token * c + attention_flops * ((p + c)^2 - p^2)) / rate,
    // derived from the inference model below and the GPU preset unless given directly.
    double model_params = 8e9;
    int model_layers = 32;
    int model_hidden = 4096;
    double efficiency = 0.5;
    double tokens_per_s = 0.0;           // >0: overrides the linear term (per stage group)
    double attention_s_per_token2 = -1;  // >=0: overrides the quadratic coefficient
    // Shrinks oracle windows at both ends; predicted windows take it as the pipeline's guard.
    Nanos guard_ns = sched::kDefaultBubbleGuardNs;
    int chunk_tokens = 512;
    int min_chunk_tokens = 32;
    double prediction_error = 0.0;  // oracle windows stretched by this fraction of their length
    // Predicted windows below this confidence (detector confidence x track hit rate) are not
    // used: a track seen in few recent iterations is a guess, and a wrong window delays
    // training.
    double min_confidence = 0.75;
    Nanos max_wait_ns = 0;    // 0: a request waits for a window for ever
    Nanos kv_handoff_ns = 0;  // added to every TTFT (KV cache to the decode GPUs)
    // Predicted windows: the plugin's publishing step, its defaults but for the keys of
    // bubbletea.predictor and the guard band above.
    sched::BubblePipelineConfig pipeline;
};

struct PlanSpec {
    int global_batch = 0;  // sequences per iteration; 0 = dp * micro_batches * mbs of the job
    std::vector<int> tp = {1, 2, 4, 8};
    std::vector<int> micro_batch_sizes = {1};
    int max_pp = 64;
    int top = 10;
    int iterations = 3;
    bool memory_check = true;
    int max_candidates = 20000;
};

struct Variant {
    std::string name;
    nlohmann::json set;  // dotted path -> value
};

struct SimConfig {
    std::string name = "unnamed";
    uint64_t seed = 1;
    int iterations = 10;
    int warmup_iterations = 2;
    GpuSpec gpu;
    JobSpec job;
    ClusterSpec cluster;
    ParallelSpec par;
    PlacementSpec placement;
    NetworkSpec network;
    JitterSpec jitter;
    BubbleTeaSpec bubbletea;
    PlanSpec plan;
    std::vector<Variant> variants;
};

// Bounds that keep one simulation's memory and time finite.
inline constexpr int kMaxGroups = 1 << 16;  // dp * pp
inline constexpr int kMaxMicroBatches = 4096;
inline constexpr int kMaxIterations = 100000;
inline constexpr int kMaxDcs = 32;

// Parses and validates. Errors carry the JSON path ("job.micro_batches: must be >= 1").
Result<SimConfig> parseConfig(const nlohmann::json& j);
Result<SimConfig> parseConfigText(std::string_view text);
// Reads a file; errors name it.
Result<nlohmann::json> loadJsonFile(const std::string& path);

// Applies "a.b.c=value" to a JSON document: value is parsed as JSON when it is valid JSON,
// else taken as a string; numeric path parts index arrays; missing objects are created.
Status applyOverride(nlohmann::json* doc, std::string_view assignment);
// Applies every entry of an object {"a.b": value, ...}.
Status applyOverrides(nlohmann::json* doc, const nlohmann::json& set);

}  // namespace atlas::sim
