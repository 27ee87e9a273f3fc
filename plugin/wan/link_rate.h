// LinkRate: the rate the grant hold/drain rule (scheduler/grant_hold.h) assumes a WAN link
// carries, per link.
//
// Today it is the configured ATLAS_LINK_GBPS (FixedLinkRate; 0 = unknown: a grant goes back
// as soon as the flow's queue is in the kernel). Issue 17 replaces it with a rate measured
// from the streams' TCP_INFO samples, aggregated per link across the node (shm segment) and
// the DC (arbiter): WanAdmission::rateFor() is where that estimator plugs in, and the gates
// only see this interface.
//
// Threads: bitsPerSec() is called by engine threads on every release of a grant, so it must
// be lock-free and cheap (an atomic load); implementations live as long as any gate holding
// them (shared_ptr).
#pragma once

#include <cstdint>

#include "atlas/common/clock.h"

namespace atlas::plugin::wan {

class LinkRate {
  public:
    virtual ~LinkRate() = default;
    // Bits per second the link is expected to carry at now_ns; 0 = unknown.
    virtual uint64_t bitsPerSec(Nanos now_ns) const = 0;
};

class FixedLinkRate final : public LinkRate {
  public:
    explicit FixedLinkRate(uint64_t bps) : bps_(bps) {}
    uint64_t bitsPerSec(Nanos) const override { return bps_; }

  private:
    const uint64_t bps_;
};

}  // namespace atlas::plugin::wan
