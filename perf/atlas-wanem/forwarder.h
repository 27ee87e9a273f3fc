// The loop of one direction thread: read frames from the input TUN into the pipeline, write
// frames whose delivery time has come to the output TUN, sleep in ppoll() until the next
// delivery or the next input. One thread per direction; the two never share state.
#pragma once

#include <cstdint>

#include "atlas/common/status.h"
#include "perf/atlas-wanem/pipeline.h"

namespace atlas::wanem {

struct ForwarderSettings {
    uint32_t batch = 256;            // frames per read/write burst
    uint32_t spin_us = 0;            // busy-poll window before a delivery
    uint64_t timer_slack_ns = 1000;  // PR_SET_TIMERSLACK for this thread
    uint32_t mtu = 1500;
    uint32_t rt_priority = 0;  // SCHED_FIFO priority, 0 = leave the scheduler alone
};

// Applies the thread-level settings (timer slack, real-time priority) to the calling
// thread. Returns a warning text when the priority could not be set, else "".
std::string applyThreadSettings(const ForwarderSettings& settings);

// Blocks until `stop_fd` (an eventfd) becomes readable, then returns OK; returns an error
// when a TUN fd fails in a way that will not recover (device gone). Frames still queued at
// stop are discarded.
Status runDirection(DirectionPipeline& pipe, int in_fd, int out_fd, int stop_fd,
                    const ForwarderSettings& settings);

}  // namespace atlas::wanem
