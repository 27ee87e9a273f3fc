// PathRate: a WAN path's bottleneck rate, learned from the dispersion of the messages that
// cross it (the packet-train method). One definition for the plugin (the receiver measures,
// the sender's grant hold/drain rule uses it: docs/arbitration.md, "Measured link rate") and
// for anything that replays recorded arrivals.
//
// The sample: a message of `bytes` whose first payload bytes reached the receiver at t0 and
// whose last byte arrived at t1 crossed the bottleneck at bytes / (t1 - t0), provided the
// sender had it all queued and the receiver was waiting for it (the caller's filter). A
// message that shared the bottleneck with other traffic arrives spread out: its sample is its
// share, below the rate. Nothing but reading delay can make a sample exceed the rate (the
// receiver reading in bursts after a stall compresses the train), so the estimate is a high
// quantile, not the maximum, of the recent samples:
//
//     estimate = the kQuantile-th of the samples of the last window_ns (at most kSamples;
//                the newest min_samples within max_age_ns when the window has fewer), or
//                the median of the newest min_samples when all of them lie more than
//                kShiftPct above it or all below (a level shift: the path changed)
//
// Bias: under fair sharing by k flows most samples are 1/k of the rate and the estimate sits
// low; under temporal sharing (one flow owns the link per grant) samples are the rate. A low
// estimate only lengthens a grant's hold (the link idles briefly, nothing overlaps), and each
// exclusive transfer then raises the estimate. Before `min_samples` samples the rate is 0
// (unknown): a grant goes back as soon as its bytes are in the kernel, today's rule, so the
// first grants are never held on a guess. Old samples age out, so a rate change (1 -> 0.5
// Gbit/s) is followed once most samples in the window come from the new rate.
//
// Pure: no clock, no lock, no I/O; times are the caller's monotonic ns. Trivially copyable
// and without pointers, so one can live in the node segment and pool the samples of every
// process of the node (plugin/wan/shm_layout.h).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "scheduler/types.h"

namespace atlas::sched {

struct PathRateConfig {
    // Smallest message that gives a sample: shorter trains are dominated by per-read jitter.
    uint64_t min_bytes = 1ull << 20;
    // Shortest dispersion accepted (below it the clock's and the reader's granularity rule).
    Nanos min_dispersion_ns = 200 * 1000;
    // Samples older than this are forgotten...
    Nanos window_ns = 3 * kNsPerSec;
    // Samples needed before the estimate is published.
    size_t min_samples = 3;
    // ...unless fewer than min_samples are that young: then the newest min_samples count as
    // long as they are younger than this. Large messages on a slow link give a sample a
    // second or less often (4 x 64 MiB in flight at 0.5 Gbit/s: one per 1.1 s), and a
    // strict window flickered between the rate and "unknown" there (measured).
    Nanos max_age_ns = 10 * kNsPerSec;

    // Whether a train of `bytes` over `dispersion_ns` is a sample (large and long enough):
    // the one filter, for PathRate and for whoever forwards trains to a pool elsewhere.
    bool admits(uint64_t bytes, Nanos dispersion_ns) const {
        return bytes >= min_bytes && dispersion_ns >= min_dispersion_ns;
    }
};

// A train during which the sender's own gate held the flow back for `stalled_ns`
// (transport/train.h GateStalls) measured that wait as well as the path. Returns the
// dispersion the sample counts with, 0 when it does not count:
//  - stalled less than a tenth of the dispersion: as it is (an arbiter's renewal round trip
//    inside a long message distorts a train by less than the estimator's own noise);
//  - otherwise *limited*: its bytes crossed in the time the gate let them, the dispersion
//    less the stall (at least a tenth of the dispersion: one train lifts the rate tenfold at
//    most, however short the measured stall leaves it), and that sample counts only when it
//    is above the current estimate, which it
//    may then raise, the way BBR uses an application-limited delivery-rate sample; with no
//    estimate yet it does not count.
// Why both halves: left in as they are, such trains make any low estimate a fixed point (a
// low rate shrinks the byte budget, messages cross in turns with holds between them, and
// every train reads as low as the rate that made it); dropped, a low estimate whose budget
// cuts every transfer never sees a train that could raise it (measured: 250 ms stairs, 6.7 s
// per iteration). Pure: one rule for every pool (plugin/wan/link_rate.h applies it before a
// sample enters one).
Nanos gateLimitedSample(uint64_t bytes, Nanos dispersion_ns, Nanos stalled_ns,
                        uint64_t estimate_bps);

class PathRate {
  public:
    static constexpr size_t kSamples = 16;
    // The estimate's quantile of the window's samples, in percent.
    static constexpr unsigned kQuantilePct = 75;
    // A level shift: the newest min_samples samples all this far (percent) above or below
    // the quantile make their median the estimate.
    static constexpr unsigned kShiftPct = 15;

    explicit PathRate(PathRateConfig config = {}) : config_(config) {}

    // One message of `bytes` arrived between first_ns and last_ns (receiver clock). False
    // when it is too small or too fast to be a sample (not counted).
    bool addMessage(uint64_t bytes, Nanos first_ns, Nanos last_ns);
    // addMessage, then the estimate and (in *live) the live sample count as of last_ns: what
    // a pool of samples publishes after each train (plugin/wan/link_rate.h).
    uint64_t addAndEstimate(uint64_t bytes, Nanos first_ns, Nanos last_ns, size_t* live);
    // Bits per second at now_ns; 0 while fewer than min_samples samples are live.
    uint64_t bitsPerSec(Nanos now_ns) const;
    size_t samples(Nanos now_ns) const;
    const PathRateConfig& config() const { return config_; }
    // The state's invariants (ring indices in range, a config the estimate can run on): a
    // PathRate kept in shared memory (the node segment) is checked before use.
    bool consistent() const;

  private:
    struct Sample {
        Nanos at_ns = 0;
        uint64_t bps = 0;
    };
    // The live samples' rates (when bps is not null) and their count.
    size_t live(Nanos now_ns, std::array<uint64_t, kSamples>* bps) const;

    PathRateConfig config_;
    std::array<Sample, kSamples> ring_{};
    size_t next_ = 0;
    size_t count_ = 0;
};

}  // namespace atlas::sched
