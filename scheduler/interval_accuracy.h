// Accuracy of predicted idle windows against observed idle intervals.
//
//   coverage  = |observed ∩ predicted| / |observed|   (how much idle time the prediction found)
//   precision = |observed ∩ predicted| / |predicted|  (how much predicted time was really idle)
//
// BubbleTea needs precision above all (prefill running outside a real bubble delays
// training); coverage is the capacity it gets. Used by the scheduler tests, atlas-bubbles
// stats and the simulator. Pure functions; inputs may be unsorted and overlapping.
#pragma once

#include <span>
#include <vector>

#include "scheduler/types.h"

namespace atlas::sched {

struct Accuracy {
    Nanos observed_ns = 0;   // total observed idle time (overlaps merged)
    Nanos predicted_ns = 0;  // total predicted window time (overlaps merged)
    Nanos overlap_ns = 0;    // time both idle and predicted
    double coverage = 1.0;   // overlap / observed; 1 when nothing was observed
    double precision = 1.0;  // overlap / predicted; 1 when nothing was predicted
};

// Sorted, non-overlapping, non-empty intervals covering the same time as `in`.
std::vector<Interval> normalizeIntervals(std::span<const Interval> in);

// Accuracy over all time.
Accuracy measureAccuracy(std::span<const Interval> observed, std::span<const Interval> predicted);

// Accuracy counting only time inside `range` (e.g. after a warm-up, before the trace ends).
Accuracy measureAccuracy(std::span<const Interval> observed, std::span<const Interval> predicted,
                         Interval range);

}  // namespace atlas::sched
