// transport/train.h: when the receiver's path-rate sample opens, is cut, ends and is spoiled.
// Every input is synthetic: the clock, the kernel's counts, the comm's counters.
#include <gtest/gtest.h>

#include "transport/train.h"

namespace atlas::transport {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr Nanos kMs = kNsPerMs;

KernelCount kc(uint64_t bytes, uint64_t ooo = 0) {
    return KernelCount{bytes, ooo};
}

TEST(MessageTrain, OpensForAWaitedForMessageOfASamplesSizeAtABoundedRate) {
    MessageTrain t;
    EXPECT_TRUE(t.canOpen(kMiB, false, 0));
    EXPECT_FALSE(t.canOpen(kMiB - 1, false, 0)) << "below a sample's size";
    EXPECT_FALSE(t.canOpen(4 * kMiB, true, 0)) << "read from a parked stream";
    t.open(7, 100 * kMs, kc(0), 0, {});
    EXPECT_TRUE(t.isOpen());
    EXPECT_EQ(t.seq(), 7u);
    EXPECT_FALSE(t.canOpen(4 * kMiB, false, 200 * kMs)) << "one train at a time";
    EXPECT_FALSE(t.close(101 * kMs, kMiB / 2, kc(kMiB / 2), {})) << "a message below 1 MiB";
    EXPECT_FALSE(t.isOpen());
    EXPECT_FALSE(t.canOpen(4 * kMiB, false, 104 * kMs)) << "within 5 ms of the last open";
    EXPECT_TRUE(t.canOpen(4 * kMiB, false, 105 * kMs));
}

TEST(MessageTrain, AMessageThatEndsWithinTheSpanIsOneSample) {
    MessageTrain t;
    t.open(1, 10 * kMs, kc(1000), 0, {});
    EXPECT_FALSE(t.cutDue(30 * kMs, 3 * kMiB)) << "the span (200 ms) has not passed";
    const auto s = t.close(31 * kMs, 3 * kMiB, kc(1000 + 3 * kMiB), {});
    ASSERT_TRUE(s);
    EXPECT_EQ(s->bytes, 3 * kMiB);
    EXPECT_EQ(s->dispersion_ns, 21 * kMs);
    EXPECT_FALSE(t.isOpen());
}

TEST(MessageTrain, ALongMessageIsCutIntoPartsOfTheSpan) {
    MessageTrain t(TrainRules{200 * kMs});
    t.open(1, 0, kc(0), 0, {});
    EXPECT_FALSE(t.cutDue(199 * kMs, 10 * kMiB)) << "before the span";
    EXPECT_FALSE(t.cutDue(300 * kMs, kMiB - 1)) << "less than a sample's worth read";
    ASSERT_TRUE(t.cutDue(200 * kMs, kMiB));
    const auto first = t.cut(210 * kMs, kc(25 * kMiB), 24 * kMiB, {});
    ASSERT_TRUE(first);
    EXPECT_EQ(first->bytes, 25 * kMiB);
    EXPECT_EQ(first->dispersion_ns, 210 * kMs);
    // The next part starts at the cut, from its counts.
    ASSERT_TRUE(t.isOpen());
    EXPECT_FALSE(t.cutDue(400 * kMs, 30 * kMiB)) << "the next part's span runs from the cut";
    EXPECT_FALSE(t.cutDue(410 * kMs, 24 * kMiB + kMiB - 1));
    ASSERT_TRUE(t.cutDue(410 * kMs, 30 * kMiB));
    const auto second = t.cut(415 * kMs, kc(50 * kMiB), 49 * kMiB, {});
    ASSERT_TRUE(second);
    EXPECT_EQ(second->bytes, 25 * kMiB);
    EXPECT_EQ(second->dispersion_ns, 205 * kMs);
    // The last part, at the message's end.
    const auto last = t.close(500 * kMs, 64 * kMiB, kc(60 * kMiB), {});
    ASSERT_TRUE(last);
    EXPECT_EQ(last->bytes, 10 * kMiB);
    EXPECT_EQ(last->dispersion_ns, 85 * kMs);
}

TEST(MessageTrain, APartThatSawASegmentOutOfOrderRunsFiveSpans) {
    MessageTrain t(TrainRules{200 * kMs});
    t.open(1, 0, kc(0, 3), 0, {});
    ASSERT_TRUE(t.cutDue(200 * kMs, 20 * kMiB));
    EXPECT_FALSE(t.cut(200 * kMs, kc(30 * kMiB, 4), 20 * kMiB, {}))
        << "a 200 ms part across a repaired hole is no sample";
    ASSERT_TRUE(t.isOpen()) << "the train runs on";
    EXPECT_FALSE(t.cutDue(999 * kMs, 100 * kMiB));
    ASSERT_TRUE(t.cutDue(1000 * kMs, 100 * kMiB));
    const auto s = t.cut(1000 * kMs, kc(120 * kMiB, 9), 119 * kMiB, {});
    ASSERT_TRUE(s) << "after five spans the part is a sample, holes or not";
    EXPECT_EQ(s->bytes, 120 * kMiB);
    EXPECT_EQ(s->dispersion_ns, 1000 * kMs);
    // Back to one span for the next part, which is clean.
    ASSERT_TRUE(t.cutDue(1200 * kMs, 125 * kMiB));
    const auto next = t.cut(1200 * kMs, kc(145 * kMiB, 9), 144 * kMiB, {});
    ASSERT_TRUE(next);
    EXPECT_EQ(next->bytes, 25 * kMiB);
}

TEST(MessageTrain, AMessageShorterThanFiveSpansWithASegmentOutOfOrderIsNoSample) {
    // 2.5 MiB across a repair: 21 ms of bytes plus a 50 ms round trip reads a third of the link.
    MessageTrain lossy(TrainRules{200 * kMs});
    lossy.open(1, 0, kc(0, 3), 0, {});
    EXPECT_FALSE(lossy.close(71 * kMs, 2560 * 1024, kc(2560 * 1024, 4), {}));
    EXPECT_FALSE(lossy.isOpen());
    MessageTrain clean(TrainRules{200 * kMs});
    clean.open(1, 0, kc(0, 3), 0, {});
    EXPECT_TRUE(clean.close(21 * kMs, 2560 * 1024, kc(2560 * 1024, 3), {}));
    // As long as five spans, a lossy message is a sample (its holes weigh a fifth).
    MessageTrain slow(TrainRules{200 * kMs});
    slow.open(1, 0, kc(0, 0), 0, {});
    EXPECT_TRUE(slow.close(1000 * kMs, 60 * kMiB, kc(60 * kMiB, 2), {}));
    // A long message's last part is held to the same rule.
    MessageTrain tail(TrainRules{200 * kMs});
    tail.open(1, 0, kc(0), 0, {});
    ASSERT_TRUE(tail.cut(200 * kMs, kc(25 * kMiB), 25 * kMiB, {}));
    EXPECT_FALSE(tail.close(300 * kMs, 40 * kMiB, kc(37 * kMiB, 1), {}));
    // Without a span (one train per message) a lossy message needs five default spans.
    MessageTrain whole(TrainRules{0});
    whole.open(1, 0, kc(0), 0, {});
    EXPECT_FALSE(whole.close(999 * kMs, 100 * kMiB, kc(100 * kMiB, 1), {}));
    whole.open(2, 2000 * kMs, kc(100 * kMiB, 1), 0, {});
    EXPECT_TRUE(whole.close(3000 * kMs, 100 * kMiB, kc(200 * kMiB, 2), {}));
}

TEST(MessageTrain, AResetADuplicateOrABacklogEndsTheMessagesTrain) {
    for (const TrainSpoilers spoil :
         {TrainSpoilers{1, 0, 0}, TrainSpoilers{0, 1, 0}, TrainSpoilers{0, 0, 1}}) {
        MessageTrain cut;
        cut.open(1, 0, kc(0), 0, {});
        EXPECT_FALSE(cut.cut(200 * kMs, kc(25 * kMiB), 25 * kMiB, spoil));
        EXPECT_FALSE(cut.isOpen());
        MessageTrain closed;
        closed.open(1, 0, kc(0), 0, {});
        EXPECT_FALSE(closed.close(20 * kMs, 4 * kMiB, kc(4 * kMiB), spoil));
        EXPECT_FALSE(closed.isOpen());
    }
    MessageTrain unreadable;
    unreadable.open(1, 0, kc(0), 0, {});
    EXPECT_FALSE(unreadable.cut(200 * kMs, std::nullopt, 25 * kMiB, {}));
    EXPECT_FALSE(unreadable.isOpen()) << "the kernel's count could not be read";
    MessageTrain back;
    back.open(1, 0, kc(10 * kMiB), 0, {});
    EXPECT_FALSE(back.close(20 * kMs, 4 * kMiB, kc(kMiB), {})) << "a counter went back";
}

TEST(MessageTrain, ASpanOfZeroNeverCuts) {
    MessageTrain t(TrainRules{0});
    t.open(1, 0, kc(0), 0, {});
    EXPECT_FALSE(t.cutDue(3600 * kNsPerSec, 1ull << 40));
    const auto s = t.close(2 * kNsPerSec, 64 * kMiB, kc(64 * kMiB), {});
    ASSERT_TRUE(s);
    EXPECT_EQ(s->dispersion_ns, 2 * kNsPerSec);
}

TEST(GateStalls, MeasureTheStopsWithinTheTimeATrainCanHaveBeenSent) {
    // Each stop counts from half an RTT after it began (the bytes on the wire still arrive),
    // and the sum less one RTT (the window's ends are that uncertain).
    constexpr Nanos kRtt = 50 * kMs;
    GateStalls g;
    EXPECT_EQ(g.stalledNs(1000 * kMs, 200 * kMs, kRtt), 0) << "no stall at all";
    // A 5 s hold in the middle of a message; its train (5.02 s) arrives 100 ms after it.
    g.begin(1000 * kMs);
    EXPECT_TRUE(g.open());
    g.begin(1500 * kMs);  // still the same stall
    g.end(6000 * kMs);
    EXPECT_FALSE(g.open());
    EXPECT_EQ(g.stalledNs(6100 * kMs, 5020 * kMs, kRtt), 4925 * kMs);
    // A later train of 200 ms, sent after the stall ended (its window starts 2 RTT + 200 ms
    // before it arrived, after 6000 ms): nothing.
    EXPECT_EQ(g.stalledNs(6400 * kMs, 200 * kMs, kRtt), 0);
    // A stop that began before the window counts from the window's start.
    EXPECT_EQ(g.stalledNs(6010 * kMs, 4810 * kMs, kRtt), 4850 * kMs);
    // Stops inside one 200 ms part add up (RTT 20 ms: each from 10 ms after it began, the
    // sum less 20 ms); one shorter than half an RTT adds nothing.
    constexpr Nanos kShort = 20 * kMs;
    g.begin(10'000 * kMs);
    g.end(10'040 * kMs);
    EXPECT_EQ(g.stalledNs(10'150 * kMs, 200 * kMs, kShort), 10 * kMs);
    g.begin(10'050 * kMs);
    g.end(10'060 * kMs);
    EXPECT_EQ(g.stalledNs(10'150 * kMs, 200 * kMs, kShort), 10 * kMs);
    g.begin(10'070 * kMs);
    g.end(10'105 * kMs);
    EXPECT_EQ(g.stalledNs(10'150 * kMs, 200 * kMs, kShort), 35 * kMs);
    // An open stall counts up to now.
    GateStalls open;
    open.begin(0);
    EXPECT_EQ(open.stalledNs(5 * kMs, 200 * kMs, 0), 5 * kMs);
    EXPECT_EQ(open.stalledNs(30 * kMs, 200 * kMs, kRtt), 0);
    EXPECT_EQ(open.stalledNs(100 * kMs, 200 * kMs, kRtt), 25 * kMs);
    // Only the last kKept stalls are kept: the oldest of kKept + 1 drops out.
    GateStalls many;
    for (size_t i = 0; i <= GateStalls::kKept; ++i) {
        many.begin(static_cast<Nanos>(i) * 100 * kMs);
        many.end(static_cast<Nanos>(i) * 100 * kMs + 30 * kMs);
    }
    EXPECT_EQ(many.stalledNs(1000 * kMs, 1000 * kMs, 0),
              static_cast<Nanos>(GateStalls::kKept) * 30 * kMs);
    EXPECT_EQ(many.stalledNs(10'000 * kMs, 200 * kMs, kRtt), 0) << "long past: outside";
}

}  // namespace
}  // namespace atlas::transport
