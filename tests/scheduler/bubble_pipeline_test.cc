// BubblePipeline, the bubble publishing step every driver runs, and the scoring rule it
// shares with the tools (bubble_score.h): the step is the predictor plus the open-wait model
// as the plugin composed them, the set is republished only when it changed (confidence
// included, encoded as the channel does), a wait carries what the steps saw of it, and the
// running accuracy counts each window only while its set reigned.
#include "scheduler/bubble_pipeline.h"

#include <gtest/gtest.h>

#include <vector>

#include "scheduler/interval_accuracy.h"
#include "tests/scheduler/units.h"

namespace atlas::sched {
namespace {

using test_units::kMiB;
using test_units::kMs;
constexpr Nanos kIter = 100 * kMs;

// Iteration k of a 100 ms pattern from 1 s: a fill wait [5, 30) ms and a drain wait
// [60, 80) ms, each ended by a 1 MiB transfer whose first data lands 10 ms before its end.
TransferWait fill(int k) {
    const Nanos b = kNsPerSec + k * kIter;
    return {b + 5 * kMs, b + 30 * kMs, b + 20 * kMs, kMiB};
}
TransferWait drain(int k) {
    const Nanos b = kNsPerSec + k * kIter;
    return {b + 60 * kMs, b + 80 * kMs, b + 70 * kMs, kMiB};
}

// Steps the pipeline every millisecond over `iterations`, as the plugin's publisher does,
// from iteration `first`; each wait is seen open from its start and taken in at its end.
void run(BubblePipeline& p, int first, int iterations) {
    for (int k = first; k < first + iterations; ++k) {
        const TransferWait waits[] = {fill(k), drain(k)};
        for (Nanos t = kNsPerSec + k * kIter; t < kNsPerSec + (k + 1) * kIter; t += kMs) {
            TransferWait open;
            for (const TransferWait& w : waits) {
                if (w.end_ns == t) {
                    (void)p.take(w, t);
                }
                if (w.start_ns <= t && t < w.end_ns) {
                    open = {w.start_ns, 0, t >= w.transfer_start_ns ? w.transfer_start_ns : 0,
                            t >= w.transfer_start_ns ? w.transfer_bytes : 0};
                }
            }
            (void)p.decide(t, open);
        }
    }
}

TEST(BubblePipeline, DefaultsAreThePluginsLiveSettings) {
    const BubblePipelineConfig c;
    EXPECT_TRUE(validate(c).isOk());
    EXPECT_TRUE(c.predictor.confirm_open);
    EXPECT_TRUE(c.open_wait_rules);
    EXPECT_EQ(c.predictor.guard_ns, kDefaultBubbleGuardNs);
    EXPECT_EQ(c.step_interval_ns, kMs);
    BubblePipelineConfig bad;
    bad.step_interval_ns = 0;
    EXPECT_FALSE(validate(bad).isOk());
    bad = {};
    bad.predictor.max_tracks = 0;
    EXPECT_FALSE(validate(bad).isOk());
}

// The step is exactly the predictor's windows completed by the open-wait model, encoded as
// the channel carries them (confidence rounded to ppm).
TEST(BubblePipeline, DecidesThePredictorsWindowsCompletedByTheOpenWaitModel) {
    BubblePipeline p;
    BubblePredictor predictor;
    OpenWaitModel model;
    for (int k = 0; k < 30; ++k) {
        for (const TransferWait& w : {fill(k), drain(k)}) {
            (void)p.take(w, w.end_ns);
            ASSERT_TRUE(predictor.observe({w.start_ns, w.end_ns}).isOk());
            model.learn(w);
        }
    }
    // The fill wait of iteration 30 is open, its transfer seen 5 ms later than usual.
    const Nanos b = kNsPerSec + 30 * kIter;
    const TransferWait open{b + 5 * kMs, 0, b + 25 * kMs, kMiB};
    const Nanos now = b + 26 * kMs;
    const PipelineDecision& d = p.decide(now, open);
    ASSERT_EQ(d.status, PredictionStatus::kOk);
    EXPECT_TRUE(d.publish);
    predictor.noteOpen(open.start_ns);
    std::vector<PredictedWindow> want;
    Nanos track_end = 0;
    ASSERT_EQ(predictor.predict(now, &want, &track_end), PredictionStatus::kOk);
    EXPECT_EQ(track_end, open.start_ns + 25 * kMs) << "the fill track's waits last 25 ms";
    completeOpenWindow(model, open, track_end, kDefaultBubbleGuardNs, now,
                       predictor.period(now).cycleOf(open.start_ns), &want);
    ASSERT_EQ(d.windows.size(), want.size());
    bool saw_open = false;
    for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(d.windows[i].start_ns, want[i].start_ns);
        EXPECT_EQ(d.windows[i].end_ns, want[i].end_ns);
        EXPECT_EQ(d.windows[i].confidence_ppm, channel::toPpm(want[i].confidence));
        EXPECT_EQ(d.windows[i].open, want[i].open);
        saw_open = saw_open || d.windows[i].open;
    }
    ASSERT_TRUE(saw_open);
    EXPECT_EQ(d.windows.front().end_ns, b + 35 * kMs - kDefaultBubbleGuardNs)
        << "the transfer's end: first data + 10 ms per MiB, past the track's 30 ms";
}

TEST(BubblePipeline, PublishesOnlyWhenTheSetChanged) {
    BubblePipeline p;
    run(p, 0, 30);
    const Nanos b = kNsPerSec + 30 * kIter;
    const TransferWait open{b + 5 * kMs, 0, 0, 0};
    EXPECT_TRUE(p.decide(b + 6 * kMs, open).publish) << "the wait opened";
    EXPECT_FALSE(p.decide(b + 6 * kMs, open).publish) << "same inputs, same set";
    EXPECT_FALSE(p.decide(b + 7 * kMs, open).publish) << "nothing moved in a millisecond";
    // Its window withdrawn (the step no longer sees the wait) is a change.
    EXPECT_TRUE(p.decide(b + 8 * kMs, {}).publish);
}

TEST(BubblePipeline, TheSetChangedRuleComparesEveryPublishedFieldButTheIteration) {
    const PublishedWindow a{10, 20, 900000, 4, true};
    EXPECT_TRUE(sameWindow(a, a));
    PublishedWindow b = a;
    b.iteration = 5;
    EXPECT_TRUE(sameWindow(a, b)) << "the iteration follows from the start";
    for (int field = 0; field < 4; ++field) {
        b = a;
        switch (field) {
            case 0:
                b.start_ns = 11;
                break;
            case 1:
                b.end_ns = 21;
                break;
            case 2:
                b.confidence_ppm = 900001;
                break;
            default:
                b.open = false;
        }
        EXPECT_FALSE(sameWindow(a, b)) << "field " << field;
    }
}

// What the steps saw of a wait comes back when it is taken in: the replay's inputs.
TEST(BubblePipeline, ATakenWaitCarriesWhatTheStepsSawOfIt) {
    BubblePipeline p;
    const TransferWait w{100 * kMs, 130 * kMs, 120 * kMs, kMiB};
    (void)p.decide(101 * kMs, {w.start_ns, 0, 0, 0});
    (void)p.decide(121 * kMs, {w.start_ns, 0, w.transfer_start_ns, w.transfer_bytes});
    (void)p.decide(129 * kMs, {w.start_ns, 0, w.transfer_start_ns, w.transfer_bytes});
    (void)p.decide(131 * kMs, {});  // it ended; not taken in yet
    const TakenWait t = p.take(w, 132 * kMs);
    EXPECT_EQ(t.trace.taken_ns, 132 * kMs);
    EXPECT_EQ(t.trace.open_from_ns, 101 * kMs);
    EXPECT_EQ(t.trace.open_to_ns, 129 * kMs);
    EXPECT_EQ(t.trace.transfer_seen_ns, 121 * kMs);
    EXPECT_EQ(t.iteration, channel::kUnknownIteration) << "no period yet";
    // A wait never seen open (shorter than a step) says so.
    const TakenWait u = p.take({140 * kMs, 140 * kMs + 10, 0, 0}, 141 * kMs);
    EXPECT_EQ(u.trace.open_from_ns, 0);
    EXPECT_EQ(u.trace.taken_ns, 141 * kMs);
}

TEST(BubblePipeline, RunningAccuracyScoresTheEffectiveWindows) {
    BubblePipeline p;
    EXPECT_EQ(p.stats(kNsPerSec).coverage_ppm, channel::kUnknownPpm);
    run(p, 0, 40);
    const PipelineStats s = p.stats(kNsPerSec + 40 * kIter);
    EXPECT_NEAR(static_cast<double>(s.period_ns), static_cast<double>(kIter), 1e5);
    EXPECT_NEAR(s.idle_fraction_ppm / 1e6, 0.45, 0.01);
    ASSERT_NE(s.coverage_ppm, channel::kUnknownPpm);
    // Each wait is covered from the step after it opened (1 ms) to its predicted end, less
    // the guard bands: about 93% of 25 ms and 90% of 20 ms; nothing outside a wait.
    EXPECT_GE(s.coverage_ppm, 880000u);
    EXPECT_GE(s.precision_ppm, 995000u);
    EXPECT_NE(s.iteration, channel::kUnknownIteration);
}

TEST(BubbleScore, EffectivePredictionsClipEachSetToItsReign) {
    std::vector<TimedPredictionSet> sets;
    sets.push_back({100, {{50, 150}, {300, 400}}});  // [50,100) too late; [300,400) superseded
    sets.push_back({200, {{250, 350}}});
    const std::vector<Interval> want = {{100, 150}, {250, 350}};
    EXPECT_EQ(effectivePredictions(sets, 1000), want);
    const std::vector<Interval> want_until = {{100, 150}, {250, 300}};
    EXPECT_EQ(effectivePredictions(sets, 300), want_until);
    EXPECT_TRUE(effectivePredictions({}, 1000).empty());
}

TEST(BubbleScore, EffectiveWindowsMergeRepublishedWindowsAndKeepTheNewest) {
    EffectiveWindows e(2);
    EXPECT_EQ(e.firstStartNs(0), kNever);
    // One window republished every 10 ns is one stretch, not one per set.
    for (Nanos t = 0; t < 100; t += 10) {
        const std::vector<Interval> w = {{50, 200}};
        e.publish(t, w);
    }
    std::vector<Interval> out;
    e.collect(150, &out);
    EXPECT_EQ(out, (std::vector<Interval>{{50, 150}}));
    e.publish(300, std::vector<Interval>{{400, 450}});
    e.publish(500, std::vector<Interval>{{600, 650}});
    e.publish(700, {});
    out.clear();
    e.collect(1000, &out);
    EXPECT_EQ(out, (std::vector<Interval>{{400, 450}, {600, 650}})) << "capacity 2: newest kept";
    EXPECT_EQ(e.firstStartNs(1000), 400);
}

}  // namespace
}  // namespace atlas::sched
