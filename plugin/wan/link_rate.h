// LinkRate: the rate the grant hold/drain rule (scheduler/grant_hold.h) assumes a WAN link
// carries, per link (WanAdmission keeps one per link; every gate of the link shares it).
//
//  - MeasuredLinkRate (ATLAS_LINK_RATE=measured, the default): learned from the message
//    trains the receivers report in their confirmations (docs/protocol.md "Confirmation"),
//    by the one estimator sched::PathRate, shared by every flow of the link in this process.
//    ATLAS_LINK_GBPS, when set, caps it and stands in until enough samples arrived.
//  - FixedLinkRate (ATLAS_LINK_RATE=fixed): ATLAS_LINK_GBPS as typed (0 = unknown: a grant
//    goes back as soon as the flow's queue is in the kernel).
//
// Threads: bitsPerSec() is called by engine threads on every release of a grant, so it is
// lock-free (an atomic load). addSample() runs on engine threads when a confirmation carries
// a train (a few per message at most); it takes a mutex no reader waits on. Implementations
// live as long as any gate holding them (shared_ptr).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>

#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "scheduler/path_rate.h"

namespace atlas::plugin::wan {

class LinkRate {
  public:
    virtual ~LinkRate() = default;
    // Bits per second the link is expected to carry at now_ns; 0 = unknown.
    virtual uint64_t bitsPerSec(Nanos now_ns) const = 0;
    // A receiver's train: `bytes` arrived over `dispersion_ns`. Default: ignored.
    virtual void addSample(uint64_t bytes, Nanos dispersion_ns, Nanos now_ns) {
        (void)bytes;
        (void)dispersion_ns;
        (void)now_ns;
    }
};

class FixedLinkRate final : public LinkRate {
  public:
    explicit FixedLinkRate(uint64_t bps) : bps_(bps) {}
    uint64_t bitsPerSec(Nanos) const override { return bps_; }

  private:
    const uint64_t bps_;
};

class MeasuredLinkRate final : public LinkRate {
  public:
    // `cap_bps`: ATLAS_LINK_GBPS (0 = none): the estimate never exceeds it, and it is the
    // rate while the estimate is unknown.
    // `link` and `log`: the INFO line each time the estimate is first known, moves by a fifth
    // or more, or is lost again (the estimate's trace; at most one line a second).
    MeasuredLinkRate(uint64_t cap_bps, std::string link = {}, Logger log = {},
                     sched::PathRateConfig config = {})
        : cap_bps_(cap_bps), link_(std::move(link)), log_(log), path_(config) {}
    uint64_t bitsPerSec(Nanos now_ns) const override;
    void addSample(uint64_t bytes, Nanos dispersion_ns, Nanos now_ns) override;
    // The estimate alone (0 = unknown), for stats and traces.
    uint64_t measuredBps() const { return measured_.load(std::memory_order_relaxed); }

  private:
    const uint64_t cap_bps_;
    const std::string link_;
    const Logger log_;
    std::mutex mu_;
    sched::PathRate path_;     // guarded by mu_
    uint64_t logged_bps_ = 0;  // guarded by mu_: the estimate the last trace line showed
    Nanos logged_at_ = -kNsPerSec;
    std::atomic<uint64_t> measured_{0};
};

}  // namespace atlas::plugin::wan
