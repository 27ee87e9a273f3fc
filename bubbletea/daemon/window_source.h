// Where the daemon's prefill windows come from.
//
// A window is a time interval [start_ns, end_ns) on CLOCK_MONOTONIC during which the GPU is
// predicted idle, so prefill may run there. Three sources:
//   - channel:    the predictions the NCCL plugin publishes on this GPU's bubble channel
//                 (channel/). While the predictor is not in kPredicting (learning,
//                 period lost, idle, disabled), or the channel is missing or its writer gone,
//                 the plan is empty and marked withdrawn: no prefill runs.
//   - duty cycle: standalone mode without a training job: windows of `open_ns` at the start
//                 of every `period_ns`, phase fixed by `origin_ns`.
//   - always:     standalone mode: one window that never ends.
//
// Threads: a WindowSource has one owner thread (it wraps a ChannelReader, which is not
// thread-safe); make one source per thread that needs windows. poll() never blocks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/log.h"

namespace atlas::bubbletea {

// "Never ends": far enough that no arithmetic with it overflows int64.
constexpr Nanos kForeverNs = INT64_MAX / 4;

struct Window {
    Nanos start_ns = 0;
    Nanos end_ns = 0;
    bool operator==(const Window&) const = default;
};

// What a source knows at one instant.
struct WindowPlan {
    // Windows that have not ended yet, sorted by start, non-overlapping.
    std::vector<Window> windows;
    // > 0: the pattern is periodic with this period; a scheduler may assume the windows
    // repeat beyond the last one (the channel's learned iteration period).
    Nanos period_ns = 0;
    // The source says predictions are withdrawn (period lost, writer gone): running chunks
    // should be cancelled and no new ones started.
    bool withdrawn = false;
    // Changes whenever the windows change (a new prediction set, a reconnect); lets the
    // watcher notice a withdrawn or moved window cheaply.
    uint64_t version = 0;
    // Human-readable state for logs and /healthz ("predicting", "channel missing", ...).
    std::string note;
};

class WindowSource {
  public:
    virtual ~WindowSource() = default;
    virtual WindowPlan poll(Nanos now_ns) = 0;
    // One line for logs, e.g. "channel /atlas-bubbles-u1000-r0" or "duty 50ms/20ms".
    virtual std::string describe() const = 0;
};

// One window [origin - 1 s, kForeverNs).
std::unique_ptr<WindowSource> makeAlwaysOpenSource();

// Windows [origin + k*period, origin + k*period + open) for the current and the next
// `horizon` periods. Requires 0 < open <= period.
std::unique_ptr<WindowSource> makeDutyCycleSource(Nanos period_ns, Nanos open_ns, Nanos origin_ns,
                                                  int horizon = 8);

struct ChannelSourceOptions {
    std::string name;                 // shm name, e.g. "/atlas-bubbles-u1000-r0"
    uint32_t min_confidence_ppm = 0;  // windows below this confidence are ignored
    // How often a missing channel is re-opened and the writer's liveness re-checked.
    Nanos reopen_interval_ns = 100 * kNsPerMs;
    Logger logger;
};

// Reads the bubble channel `options.name`; opens it lazily (the training job may start
// after the daemon) and follows writer restarts.
std::unique_ptr<WindowSource> makeChannelSource(ChannelSourceOptions options);

}  // namespace atlas::bubbletea
