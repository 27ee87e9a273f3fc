// Deterministic synthetic traces for the scheduler tests: periodic event streams and idle
// intervals with iteration jitter, per-event jitter and dropped events.
#pragma once

#include <cstdint>
#include <vector>

#include "scheduler/types.h"

namespace atlas::sched::testing {

// splitmix64: tiny, fast and identical on every platform (std:: distributions are not).
class Rng {
  public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    // Uniform in [0, 1).
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
    bool chance(double p) { return uniform() < p; }

  private:
    uint64_t state_;
};

// One iteration of `period_ns` (scaled by 1 + U(-iteration_jitter, +iteration_jitter)) holds
// events/bubbles at fractional offsets; each is shifted by period * U(-event_jitter, +...)
// and dropped with probability `drop`.
struct PatternSpec {
    Nanos period_ns = 100 * kNsPerMs;
    std::vector<double> offsets = {0.0};  // fractions of the iteration
    std::vector<double> lengths;          // bubble lengths as fractions (bubbles only)
    double iteration_jitter = 0.0;
    double event_jitter = 0.0;
    double drop = 0.0;
};

struct Trace {
    std::vector<Interval> truth;     // every bubble (events: zero-length intervals)
    std::vector<Interval> observed;  // truth minus dropped ones
    Nanos end_ns = 0;                // end of the last iteration
};

inline Trace generate(const PatternSpec& spec, int iterations, Nanos start_ns, Rng& rng) {
    Trace t;
    Nanos iter_start = start_ns;
    for (int i = 0; i < iterations; ++i) {
        const double scale = 1.0 + rng.uniform(-spec.iteration_jitter, spec.iteration_jitter);
        const auto len = static_cast<Nanos>(static_cast<double>(spec.period_ns) * scale);
        for (size_t k = 0; k < spec.offsets.size(); ++k) {
            const double jitter = rng.uniform(-spec.event_jitter, spec.event_jitter);
            const Nanos s = iter_start + static_cast<Nanos>((spec.offsets[k] + jitter) *
                                                            static_cast<double>(len));
            const double frac = k < spec.lengths.size() ? spec.lengths[k] : 0.0;
            const Nanos e = s + static_cast<Nanos>(frac * static_cast<double>(len));
            t.truth.push_back({s, e});
            if (!rng.chance(spec.drop)) {
                t.observed.push_back({s, e});
            }
        }
        iter_start += len;
    }
    t.end_ns = iter_start;
    return t;
}

}  // namespace atlas::sched::testing
