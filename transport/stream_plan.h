// How many data streams a comm opens, decided once at connect time from the measured RTT.
//
// Rule (docs/env.md, "Stream count"): one TCP stream moves at most one window per RTT, and
// the window is bounded by the kernel (autotuning ceilings net.ipv4.tcp_wmem[2] and
// tcp_rmem[2], or an explicit ATLAS_SOCKBUF_BYTES). To fill a path of rate B with round-trip
// time R we need N >= B*R / W streams; we add 25% headroom for loss recovery and slow start.
// A CPU floor of one stream per 25 Gbit/s keeps fast LANs from being bound by one core's copy
// rate. The result is clamped to [1, max_streams]. ATLAS_NSTREAMS overrides the rule.
//
// The path rate B: the link's measured rate when one is known at connect time (the plugin's
// estimate from earlier comms on the same WAN link, issue 17), else the configured rate
// (ATLAS_LINK_GBPS, else the device's speed). The plugin passes no measurement when
// ATLAS_LINK_GBPS is set: a typed-in rate is an override. A measurement above the configured
// rate is capped by it (the device speed bounds every path through it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "atlas/common/clock.h"
#include "transport/socket_util.h"

namespace atlas::transport {

struct StreamPlanInput {
    Nanos rtt_ns = 0;
    uint64_t link_bps = 0;      // configured: ATLAS_LINK_GBPS, else the device speed
    uint64_t measured_bps = 0;  // the link's measured rate, 0 = not known
    int requested = 0;          // ATLAS_NSTREAMS; 0 = automatic
    int max_streams = 64;
    size_t sockbuf_bytes = 0;
    KernelTcpLimits limits;
};

struct StreamPlan {
    int nstreams = 1;
    uint64_t window_bytes = 0;  // what one stream can keep in flight
    uint64_t path_bps = 0;      // the rate planned for: measured (capped) or link_bps
    bool measured = false;      // path_bps is the measured rate
    uint64_t bdp_bytes = 0;     // path_bps * rtt / 8
    std::string reason;         // one line for the INFO log
};

// Pure function of its input.
StreamPlan planStreams(const StreamPlanInput& in);

}  // namespace atlas::transport
