#include "perf/atlas-sim/schedule.h"

#include <algorithm>

namespace atlas::sim {

std::vector<Task> stageOrder(Schedule schedule, int stage, int pp, int m) {
    std::vector<Task> out;
    out.reserve(static_cast<size_t>(2 * m));
    if (schedule == Schedule::kGpipe) {
        for (int i = 0; i < m; ++i) {
            out.push_back({false, i});
        }
        for (int i = m - 1; i >= 0; --i) {
            out.push_back({true, i});
        }
        return out;
    }
    const int warmup = std::min(pp - stage - 1, m);
    for (int i = 0; i < warmup; ++i) {
        out.push_back({false, i});
    }
    for (int i = 0; i < m - warmup; ++i) {
        out.push_back({false, warmup + i});
        out.push_back({true, i});
    }
    for (int i = m - warmup; i < m; ++i) {
        out.push_back({true, i});
    }
    return out;
}

}  // namespace atlas::sim
