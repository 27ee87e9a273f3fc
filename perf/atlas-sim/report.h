// Running one configuration end to end (placement, the training pass, the BubbleTea pass) and
// turning the raw results into the figures atlas-sim prints: iteration time, throughput,
// utilization and bubble fraction per stage, WAN link use, BubbleTea's prefill throughput,
// TTFT and the training slowdown it caused.
//
// Definitions (measured over the iterations after warm-up, [measure_start, end)):
//  utilization       compute time (forward + backward) / wall time, per group
//  util. with BT     (compute + prefill) / wall time
//  bubble fraction   (wall - compute - all-reduce) / wall: idle time BubbleTea could fill
//  slowdown          mean iteration time with BubbleTea / without - 1 (same seed, same
//                    jitter draws)
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perf/atlas-sim/config.h"
#include "perf/atlas-sim/placement.h"
#include "perf/atlas-sim/simulator.h"

namespace atlas::sim {

struct StageSummary {
    int stage = 0;
    std::string dc;            // DC of pipeline 0's replica
    double utilization = 0.0;  // mean over replicas
    double utilization_bt = 0.0;
    double bubble_fraction = 0.0;
    double allreduce_fraction = 0.0;
};

struct LinkSummary {
    std::string from;
    std::string to;
    double capacity_gbps = 0.0;
    double transfer_cap_gbps = 0.0;  // what one transfer can reach with the transport
    uint64_t bytes = 0;
    uint64_t transfers = 0;
    double busy_fraction = 0.0;  // of the whole run
    double goodput_gbps = 0.0;   // bytes / busy time
    size_t max_active = 0;
    uint64_t loss_recoveries = 0;  // transfers delivered an RTT and a buffer late (contention loss)
    double max_share_sum = 0.0;
    uint64_t planned_picks = 0;  // WorkloadAware decisions by plan / FIFO fallback / aging
    uint64_t fallback_picks = 0;
    uint64_t aged_picks = 0;
    std::string workload_plan;
};

struct BubbleTeaSummary {
    bool enabled = false;
    std::string windows;
    PrefillStats stats;
    double prefill_tokens_per_s = 0.0;
    double ttft_p50_ms = 0.0;
    double ttft_p99_ms = 0.0;
    double ttft_mean_ms = 0.0;
    double slowdown = 0.0;  // fraction
    double training_delay_ms = 0.0;
    uint64_t delayed_starts = 0;
};

struct Summary {
    std::string name;
    std::string placement;
    int dp = 0;
    int pp = 0;
    int tp = 0;
    int gpus = 0;
    int dcs = 0;
    int measured_iterations = 0;
    double iteration_ms = 0.0;  // mean
    double iteration_min_ms = 0.0;
    double iteration_max_ms = 0.0;
    double first_iteration_ms = 0.0;
    std::vector<double> iteration_ms_all;
    double throughput = 0.0;  // tokens/s (samples/s when the job has no sequence length)
    const char* throughput_unit = "tokens/s";
    double utilization = 0.0;
    double utilization_bt = 0.0;
    double bubble_fraction = 0.0;
    double allreduce_fraction = 0.0;
    std::vector<StageSummary> stages;
    std::vector<LinkSummary> links;
    BubbleTeaSummary bubbletea;
    uint64_t events = 0;
    double sim_seconds = 0.0;
};

struct RunFlags {
    bool record_timeline = false;
    int record_iterations = 2;  // the last N iterations (timeline)
    bool record_link_rates = false;
};

struct RunReport {
    SimConfig config;
    Layout layout;
    RunResult base;               // without BubbleTea
    std::optional<RunResult> bt;  // with BubbleTea (when enabled)
    Summary summary;
};

Result<RunReport> runConfig(const SimConfig& config, const RunFlags& flags);

Summary summarize(const SimConfig& config, const Layout& layout, const RunResult& base,
                  const RunResult* with_bt);

// Nearest-rank percentile (p in [0, 100]) of unsorted samples; 0 for none.
double percentileMs(std::vector<Nanos> samples, double p);

void printSummary(std::ostream& os, const Summary& s);
// One row per variant; ratio = baseline iteration time / variant iteration time.
void printComparison(std::ostream& os, const std::vector<Summary>& runs);

nlohmann::json toJson(const Summary& s);

}  // namespace atlas::sim
