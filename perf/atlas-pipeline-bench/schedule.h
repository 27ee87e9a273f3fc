// Per-stage operation order of one training iteration (GPipe or 1F1B / PipeDream-Flush).
#pragma once

#include <vector>

#include "perf/atlas-pipeline-bench/options.h"

namespace atlas::pipebench {

struct Op {
    bool forward = true;
    int mb = 0;  // micro-batch index
    friend bool operator==(const Op&, const Op&) = default;
};

// The order in which stage `stage` of `stages` runs its 2*M operations.
//  GPipe: F0 .. F(M-1), then B0 .. B(M-1).
//  1F1B:  min(P-1-stage, M) warm-up forwards, then alternating F/B, then the remaining Bs.
// Every stage runs the backward passes in micro-batch order, so the gradient messages of one
// comm are sent and received in the same order.
std::vector<Op> stageOps(Schedule schedule, int stage, int stages, int microbatches);

}  // namespace atlas::pipebench
