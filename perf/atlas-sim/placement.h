// Placement: which DC runs each (pipeline, stage) group of tp GPUs.
//
//  atlas        The paper's rule. A stage needs dp * tp GPUs in one DC (its DP all-reduce
//               and TP traffic stay inside the DC). Sort DCs by GPU count, largest first;
//               give each as many whole consecutive stages as fit until all pp stages are
//               placed; DCs that are not needed get nothing (they would only add WAN hops).
//               With order_chain, the chosen DCs are then ordered along the pipeline to
//               minimise the summed RTT of the hops (each DC keeps its stage count; ties keep
//               the size order).
//  sequential   Varuna-style, DC-unaware: ranks in stage-major order (all replicas of stage
//               0, then stage 1, ...) fill the DCs in the order they are listed, tp GPUs at a
//               time. A stage's replicas may straddle DCs, so its all-reduce crosses the WAN.
//  pipeline_major  Each pipeline's stages are contiguous ranks: data parallelism crosses DCs.
//  manual       placement.stage_dcs (every replica of a stage in that DC).
#pragma once

#include <string>
#include <vector>

#include "atlas/common/status.h"
#include "perf/atlas-sim/config.h"

namespace atlas::sim {

struct Layout {
    int dp = 1;
    int pp = 1;
    int tp = 1;
    std::vector<int> group_dc;     // [pipeline * pp + stage] -> DC index
    std::vector<int> gpus_per_dc;  // GPUs used in each DC
    std::string summary;           // e.g. "A:0-3 B:4-5" (stages per DC, pipeline 0)

    int dcOf(int pipeline, int stage) const {
        return group_dc[static_cast<size_t>(pipeline) * pp + stage];
    }
    int groups() const { return dp * pp; }
    int dcsUsed() const;
};

// Fails with kInvalidUsage when the layout does not fit the cluster.
Result<Layout> placeStages(const SimConfig& config);

}  // namespace atlas::sim
