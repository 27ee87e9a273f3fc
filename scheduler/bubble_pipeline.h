// BubblePipeline: the whole bubble publishing step, the one definition every driver runs.
//
// A driver steps it: at each step it hands over the GPU waits that finished since the last
// step (take) and the wait open now as it sees it, and gets back the prediction set in force
// and whether it changed (decide). Inside, one step is:
//  - learning: each finished wait feeds BubblePredictor (period, tracks) and OpenWaitModel
//    (wait lengths, transfer rates), and gets its iteration number;
//  - predicting: the open wait is noted (confirm_open), the predictor's windows are
//    completed by the open-wait model (completeOpenWindow: the transfer's end, the elapsed
//    rule for a wait no track explains);
//  - the publish decision: windows encoded as the bubble channel carries them (confidence in
//    ppm, rounded: toPpm), and a set is published only when it differs from the one in
//    force (start, end, confidence or openness of any window: sameWindow);
//  - scoring: the running coverage/precision of the effective windows (bubble_score.h)
//    against the observed waits, the idle fraction, the period (stats).
// Drivers: the plugin's BubblePublisher (a thread, every publish tick, on the recorder's
// waits), `atlas-bubbles replay` (at the plugin's recorded steps, or at ticks) and atlas-sim's
// BubbleTea model (at its events). Only the wiring differs; the defaults are this config's.
//
// For an exact replay each taken wait also carries what the steps saw of it (WaitTrace): the
// step that took it in, the first and last step that saw it open, the first that saw its
// transfer. Published with the wait, they let a replay rebuild every input of every step that
// took a wait in or published a set (docs/bubble-channel.md, "Publisher steps").
//
// Pure: state and `now` in, decisions out; no clock reads, threads or I/O. One owner; not
// thread-safe. decide() reuses its buffers (no allocation once they have grown).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "atlas/bubble_channel.h"
#include "atlas/common/status.h"
#include "scheduler/bubble_predictor.h"
#include "scheduler/bubble_score.h"
#include "scheduler/open_wait_model.h"
#include "scheduler/types.h"

namespace atlas::sched {

struct BubblePipelineConfig {
    // guard_ns (kDefaultBubbleGuardNs) and confirm_open (on) included: the defaults of the
    // plugin, replay and the simulator.
    BubblePredictorConfig predictor;
    OpenWaitConfig open_wait;
    // The open-wait model's ends beyond the tracks (docs/bubbles.md); off: open windows from
    // the predictor's tracks alone (replay --tracks-only, to see what the model adds).
    bool open_wait_rules = true;
    // How often a ticking driver steps (the plugin's publisher thread, replay's ticks): the
    // delay between a wait's start and its window's publication is at most this.
    Nanos step_interval_ns = kNsPerMs;
    size_t accuracy_history = 256;  // finished waits the running accuracy is scored against
    size_t accuracy_windows = 512;  // disjoint effective windows kept for it
};

Status validate(const BubblePipelineConfig& config);

// What the steps saw of one wait (CLOCK_MONOTONIC step times; 0: not seen).
struct WaitTrace {
    Nanos taken_ns = 0;          // the step that took the finished wait in
    Nanos open_from_ns = 0;      // the first step that saw it open
    Nanos open_to_ns = 0;        // the last step that saw it open
    Nanos transfer_seen_ns = 0;  // the first step that saw its transfer's first data
};

// A finished wait as taken in: what the channel's observed record carries.
struct TakenWait {
    TransferWait wait;
    uint64_t iteration = channel::kUnknownIteration;  // while the period is known
    WaitTrace trace;
};

// A window as published: the channel's encoding.
struct PublishedWindow {
    Nanos start_ns = 0;
    Nanos end_ns = 0;
    uint32_t confidence_ppm = 0;  // toPpm(PredictedWindow::confidence)
    uint64_t iteration = 0;       // absolute iteration, >= 0
    bool open = false;            // predictor-open: its wait has begun
};

// The "set changed" rule: a set is republished when any window differs in one of these.
// The iteration number alone does not make a new set (it follows from the start).
bool sameWindow(const PublishedWindow& a, const PublishedWindow& b);

struct PipelineDecision {
    PredictionStatus status = PredictionStatus::kSearching;
    LossReason loss_reason = LossReason::kNone;  // with kLost
    bool publish = false;  // the set changed at this step: publish `windows` now
    // The set in force after this step (published now when `publish`). Valid until the
    // next decide().
    std::span<const PublishedWindow> windows;
};

// The running figures a driver publishes beside the set (the channel's stats block); the
// channel's unknown values where not known.
struct PipelineStats {
    Nanos period_ns = 0;
    uint32_t period_confidence_ppm = 0;
    uint32_t idle_fraction_ppm = channel::kUnknownPpm;
    uint64_t iteration = channel::kUnknownIteration;
    uint32_t coverage_ppm = channel::kUnknownPpm;
    uint32_t precision_ppm = channel::kUnknownPpm;
};

class BubblePipeline {
  public:
    // The config must be valid (see validate()).
    explicit BubblePipeline(const BubblePipelineConfig& config = {});

    // A finished wait the step at now_ns took in; call before that step's decide(), in the
    // order taken (a wait whose start goes backwards is still published but not learned).
    TakenWait take(const TransferWait& finished, Nanos now_ns);

    // The step's decision at now_ns (non-decreasing), with the wait open now as the driver
    // sees it (start_ns 0: none; transfer fields once its first data is seen).
    const PipelineDecision& decide(Nanos now_ns, const TransferWait& open);

    // Idle fraction since the first wait, the period, and the coverage/precision of the
    // effective windows over the span where both histories exist, up to now_ns.
    PipelineStats stats(Nanos now_ns) const;

    PeriodEstimate period(Nanos now_ns) const { return predictor_.period(now_ns); }
    const BubblePipelineConfig& config() const { return config_; }

  private:
    // What decide() saw of a wait that has not been taken in yet.
    struct Seen {
        Nanos start_ns = 0;
        WaitTrace trace;
    };

    BubblePipelineConfig config_;
    BubblePredictor predictor_;
    OpenWaitModel open_wait_;

    std::vector<PredictedWindow> predicted_;  // scratch
    std::vector<PublishedWindow> next_;       // scratch
    std::vector<PublishedWindow> current_;    // the set in force
    std::vector<Interval> current_intervals_;
    PipelineDecision decision_;

    // A wait is seen open before it is taken in; two can be pending when the next one opens
    // before the first is taken (its completion reached the driver late).
    static constexpr size_t kSeenCapacity = 4;
    std::array<Seen, kSeenCapacity> seen_{};
    size_t seen_next_ = 0;

    EffectiveWindows effective_;
    std::deque<Interval> observed_;  // last accuracy_history finished waits
    Nanos first_start_ns_ = 0;
    Nanos last_end_ns_ = 0;
    Nanos idle_ns_ = 0;
};

}  // namespace atlas::sched
