// LinkRate: the rate the grant hold/drain rule (scheduler/grant_hold.h) assumes a WAN link
// carries, per link (WanAdmission keeps one per link; every gate of the link shares it).
//
//  - MeasuredLinkRate (ATLAS_LINK_RATE=measured, the default): learned from the message
//    trains the receivers report in their confirmations (docs/protocol.md "Confirmation"),
//    by the one estimator sched::PathRate over a RatePool: the samples of this process
//    (LocalRatePool), or of every process of the node (the node segment's pool, ShmArbiter::
//    ratePool(), under node-local arbitration). ATLAS_LINK_GBPS, when set, caps it and
//    stands in until enough samples arrived.
//  - FixedLinkRate (ATLAS_LINK_RATE=fixed): ATLAS_LINK_GBPS as typed (0 = unknown: a grant
//    goes back as soon as the flow's queue is in the kernel).
//
// Both carry the link's hand-off lead (ATLAS_HANDOFF_LEAD_US): how long before a drained
// grant's bytes are through the gate hands the link on (sched::GrantHold's lead), so the next
// holder's first bytes reach the bottleneck as ours leave it.
//
// Threads: bitsPerSec() is called by engine threads on every release of a grant, so it is
// lock-free (an atomic load). addSample() runs on engine threads when a confirmation carries
// a train (a few per message at most); it takes the pool's lock (a mutex no reader waits on,
// or the node segment's) for the estimate's O(samples) update. Implementations
// live as long as any gate holding them (shared_ptr).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "scheduler/path_rate.h"

namespace atlas::plugin::wan {

class LinkRate {
  public:
    explicit LinkRate(Nanos handoff_lead_ns = 0) : handoff_lead_ns_(handoff_lead_ns) {}
    virtual ~LinkRate() = default;
    Nanos handoffLeadNs() const { return handoff_lead_ns_; }
    // Bits per second the link is expected to carry at now_ns; 0 = unknown.
    virtual uint64_t bitsPerSec(Nanos now_ns) const = 0;
    // The measured estimate alone (0 = not measured, or not known yet): what the stream plan
    // of a later comm on the link sizes itself by (WanAdmission::measuredPathBps).
    virtual uint64_t measuredBps() const { return 0; }
    // A receiver's train: `bytes` arrived over `dispersion_ns`, `stalled_ns` of which the
    // sender's gate held the flow back (FlowGate::onPathSample). Default: ignored.
    virtual void addSample(uint64_t bytes, Nanos dispersion_ns, Nanos now_ns, Nanos stalled_ns) {
        (void)bytes;
        (void)dispersion_ns;
        (void)now_ns;
        (void)stalled_ns;
    }

  private:
    const Nanos handoff_lead_ns_;
};

class FixedLinkRate final : public LinkRate {
  public:
    explicit FixedLinkRate(uint64_t bps, Nanos handoff_lead_ns = 0)
        : LinkRate(handoff_lead_ns), bps_(bps) {}
    uint64_t bitsPerSec(Nanos) const override { return bps_; }

  private:
    const uint64_t bps_;
};

// Where a link's trains are pooled, and the estimate over them. Pooling matters: a process
// whose own flows saw only shared trains (its first grants, before any hold) learns the rate
// from its neighbours' exclusive ones instead of creeping up from its own low estimate
// (measured: two stage processes took 30 s to reach 0.9 Gbit/s while the others of the
// node had it after 5 s; docs/arbitration.md "Measured link rate").
class RatePool {
  public:
    virtual ~RatePool() = default;
    // One train of `bytes` that arrived between first_ns and last_ns. Returns the estimate
    // after it (0 = unknown) and, in *live, how many samples it rests on.
    virtual uint64_t add(uint64_t bytes, Nanos first_ns, Nanos last_ns, size_t* live) = 0;
    // The estimate as of the last add by anyone (0 = unknown). Lock-free.
    virtual uint64_t estimate() const = 0;
    virtual const sched::PathRateConfig& config() const = 0;
};

// This process's own samples.
class LocalRatePool final : public RatePool {
  public:
    explicit LocalRatePool(sched::PathRateConfig config = {}) : path_(config) {}
    uint64_t add(uint64_t bytes, Nanos first_ns, Nanos last_ns, size_t* live) override;
    uint64_t estimate() const override { return estimate_.load(std::memory_order_relaxed); }
    const sched::PathRateConfig& config() const override { return path_.config(); }

  private:
    std::mutex mu_;
    sched::PathRate path_;  // guarded by mu_
    std::atomic<uint64_t> estimate_{0};
};

class MeasuredLinkRate final : public LinkRate {
  public:
    // `cap_bps`: ATLAS_LINK_GBPS (0 = none): the estimate never exceeds it, and it is the
    // rate while the estimate is unknown.
    // `link` and `log`: the INFO line each time the estimate is first known, moves by a tenth
    // or more, or is lost again (the estimate's trace; at most one line a second); every
    // train at TRACE level.
    // `pool`: where the samples go (null: a LocalRatePool of its own).
    MeasuredLinkRate(uint64_t cap_bps, std::string link = {}, Logger log = {},
                     std::shared_ptr<RatePool> pool = nullptr, Nanos handoff_lead_ns = 0);
    uint64_t bitsPerSec(Nanos now_ns) const override;
    // A train the gate stalled enters the pool as sched::gateLimitedSample() says.
    void addSample(uint64_t bytes, Nanos dispersion_ns, Nanos now_ns, Nanos stalled_ns) override;
    // The estimate alone (0 = unknown), uncapped: for the stream plan, stats and traces.
    uint64_t measuredBps() const override { return pool_->estimate(); }

  private:
    const uint64_t cap_bps_;
    const std::string link_;
    const Logger log_;
    const std::shared_ptr<RatePool> pool_;
    std::mutex mu_;            // the trace's state only
    uint64_t logged_bps_ = 0;  // guarded by mu_: the estimate the last trace line showed
    Nanos logged_at_ = -kNsPerSec;
};

}  // namespace atlas::plugin::wan
