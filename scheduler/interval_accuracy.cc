#include "scheduler/interval_accuracy.h"

#include <algorithm>

namespace atlas::sched {

namespace {

Nanos total(const std::vector<Interval>& v) {
    Nanos sum = 0;
    for (const Interval& i : v) {
        sum += i.length();
    }
    return sum;
}

std::vector<Interval> clip(std::vector<Interval> v, Interval range) {
    std::vector<Interval> out;
    out.reserve(v.size());
    for (Interval i : v) {
        i.start_ns = std::max(i.start_ns, range.start_ns);
        i.end_ns = std::min(i.end_ns, range.end_ns);
        if (i.end_ns > i.start_ns) {
            out.push_back(i);
        }
    }
    return out;
}

Accuracy compute(const std::vector<Interval>& obs, const std::vector<Interval>& pred) {
    Accuracy a;
    a.observed_ns = total(obs);
    a.predicted_ns = total(pred);
    // Both lists are sorted and disjoint: one merge pass.
    size_t i = 0;
    size_t j = 0;
    while (i < obs.size() && j < pred.size()) {
        const Nanos lo = std::max(obs[i].start_ns, pred[j].start_ns);
        const Nanos hi = std::min(obs[i].end_ns, pred[j].end_ns);
        if (hi > lo) {
            a.overlap_ns += hi - lo;
        }
        if (obs[i].end_ns < pred[j].end_ns) {
            ++i;
        } else {
            ++j;
        }
    }
    if (a.observed_ns > 0) {
        a.coverage = static_cast<double>(a.overlap_ns) / static_cast<double>(a.observed_ns);
    }
    if (a.predicted_ns > 0) {
        a.precision = static_cast<double>(a.overlap_ns) / static_cast<double>(a.predicted_ns);
    }
    return a;
}

}  // namespace

std::vector<Interval> normalizeIntervals(std::span<const Interval> in) {
    std::vector<Interval> v;
    v.reserve(in.size());
    for (const Interval& i : in) {
        if (i.end_ns > i.start_ns) {
            v.push_back(i);
        }
    }
    std::sort(v.begin(), v.end(),
              [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
    std::vector<Interval> out;
    out.reserve(v.size());
    for (const Interval& i : v) {
        if (!out.empty() && i.start_ns <= out.back().end_ns) {
            out.back().end_ns = std::max(out.back().end_ns, i.end_ns);
        } else {
            out.push_back(i);
        }
    }
    return out;
}

Accuracy measureAccuracy(std::span<const Interval> observed, std::span<const Interval> predicted) {
    return compute(normalizeIntervals(observed), normalizeIntervals(predicted));
}

Accuracy measureAccuracy(std::span<const Interval> observed, std::span<const Interval> predicted,
                         Interval range) {
    return compute(clip(normalizeIntervals(observed), range),
                   clip(normalizeIntervals(predicted), range));
}

}  // namespace atlas::sched
