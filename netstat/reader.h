// Reading stats segments (include/atlas/netstat.h) from outside the writer process: what
// atlas-netstat shows. Everything read from a segment is untrusted: parseSegment() checks the
// header against the ABI and recomputes the layout before it reads a record, copies comm
// records under their generation (N2), and bounds every count and string it returns.
// Fuzzed (tests/netstat/fuzz_netstat_segment.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "atlas/common/status.h"
#include "atlas/netstat.h"

namespace atlas::netstat {

struct StreamView {
    uint32_t stream = 0;
    bool valid = false;  // a TCP_INFO sample is present
    uint64_t bytes = 0;
    uint64_t rtt_us = 0, rttvar_us = 0, min_rtt_us = 0;
    uint64_t snd_cwnd = 0, snd_mss = 0, unacked = 0;
    uint64_t total_retrans = 0, bytes_retrans = 0;
    uint64_t delivery_rate = 0, pacing_rate = 0;  // bytes/s
    uint32_t tcp_state = 0, ca_state = 0;
    bool app_limited = false;
    uint64_t sample_ns = 0;
};

struct CommView {
    uint32_t index = 0;  // the comm's entry in the segment
    uint64_t comm_id = 0, session_id = 0;
    Role role = kRoleSend;
    uint32_t dev = 0;
    uint32_t nstreams = 0;
    Traffic traffic = kTrafficUnknown;
    uint32_t priority = 0;
    bool wan = false;
    uint64_t handshake_rtt_ns = 0, open_ns = 0;
    std::string peer, local, link;  // printable ASCII only
    uint64_t bytes = 0, messages = 0, last_done_ns = 0;
    uint64_t gate_waits = 0, gate_grants = 0, sample_ns = 0;
    uint64_t resets = 0, rejoins = 0, resent_bytes = 0;
    std::vector<StreamView> streams;  // control stream first, then data streams 1..nstreams
};

struct ProcessView {
    std::string path;
    int64_t pid = 0;
    std::string host, process;
    uint64_t start_mono_ns = 0, start_real_ns = 0, heartbeat_ns = 0;
    uint64_t auth_failures = 0, comms_dropped = 0;
    bool closed = false;  // the writer finished (state kSegmentClosed)
    bool alive = true;    // the writer process exists (readSegmentFile checks it)
    std::vector<CommView> comms;
};

// Parses a segment image of `size` bytes at `data` (8-byte aligned). kRemote names the first
// problem: wrong magic/version/sizes, a layout that does not fit, a record that lies about
// its stream count. Records changing under the copy are skipped, not errors.
Result<ProcessView> parseSegment(const void* data, size_t size);

// Maps `path` read-only and parses it; `alive` from kill(pid, 0).
Result<ProcessView> readSegmentFile(const std::string& path);

// Paths of the files in `dir` whose name starts with kNamePrefix, sorted.
std::vector<std::string> listSegments(const std::string& dir);

}  // namespace atlas::netstat
