// The plain-TCP baseline of atlas-net-perf: the plan over N TCP connections without the
// plugin. Each message is split evenly across the N streams (NCCL's socket transport splits
// the same way), one thread per stream and direction moves its share with blocking writes and
// reads; TCP's own buffering is the "window". With N = 1 this is NCCL's default socket path.
#pragma once

#include <vector>

#include "perf/atlas-net-perf/bench.h"

namespace atlas::netperf {

// Both roles; the client fills `rows`. The server listens on cfg.raw_host (or the address the
// bootstrap connection arrived on) and sends "host:port" over the channel.
Status runRawTcp(Channel& chan, const Plan& plan, const RoleConfig& cfg, bool is_client,
                 std::vector<Row>* rows);

}  // namespace atlas::netperf
