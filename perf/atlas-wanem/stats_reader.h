// The consumer side of atlas-wanem's counters (stats.h writes them): a running emulator's
// link utilization, for benchmarks (atlas-pipeline-bench --link-stats, issue 17): for each
// direction, the bytes it carried against what its rate could have carried over a window.
//
// Protocol: atlas-wanem rewrites its --stats file (JSON, docs/wan.md "Counters") when it gets
// SIGUSR1; a snapshot signals it, waits for the document's `seq` to move on and parses it.
// The bytes are `wire_bytes`: what the rate cap charges (IP packets plus the L2 overhead),
// counted when a packet is admitted to the bottleneck queue, so a window that ends with the
// link drained (an iteration's barrier) counts exactly what crossed; 1.0 means the bottleneck
// never idled. TCP/IP headers and the reverse flow's ACKs count as carried (about 4 % on a
// bulk transfer): the payload alone is below that.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"

namespace atlas::wanem {

// A running atlas-wanem and its --stats file (scripts/wan-up exports both, as
// LINK_DC<i>_DC<j>_PID and LINK_DC<i>_DC<j>_STATS).
struct LinkSource {
    int pid = 0;
    std::string path;
    bool operator==(const LinkSource&) const = default;
};

// One direction of a link at one snapshot. `from`/`to` are the emulator's namespaces
// (config.ns_a/ns_b: the testbed's DC namespaces, DC<i>_NS).
struct LinkDirection {
    std::string from;
    std::string to;
    uint64_t wire_bytes = 0;  // since the emulator started
    uint64_t rate_bps = 0;    // the sum of its paths' rates now; 0 = a path is uncapped
    // TCP segments the bottleneck dropped since the emulator started: drop-tail (its buffer
    // was full) and random loss (--loss), apart.
    uint64_t queue_drops = 0;
    uint64_t loss_drops = 0;
};

struct LinkSnapshot {
    uint64_t seq = 0;  // the emulator's dump counter
    std::vector<LinkDirection> dirs;
};

// Parses atlas-wanem's stats JSON. kInvalidArgument naming the first field that is missing or
// of the wrong type (the file is another program's output: nothing in it is trusted).
Result<LinkSnapshot> parseLinkStats(std::string_view text);

// The document in `path` once its seq exceeds `newer_than_seq` (the emulator rewrites the
// file atomically), polling for at most `timeout_ns`; kTimeout naming the file otherwise.
// Only the seq is checked: callers that trust nothing else parse it (parseLinkStats).
Result<nlohmann::json> awaitStatsDocument(const std::string& path, uint64_t newer_than_seq,
                                          Nanos timeout_ns);

// Signals `src.pid` (SIGUSR1) and waits until its stats file shows a newer seq than the one
// on disk, at most `timeout_ns`, then parses it. kUnavailable when the process is gone,
// kTimeout when the file did not move.
Result<LinkSnapshot> snapshotLink(const LinkSource& src, Nanos timeout_ns);

// What one direction did over a window.
struct DirectionUse {
    std::string from;
    std::string to;
    uint64_t wire_bytes = 0;    // carried in the window
    uint64_t queue_drops = 0;   // segments dropped by the full buffer in the window
    uint64_t loss_drops = 0;    // segments dropped by random loss in the window
    double capacity_bytes = 0;  // rate x window / 8; 0 when uncapped
    double utilization = -1;    // wire / capacity; -1 when uncapped or the window is empty
};

// The difference of two snapshots of the same emulator over `window_ns`, per direction (the
// rate of `after`). kInvalidArgument when they do not match (other directions, counters that
// went backwards: the emulator restarted).
Result<std::vector<DirectionUse>> linkUse(const LinkSnapshot& before, const LinkSnapshot& after,
                                          Nanos window_ns);

}  // namespace atlas::wanem
