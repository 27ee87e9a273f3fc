#include "scheduler/bubble_predictor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>

#include "scheduler/interval_accuracy.h"
#include "tests/scheduler/recorded_traces.h"
#include "tests/scheduler/trace_gen.h"

namespace atlas::sched {
namespace {

using testing::generate;
using testing::PatternSpec;
using testing::Rng;
using testing::Trace;

constexpr Nanos kP = 100 * kNsPerMs;
constexpr Nanos kStep = 500 * kNsPerUs;

// What a reader of the bubble channel saw: it polls the predictor every `step`, the way the
// plugin republishes, and at each instant trusts the latest prediction. Intervals are
// observed when they end, as the plugin learns about a receive wait only when it finishes.
struct Poll {
    Nanos now = 0;
    PredictionStatus status = PredictionStatus::kOk;
    LossReason reason = LossReason::kNone;
};

struct Live {
    std::vector<Interval> predicted;  // the union of what was believed, instant by instant
    std::vector<Poll> polls;
};

// With config.confirm_open the caller also reports the interval open at each poll, as the
// plugin's recorder does.
Live runLive(BubblePredictor& p, const std::vector<Interval>& observed, Nanos from, Nanos to) {
    Live live;
    size_t next = 0;
    std::vector<PredictedWindow> out;
    for (Nanos now = from; now < to; now += kStep) {
        while (next < observed.size() && observed[next].end_ns <= now) {
            EXPECT_TRUE(p.observe(observed[next]).isOk());
            ++next;
        }
        const bool open = next < observed.size() && observed[next].start_ns <= now;
        p.noteOpen(open ? observed[next].start_ns : 0);
        const PredictionStatus st = p.predict(now, &out);
        live.polls.push_back({now, st, p.lossReason(now)});
        if (st != PredictionStatus::kOk) {
            EXPECT_TRUE(out.empty());
        }
        for (const PredictedWindow& w : out) {
            EXPECT_LT(w.start_ns, w.end_ns);
            EXPECT_GT(w.end_ns, now);
            const Interval clipped{std::max(w.start_ns, now), std::min(w.end_ns, now + kStep)};
            if (clipped.end_ns > clipped.start_ns) {
                live.predicted.push_back(clipped);
            }
        }
    }
    return live;
}

// The window whose wait has begun (confirm_open), or null.
const PredictedWindow* openWindowIn(const std::vector<PredictedWindow>& windows) {
    const auto it =
        std::find_if(windows.begin(), windows.end(), [](const auto& w) { return w.open; });
    return it == windows.end() ? nullptr : &*it;
}

// predict() at now_ns with the wait open since open_ns: its window, if it has one.
std::optional<PredictedWindow> openWindowAt(BubblePredictor& p, Nanos open_ns, Nanos now_ns) {
    p.noteOpen(open_ns);
    std::vector<PredictedWindow> out;
    EXPECT_EQ(p.predict(now_ns, &out), PredictionStatus::kOk);
    const PredictedWindow* w = openWindowIn(out);
    return w != nullptr ? std::optional(*w) : std::nullopt;
}

// A confirm_open predictor (guard_ns) after 30 iterations of period_ns from t = 1 s, each with
// the idle intervals bubbles_ms ({start, end} in ms from the iteration start).
BubblePredictor trainedOnOpen(Nanos period_ns,
                              std::initializer_list<std::pair<int, int>> bubbles_ms,
                              Nanos guard_ns) {
    BubblePredictorConfig cfg;
    cfg.guard_ns = guard_ns;
    cfg.confirm_open = true;
    BubblePredictor p(cfg);
    for (int i = 0; i < 30; ++i) {
        const Nanos it0 = kNsPerSec + i * period_ns;
        for (const auto& [start, end] : bubbles_ms) {
            EXPECT_TRUE(p.observe({it0 + start * kNsPerMs, it0 + end * kNsPerMs}).isOk());
        }
    }
    return p;
}

// Feeds `waits` as the plugin sees them: each opens, predict() runs 200 us later and
// check(k, its open window) judges it, then the wait ends and is observed.
template <typename Check>
void feedOpenByOpen(BubblePredictor& p, const std::vector<Interval>& waits, Check check) {
    for (size_t k = 0; k < waits.size(); ++k) {
        SCOPED_TRACE(k);
        check(k, openWindowAt(p, waits[k].start_ns, waits[k].start_ns + 200 * kNsPerUs));
        p.noteOpen(0);
        ASSERT_TRUE(p.observe(waits[k]).isOk());
    }
}

// The slot model alone: windows stand as predicted (confirm_open off), as for a caller that
// cannot see a wait begin. These tests judge the slots, including bubbles never observed.
BubblePredictorConfig slotsAlone() {
    BubblePredictorConfig cfg;
    cfg.confirm_open = false;
    return cfg;
}

PatternSpec threeBubbles() {
    // Fill bubble, a wait between forward and backward, drain bubble.
    PatternSpec spec;
    spec.offsets = {0.0, 0.35, 0.8};
    spec.lengths = {0.15, 0.10, 0.15};
    spec.iteration_jitter = 0.005;
    spec.event_jitter = 0.002;
    return spec;
}

TEST(BubblePredictorTest, ExactWindowsOnACleanTrace) {
    BubblePredictorConfig cfg;
    cfg.guard_ns = 1 * kNsPerMs;
    cfg.horizon_iterations = 3;
    BubblePredictor p(cfg);
    // One 20 ms bubble at the middle of every 100 ms iteration, no jitter.
    std::vector<PredictedWindow> out;
    EXPECT_EQ(p.predict(0, &out), PredictionStatus::kSearching);
    Nanos last_start = 0;
    for (int i = 0; i < 12; ++i) {
        last_start = kNsPerSec + i * kP + 50 * kNsPerMs;
        ASSERT_TRUE(p.observe({last_start, last_start + 20 * kNsPerMs}).isOk());
    }
    const Nanos now = last_start + 30 * kNsPerMs;  // after the last bubble ended
    ASSERT_EQ(p.predict(now, &out), PredictionStatus::kOk);
    EXPECT_EQ(p.period(now).period_ns, kP);
    // The current iteration's bubble is over; the next horizon-1 iterations' remain.
    ASSERT_EQ(out.size(), 2u);
    for (size_t k = 0; k < out.size(); ++k) {
        const Nanos start = last_start + static_cast<Nanos>(k + 1) * kP;
        EXPECT_EQ(out[k].start_ns, start + cfg.guard_ns);
        EXPECT_EQ(out[k].end_ns, start + 20 * kNsPerMs - cfg.guard_ns);
        EXPECT_GT(out[k].confidence, 0.9);
    }
    EXPECT_EQ(out[1].iteration, out[0].iteration + 1);
}

TEST(BubblePredictorTest, AccurateOnThreeBubblesPerIteration) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
        SCOPED_TRACE(seed);
        Rng rng(seed);
        PatternSpec spec = threeBubbles();
        spec.drop = 0.1;
        Trace t = generate(spec, 120, kNsPerSec, rng);
        BubblePredictor p(slotsAlone());
        Live live = runLive(p, t.observed, kNsPerSec, t.end_ns);
        const Nanos warm = kNsPerSec + 40 * kP;
        const Accuracy a = measureAccuracy(t.truth, live.predicted, {warm, t.end_ns});
        EXPECT_GE(a.coverage, 0.9);
        EXPECT_GE(a.precision, 0.95);
        EXPECT_EQ(p.slotCount(), 3u);
    }
}

// 1F1B: a fill bubble, six small waits in the steady phase, a drain bubble.
TEST(BubblePredictorTest, AccurateWithManySmallBubbles) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
        SCOPED_TRACE(seed);
        Rng rng(seed);
        PatternSpec spec;
        spec.offsets = {0.0, 0.20, 0.30, 0.40, 0.50, 0.60, 0.70, 0.85};
        spec.lengths = {0.12, 0.04, 0.04, 0.04, 0.04, 0.04, 0.04, 0.10};
        spec.iteration_jitter = 0.003;
        spec.event_jitter = 0.001;
        spec.drop = 0.05;
        Trace t = generate(spec, 120, kNsPerSec, rng);
        BubblePredictorConfig cfg = slotsAlone();
        cfg.guard_ns = 100 * kNsPerUs;
        BubblePredictor p(cfg);
        Live live = runLive(p, t.observed, kNsPerSec, t.end_ns);
        const Nanos warm = kNsPerSec + 40 * kP;
        const Accuracy a = measureAccuracy(t.truth, live.predicted, {warm, t.end_ns});
        EXPECT_GE(a.coverage, 0.9);
        EXPECT_GE(a.precision, 0.95);
        EXPECT_EQ(p.slotCount(), 8u);
    }
}

// A fifth of the idle intervals are never observed: the predictor still predicts them.
TEST(BubblePredictorTest, PredictsBubblesItDidNotObserve) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
        SCOPED_TRACE(seed);
        Rng rng(seed);
        PatternSpec spec = threeBubbles();
        spec.drop = 0.2;
        Trace t = generate(spec, 120, kNsPerSec, rng);
        BubblePredictor p(slotsAlone());
        Live live = runLive(p, t.observed, kNsPerSec, t.end_ns);
        const Nanos warm = kNsPerSec + 40 * kP;
        // Accuracy against the truth restricted to the bubbles that were dropped.
        std::vector<Interval> unseen;
        std::set_difference(t.truth.begin(), t.truth.end(), t.observed.begin(), t.observed.end(),
                            std::back_inserter(unseen), [](const Interval& a, const Interval& b) {
                                return a.start_ns < b.start_ns;
                            });
        ASSERT_GT(unseen.size(), 40u);
        const Accuracy all = measureAccuracy(t.truth, live.predicted, {warm, t.end_ns});
        EXPECT_GE(all.coverage, 0.9);
        EXPECT_GE(all.precision, 0.95);
        const Accuracy hidden = measureAccuracy(unseen, live.predicted, {warm, t.end_ns});
        EXPECT_GE(hidden.coverage, 0.85);
    }
}

TEST(BubblePredictorTest, StopsPredictingDuringAPauseAndRecovers) {
    Rng rng(11);
    PatternSpec spec = threeBubbles();
    Trace before = generate(spec, 50, kNsPerSec, rng);
    const Nanos pause_ns = 3 * kNsPerSec;  // a checkpoint: no receive waits at all
    Trace after = generate(spec, 60, before.end_ns + pause_ns, rng);
    std::vector<Interval> observed = before.observed;
    observed.insert(observed.end(), after.observed.begin(), after.observed.end());
    std::vector<Interval> truth = before.truth;
    truth.insert(truth.end(), after.truth.begin(), after.truth.end());

    BubblePredictor p;
    Live live = runLive(p, observed, kNsPerSec, after.end_ns);
    const Nanos last_end = before.observed.back().end_ns;
    const Nanos stale_at =
        last_end + static_cast<Nanos>(p.config().stale_cycles * static_cast<double>(kP));
    const Nanos resume = before.end_ns + pause_ns;
    std::map<PredictionStatus, int> during;
    for (const Poll& poll : live.polls) {
        if (poll.now > stale_at + kStep && poll.now < resume) {
            EXPECT_NE(poll.status, PredictionStatus::kOk) << poll.now;
            during[poll.status]++;
            if (poll.status == PredictionStatus::kLost) {
                EXPECT_EQ(poll.reason, LossReason::kPause);
            }
        }
    }
    EXPECT_GT(during[PredictionStatus::kStale], 0);  // first: nothing observed recently
    EXPECT_GT(during[PredictionStatus::kLost], 0);   // then: the detector reports a pause
    // Nothing was predicted inside the pause.
    const Accuracy in_pause =
        measureAccuracy(truth, live.predicted, {stale_at + kStep, before.end_ns + pause_ns});
    EXPECT_EQ(in_pause.predicted_ns, 0);
    // Predictions come back after training resumes, and are accurate again.
    const Nanos warm = before.end_ns + pause_ns + 30 * kP;
    const Accuracy a = measureAccuracy(truth, live.predicted, {warm, after.end_ns});
    EXPECT_GE(a.coverage, 0.9);
    EXPECT_GE(a.precision, 0.95);
}

TEST(BubblePredictorTest, RelearnsAfterAPeriodChange) {
    Rng rng(5);
    PatternSpec a = threeBubbles();
    Trace t1 = generate(a, 60, kNsPerSec, rng);
    PatternSpec b = a;
    b.period_ns = 130 * kNsPerMs;
    Trace t2 = generate(b, 80, t1.end_ns, rng);
    std::vector<Interval> observed = t1.observed;
    observed.insert(observed.end(), t2.observed.begin(), t2.observed.end());
    BubblePredictor p;
    Live live = runLive(p, observed, kNsPerSec, t2.end_ns);
    const Nanos warm = t1.end_ns + 40 * b.period_ns;
    const Accuracy acc = measureAccuracy(t2.truth, live.predicted, {warm, t2.end_ns});
    EXPECT_GE(acc.coverage, 0.9);
    EXPECT_GE(acc.precision, 0.95);
    EXPECT_NEAR(static_cast<double>(p.period(t2.end_ns).period_ns), 130e6, 130e6 * 0.02);
}

// A 1F1B middle stage on a WAN (the shape atlas-pipeline-bench records): P = 1 s, a long
// bubble 20 ms after two 1 ms waits. A slot window of 5% of P (50 ms) would fold them into one
// slot; the 10 ms cap keeps all eight apart. Observed intervals carry no iteration jitter
// beyond 1% because compute, not the period, sets the offsets.
TEST(BubblePredictorTest, KeepsBubblesTensOfMsApartAtLongPeriods) {
    PatternSpec spec;
    spec.period_ns = kNsPerSec;
    spec.offsets = {0.0, 0.083, 0.105, 0.126, 0.44, 0.462, 0.503, 0.66};
    spec.lengths = {0.063, 0.001, 0.001, 0.27, 0.001, 0.001, 0.116, 0.116};
    spec.iteration_jitter = 0.005;
    spec.event_jitter = 0.002;
    for (bool confirm : {false, true}) {
        for (uint64_t seed = 1; seed <= 3; ++seed) {
            SCOPED_TRACE(::testing::Message() << "seed " << seed << " confirm_open " << confirm);
            Rng rng(seed);
            Trace t = generate(spec, 60, kNsPerSec, rng);
            BubblePredictorConfig cfg;
            cfg.confirm_open = confirm;
            BubblePredictor p(cfg);
            Live live = runLive(p, t.observed, kNsPerSec, t.end_ns);
            const Nanos warm = kNsPerSec + 20 * spec.period_ns;
            const Accuracy a = measureAccuracy(t.truth, live.predicted, {warm, t.end_ns});
            EXPECT_GE(a.coverage, 0.9);
            EXPECT_GE(a.precision, confirm ? 0.99 : 0.95);
            EXPECT_EQ(p.slotCount(), 8u);
        }
    }
    // The reason for the cap: without it the close bubbles can share slots. The sequence
    // match keeps most runs apart even then, so this needs the seeds where phase alone
    // decided a bubble's first slot.
    size_t merged = 0;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        Rng rng(seed);
        Trace t = generate(spec, 60, kNsPerSec, rng);
        BubblePredictorConfig uncapped;
        uncapped.slot_tolerance_max_ns = spec.period_ns;
        BubblePredictor p(uncapped);
        (void)runLive(p, t.observed, kNsPerSec, t.end_ns);
        merged += p.slotCount() < 8u ? 1 : 0;
    }
    EXPECT_GE(merged, 1u);
}

// GPipe stage 1 of atlas-pipeline-bench on a WAN, as recorded from the plugin: the burst of
// 1 ms waits 21 and 41 ms apart lured the live detector onto a 42 ms "period"; a 292 ms wait
// cannot fit in a 42 ms iteration, so the predictor searches again above it.
TEST(BubblePredictorTest, AWaitLongerThanThePeriodForcesALongerPeriod) {
    std::vector<Interval> observed;
    for (const auto& iv : testing::kGpipeStage1WanUs) {
        observed.push_back({kNsPerSec + iv[0] * kNsPerUs, kNsPerSec + iv[1] * kNsPerUs});
    }
    BubblePredictorConfig cfg;
    cfg.confirm_open = true;
    BubblePredictor p(cfg);
    const Nanos end = observed.back().end_ns;
    Live live = runLive(p, observed, kNsPerSec, end);
    const PeriodEstimate est = p.period(end);
    ASSERT_TRUE(est.locked());
    EXPECT_NEAR(static_cast<double>(est.period_ns), 690e6, 690e6 * 0.02);
    const Accuracy a = measureAccuracy(observed, live.predicted, {kNsPerSec + 12 * kNsPerSec, end});
    EXPECT_GE(a.coverage, 0.9);
    EXPECT_GE(a.precision, 0.99);
}

// 1F1B with many micro-batches (atlas-sim's 4,096 GPUs: 33 waits 129 ms apart in a 7.6 s
// iteration): a long burst of evenly spaced waits between a fill and a drain wait. The burst
// locks the detector on its spacing; the fill wait cannot fit in it, and a search above it
// on every wait would lock on a multiple of the spacing (which the burst repeats too, while
// the iteration is no multiple of it). Searching on the waits longer than the spacing finds
// the iteration, and each of its 40 bubbles keeps a slot (more than the 32 slots there used
// to be: every iteration evicted slots before they had the samples to be predicted).
TEST(BubblePredictorTest, ALongBurstOfEvenlySpacedWaitsDoesNotHideTheIteration) {
    constexpr Nanos kIter = 3850 * kNsPerMs;
    std::vector<Interval> observed;
    for (int i = 0; i < 20; ++i) {
        const Nanos it0 = kNsPerSec + i * kIter;
        observed.push_back({it0, it0 + 300 * kNsPerMs});  // fill
        for (int k = 0; k < 38; ++k) {
            const Nanos s = it0 + 400 * kNsPerMs + k * 80 * kNsPerMs;
            observed.push_back({s, s + 20 * kNsPerMs});
        }
        observed.push_back({it0 + 3600 * kNsPerMs, it0 + 3750 * kNsPerMs});  // drain
    }
    BubblePredictor p;
    const Nanos end = observed.back().end_ns;
    Live live = runLive(p, observed, kNsPerSec, end);
    const PeriodEstimate est = p.period(end);
    ASSERT_TRUE(est.locked());
    EXPECT_NEAR(static_cast<double>(est.period_ns), static_cast<double>(kIter), 1e6);
    EXPECT_EQ(p.slotCount(), 40u);
    const Accuracy a = measureAccuracy(observed, live.predicted, {kNsPerSec + 10 * kIter, end});
    EXPECT_GE(a.coverage, 0.95);
    EXPECT_GE(a.precision, 0.99);
}

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
    // The wait began 4 ms late: the window starts there, and keeps the slot's length.
    p.noteOpen(next + 54 * kNsPerMs);
    ASSERT_EQ(p.predict(next + 55 * kNsPerMs, &out), PredictionStatus::kOk);
    w = windowOf(next + 60 * kNsPerMs);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->start_ns, next + 55 * kNsPerMs);
    EXPECT_EQ(w->end_ns, next + 73 * kNsPerMs);
}

// An open window's end follows what has elapsed: once the wait outlasts the slot's short
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

// A wait that opens nearer a short bubble's slot but outlasts every length of it belongs to
// the long bubble next to it: the open window moves there (1F1B: 1 ms waits 20 ms before a
// 200 ms one).
TEST(BubblePredictorTest, OpenWaitOutlastingAShortSlotMovesToTheLongOne) {
    constexpr Nanos kLongP = 900 * kNsPerMs;
    BubblePredictor p = trainedOnOpen(kLongP, {{100, 101}, {121, 321}, {500, 600}}, 1 * kNsPerMs);
    const Nanos it0 = kNsPerSec + 29 * kLongP;
    // The short bubble did not happen this time; the long one began 13 ms early, 8 ms from the
    // short one's slot.
    const Nanos open = it0 + kLongP + 108 * kNsPerMs;
    const auto w = openWindowAt(p, open, open + 30 * kNsPerMs);
    ASSERT_TRUE(w.has_value());
    EXPECT_EQ(w->start_ns, open + 1 * kNsPerMs);
    EXPECT_EQ(w->end_ns, open + 199 * kNsPerMs);
}

// A wait that ran long shifts every bubble after it; the next bubble then opens far from its
// slot's phase, but it is the slot that comes next in order, and gets its window.
TEST(BubblePredictorTest, OpenWaitAfterAShiftedBubbleTakesTheNextSlotInOrder) {
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
// moves 13 ms: by phase the first 1 ms wait then lands on the second's slot, the second on
// the long one's, and the long wait finds its slot filled and gets no window. By the sequence
// (which slot came before, and the compute time since its end) each keeps its own.
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
// 13 ms the long wait ran over and lands 8 ms from the 270 ms bubble's slot; its phase from
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
            // The long wait gets its window: the 8 ms one before it did not fill its slot.
            ASSERT_TRUE(w.has_value());
            EXPECT_EQ(w->end_ns, late[k].start_ns + 269 * kMs);
        }
    });
}

// A slot with a single sample (a stray wait of a disturbed iteration) is not predicted; when
// an open wait lies nearer it than its own slot, it must still take its own slot, or it gets
// no window.
TEST(BubblePredictorTest, OpenWaitPrefersAPredictedSlotToANearerStrayOne) {
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
    // The short bubble opens 8 ms late (its compute ran long): 8 ms from its own slot, 5 ms
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
// short bubble: the slot that learned to follow that one gets the open window.
TEST(BubblePredictorTest, OpenWaitAfterASlowStretchTakesTheSlotThatFollowsInSequence) {
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

// An open wait that has outlasted every length of the slot it opened at is not that slot's
// bubble: it moves to the long one next to it at once, not only once it has also outlasted
// the slot's length slack (10 ms), which left the first 10 ms of such waits uncovered.
TEST(BubblePredictorTest, OpenWaitMovesAsSoonAsItOutlastsItsSlot) {
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

TEST(BubblePredictorTest, RejectsMalformedIntervals) {
    BubblePredictor p;
    EXPECT_EQ(p.observe({100, 50}).code(), Code::kInvalidArgument);
    ASSERT_TRUE(p.observe({100, 150}).isOk());
    EXPECT_EQ(p.observe({99, 200}).code(), Code::kInvalidArgument);
    EXPECT_TRUE(p.observe({100, 120}).isOk());
}

TEST(BubblePredictorTest, ValidatesConfig) {
    EXPECT_TRUE(validate(BubblePredictorConfig{}).isOk());
    BubblePredictorConfig c;
    c.min_slot_samples = c.slot_history + 1;
    EXPECT_EQ(validate(c).code(), Code::kInvalidArgument);
    c = {};
    c.horizon_iterations = 0;
    EXPECT_EQ(validate(c).code(), Code::kInvalidArgument);
    c = {};
    c.detector.tolerance = 0.5;
    EXPECT_EQ(validate(c).code(), Code::kInvalidArgument);
    c = {};
    c.slot_tolerance = 0.0;
    EXPECT_EQ(validate(c).code(), Code::kInvalidArgument);
    c = {};
    c.slot_tolerance_max_ns = 0;
    EXPECT_EQ(validate(c).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace atlas::sched
