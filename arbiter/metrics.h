// Prometheus text exposition (format 0.0.4) of the arbiter's state: per link grants, waits,
// slot utilization and bytes, per flow bytes and grants, and the server's session counters.
// Pure function of its inputs, so tests compare it without a server.
#pragma once

#include <cstdint>
#include <string>

#include "arbiter/arbiter_core.h"

namespace atlas::arbiter {

struct ServerCounters {
    uint64_t sessions_current = 0;
    uint64_t sessions_total = 0;
    uint64_t auth_failures = 0;
    uint64_t protocol_errors = 0;
    uint64_t liveness_drops = 0;  // sessions dropped for silence (partitioned or hung clients)
    uint64_t messages_in = 0;
    uint64_t messages_out = 0;
};

std::string renderMetrics(const ArbiterCore& core, const ServerCounters& counters, Nanos now_ns);

}  // namespace atlas::arbiter
