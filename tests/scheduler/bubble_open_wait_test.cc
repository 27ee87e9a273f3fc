// BubblePredictor with the wait open now (confirm_open, as the plugin's recorder reports it):
// due windows withdrawn until their wait begins, the open window starting at the open, its
// end following the elapsed wait, and the track an open wait takes when its phase is off
// (the next in sequence, in order, the longer bubble it outlasted into).
#include <gtest/gtest.h>

#include <vector>

#include "scheduler/bubble_predictor.h"
#include "scheduler/interval_accuracy.h"
#include "tests/scheduler/bubble_test_util.h"
#include "tests/scheduler/trace_gen.h"

namespace atlas::sched {
namespace {

using testing::feedOpenByOpen;
using testing::kP;
using testing::Live;
using testing::openWindowAt;
using testing::openWindowIn;
using testing::Rng;
using testing::runLive;
using testing::trainedOnOpen;

// confirm_open: a window whose start has come is in force only once its interval opens, and
// then it starts where the interval did.
TEST(BubblePredictorTest, ConfirmOpenWithdrawsDueWindowsAndStartsAtTheOpen) {
    BubblePredictorConfig cfg;
    cfg.guard_ns = 1 * kNsPerMs;
    cfg.confirm_open = true;
    BubblePredictor p(cfg);
    // One 20 ms bubble at 50 ms into every 100 ms iteration.
    Nanos it0 = 0;
    for (int i = 0; i < 40; ++i) {
        it0 = kNsPerSec + i * kP;
        ASSERT_TRUE(p.observe({it0 + 50 * kNsPerMs, it0 + 70 * kNsPerMs}).isOk());
    }
    const Nanos next = it0 + kP;  // the next iteration's start
    std::vector<PredictedWindow> out;
    auto windowOf = [&](Nanos t) -> const PredictedWindow* {
        for (const auto& w : out) {
            if (w.start_ns <= t && t < w.end_ns + 5 * kNsPerMs) {
                return &w;
            }
        }
        return nullptr;
    };
    // Ahead of it: predicted as usual.
    ASSERT_EQ(p.predict(next + 10 * kNsPerMs, &out), PredictionStatus::kOk);
    const PredictedWindow* w = windowOf(next + 55 * kNsPerMs);
    ASSERT_NE(w, nullptr);
    EXPECT_NEAR(static_cast<double>(w->start_ns), static_cast<double>(next + 51 * kNsPerMs),
                static_cast<double>(kNsPerMs));
    // Due, but the GPU is still busy (nothing open): withdrawn.
    ASSERT_EQ(p.predict(next + 53 * kNsPerMs, &out), PredictionStatus::kOk);
    EXPECT_EQ(windowOf(next + 55 * kNsPerMs), nullptr);
    // The wait began 4 ms late: the window starts there, and keeps the track's length.
    p.noteOpen(next + 54 * kNsPerMs);
    ASSERT_EQ(p.predict(next + 55 * kNsPerMs, &out), PredictionStatus::kOk);
    w = windowOf(next + 60 * kNsPerMs);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->start_ns, next + 55 * kNsPerMs);
    EXPECT_EQ(w->end_ns, next + 73 * kNsPerMs);
}

// An open window's end follows what has elapsed: once the wait outlasts the track's short
// lengths, its end moves to the (low quantile of the) lengths that lasted longer.
TEST(BubblePredictorTest, OpenWindowEndFollowsTheElapsedWait) {
    BubblePredictorConfig cfg;
    cfg.guard_ns = 1 * kNsPerMs;
    cfg.confirm_open = true;
    BubblePredictor p(cfg);
    // One bubble at 30 ms into every 100 ms iteration, 20 ms or 50 ms long in turn (a wait that
    // ends with one of two transfers).
    Nanos it0 = 0;
    for (int i = 0; i < 40; ++i) {
        it0 = kNsPerSec + i * kP;
        const Nanos len = (i % 2 == 0 ? 20 : 50) * kNsPerMs;
        ASSERT_TRUE(p.observe({it0 + 30 * kNsPerMs, it0 + 30 * kNsPerMs + len}).isOk());
    }
    const Nanos open = it0 + kP + 30 * kNsPerMs;
    p.noteOpen(open);
    std::vector<PredictedWindow> out;
    // Just begun: the precision-first (short) length.
    ASSERT_EQ(p.predict(open + 5 * kNsPerMs, &out), PredictionStatus::kOk);
    const PredictedWindow* w = openWindowIn(out);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->end_ns, open + 19 * kNsPerMs);
    // Past every short one: only the long ones are left, so the window runs to their length.
    ASSERT_EQ(p.predict(open + 25 * kNsPerMs, &out), PredictionStatus::kOk);
    w = openWindowIn(out);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->start_ns, open + 1 * kNsPerMs);
    EXPECT_EQ(w->end_ns, open + 49 * kNsPerMs);
    // Longer than any seen: no window (nothing says how long it lasts).
    ASSERT_EQ(p.predict(open + 60 * kNsPerMs, &out), PredictionStatus::kOk);
    EXPECT_EQ(openWindowIn(out), nullptr);
}

// A wait that opens nearer a short bubble's track but outlasts every length of it belongs to
// the long bubble next to it: the open window moves there (1F1B: 1 ms waits 20 ms before a
// 200 ms one).
TEST(BubblePredictorTest, OpenWaitOutlastingAShortTrackMovesToTheLongOne) {
    constexpr Nanos kLongP = 900 * kNsPerMs;
    BubblePredictor p = trainedOnOpen(kLongP, {{100, 101}, {121, 321}, {500, 600}}, 1 * kNsPerMs);
    const Nanos it0 = kNsPerSec + 29 * kLongP;
    // The short bubble did not happen this time; the long one began 13 ms early, 8 ms from the
    // short one's track.
    const Nanos open = it0 + kLongP + 108 * kNsPerMs;
    const auto w = openWindowAt(p, open, open + 30 * kNsPerMs);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->start_ns, open + 1 * kNsPerMs);
    EXPECT_EQ(w->end_ns, open + 199 * kNsPerMs);
}

// A wait that ran long shifts every bubble after it; the next bubble then opens far from its
// track's phase, but it is the track that comes next in order, and gets its window.
TEST(BubblePredictorTest, OpenWaitAfterAShiftedBubbleTakesTheNextTrackInOrder) {
    constexpr Nanos kLongP = 900 * kNsPerMs;
    constexpr Nanos kMs = kNsPerMs;
    BubblePredictorConfig cfg;
    cfg.guard_ns = 1 * kMs;
    cfg.confirm_open = true;
    BubblePredictor p(cfg);
    Nanos it0 = 0;
    for (int i = 0; i < 30; ++i) {
        it0 = kNsPerSec + i * kLongP;
        const Nanos last_len = (i == 29 ? 274 : 110) * kMs;  // the last one runs long
        ASSERT_TRUE(p.observe({it0, it0 + 400 * kMs}).isOk());
        ASSERT_TRUE(p.observe({it0 + 440 * kMs, it0 + 460 * kMs}).isOk());
        ASSERT_TRUE(p.observe({it0 + 500 * kMs, it0 + 620 * kMs}).isOk());
        ASSERT_TRUE(p.observe({it0 + 660 * kMs, it0 + 660 * kMs + last_len}).isOk());
    }
    // The next iteration's first (400 ms) bubble opens 60 ms late.
    const Nanos open = it0 + kLongP + 60 * kMs;
    const auto w = openWindowAt(p, open, open + 5 * kMs);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->start_ns, open + 1 * kMs);
    EXPECT_EQ(w->end_ns, open + 399 * kMs);
}

// Three bubbles 20 ms apart (end to start) behind a long wait (1F1B stage 1 on a WAN: two
// 1 ms waits, then a 270 ms one). When that wait runs 13 ms long, every bubble after it
// moves 13 ms: by phase the first 1 ms wait then lands on the second's track, the second on
// the long one's, and the long wait finds its track filled and gets no window. By the sequence
// (which track came before, and the compute time since its end) each keeps its own.
TEST(BubblePredictorTest, SequenceKeepsCloseBubblesApartBehindAWaitThatRanLong) {
    constexpr Nanos kLongP = 900 * kNsPerMs;
    constexpr Nanos kMs = kNsPerMs;
    BubblePredictorConfig cfg;
    cfg.guard_ns = 1 * kMs;
    cfg.confirm_open = true;
    BubblePredictor p(cfg);
    Rng rng(3);
    auto iteration = [&](Nanos it0, Nanos extra) {
        const auto jitter = static_cast<Nanos>(rng.uniform(-2.0, 2.0) * 1e6) + extra;
        const Interval w{it0, it0 + 400 * kMs + jitter};
        const Interval a{w.end_ns + 20 * kMs, w.end_ns + 21 * kMs};
        const Interval b{a.end_ns + 20 * kMs, a.end_ns + 21 * kMs};
        const Interval c{b.end_ns + 20 * kMs, b.end_ns + 290 * kMs};
        return std::vector<Interval>{w, a, b, c};
    };
    Nanos it0 = 0;
    for (int i = 0; i < 30; ++i) {
        it0 = kNsPerSec + i * kLongP;
        for (const Interval& iv : iteration(it0, 0)) {
            ASSERT_TRUE(p.observe(iv).isOk());
        }
    }
    const std::vector<Interval> late = iteration(it0 + kLongP, 13 * kMs);
    feedOpenByOpen(p, late, [&](size_t k, const std::optional<PredictedWindow>& w) {
        if (k == 3) {
            // The long wait: its window, from its start, as long as its bubble.
            ASSERT_TRUE(w.has_value());
            EXPECT_EQ(w->start_ns, late[k].start_ns + 1 * kMs);
            EXPECT_EQ(w->end_ns, late[k].start_ns + 269 * kMs);
        } else if (k > 0 && w.has_value()) {
            // A 1 ms wait: never the long bubble's window (it would claim 270 ms of work).
            EXPECT_LE(w->end_ns, late[k].start_ns + 2 * kMs);
        }
    });
}

// The same bubbles, but the second 1 ms wait lasts 8 ms this time, so the sequence (which
// wants a like length) does not place it. Its phase from the detector's anchor carries the
// 13 ms the long wait ran over and lands 8 ms from the 270 ms bubble's track; its phase from
// the previous bubble (the chain) carries none of it and is tried first.
TEST(BubblePredictorTest, ChainPhaseComesBeforeTheAnchorPhase) {
    constexpr Nanos kLongP = 900 * kNsPerMs;
    constexpr Nanos kMs = kNsPerMs;
    BubblePredictorConfig cfg;
    cfg.guard_ns = 1 * kMs;
    cfg.confirm_open = true;
    BubblePredictor p(cfg);
    Rng rng(3);
    auto iteration = [&](Nanos it0, Nanos extra, Nanos b_len) {
        const auto jitter = static_cast<Nanos>(rng.uniform(-2.0, 2.0) * 1e6) + extra;
        const Interval w{it0, it0 + 400 * kMs + jitter};
        const Interval a{w.end_ns + 20 * kMs, w.end_ns + 21 * kMs};
        const Interval b{a.end_ns + 20 * kMs, a.end_ns + 20 * kMs + b_len};
        const Interval c{b.end_ns + 20 * kMs, b.end_ns + 290 * kMs};
        return std::vector<Interval>{w, a, b, c};
    };
    Nanos it0 = 0;
    for (int i = 0; i < 30; ++i) {
        it0 = kNsPerSec + i * kLongP;
        for (const Interval& iv : iteration(it0, 0, 1 * kMs)) {
            ASSERT_TRUE(p.observe(iv).isOk());
        }
    }
    const std::vector<Interval> late = iteration(it0 + kLongP, 13 * kMs, 8 * kMs);
    feedOpenByOpen(p, late, [&](size_t k, const std::optional<PredictedWindow>& w) {
        if (k == 3) {
            // The long wait gets its window: the 8 ms one before it did not fill its track.
            ASSERT_TRUE(w.has_value());
            EXPECT_EQ(w->end_ns, late[k].start_ns + 269 * kMs);
        }
    });
}

// A track with a single sample (a stray wait of a disturbed iteration) is not predicted; when
// an open wait lies nearer it than its own track, it must still take its own track, or it gets
// no window.
TEST(BubblePredictorTest, OpenWaitPrefersAPredictedTrackToANearerStrayOne) {
    constexpr Nanos kLongP = 900 * kNsPerMs;
    constexpr Nanos kMs = kNsPerMs;
    BubblePredictorConfig cfg;
    cfg.guard_ns = 1 * kMs;
    cfg.confirm_open = true;
    BubblePredictor p(cfg);
    Nanos it0 = 0;
    for (int i = 0; i < 30; ++i) {
        it0 = kNsPerSec + i * kLongP;
        ASSERT_TRUE(p.observe({it0, it0 + 300 * kMs}).isOk());
        ASSERT_TRUE(p.observe({it0 + 500 * kMs, it0 + 505 * kMs}).isOk());
        if (i == 25) {
            // Once: a 2 ms wait 8 ms after the short bubble ended.
            ASSERT_TRUE(p.observe({it0 + 513 * kMs, it0 + 515 * kMs}).isOk());
        }
    }
    // The short bubble opens 8 ms late (its compute ran long): 8 ms from its own track, 5 ms
    // from the stray one.
    const Nanos next = it0 + kLongP;
    ASSERT_TRUE(p.observe({next, next + 300 * kMs}).isOk());
    const Nanos open = next + 508 * kMs;
    const auto w = openWindowAt(p, open, open + 1 * kMs);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->start_ns, open + 1 * kMs);
    EXPECT_EQ(w->end_ns, open + 4 * kMs);
}

// After a slow stretch of compute the long bubble opens 190 ms late, past every phase rule
// (and past the quarter period of the offset order), but it still comes right after the last
// short bubble: the track that learned to follow that one gets the open window.
TEST(BubblePredictorTest, OpenWaitAfterASlowStretchTakesTheTrackThatFollowsInSequence) {
    constexpr Nanos kLongP = 700 * kNsPerMs;
    constexpr Nanos kMs = kNsPerMs;
    BubblePredictor p =
        trainedOnOpen(kLongP, {{20, 210}, {230, 231}, {251, 252}, {272, 273}}, 1 * kMs);
    const Nanos it0 = kNsPerSec + 29 * kLongP;
    const Nanos open = it0 + kLongP + 210 * kMs;
    const auto w = openWindowAt(p, open, open + 2 * kMs);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->start_ns, open + 1 * kMs);
    EXPECT_EQ(w->end_ns, open + 189 * kMs);
}

// An open wait that has outlasted every length of the track it opened at is not that track's
// bubble: it moves to the long one next to it at once, not only once it has also outlasted
// the track's length slack (10 ms), which left the first 10 ms of such waits uncovered.
TEST(BubblePredictorTest, OpenWaitMovesAsSoonAsItOutlastsItsTrack) {
    constexpr Nanos kLongP = 900 * kNsPerMs;
    constexpr Nanos kMs = kNsPerMs;
    BubblePredictor p = trainedOnOpen(kLongP, {{100, 101}, {121, 321}, {500, 600}}, 200 * kNsPerUs);
    const Nanos it0 = kNsPerSec + 29 * kLongP;
    // The short bubble did not happen; the long one opened at the short one's phase.
    const Nanos open = it0 + kLongP + 104 * kMs;
    const auto w = openWindowAt(p, open, open + 3 * kMs);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->start_ns, open + 200 * kNsPerUs);
    EXPECT_EQ(w->end_ns, open + 200 * kMs - 200 * kNsPerUs);
}

}  // namespace
}  // namespace atlas::sched
