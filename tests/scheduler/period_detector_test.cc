#include "scheduler/period_detector.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/scheduler/trace_gen.h"

namespace atlas::sched {
namespace {

using testing::generate;
using testing::PatternSpec;
using testing::Rng;
using testing::Trace;

constexpr Nanos kP = 100 * kNsPerMs;

// Feeds a trace's observed starts; returns the index of the first event after which the
// detector was locked (or -1).
struct FeedResult {
    int first_lock_event = -1;
    int locked_events = 0;       // events after which the detector was locked
    int events_after_lock = 0;   // events from the first lock on
    double max_rel_error = 0.0;  // |period - truth| / truth while locked
};

FeedResult feed(PeriodDetector& d, const std::vector<Interval>& events, Nanos truth_period,
                size_t from = 0, size_t to = SIZE_MAX) {
    FeedResult r;
    to = std::min(to, events.size());
    for (size_t i = from; i < to; ++i) {
        EXPECT_TRUE(d.addEvent(events[i].start_ns).isOk());
        const PeriodEstimate e = d.estimate(events[i].start_ns);
        if (r.first_lock_event >= 0) {
            ++r.events_after_lock;
        }
        if (e.locked()) {
            if (r.first_lock_event < 0) {
                r.first_lock_event = static_cast<int>(i - from);
                r.events_after_lock = 1;
            }
            ++r.locked_events;
            const double err = std::abs(static_cast<double>(e.period_ns - truth_period)) /
                               static_cast<double>(truth_period);
            r.max_rel_error = std::max(r.max_rel_error, err);
        }
    }
    return r;
}

TEST(PeriodDetectorTest, LocksOnCleanSingleEventStream) {
    PeriodDetector d;
    Rng rng(1);
    PatternSpec spec;
    Trace t = generate(spec, 20, kNsPerSec, rng);
    FeedResult r = feed(d, t.observed, kP);
    // The history must span min_cycles (4) periods, and the matches must be significant
    // against the chance level of +-15% windows after a Bonferroni correction: nine events.
    EXPECT_EQ(r.first_lock_event, 8);
    EXPECT_EQ(r.locked_events, 12);
    const PeriodEstimate e = d.estimate(t.observed.back().start_ns);
    EXPECT_EQ(e.period_ns, kP);
    EXPECT_EQ(e.anchor_ns, t.observed.back().start_ns);
    EXPECT_GT(e.confidence, 0.9);
    EXPECT_EQ(e.cycleOf(e.anchor_ns + kP / 2), e.anchor_cycle);
    EXPECT_EQ(e.cycleStartNs(e.anchor_cycle + 2), e.anchor_ns + 2 * kP);
}

// +-10% iteration-length jitter and 20% of events dropped, over several seeds.
TEST(PeriodDetectorTest, RobustToJitterAndDrops) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
        SCOPED_TRACE(seed);
        PeriodDetector d;
        Rng rng(seed);
        PatternSpec spec;
        spec.iteration_jitter = 0.10;
        spec.drop = 0.20;
        Trace t = generate(spec, 200, kNsPerSec, rng);
        FeedResult r = feed(d, t.observed, kP);
        ASSERT_GE(r.first_lock_event, 0);
        EXPECT_LE(r.first_lock_event, 30);  // ~40 iterations at 20% drops
        // A long run of drops (half the events of a few iterations) may break the lock
        // briefly; it must come back.
        EXPECT_GE(r.locked_events, r.events_after_lock * 90 / 100);
        EXPECT_LE(r.max_rel_error, 0.06);
    }
}

// Three bubbles per iteration (fill, middle, drain) must lock on the iteration, not on a
// sub-period between bubbles.
TEST(PeriodDetectorTest, LocksOnIterationWithSeveralEventsPerPeriod) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
        SCOPED_TRACE(seed);
        PeriodDetectorConfig cfg;
        cfg.tolerance = 0.05;
        PeriodDetector d(cfg);
        Rng rng(seed);
        PatternSpec spec;
        spec.offsets = {0.0, 0.35, 0.8};
        spec.iteration_jitter = 0.03;
        spec.event_jitter = 0.01;
        spec.drop = 0.2;
        Trace t = generate(spec, 100, kNsPerSec, rng);
        FeedResult r = feed(d, t.observed, kP);
        ASSERT_GE(r.first_lock_event, 0);
        EXPECT_LE(r.first_lock_event, 25);
        EXPECT_GE(r.locked_events, r.events_after_lock * 95 / 100);
        EXPECT_LE(r.max_rel_error, 0.03);
    }
}

// A micro-batch burst (8 transfers 2% of the period apart, then a long gap) must lock on the
// iteration, not on the burst spacing. A single burst is locally periodic, so a lock on the
// spacing inside the first burst is allowed; the next burst refutes it (its gap would be a
// "pause" in the middle of the history) and the detector settles on the iteration.
TEST(PeriodDetectorTest, LocksOnIterationNotBurstSpacing) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
        SCOPED_TRACE(seed);
        PeriodDetector d;
        Rng rng(seed);
        PatternSpec spec;
        spec.offsets = {0.0, 0.02, 0.04, 0.06, 0.08, 0.10, 0.12, 0.14};
        spec.iteration_jitter = 0.05;
        spec.event_jitter = 0.002;
        Trace t = generate(spec, 40, kNsPerSec, rng);
        constexpr size_t kSettle = 8 * 8;  // events of the first 8 iterations
        feed(d, t.observed, kP, 0, kSettle);
        FeedResult r = feed(d, t.observed, kP, kSettle);
        EXPECT_EQ(r.first_lock_event, 0);
        EXPECT_EQ(r.locked_events, static_cast<int>(t.observed.size() - kSettle));
        EXPECT_LE(r.max_rel_error, 0.05);
        const PeriodEstimate e = d.estimate(t.observed.back().start_ns);
        ASSERT_TRUE(e.locked());
        // The anchor is the first transfer of an iteration (after the long gap).
        const Nanos last_burst_start = t.observed[t.observed.size() - 8].start_ns;
        EXPECT_EQ(e.anchor_ns, last_burst_start);
    }
}

TEST(PeriodDetectorTest, LosesLockOnPeriodChangeAndRelocks) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
        SCOPED_TRACE(seed);
        PeriodDetector d;
        Rng rng(seed);
        PatternSpec a;
        a.iteration_jitter = 0.05;
        a.drop = 0.1;
        Trace t1 = generate(a, 40, kNsPerSec, rng);
        FeedResult r1 = feed(d, t1.observed, kP);
        ASSERT_TRUE(d.estimate(t1.end_ns).locked());
        EXPECT_LE(r1.max_rel_error, 0.05);

        PatternSpec b = a;
        b.period_ns = 150 * kNsPerMs;
        Trace t2 = generate(b, 60, t1.end_ns, rng);
        const uint64_t old_epoch = d.estimate(t1.end_ns).epoch;
        // The old lock must end (reported as kPatternChanged, or replaced at once by a lock
        // on the new period in a new epoch) and the new period must lock.
        int relock_event = -1;
        for (size_t i = 0; i < t2.observed.size(); ++i) {
            ASSERT_TRUE(d.addEvent(t2.observed[i].start_ns).isOk());
            const PeriodEstimate e = d.estimate(t2.observed[i].start_ns);
            if (!e.locked()) {
                EXPECT_EQ(e.state, LockState::kLost);
                EXPECT_EQ(e.reason, LossReason::kPatternChanged);
                continue;
            }
            const bool on_new = std::abs(static_cast<double>(e.period_ns) - 150e6) <= 9e6;
            const bool on_old = std::abs(static_cast<double>(e.period_ns) - 100e6) <= 6e6;
            EXPECT_TRUE(on_new || on_old) << e.period_ns;
            if (on_new && relock_event < 0) {
                relock_event = static_cast<int>(i);
                EXPECT_GT(e.epoch, old_epoch);
            }
        }
        ASSERT_GE(relock_event, 0);
        EXPECT_LE(relock_event, 25);
        const PeriodEstimate e = d.estimate(t2.observed.back().start_ns);
        EXPECT_TRUE(e.locked());
        EXPECT_NEAR(static_cast<double>(e.period_ns), 150e6, 150e6 * 0.05);
    }
}

TEST(PeriodDetectorTest, ReportsPauseAndRelocksAfterIt) {
    PeriodDetector d;
    Rng rng(7);
    PatternSpec spec;
    spec.iteration_jitter = 0.05;
    Trace t1 = generate(spec, 40, kNsPerSec, rng);
    feed(d, t1.observed, kP);
    const Nanos last = t1.observed.back().start_ns;
    ASSERT_TRUE(d.estimate(last).locked());
    const uint64_t epoch = d.estimate(last).epoch;
    // Silence: still locked within pause_cycles (8) periods, lost (pause) after.
    EXPECT_TRUE(d.estimate(last + 7 * kP).locked());
    const PeriodEstimate paused = d.estimate(last + 9 * kP);
    EXPECT_EQ(paused.state, LockState::kLost);
    EXPECT_EQ(paused.reason, LossReason::kPause);
    EXPECT_EQ(paused.confidence, 0.0);

    // Training resumes 5 s later with the same period: the old history is dropped (the lock
    // was mature), re-lock needs relock_cycles (3) periods instead of min_cycles (4), and the
    // epoch changes.
    Trace t2 = generate(spec, 20, last + 5 * kNsPerSec, rng);
    ASSERT_TRUE(d.addEvent(t2.observed[0].start_ns).isOk());
    EXPECT_EQ(d.estimate(t2.observed[0].start_ns).state, LockState::kLost);
    EXPECT_EQ(d.estimate(t2.observed[0].start_ns).reason, LossReason::kPause);
    EXPECT_EQ(d.historySize(), 1u);
    FeedResult r = feed(d, t2.observed, kP, 1);
    ASSERT_GE(r.first_lock_event, 0);
    EXPECT_LE(r.first_lock_event, 8);
    const PeriodEstimate e = d.estimate(t2.observed.back().start_ns);
    EXPECT_TRUE(e.locked());
    EXPECT_GT(e.epoch, epoch);
}

TEST(PeriodDetectorTest, DoesNotLockOnRandomEvents) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
        SCOPED_TRACE(seed);
        PeriodDetector d;
        Rng rng(seed);
        Nanos t = kNsPerSec;
        int locked = 0;
        for (int i = 0; i < 400; ++i) {
            // Exponential inter-arrival with mean 100 ms.
            t += static_cast<Nanos>(-std::log(1.0 - rng.uniform()) * 100e6) + 1;
            ASSERT_TRUE(d.addEvent(t).isOk());
            locked += d.estimate(t).locked() ? 1 : 0;
        }
        // At most a brief false lock, dropped once its tracked matches fall to chance level.
        EXPECT_LE(locked, 16);
    }
}

TEST(PeriodDetectorTest, RejectsTimeGoingBackwards) {
    PeriodDetector d;
    ASSERT_TRUE(d.addEvent(1000).isOk());
    const Status s = d.addEvent(999);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_EQ(d.historySize(), 1u);
    EXPECT_TRUE(d.addEvent(1000).isOk());  // equal times are fine
}

TEST(PeriodDetectorTest, ValidatesConfig) {
    EXPECT_TRUE(validate(PeriodDetectorConfig{}).isOk());
    PeriodDetectorConfig c;
    c.tolerance = 0.0;
    EXPECT_EQ(validate(c).code(), Code::kInvalidArgument);
    c = {};
    c.min_period_ns = c.max_period_ns;
    EXPECT_EQ(validate(c).code(), Code::kInvalidArgument);
    c = {};
    c.relock_cycles = c.min_cycles + 1;
    EXPECT_EQ(validate(c).code(), Code::kInvalidArgument);
    c = {};
    c.loss_score = c.lock_score;
    EXPECT_EQ(validate(c).code(), Code::kInvalidArgument);
    c = {};
    c.history = 4;
    EXPECT_EQ(validate(c).code(), Code::kInvalidArgument);
}

TEST(PeriodDetectorTest, ResetForgetsEverything) {
    PeriodDetector d;
    Rng rng(3);
    Trace t = generate(PatternSpec{}, 10, kNsPerSec, rng);
    feed(d, t.observed, kP);
    ASSERT_TRUE(d.estimate(t.end_ns).locked());
    d.reset();
    EXPECT_EQ(d.historySize(), 0u);
    EXPECT_EQ(d.estimate(t.end_ns).state, LockState::kSearching);
    EXPECT_TRUE(d.addEvent(0).isOk());  // time may restart after reset
}

}  // namespace
}  // namespace atlas::sched
