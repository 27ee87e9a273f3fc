// One pipeline stage as its own process: joins its network namespace, sets its environment,
// loads the plugin (dlopen, v11 table), connects to its neighbouring stages through the
// parent's handle exchange, then runs iterations on the parent's GO: compute is a timed busy
// period, activations and gradients are isend/irecv'd through the plugin like NCCL's proxy
// would, every receive wait is recorded as idle time.
#pragma once

#include <string>

#include "perf/atlas-pipeline-bench/options.h"

namespace atlas::pipebench {

// Runs in a freshly forked child (single-threaded until the plugin loads). Returns the exit
// code; failures are also sent to the parent as a kError frame.
int runStage(const BenchConfig& cfg, int pipeline, int stage, int ctrl_fd);

// One timeline entry (CLOCK_MONOTONIC ns).
struct TimelineEvent {
    int iteration = 0;
    char kind = 'F';  // F forward, B backward, A waiting for an activation, G waiting for a
                      // gradient, D draining its own sends at the end of the iteration
    int mb = 0;
    int64_t start_ns = 0;
    int64_t end_ns = 0;
};

}  // namespace atlas::pipebench
