// The scheduler's one quantile rule, shared by BubblePredictor (track lengths) and
// OpenWaitModel (wait lengths, transfer times), so "the 25th percentile" means the same
// element everywhere a window's end is chosen.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>

namespace atlas::sched {

// The q-quantile (q in [0, 1]) of `values`: the element at floor(q * (n - 1)) in sorted
// order, no interpolation (a window ends at a length some sample really had). Reorders
// `values`, which must not be empty.
template <typename T>
T lowerQuantile(std::span<T> values, double q) {
    const auto k = static_cast<size_t>(std::floor(q * static_cast<double>(values.size() - 1)));
    const auto it = values.begin() + static_cast<std::ptrdiff_t>(k);
    std::nth_element(values.begin(), it, values.end());
    return *it;
}

}  // namespace atlas::sched
