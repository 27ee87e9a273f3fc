// How a grant's pace is split over the data streams that carry the flow's bytes, for
// streams that send at the rate they are told (atlas_rate; docs/tcp-cc.md). Pure: the
// engine (CommCore::paceStreams) feeds it each stream's unsent bytes (the ledger's queued
// ones plus the kernel's, SIOCOUTQNSD) and applies the answers with SO_MAX_PACING_RATE.
#pragma once

#include <cstdint>

namespace atlas::transport {

// The floor of a stream's share, so that a collapsed estimate or a sliver of the flow's
// bytes cannot stall a stream outright.
inline constexpr uint64_t kMinStreamPaceBytes = 128 * 1024;  // bytes/s

// A stream's pace in bytes/s when the flow may send `pace_bps` (bits/s) in all and the
// stream holds `queued` of the `total` bytes the flow's streams hold: the pace x
// queued / total, so the streams finish together at the pace however the striper loaded
// them, and at least kMinStreamPaceBytes. 0 (no cap) when pace_bps is 0 or the stream holds
// nothing.
uint64_t streamPaceBytes(uint64_t pace_bps, uint64_t queued, uint64_t total);

// Whether a stream paced at `have` bytes/s (0: none) should be set to `want`: not when they
// are within an eighth of each other, so a steady grant costs no syscall per piece.
bool paceChanged(uint64_t have, uint64_t want);

}  // namespace atlas::transport
