// How many data streams a comm opens, decided once at connect time from the measured RTT.
//
// Rule (docs/env.md, "Stream count"): one TCP stream moves at most one window per RTT, and
// the window is bounded by the kernel (autotuning ceilings net.ipv4.tcp_wmem[2] and
// tcp_rmem[2], or an explicit ATLAS_SOCKBUF_BYTES). To fill a path of rate B with round-trip
// time R we need N >= B*R / W streams; we add 25% headroom for loss recovery and slow start.
// A CPU floor of one stream per 25 Gbit/s keeps fast LANs from being bound by one core's copy
// rate. The result is clamped to [1, max_streams]. ATLAS_NSTREAMS overrides the rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "atlas/common/clock.h"
#include "transport/socket_util.h"

namespace atlas::transport {

struct StreamPlanInput {
    Nanos rtt_ns = 0;
    uint64_t link_bps = 0;
    int requested = 0;  // ATLAS_NSTREAMS; 0 = automatic
    int max_streams = 64;
    size_t sockbuf_bytes = 0;
    KernelTcpLimits limits;
};

struct StreamPlan {
    int nstreams = 1;
    uint64_t window_bytes = 0;  // what one stream can keep in flight
    uint64_t bdp_bytes = 0;     // link_bps * rtt / 8
    std::string reason;         // one line for the INFO log
};

// Pure function of its input.
StreamPlan planStreams(const StreamPlanInput& in);

}  // namespace atlas::transport
