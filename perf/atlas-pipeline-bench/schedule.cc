#include "perf/atlas-pipeline-bench/schedule.h"

#include <algorithm>

namespace atlas::pipebench {

std::vector<Op> stageOps(Schedule schedule, int stage, int stages, int microbatches) {
    std::vector<Op> ops;
    ops.reserve(static_cast<size_t>(2 * microbatches));
    if (schedule == Schedule::kGpipe) {
        for (int m = 0; m < microbatches; ++m) {
            ops.push_back({true, m});
        }
        for (int m = 0; m < microbatches; ++m) {
            ops.push_back({false, m});
        }
        return ops;
    }
    const int warm = std::min(stages - 1 - stage, microbatches);
    int next_f = 0;
    int next_b = 0;
    for (; next_f < warm; ++next_f) {
        ops.push_back({true, next_f});
    }
    while (next_f < microbatches) {
        ops.push_back({true, next_f++});
        ops.push_back({false, next_b++});
    }
    while (next_b < microbatches) {
        ops.push_back({false, next_b++});
    }
    return ops;
}

}  // namespace atlas::pipebench
