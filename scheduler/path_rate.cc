#include "scheduler/path_rate.h"

#include <algorithm>

namespace atlas::sched {

namespace {
// A train's rate: bits per second = bytes * 8e9 / ns, without overflow for any realistic size.
long double trainBps(uint64_t bytes, Nanos dispersion_ns) {
    return static_cast<long double>(bytes) * 8.0L * 1e9L / static_cast<long double>(dispersion_ns);
}
}  // namespace

Nanos gateLimitedSample(uint64_t bytes, Nanos dispersion_ns, Nanos stalled_ns,
                        uint64_t estimate_bps) {
    if (dispersion_ns <= 0) {
        return 0;
    }
    if (stalled_ns <= 0 || stalled_ns * 10 < dispersion_ns) {
        return dispersion_ns;
    }
    if (estimate_bps == 0) {
        return 0;
    }
    const Nanos sent_over = std::max(dispersion_ns - stalled_ns, dispersion_ns / 10);
    return trainBps(bytes, sent_over) > static_cast<long double>(estimate_bps) ? sent_over : 0;
}

bool PathRate::addMessage(uint64_t bytes, Nanos first_ns, Nanos last_ns) {
    const Nanos dispersion = last_ns - first_ns;
    if (!config_.admits(bytes, dispersion)) {
        return false;
    }
    ring_[next_] = {last_ns, static_cast<uint64_t>(trainBps(bytes, dispersion))};
    next_ = (next_ + 1) % kSamples;
    count_ = std::min(count_ + 1, kSamples);
    return true;
}

uint64_t PathRate::addAndEstimate(uint64_t bytes, Nanos first_ns, Nanos last_ns, size_t* live) {
    addMessage(bytes, first_ns, last_ns);
    *live = samples(last_ns);
    return bitsPerSec(last_ns);
}

size_t PathRate::live(Nanos now_ns, std::array<uint64_t, kSamples>* bps) const {
    // Newest first: ring_[next_ - 1], ring_[next_ - 2], ... (count_ of them).
    size_t n = 0;
    for (size_t k = 1; k <= count_; ++k) {
        const Sample& s = ring_[(next_ + kSamples - k) % kSamples];
        const Nanos age = now_ns - s.at_ns;
        if (age <= config_.window_ns || (n < config_.min_samples && age <= config_.max_age_ns)) {
            if (bps != nullptr) {
                (*bps)[n] = s.bps;
            }
            ++n;
        }
    }
    return n;
}

bool PathRate::consistent() const {
    // Times are monotonic ns, never negative: `now - at` cannot overflow for any now >= 0.
    return next_ < kSamples && count_ <= kSamples && config_.min_samples >= 1 &&
           config_.min_samples <= kSamples && config_.window_ns > 0 &&
           config_.max_age_ns >= config_.window_ns && config_.min_dispersion_ns > 0 &&
           std::all_of(ring_.begin(), ring_.end(), [](const Sample& s) { return s.at_ns >= 0; });
}

size_t PathRate::samples(Nanos now_ns) const {
    return live(now_ns, nullptr);
}

uint64_t PathRate::bitsPerSec(Nanos now_ns) const {
    std::array<uint64_t, kSamples> sorted{};
    const size_t n = live(now_ns, &sorted);
    if (n == 0 || n < config_.min_samples) {
        return 0;
    }
    // live() lists the newest first: keep the newest min_samples for the level-shift rule.
    std::array<uint64_t, kSamples> newest{};
    const size_t k = std::min(config_.min_samples, n);
    std::copy_n(sorted.begin(), k, newest.begin());
    std::sort(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(n));
    // The rank of the quantile, rounded down: with 16 samples the 12th of the ascending order,
    // with 4 the 3rd, with 3 the 2nd (the median: rounded up, the quantile of the few samples
    // of a sparse window was their maximum, and one train read in a burst set the estimate;
    // measured, 1.24 on a 1 Gbit/s link).
    const size_t rank = kQuantilePct * n / 100;
    const uint64_t q = sorted[std::max<size_t>(rank, 1) - 1];
    // A level shift: the newest min_samples samples all lie more than kShiftPct beyond the
    // quantile, on the same side. The path changed (a rate step; the end of the shared trains
    // of the first, unheld grants), and their median is the estimate now, instead of waiting
    // for the old samples to leave the window: with 64 MiB messages at 0.5 Gbit/s a train
    // ends about once a second, and a 1 -> 0.5 Gbit/s step settled 7.2-8.4 s after it
    // (measured, scripts/bench-rate-step). One stray sample (a compressed train) moves
    // nothing: it takes min_samples in a row.
    if (k > 0) {  // k == min_samples: fewer live samples returned above
        const auto beyond = [&](bool above) {
            return std::all_of(newest.begin(), newest.begin() + static_cast<std::ptrdiff_t>(k),
                               [&](uint64_t v) {
                                   return above ? v * 100 > q * (100 + kShiftPct)
                                                : v * 100 < q * (100 - kShiftPct);
                               });
        };
        if (beyond(true) || beyond(false)) {
            std::sort(newest.begin(), newest.begin() + static_cast<std::ptrdiff_t>(k));
            return newest[(k - 1) / 2];
        }
    }
    return q;
}

}  // namespace atlas::sched
