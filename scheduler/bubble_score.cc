#include "scheduler/bubble_score.h"

#include <algorithm>

#include "scheduler/interval_accuracy.h"

namespace atlas::sched {

Interval reignPart(const Interval& window, Nanos published_ns, Nanos superseded_ns) {
    const Nanos lo = std::max(window.start_ns, published_ns);
    const Nanos hi = std::min(window.end_ns, superseded_ns);
    return hi > lo ? Interval{lo, hi} : Interval{lo, lo};
}

void EffectiveWindows::add(const Interval& part) {
    if (part.length() <= 0) {
        return;
    }
    if (!done_.empty() && part.start_ns <= done_.back().end_ns) {
        done_.back().end_ns = std::max(done_.back().end_ns, part.end_ns);
        return;
    }
    done_.push_back(part);
    if (capacity_ > 0 && done_.size() > capacity_) {
        done_.pop_front();
    }
}

void EffectiveWindows::publish(Nanos published_ns, std::span<const Interval> windows) {
    for (const Interval& w : current_) {
        add(reignPart(w, current_from_, published_ns));
    }
    current_.assign(windows.begin(), windows.end());
    current_from_ = published_ns;
}

void EffectiveWindows::collect(Nanos until_ns, std::vector<Interval>* out) const {
    const size_t first = out->size();
    out->insert(out->end(), done_.begin(), done_.end());
    for (const Interval& w : current_) {
        const Interval part = reignPart(w, current_from_, until_ns);
        if (part.length() <= 0) {
            continue;
        }
        if (out->size() > first && part.start_ns <= out->back().end_ns) {
            out->back().end_ns = std::max(out->back().end_ns, part.end_ns);
        } else {
            out->push_back(part);
        }
    }
}

Nanos EffectiveWindows::firstStartNs(Nanos until_ns) const {
    if (!done_.empty()) {
        return done_.front().start_ns;
    }
    for (const Interval& w : current_) {
        if (reignPart(w, current_from_, until_ns).length() > 0) {
            return std::max(w.start_ns, current_from_);
        }
    }
    return kNever;
}

std::vector<Interval> effectivePredictions(std::span<const TimedPredictionSet> sets,
                                           Nanos until_ns) {
    EffectiveWindows effective;
    for (const TimedPredictionSet& s : sets) {
        effective.publish(s.published_ns, s.windows);
    }
    std::vector<Interval> out;
    effective.collect(until_ns, &out);
    return normalizeIntervals(out);  // a recorded set need not be sorted
}

}  // namespace atlas::sched
