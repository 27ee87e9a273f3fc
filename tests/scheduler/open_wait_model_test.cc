// OpenWaitModel and completeOpenWindow: what is learned from finished waits, the early
// quantile of the samples that outlast the open wait, and how the open wait's window is
// extended to its transfer's end or made from its elapsed time when no track gave it one.
#include <gtest/gtest.h>

#include <vector>

#include "scheduler/open_wait_model.h"
#include "tests/scheduler/units.h"

namespace atlas::sched {
namespace {

using test_units::kMiB;
using test_units::kMs;

// A finished wait of `length_ms` whose 1 MiB transfer began `transfer_ms` before its end.
TransferWait finished(int i, Nanos length_ms, Nanos transfer_ms) {
    const Nanos start = (i + 1) * 1000 * kMs;
    const Nanos end = start + length_ms * kMs;
    return {start, end, end - transfer_ms * kMs, kMiB};
}

// Waits of 30 ms whose 1 MiB crossed in `ms_per_mib`.
OpenWaitModel trained(Nanos ms_per_mib) {
    OpenWaitModel m;
    for (int i = 0; i < 16; ++i) {
        m.learn(finished(i, 30, ms_per_mib));
    }
    return m;
}

TEST(OpenWaitModel, LearnsWaitLengthsAndTheTransfersLargeEnoughToShowTheRate) {
    OpenWaitModel m;
    m.learn({200 * kMs, 230 * kMs, 220 * kMs, 4096});  // small: latency, not rate
    m.learn({300 * kMs, 330 * kMs, 0, 0});             // transfer not seen
    m.learn({400 * kMs, 430 * kMs, 430 * kMs, kMiB});  // landed with its first data: no time
    EXPECT_EQ(m.transferSamples(), 0u);
    EXPECT_EQ(m.waitSamples(), 3u);
    m.learn({500 * kMs, 530 * kMs, 520 * kMs, kMiB});
    m.learn({600 * kMs, 630 * kMs, 600 * kMs, kMiB});  // data was there when the wait opened
    EXPECT_EQ(m.transferSamples(), 2u);
    m.learn({700 * kMs, 700 * kMs, 0, 0});  // empty wait
    EXPECT_EQ(m.waitSamples(), 5u);
}

TEST(OpenWaitModel, TransferEndIsAnEarlyQuantileOfTheLearnedTimePerByte) {
    OpenWaitModel m;  // quantile 0.25, 8 samples needed
    const TransferWait open{50000 * kMs, 0, 50020 * kMs, 2 * kMiB};
    const Nanos now = 50021 * kMs;
    for (int ms = 10; ms < 17; ++ms) {
        m.learn(finished(ms, 50, ms));
    }
    EXPECT_EQ(m.transferEnd(open, now), 0) << "7 samples are too few";
    m.learn(finished(17, 50, 17));
    // Samples 10..17 ms per MiB: the 25th percentile (element 1 of 8) is 11 ms per MiB.
    EXPECT_EQ(m.transferEnd(open, now), 50020 * kMs + 22 * kMs);
    EXPECT_EQ(m.transferEnd({50000 * kMs, 0, 0, 0}, now), 0) << "no data has arrived yet";
    EXPECT_EQ(m.transferEnd({50000 * kMs, 0, 50020 * kMs, 1024}, now), 0) << "too small";
    EXPECT_EQ(m.transferEnd(open, 50060 * kMs), 0) << "slower than every transfer learned";
}

TEST(OpenWaitModel, OnceTheDataIsNotAllBufferedItPredictsAWanCrossing) {
    OpenWaitModel m;
    // Half the waits found their 1 MiB mostly buffered (1 ms), half waited for it to cross
    // the WAN (17 ms).
    for (int i = 0; i < 16; ++i) {
        m.learn(finished(i, 50, i % 2 ? 17 : 1));
    }
    const TransferWait open{100000 * kMs, 0, 100010 * kMs, kMiB};
    EXPECT_EQ(m.transferEnd(open, 100010 * kMs + kMs / 2), 100011 * kMs)
        << "just arrived: it may be buffered";
    EXPECT_EQ(m.transferEnd(open, 100013 * kMs), 100027 * kMs) << "3 ms on, it is crossing";
}

TEST(OpenWaitModel, ElapsedEndIsAnEarlyQuantileOfTheWaitsThatLastedLonger) {
    OpenWaitModel m;
    // Short waits of 1-4 ms and long ones of 100-400 ms.
    for (int i = 0; i < 4; ++i) {
        m.learn(finished(i, i + 1, 0));
        m.learn(finished(i + 4, 100 * (i + 1), 0));
    }
    const TransferWait open{50000 * kMs, 0, 0, 0};
    // At the start every sample outlasts it: element 1 of 8 (2 ms).
    EXPECT_EQ(m.elapsedEnd(open, 50000 * kMs), 50002 * kMs);
    // After 10 ms only the long ones do: element 0 of 4 (100 ms).
    EXPECT_EQ(m.elapsedEnd(open, 50010 * kMs), 50100 * kMs);
    EXPECT_EQ(m.elapsedEnd(open, 50500 * kMs), 0) << "longer than every wait learned";
    EXPECT_EQ(m.elapsedEnd({}, 50010 * kMs), 0) << "no wait is open";
}

TEST(OpenWaitModel, ForgetsTheOldestSamples) {
    OpenWaitConfig cfg;
    cfg.history = 4;
    cfg.min_samples = 4;
    cfg.quantile = 0.0;
    OpenWaitModel m(cfg);
    for (int i = 0; i < 4; ++i) {
        m.learn(finished(i, 50, 5));
    }
    for (int i = 4; i < 8; ++i) {
        m.learn(finished(i, 50, 20));
    }
    EXPECT_EQ(m.transferEnd({90000 * kMs, 0, 90010 * kMs, kMiB}, 90011 * kMs), 90030 * kMs)
        << "the 5 ms transfers are no longer among the last 4";
}

TEST(OpenWaitConfig, RejectsBadValues) {
    OpenWaitConfig cfg;
    EXPECT_TRUE(validate(cfg).isOk());
    cfg.min_samples = cfg.history + 1;
    EXPECT_FALSE(validate(cfg).isOk());
    cfg = {};
    cfg.quantile = 1.5;
    EXPECT_FALSE(validate(cfg).isOk());
}

TEST(CompleteOpenWindow, TheOpenWindowLastsUntilItsTransferLands) {
    const OpenWaitModel m = trained(10);
    const Nanos guard = kMs;
    // The track said 25 ms; the transfer began late, at 40 ms: the wait ends at 50 ms.
    std::vector<PredictedWindow> w = {{6 * kMs, 29 * kMs, 0.9, 7, true},
                                      {61 * kMs, 79 * kMs, 0.9, 7, false}};
    completeOpenWindow(m, {5 * kMs, 0, 40 * kMs, kMiB}, 0, guard, 41 * kMs, 7, &w);
    ASSERT_EQ(w.size(), 2u);
    EXPECT_EQ(w[0].start_ns, 6 * kMs);
    EXPECT_EQ(w[0].end_ns, 49 * kMs);
    EXPECT_EQ(w[1].end_ns, 79 * kMs) << "other windows are left alone";
    // A transfer that began early does not cut the track's window short, and the elapsed
    // time does not touch a window the track gave.
    w = {{6 * kMs, 29 * kMs, 0.9, 7, true}};
    completeOpenWindow(m, {5 * kMs, 0, 12 * kMs, kMiB}, 0, guard, 13 * kMs, 7, &w);
    EXPECT_EQ(w[0].end_ns, 29 * kMs);
}

TEST(CompleteOpenWindow, AWaitWithNoWindowGetsOneInPlaceOfThePlansItOverlaps) {
    const OpenWaitModel m = trained(10);  // waits of 30 ms
    // The predictor placed the wait open since 200 ms in no track; a planned window ahead
    // overlaps what is now known to be this wait, one after it does not.
    const std::vector<PredictedWindow> plans = {{220 * kMs, 240 * kMs, 0.9, 3, false},
                                                {300 * kMs, 320 * kMs, 0.9, 3, false}};
    std::vector<PredictedWindow> w = plans;
    completeOpenWindow(m, {200 * kMs, 0, 0, 0}, 0, kMs, 202 * kMs, 3, &w);
    ASSERT_EQ(w.size(), 2u);
    EXPECT_EQ(w[0].start_ns, 201 * kMs);
    EXPECT_EQ(w[0].end_ns, 229 * kMs) << "the usual 30 ms wait, less the guard";
    EXPECT_TRUE(w[0].open);
    EXPECT_EQ(w[0].iteration, 3);
    EXPECT_DOUBLE_EQ(w[0].confidence, m.confidence());
    EXPECT_EQ(w[1].start_ns, 300 * kMs);
    // Its transfer starts late: the window lasts until it lands.
    w = plans;
    completeOpenWindow(m, {200 * kMs, 0, 225 * kMs, kMiB}, 0, kMs, 226 * kMs, 3, &w);
    ASSERT_EQ(w.size(), 2u);
    EXPECT_EQ(w[0].end_ns, 234 * kMs);
}

// A wait its track explains but gave no window (it is over, or out of the horizon): the lengths
// of other waits give it one only up to where its track says it ends; its transfer's end
// counts in full.
TEST(CompleteOpenWindow, AWaitItsTrackExplainsEndsWhereItsTrackSays) {
    const OpenWaitModel m = trained(10);  // waits of 30 ms
    std::vector<PredictedWindow> w;
    completeOpenWindow(m, {200 * kMs, 0, 0, 0}, 202 * kMs, kMs, 202 * kMs, 3, &w);
    EXPECT_TRUE(w.empty()) << "its track says it ends at 2 ms: the window is over";
    completeOpenWindow(m, {200 * kMs, 0, 0, 0}, 220 * kMs, kMs, 202 * kMs, 3, &w);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].end_ns, 219 * kMs) << "capped where its track says (20 ms), not at 30 ms";
    w.clear();
    completeOpenWindow(m, {200 * kMs, 0, 225 * kMs, kMiB}, 202 * kMs, kMs, 226 * kMs, 3, &w);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_EQ(w[0].start_ns, 201 * kMs);
    EXPECT_EQ(w[0].end_ns, 234 * kMs) << "first data + 10 ms per MiB - 1 ms guard";
    EXPECT_TRUE(w[0].open);
}

TEST(CompleteOpenWindow, NothingChangesWithoutAKnownFutureEnd) {
    const std::vector<PredictedWindow> before = {{500 * kMs, 520 * kMs, 0.9, 7, false}};
    auto same = [&](const std::vector<PredictedWindow>& w) {
        return w.size() == 1 && w[0].start_ns == before[0].start_ns &&
               w[0].end_ns == before[0].end_ns;
    };
    std::vector<PredictedWindow> w = before;
    completeOpenWindow(OpenWaitModel(), {5 * kMs, 0, 10 * kMs, kMiB}, 0, kMs, 11 * kMs, 7, &w);
    EXPECT_TRUE(same(w)) << "nothing learned yet";
    const OpenWaitModel m = trained(10);
    completeOpenWindow(m, {5 * kMs, 0, 0, 0}, 0, kMs, 60 * kMs, 7, &w);
    EXPECT_TRUE(same(w)) << "longer than every wait, and its data has not arrived";
    completeOpenWindow(m, {5 * kMs, 0, 10 * kMs, kMiB}, 0, kMs, 36 * kMs, 7, &w);
    EXPECT_TRUE(same(w)) << "overdue: both ends have passed";
    completeOpenWindow(m, {0, 0, 10 * kMs, kMiB}, 0, kMs, 11 * kMs, 7, &w);
    EXPECT_TRUE(same(w)) << "no wait is open";
}

}  // namespace
}  // namespace atlas::sched
