// The model of one emulated path in one direction: a drop-tail bottleneck queue drained at a
// fixed rate, followed by a fixed propagation delay with optional jitter. Pure and
// deterministic: time is passed in, randomness is passed in, nothing blocks.
//
// For each wire segment arriving at time `now`:
//   start     = max(now, link_free)                   (wait behind earlier segments)
//   backlog   = (start - now) * rate                  (bytes already queued at the bottleneck)
//   tail drop if backlog + wire > buffer
//   link_free = start + wire / rate                   (serialization)
// and a frame whose last segment left the bottleneck at `departed` is delivered at
//   deliver   = max(previous deliver, departed + delay + jitter),
// so jitter never reorders a path. The order is bottleneck first, then propagation.
// rate == 0 means "no cap": no serialization, no queue, departed == now.
#pragma once

#include <cstdint>
#include <optional>

#include "atlas/common/clock.h"

namespace atlas::wanem {

struct LinkParams {
    double rate_bps = 0;        // bottleneck rate in bits/s counting wire bytes; 0 = no cap
    Nanos delay_ns = 0;         // one-way propagation delay
    Nanos jitter_ns = 0;        // delay varies uniformly in [delay - jitter, delay + jitter]
    uint64_t buffer_bytes = 0;  // drop-tail limit on queued wire bytes (ignored without a cap)
};

// Not thread-safe: owned by one direction thread.
class LinkModel {
  public:
    explicit LinkModel(const LinkParams& params) : params_(params) {}

    const LinkParams& params() const { return params_; }
    // A new bottleneck rate from now on (0: no cap). Bytes already admitted keep their
    // departure times; the buffer keeps its size in bytes.
    void setRate(double rate_bps) { params_.rate_bps = rate_bps; }

    // Offers one wire segment arriving at `now_ns`. Returns the time its last bit leaves the
    // bottleneck (fractional ns), or nullopt when the drop-tail buffer is full.
    std::optional<double> admit(Nanos now_ns, uint32_t wire_bytes);

    // Delivery time of a frame whose last segment left the bottleneck at `departed_ns`.
    // `jitter_unit` is a uniform sample in [-1, 1] (ignored when jitter is 0).
    Nanos deliveryTime(double departed_ns, double jitter_unit);

    // Bytes waiting at the bottleneck at `now_ns` (0 without a cap).
    uint64_t backlogBytes(Nanos now_ns) const;
    uint64_t maxBacklogBytes() const { return max_backlog_bytes_; }
    // Queueing delay seen by the most delayed admitted segment so far.
    Nanos maxQueueDelayNs() const { return max_queue_delay_ns_; }

  private:
    LinkParams params_;
    double link_free_ns_ = 0;
    Nanos last_deliver_ns_ = 0;
    uint64_t max_backlog_bytes_ = 0;
    Nanos max_queue_delay_ns_ = 0;
};

// xoshiro256** seeded through splitmix64: fast, good enough for Bernoulli loss and jitter,
// reproducible from one 64-bit seed.
class Rng {
  public:
    explicit Rng(uint64_t seed);
    uint64_t next();
    // Uniform in [0, 1).
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    // True with probability p (p outside [0, 1] clamps).
    bool bernoulli(double p) { return p > 0 && (p >= 1 || uniform() < p); }

  private:
    uint64_t s_[4];
};

}  // namespace atlas::wanem
