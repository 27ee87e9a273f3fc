#include "scheduler/path_rate.h"

#include <algorithm>

namespace atlas::sched {

bool PathRate::addMessage(uint64_t bytes, Nanos first_ns, Nanos last_ns) {
    const Nanos dispersion = last_ns - first_ns;
    if (bytes < config_.min_bytes || dispersion < config_.min_dispersion_ns) {
        return false;
    }
    // bits per second = bytes * 8e9 / ns, without overflow for any realistic size.
    const long double bps = static_cast<long double>(bytes) * 8.0L * 1e9L / dispersion;
    ring_[next_] = {last_ns, static_cast<uint64_t>(bps)};
    next_ = (next_ + 1) % kSamples;
    count_ = std::min(count_ + 1, kSamples);
    return true;
}

size_t PathRate::samples(Nanos now_ns) const {
    size_t n = 0;
    for (size_t i = 0; i < count_; ++i) {
        n += now_ns - ring_[i].at_ns <= config_.window_ns ? 1 : 0;
    }
    return n;
}

uint64_t PathRate::bitsPerSec(Nanos now_ns) const {
    std::array<uint64_t, kSamples> live{};
    size_t n = 0;
    for (size_t i = 0; i < count_; ++i) {
        if (now_ns - ring_[i].at_ns <= config_.window_ns) {
            live[n++] = ring_[i].bps;
        }
    }
    if (n == 0 || n < config_.min_samples) {
        return 0;
    }
    std::sort(live.begin(), live.begin() + static_cast<std::ptrdiff_t>(n));
    // Nearest rank of the quantile: with 16 samples the 12th, with 3 the 3rd... of the
    // ascending order (index ceil(q * n) - 1).
    const size_t rank = (kQuantilePct * n + 99) / 100;
    return live[std::max<size_t>(rank, 1) - 1];
}

}  // namespace atlas::sched
