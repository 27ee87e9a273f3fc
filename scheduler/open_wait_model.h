// OpenWaitModel: when the GPU wait open now ends, from what BubblePredictor's tracks do not
// know about it: the transfer it waits for, and how long it has lasted.
//
// BubblePredictor gives an open wait the window of the track it matches, as long as that
// track's waits usually last. Two things it cannot see:
//  - The transfer. A wait ends when the last byte of the awaited message lands, and its first
//    byte lands when the sender starts sending it (under temporal sharing: when the sender's
//    arbiter grants it the link, plus the one-way delay); from then on the message crosses at
//    the rate the path gives it. So once its first data is seen, the end is
//    first arrival + bytes x (time per byte), whatever delayed the grant. Waits whose sender
//    was queued behind another pipeline are exactly the ones that outlast their track.
//  - Waits no track explains. When a pattern shifts (a slow iteration, a pipeline granted in a
//    new order) a wait may match no track and get no window at all. What is still known is
//    that it has lasted `elapsed` so far, and how long recent waits lasted.
// Both are answered the same way, the way BubblePredictor sizes an open track window: among
// the learned samples that outlasted what is known so far (the wait's elapsed time, or the
// time since the transfer's first data), a low quantile (an early end). An early end costs a
// consumer a little idle time; a late one delays training. Conditioning on elapsed time is
// what separates the kinds a sample mix holds: a message mostly buffered before its receive
// was posted lands within a millisecond or two of its first data, one crossing the WAN takes
// bytes / rate; once the first kind is ruled out the second kind's time is the prediction.
//
// Threads: one owner; not thread-safe. Time enters only through arguments; no allocation
// after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "atlas/common/status.h"
#include "scheduler/bubble_predictor.h"
#include "scheduler/types.h"

namespace atlas::sched {

struct OpenWaitConfig {
    int history = 64;        // samples kept, of wait lengths and of transfer times each
    int min_samples = 8;     // of a kind, before it predicts anything
    double quantile = 0.25;  // of the samples that outlast the open wait: < 0.5 ends early
    // Smaller messages cross within a publish tick: their time is latency, not rate.
    uint64_t min_transfer_bytes = 64 * 1024;
};

Status validate(const OpenWaitConfig& config);

// A finished wait, or the wait open now (end_ns == 0; start_ns == 0: none is open), with its
// transfer: the first data of the awaited message arrived at transfer_start_ns (0: not yet,
// or not seen) and the message is transfer_bytes long.
struct TransferWait {
    Nanos start_ns = 0;
    Nanos end_ns = 0;
    Nanos transfer_start_ns = 0;
    uint64_t transfer_bytes = 0;
};

class OpenWaitModel {
  public:
    // The config must be valid (see validate()).
    explicit OpenWaitModel(const OpenWaitConfig& config = {});

    // Learns from a finished wait: its length, and its transfer's time per byte when its
    // transfer was seen and is at least min_transfer_bytes.
    void learn(const TransferWait& finished);

    // When the open wait's transfer will have landed, judged at now_ns; 0 when unknown (its
    // first data has not arrived, it is small, too few samples, or it outlasted them all).
    Nanos transferEnd(const TransferWait& open, Nanos now_ns) const;
    // When the open wait ends judging by its elapsed time alone; 0 when unknown.
    Nanos elapsedEnd(const TransferWait& open, Nanos now_ns) const;

    // Fraction of samples that outlast the predicted end: a window's confidence.
    double confidence() const { return 1.0 - config_.quantile; }
    size_t transferSamples() const { return transfers_.count; }
    size_t waitSamples() const { return waits_.count; }

  private:
    // The last `history` values of one kind.
    struct Ring {
        std::vector<double> values;
        size_t next = 0;
        size_t count = 0;
        void add(double v);
    };
    // The config's quantile of the ring's values greater than `above`; 0 when there are too
    // few values or none is greater.
    double quantileAbove(const Ring& ring, double above) const;

    OpenWaitConfig config_;
    Ring waits_;      // ns
    Ring transfers_;  // ns per byte, first data to end
    mutable std::vector<double> scratch_;
};

// Completes the predicted windows with the model, for the wait open now (`open`):
//  - its window (PredictedWindow::open) lasts at least until its transfer will have landed
//    (guard_ns before that). It is extended, never shortened: both ends are early estimates,
//    and on recorded runs letting the transfer shorten windows lost coverage;
//  - when it has none, it gets one from its start (plus guard) to the later of the two ends,
//    for `iteration`, with the model's confidence, in place of any planned window that
//    overlaps it (a plan for a bubble that, this iteration, is this wait). That is a wait the
//    predictor matched to no track (`track_end_ns` 0), or one whose track gave no window (its
//    window is over, in the last guard band before the end the track predicts, or the track's
//    iteration lies outside the horizon). For the latter the elapsed end is capped at
//    `track_end_ns`, where the track says the wait ends: the lengths of other kinds of wait say
//    nothing about it (uncapped, in the simulator, whose tracks' waits all last the same, each
//    such window in the guard band overran training; capped at the track's longest wait
//    instead, the testbed's trial patterns still slowed training by 5%).
// Nothing changes when no wait is open or no end is known and still ahead. Keeps `windows`
// sorted by start.
void completeOpenWindow(const OpenWaitModel& model, const TransferWait& open, Nanos track_end_ns,
                        Nanos guard_ns, Nanos now_ns, int64_t iteration,
                        std::vector<PredictedWindow>* windows);

}  // namespace atlas::sched
