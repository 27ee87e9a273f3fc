#include "bubbletea/tools/bubble_analysis.h"

#include <algorithm>
#include <limits>
#include <map>

#include "scheduler/interval_accuracy.h"

namespace atlas::bubbletea::tools {

double IterationBubble::fraction() const {
    return end_ns > start_ns ? static_cast<double>(idle_ns) / static_cast<double>(end_ns - start_ns)
                             : std::numeric_limits<double>::quiet_NaN();
}

Nanos idleTimeIn(std::span<const channel::IdleInterval> observed, Nanos from, Nanos to) {
    std::vector<sched::Interval> idle;
    idle.reserve(observed.size());
    for (const channel::IdleInterval& i : observed) {
        idle.push_back({i.start_ns, i.end_ns});
    }
    return sched::measureAccuracy(idle, {}, sched::Interval{from, to}).observed_ns;
}

std::vector<IterationBubble> bubblesPerIteration(std::span<const channel::IdleInterval> observed) {
    std::map<uint64_t, Nanos> first_start;
    for (const channel::IdleInterval& i : observed) {
        if (i.iteration == channel::kUnknownIteration || i.end_ns < i.start_ns) {
            continue;
        }
        auto [it, inserted] = first_start.emplace(i.iteration, i.start_ns);
        if (!inserted) {
            it->second = std::min(it->second, i.start_ns);
        }
    }
    std::vector<sched::Interval> idle;
    idle.reserve(observed.size());
    for (const channel::IdleInterval& i : observed) {
        idle.push_back({i.start_ns, i.end_ns});
    }
    idle = sched::normalizeIntervals(idle);
    std::vector<IterationBubble> out;
    for (auto it = first_start.begin(); it != first_start.end(); ++it) {
        auto next = std::next(it);
        if (next == first_start.end() || next->first != it->first + 1 ||
            next->second <= it->second) {
            continue;
        }
        IterationBubble b;
        b.iteration = it->first;
        b.start_ns = it->second;
        b.end_ns = next->second;
        b.idle_ns =
            sched::measureAccuracy(idle, {}, sched::Interval{b.start_ns, b.end_ns}).observed_ns;
        out.push_back(b);
    }
    return out;
}

}  // namespace atlas::bubbletea::tools
