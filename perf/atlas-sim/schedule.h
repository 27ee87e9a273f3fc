// Pipeline schedules: the order in which one stage runs its forward (F) and backward (B)
// micro-batch tasks within an iteration. Dependencies (enforced by the simulator, not here):
// F(s, i) needs the activation of F(s-1, i); B(s, i) needs the gradient of B(s+1, i); the last
// stage's B(i) follows its own F(i) by construction of the order.
//
//  gpipe: F0 .. F(m-1), then B(m-1) .. B0 (all forwards, then backwards in reverse, as in the
//         GPipe paper's figure).
//  1f1b:  PipeDream-Flush / Megatron: min(pp - s - 1, m) warm-up forwards, then alternate one
//         forward and one backward, then the remaining backwards.
// With free communication and equal per-task times both give an iteration of
// (m + pp - 1) * (tf + tb) and a bubble fraction of (pp - 1) / (m + pp - 1).
#pragma once

#include <cstdint>
#include <vector>

#include "perf/atlas-sim/config.h"

namespace atlas::sim {

struct Task {
    bool backward = false;
    int32_t micro_batch = 0;

    friend bool operator==(const Task&, const Task&) = default;
};

// Tasks of stage `stage` (0-based) of `pp` stages with `m` micro-batches, in execution order.
std::vector<Task> stageOrder(Schedule schedule, int stage, int pp, int m);

}  // namespace atlas::sim
