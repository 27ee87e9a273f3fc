// Bubble-specific analysis on top of the scheduler's interval accuracy
// (scheduler/interval_accuracy.h, the one implementation of coverage/precision; which
// predictions a consumer could act on is scheduler/bubble_score.h's): per-iteration bubble
// fractions.
// Pure functions over CLOCK_MONOTONIC ns; allocate; any thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "atlas/common/clock.h"
#include "channel/channel_types.h"
#include "scheduler/types.h"

namespace atlas::bubbletea::tools {

// Bubble fraction of one training iteration.
struct IterationBubble {
    uint64_t iteration = 0;
    Nanos start_ns = 0;  // first observed idle start of this iteration
    Nanos end_ns = 0;    // first observed idle start of iteration + 1
    Nanos idle_ns = 0;   // observed idle time in [start_ns, end_ns)
    double fraction() const;
};

// Iteration k spans [first idle start of k, first idle start of k+1): the bubble that opens
// an iteration is where the stage waits for its input. Only iterations whose successor was
// observed are reported (never the last one); intervals with an unknown iteration count as
// idle time but do not delimit iterations.
std::vector<IterationBubble> bubblesPerIteration(std::span<const channel::IdleInterval> observed);

// Observed idle time inside [from, to), overlaps counted once.
Nanos idleTimeIn(std::span<const channel::IdleInterval> observed, Nanos from, Nanos to);

}  // namespace atlas::bubbletea::tools
