// The measurements of atlas-net-perf. One server and one client run the same Plan over a
// bootstrap Channel: the client decides the plan and keeps the clock, the server follows.
//
// Plugin kind: each side loads the plugin through dlopen (v11 table), listens, swaps handles
// over the channel and connects to the other, so there is one sendComm and one recvComm per
// side, exactly like an NCCL connection pair. Messages are posted NCCL-style: up to `window`
// isend/irecv in flight per direction, test() on the oldest.
// Raw-TCP kind: the same plan over N plain TCP connections per side; every message is split
// evenly across them (one thread per stream and direction), the NCCL-socket-transport baseline.
//
// Timing (bandwidth): after a warm-up and a barrier on the channel, the client starts the
// clock, both sides move `iters` messages, and the server answers with an 8-byte completion
// message on the data path; the clock stops when it arrives. time = elapsed / iters.
// Latency: ping-pong of `size` bytes; every round trip is one sample.
//
// Threads: the plugin kind polls from the calling thread (as NCCL's proxy thread does); the
// raw kind starts and joins its stream threads per size. Every wait has a deadline.
#pragma once

#include <string>
#include <vector>

#include "perf/atlas-net-perf/bootstrap.h"
#include "perf/atlas-net-perf/options.h"

namespace atlas::netperf {

struct Row {
    size_t size = 0;
    int count = 0;
    // Bandwidth
    double time_us = 0;     // per message (per iteration in bidir)
    double algbw_GBps = 0;  // size / time, 1e9 bytes per second (per direction in bidir)
    double gbps = 0;        // algbw * 8
    // Latency (round trip)
    double p50_us = 0;
    double p99_us = 0;
    double mean_us = 0;
    double min_us = 0;
    double max_us = 0;
};

struct RoleConfig {
    std::string plugin_path;
    std::string raw_host;  // server: address advertised for raw TCP ("" = derive)
    Deadline deadline;
};

// Client role: sends the plan, measures, returns one row per size.
Result<std::vector<Row>> runClient(Channel& chan, const Plan& plan, const RoleConfig& cfg);
// Server role: receives the plan and serves it.
Status runServer(Channel& chan, const RoleConfig& cfg);

// Percentile (nearest rank) of unsorted samples; 0 when empty.
double percentile(std::vector<double> samples, double p);

}  // namespace atlas::netperf
