// Time in Atlas is int64 nanoseconds on CLOCK_MONOTONIC (the bubble channel and the
// scheduler share this unit). Stateful components take a Clock& so tests can drive time by
// hand (ManualClock) instead of sleeping; pure policies take `now_ns` as an argument.
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>

namespace atlas {

using Nanos = int64_t;

constexpr Nanos kNsPerUs = 1000;
constexpr Nanos kNsPerMs = 1000 * 1000;
constexpr Nanos kNsPerSec = 1000 * 1000 * 1000;

// CLOCK_MONOTONIC in nanoseconds. This is the clock id recorded in shared-memory formats.
inline Nanos monotonicNowNs() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<Nanos>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
}

// Injectable time source. Thread-safe: nowNs() may be called from any thread.
class Clock {
public:
    virtual ~Clock() = default;
    virtual Nanos nowNs() const = 0;
};

class MonotonicClock final : public Clock {
public:
    Nanos nowNs() const override { return monotonicNowNs(); }
    // A process-wide instance for production wiring.
    static const MonotonicClock& instance() {
        static const MonotonicClock clock;
        return clock;
    }
};

// A clock that only moves when told to. For tests; safe to read from several threads.
class ManualClock final : public Clock {
public:
    explicit ManualClock(Nanos start_ns = 0) : now_(start_ns) {}
    Nanos nowNs() const override { return now_.load(std::memory_order_acquire); }
    void advance(Nanos delta_ns) { now_.fetch_add(delta_ns, std::memory_order_acq_rel); }
    void set(Nanos now_ns) { now_.store(now_ns, std::memory_order_release); }

private:
    std::atomic<Nanos> now_;
};

}  // namespace atlas
