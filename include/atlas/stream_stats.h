// Stream statistics: what the transport measures about its TCP streams, off the data path,
// and hands to whoever listens (the plugin's shared-memory stats segment, docs/netstat.md; the
// link-rate estimator of issue 17). Declared here so transport/ can report without knowing
// the listener, like RecvObserver.
//
// Units: time in ns (CLOCK_MONOTONIC for timestamps), rates in bytes/s, sizes in bytes, the
// congestion window in segments (the kernel's unit; snd_mss converts it).
#pragma once

#include <cstdint>

#include "atlas/common/clock.h"

namespace atlas {

// One TCP_INFO reading of one socket (transport/tcp_info.h takes it). Fields the running
// kernel does not report stay 0.
struct TcpInfoSample {
    Nanos at_ns = 0;              // when it was taken
    uint32_t state = 0;           // TCP_ESTABLISHED = 1, ...
    uint32_t ca_state = 0;        // congestion-avoidance state (0 open, 4 loss)
    uint32_t rtt_us = 0;          // smoothed RTT
    uint32_t rttvar_us = 0;       // its mean deviation
    uint32_t min_rtt_us = 0;      // windowed minimum
    uint32_t snd_cwnd = 0;        // segments
    uint32_t snd_mss = 0;         // bytes per segment
    uint32_t unacked = 0;         // segments in flight
    uint64_t total_retrans = 0;   // segments retransmitted over the socket's life
    uint64_t bytes_retrans = 0;   // bytes retransmitted (Linux 4.19+)
    uint64_t delivery_rate = 0;   // bytes/s, the kernel's latest delivery-rate sample
    uint64_t pacing_rate = 0;     // bytes/s (bbr's bandwidth estimate times its gain)
    uint64_t bytes_acked = 0;     // sender side
    uint64_t bytes_received = 0;  // receiver side
    uint32_t rcv_ooopack = 0;     // receiver side: out-of-order packets (Linux 5.4+)
    uint32_t notsent_bytes = 0;   // sender side: bytes queued, not yet sent (Linux 4.6+)
    bool delivery_rate_app_limited = false;
};

// One stream of a comm at one sampling point.
struct StreamSample {
    int stream = 0;      // 0: the control stream, 1..n: data streams
    uint64_t bytes = 0;  // payload bytes this stream moved for the comm
    bool tcp_info_ok = false;
    TcpInfoSample tcp;
};

// Comm-level counters kept by the owner engine thread.
struct CommEngineCounters {
    uint64_t gate_waits = 0;   // admission asked and had to wait for the link
    uint64_t gate_grants = 0;  // admission granted the link
    // Stream recovery (transport/recovery.h RecoveryCounters, docs/protocol.md "Recovery").
    uint64_t stream_resets = 0;  // streams lost and recovered from (not comm failures)
    uint64_t rejoins = 0;        // lost streams re-established
    uint64_t resent_bytes = 0;   // bytes sent again on another stream after a loss
};

// Receives a comm's samples. Called on the comm's owner engine thread only, at a bounded rate
// (TransportConfig::stats_interval_ns), between I/O completions, never inside one: begin, one
// stream() per stream, end. Must not block (it may write shared memory with atomics).
class CommStatsSink {
  public:
    virtual ~CommStatsSink() = default;
    virtual void stream(const StreamSample& sample) noexcept = 0;
    virtual void engine(const CommEngineCounters& counters, Nanos now_ns) noexcept = 0;
};

}  // namespace atlas
