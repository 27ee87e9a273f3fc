// How published bubble predictions are scored: the one definition behind the plugin's running
// accuracy (BubblePipeline), `atlas-bubbles stats` and `replay`, and the trace's predicted
// track.
//
// Prediction set k *reigns* from its publish time until the next set is published. A window
// counts only for the part of it inside its set's reign: an earlier part was published too
// late to act on, a later part was superseded. That is what a consumer acting on the latest
// set (bubbletea) could have used. Coverage and precision of these *effective* windows against
// the observed idle intervals are then interval_accuracy.h's.
//
// Pure; EffectiveWindows has one owner and is not thread-safe.
#pragma once

#include <cstddef>
#include <deque>
#include <span>
#include <vector>

#include "scheduler/types.h"

namespace atlas::sched {

// The part of `window` that counts when its set reigned over [published_ns, superseded_ns);
// empty (start == end) when none does.
Interval reignPart(const Interval& window, Nanos published_ns, Nanos superseded_ns);

// The effective windows of a sequence of prediction sets, collected as they are published.
// Parts arrive in time order (a set's reign follows the previous one; a set's windows sorted
// by start, as the pipeline's are), so they are kept merged: `capacity` bounds the number of
// disjoint stretches kept (0: unbounded), the oldest going first.
class EffectiveWindows {
  public:
    explicit EffectiveWindows(size_t capacity = 0) : capacity_(capacity) {}

    // A new set reigns from published_ns (non-decreasing across calls); the previous set's
    // parts are final from here.
    void publish(Nanos published_ns, std::span<const Interval> windows);
    // Appends every effective part up to until_ns to *out (the current set reigns until
    // then), merged where they touch.
    void collect(Nanos until_ns, std::vector<Interval>* out) const;
    // Start of the oldest part kept, or of the current set's first window when nothing
    // earlier counted; kNever when there is none.
    Nanos firstStartNs(Nanos until_ns) const;

  private:
    void add(const Interval& part);

    size_t capacity_;
    std::deque<Interval> done_;      // parts of superseded sets, merged
    std::vector<Interval> current_;  // the reigning set's windows
    Nanos current_from_ = 0;
};

// One published prediction set with its publish time.
struct TimedPredictionSet {
    Nanos published_ns = 0;
    std::vector<Interval> windows;
};

// The effective windows of `sets` (in publish order), the last one reigning until until_ns:
// sorted and disjoint.
std::vector<Interval> effectivePredictions(std::span<const TimedPredictionSet> sets,
                                           Nanos until_ns);

}  // namespace atlas::sched
