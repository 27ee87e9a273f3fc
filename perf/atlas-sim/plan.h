// `atlas-sim plan`: which DCs to use and how to split the job (the paper's DC-selection
// question). Searches DP x PP x TP, micro-batch size and micro-batch count (the global batch
// is fixed) and every subset of DCs, places each candidate with Atlas's placement, and ranks
// the candidates by simulated iteration time.
//
// Search: PP runs over the divisors of the layer count up to plan.max_pp (balanced stages),
// TP over plan.tp, the micro-batch size over plan.micro_batch_sizes, DP over the values that
// divide the global batch; a candidate must fit its DCs' GPUs (a stage's dp * tp GPUs in one
// DC), use every DC of its subset (otherwise it is the smaller subset's candidate) and, with
// plan.memory_check, fit GPU memory (model.h stageMemoryBytes). Candidates are simulated in
// order of a lower bound on their iteration time (max of the busiest stage's compute and the
// first micro-batch's round trip through every stage and WAN hop); once `top` candidates are
// known, any whose bound is no better than the worst of them, nor than the best simulated
// plan of its own DC subset, is skipped (branch and bound), so both the top list and the
// best plan per DC subset are exact. Each candidate runs plan.iterations
// iterations and is scored by the last one (a short run: WorkloadAware is still learning and
// decides like TemporalFifo).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "atlas/common/status.h"
#include "perf/atlas-sim/config.h"

namespace atlas::sim {

struct PlanCandidate {
    int dp = 0;
    int pp = 0;
    int tp = 0;
    int micro_batch_size = 0;
    int micro_batches = 0;
    uint32_t dc_mask = 0;  // DCs allowed (bit i = cluster.dcs[i])
    int gpus = 0;
    double lower_bound_ms = 0.0;
    double iteration_ms = 0.0;  // simulated
    double tokens_per_s = 0.0;
    double bubble_fraction = 0.0;
    double memory_gb = 0.0;  // peak per GPU
    std::string placement;
    std::string dcs;  // names of the DCs used
};

struct PlanResult {
    std::vector<PlanCandidate> top;              // best first
    std::vector<PlanCandidate> best_per_subset;  // best simulated plan of each DC subset
    int enumerated = 0;
    int no_fit = 0;  // placement failed or a DC of the subset unused
    int over_memory = 0;
    int simulated = 0;
    int pruned = 0;  // skipped by the bound
    int global_batch = 0;
};

Result<PlanResult> plan(const SimConfig& config);

void printPlan(std::ostream& os, const SimConfig& config, const PlanResult& result);
nlohmann::json toJson(const PlanResult& result);

}  // namespace atlas::sim
