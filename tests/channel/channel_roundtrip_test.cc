// Writer and reader over real shm segments: what the writer publishes is what readers get,
// cursors, overrun, sets, state, and the writer lifecycle (close, restart, crash, take-over).
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include <gtest/gtest.h>

#include "atlas/common/clock.h"
#include "channel/channel_reader.h"
#include "channel/channel_writer.h"
#include "tests/channel/channel_test_util.h"

namespace atlas::channel {
namespace {

using testing::ShmNameGuard;
using testing::uniqueShmName;

class ChannelRoundTrip : public ::testing::Test {
  protected:
    ChannelWriter makeWriter(ChannelCapacities caps = {16, 32}, WriterOptions options = {}) {
        if (options.clock == nullptr) {
            options.clock = &clock_;
        }
        auto w = ChannelWriter::create(guard_.name(), caps, options);
        EXPECT_TRUE(w.isOk()) << w.status().toString();
        return std::move(w.value());
    }
    ChannelReader makeReader() {
        auto r = ChannelReader::open(guard_.name());
        EXPECT_TRUE(r.isOk()) << r.status().toString();
        return std::move(r.value());
    }

    ShmNameGuard guard_{uniqueShmName("rt")};
    ManualClock clock_{1'000'000'000};
};

PredictedWindow window(Nanos start, Nanos end, uint32_t conf = 500000, uint64_t iter = 1) {
    return PredictedWindow{start, end, conf, iter, WindowSource::kPredictor};
}

TEST_F(ChannelRoundTrip, ReaderSeesWriterIdentity) {
    ChannelWriter w = makeWriter({16, 32});
    ChannelReader r = makeReader();
    EXPECT_EQ(r.info().generation, 1u);
    EXPECT_EQ(r.info().writer_pid, ::getpid());
    EXPECT_EQ(r.info().writer_start_ns, 1'000'000'000);
    EXPECT_EQ(r.info().window_capacity, 16u);
    EXPECT_EQ(r.info().idle_capacity, 32u);
    EXPECT_EQ(r.info().layout_size, expectedLayout(16, 32).layout_size);
    EXPECT_EQ(r.lifecycle(), Lifecycle::kLive);
    EXPECT_TRUE(r.writerAlive());
    EXPECT_EQ(w.maxPredictionSet(), 8u);
}

TEST_F(ChannelRoundTrip, PredictionSetsReplaceEachOtherWhole) {
    ChannelWriter w = makeWriter();
    ChannelReader r = makeReader();
    auto none = r.readPredictions();
    ASSERT_TRUE(none.isOk());
    EXPECT_EQ(none.value().set_id, 0u);
    EXPECT_TRUE(none.value().windows.empty());

    std::vector<PredictedWindow> first = {window(100, 200, 900000, 7), window(300, 450, 2, 8),
                                          window(500, 600)};
    first[1].source = WindowSource::kArbiterPlan;
    clock_.set(5000);
    EXPECT_EQ(w.publishPredictions(first), 3u);
    auto s1 = r.readPredictions();
    ASSERT_TRUE(s1.isOk()) << s1.status().toString();
    EXPECT_EQ(s1.value().set_id, 1u);
    EXPECT_EQ(s1.value().published_ns, 5000);
    ASSERT_EQ(s1.value().windows.size(), 3u);
    EXPECT_EQ(s1.value().windows[0].start_ns, 100);
    EXPECT_EQ(s1.value().windows[0].end_ns, 200);
    EXPECT_EQ(s1.value().windows[0].confidence_ppm, 900000u);
    EXPECT_EQ(s1.value().windows[0].iteration, 7u);
    EXPECT_EQ(s1.value().windows[1].source, WindowSource::kArbiterPlan);
    EXPECT_EQ(s1.value().windows[2].start_ns, 500);

    std::vector<PredictedWindow> second = {window(1000, 1100)};
    EXPECT_EQ(w.publishPredictions(second), 1u);
    auto s2 = r.readPredictions();
    ASSERT_TRUE(s2.isOk());
    EXPECT_EQ(s2.value().set_id, 2u);
    ASSERT_EQ(s2.value().windows.size(), 1u);
    EXPECT_EQ(s2.value().windows[0].start_ns, 1000);

    // An empty set withdraws every prediction.
    EXPECT_EQ(w.publishPredictions({}), 0u);
    auto s3 = r.readPredictions();
    ASSERT_TRUE(s3.isOk());
    EXPECT_EQ(s3.value().set_id, 3u);
    EXPECT_TRUE(s3.value().windows.empty());
    EXPECT_EQ(r.writerCounters().prediction_sets, 3u);
}

TEST_F(ChannelRoundTrip, PublishSkipsInvalidClampsConfidenceAndTruncates) {
    ChannelWriter w = makeWriter({8, 8});  // max set 4
    ChannelReader r = makeReader();
    std::vector<PredictedWindow> in = {window(10, 5),              // inverted: skipped
                                       window(10, 20, 5'000'000),  // clamped to 1.0
                                       window(30, 40),
                                       window(50, 60),
                                       window(70, 80),
                                       window(90, 100)};  // beyond max set
    EXPECT_EQ(w.publishPredictions(in), 4u);
    auto s = r.readPredictions();
    ASSERT_TRUE(s.isOk());
    ASSERT_EQ(s.value().windows.size(), 4u);
    EXPECT_EQ(s.value().windows[0].start_ns, 10);
    EXPECT_EQ(s.value().windows[0].confidence_ppm, kPpmOne);
    EXPECT_EQ(s.value().windows[3].start_ns, 70);
}

TEST_F(ChannelRoundTrip, ManySetsWrapTheRingAndStayIntact) {
    ChannelWriter w = makeWriter({8, 8});
    ChannelReader r = makeReader();
    for (int k = 1; k <= 50; ++k) {
        std::vector<PredictedWindow> set;
        for (int i = 0; i < 1 + k % 4; ++i) {
            set.push_back(window(k * 1000 + i * 10, k * 1000 + i * 10 + 5, 0, k));
        }
        ASSERT_EQ(w.publishPredictions(set), set.size());
        auto s = r.readPredictions();
        ASSERT_TRUE(s.isOk()) << s.status().toString();
        ASSERT_EQ(s.value().set_id, static_cast<uint64_t>(k));
        ASSERT_EQ(s.value().windows.size(), set.size());
        for (size_t i = 0; i < set.size(); ++i) {
            EXPECT_EQ(s.value().windows[i].start_ns, set[i].start_ns);
            EXPECT_EQ(s.value().windows[i].iteration, static_cast<uint64_t>(k));
        }
    }
}

TEST_F(ChannelRoundTrip, ObservedCursorReturnsEachRecordOnce) {
    ChannelWriter w = makeWriter({16, 32});
    ChannelReader r = makeReader();
    for (int i = 0; i < 10; ++i) {
        ASSERT_TRUE(w.publishObserved({i * 100, i * 100 + 40, static_cast<uint64_t>(i)}));
    }
    ReadCursor cursor;
    auto a = r.readObservedSince(cursor, 4);
    ASSERT_TRUE(a.isOk());
    ASSERT_EQ(a.value().records.size(), 4u);
    EXPECT_FALSE(a.value().resynced);
    EXPECT_EQ(a.value().records[3].iteration, 3u);
    auto b = r.readObservedSince(cursor);
    ASSERT_TRUE(b.isOk());
    ASSERT_EQ(b.value().records.size(), 6u);
    EXPECT_EQ(b.value().records[0].start_ns, 400);
    EXPECT_EQ(b.value().records[5].end_ns, 940);
    auto c = r.readObservedSince(cursor);
    ASSERT_TRUE(c.isOk());
    EXPECT_TRUE(c.value().records.empty());
    EXPECT_EQ(c.value().lost, 0u);
}

TEST_F(ChannelRoundTrip, ObservedOverrunIsCountedAndCursorJumpsToOldest) {
    ChannelWriter w = makeWriter({16, 8});
    ChannelReader r = makeReader();
    ReadCursor cursor;
    ASSERT_TRUE(w.publishObserved({0, 1, 0}));
    ASSERT_TRUE(r.readObservedSince(cursor).isOk());  // cursor.next == 1
    for (int i = 1; i <= 20; ++i) {
        ASSERT_TRUE(w.publishObserved({i * 10, i * 10 + 1, static_cast<uint64_t>(i)}));
    }
    auto b = r.readObservedSince(cursor);
    ASSERT_TRUE(b.isOk());
    // Records 1..20 were published into 8 cells: 1..12 are gone, 13..20 remain.
    EXPECT_EQ(b.value().lost, 12u);
    ASSERT_EQ(b.value().records.size(), 8u);
    EXPECT_EQ(b.value().records.front().iteration, 13u);
    EXPECT_EQ(b.value().records.back().iteration, 20u);
    EXPECT_EQ(r.counters().lost, 12u);
}

TEST_F(ChannelRoundTrip, FreshCursorStartsAtOldestRetainedRecord) {
    ChannelWriter w = makeWriter({16, 8});
    for (int i = 0; i < 11; ++i) {
        ASSERT_TRUE(w.publishObserved({i, i + 1, static_cast<uint64_t>(i)}));
    }
    ChannelReader r = makeReader();
    ReadCursor cursor;
    auto b = r.readObservedSince(cursor);
    ASSERT_TRUE(b.isOk());
    EXPECT_EQ(b.value().lost, 0u);
    ASSERT_EQ(b.value().records.size(), 8u);
    EXPECT_EQ(b.value().records.front().iteration, 3u);
}

TEST_F(ChannelRoundTrip, InvertedObservedIntervalIsRejectedAndCounted) {
    ChannelWriter w = makeWriter();
    ChannelReader r = makeReader();
    EXPECT_FALSE(w.publishObserved({100, 50, 1}));
    EXPECT_EQ(r.writerCounters().rejected_records, 1u);
    EXPECT_EQ(r.writerCounters().idle_records, 0u);
}

IdleInterval withTransfer(Nanos start, Nanos end, uint64_t iter, Nanos transfer_start,
                          uint64_t bytes) {
    IdleInterval i{start, end, iter};
    i.transfer_start_ns = transfer_start;
    i.transfer_bytes = bytes;
    return i;
}

TEST_F(ChannelRoundTrip, ObservedTransferFieldsRoundTrip) {
    ChannelWriter w = makeWriter();
    ChannelReader r = makeReader();
    const std::vector<IdleInterval> published = {
        withTransfer(1000, 2000, 1, 1500, 64 << 20),  // first data landed inside the wait
        withTransfer(3000, 4000, 2, 3000, 1),         // data buffered before: start_ns
        withTransfer(5000, 6000, 3, 4200, 7),         // landed before the wait opened
        withTransfer(7000, 8000, 4, 8000, ~0ull),     // at the very end of the wait
        {9000, 9500, 5},                              // transfer unknown
    };
    for (const IdleInterval& i : published) {
        ASSERT_TRUE(w.publishObserved(i)) << i.iteration;
    }
    ReadCursor cursor;
    auto b = r.readObservedSince(cursor);
    ASSERT_TRUE(b.isOk());
    ASSERT_EQ(b.value().records.size(), published.size());
    EXPECT_EQ(b.value().invalid, 0u);
    for (size_t k = 0; k < published.size(); ++k) {
        const IdleInterval& got = b.value().records[k];
        EXPECT_EQ(got.start_ns, published[k].start_ns) << k;
        EXPECT_EQ(got.end_ns, published[k].end_ns) << k;
        EXPECT_EQ(got.iteration, published[k].iteration) << k;
        EXPECT_EQ(got.transfer_start_ns, published[k].transfer_start_ns) << k;
        EXPECT_EQ(got.transfer_bytes, published[k].transfer_bytes) << k;
    }
    EXPECT_EQ(r.writerCounters().rejected_records, 0u);
}

// What the writer's step saw of a wait (the "Publisher steps" fields): step times stored as
// offsets from the record's own times; unknown (0) or too far (beyond 2^31 ns) reads as 0.
TEST_F(ChannelRoundTrip, ObservedStepFieldsRoundTripWithinTheirRange) {
    ChannelWriter w = makeWriter();
    ChannelReader r = makeReader();
    IdleInterval seen = withTransfer(10'000'000'000, 10'030'000'000, 1, 10'020'000'000, 1 << 20);
    seen.taken_step_ns = 10'030'400'000;          // after its end
    seen.open_from_step_ns = 10'000'700'000;      // after its start
    seen.open_to_step_ns = 10'029'800'000;        // before its end
    seen.transfer_seen_step_ns = 10'019'900'000;  // read before the data's own stamp
    IdleInterval unseen{20'000'000'000, 20'000'000'100, 2};
    unseen.taken_step_ns = 20'000'000'100 + (int64_t{3} << 31);  // 6.4 s late: not representable
    ASSERT_TRUE(w.publishObserved(seen));
    ASSERT_TRUE(w.publishObserved(unseen));
    ReadCursor cursor;
    auto b = r.readObservedSince(cursor);
    ASSERT_TRUE(b.isOk());
    ASSERT_EQ(b.value().records.size(), 2u);
    const IdleInterval& got = b.value().records[0];
    EXPECT_EQ(got.taken_step_ns, seen.taken_step_ns);
    EXPECT_EQ(got.open_from_step_ns, seen.open_from_step_ns);
    EXPECT_EQ(got.open_to_step_ns, seen.open_to_step_ns);
    EXPECT_EQ(got.transfer_seen_step_ns, seen.transfer_seen_step_ns);
    const IdleInterval& other = b.value().records[1];
    EXPECT_EQ(other.taken_step_ns, 0);
    EXPECT_EQ(other.open_from_step_ns, 0);
    EXPECT_EQ(other.transfer_seen_step_ns, 0);
}

TEST_F(ChannelRoundTrip, TransferAfterWaitEndOrHalfKnownIsRejectedAndCounted) {
    ChannelWriter w = makeWriter();
    ChannelReader r = makeReader();
    EXPECT_FALSE(w.publishObserved(withTransfer(100, 200, 1, 201, 10)));  // after the end
    EXPECT_FALSE(w.publishObserved(withTransfer(100, 200, 1, 150, 0)));   // start, no bytes
    EXPECT_FALSE(w.publishObserved(withTransfer(100, 200, 1, 0, 10)));    // bytes, no start
    EXPECT_FALSE(w.publishObserved(withTransfer(100, 200, 1, -5, 10)));   // not a time
    EXPECT_EQ(r.writerCounters().rejected_records, 4u);
    EXPECT_EQ(r.writerCounters().idle_records, 0u);
    // The counter keeps counting alongside the end < start refusal, and valid records still go.
    EXPECT_FALSE(w.publishObserved({200, 100, 1}));
    EXPECT_TRUE(w.publishObserved(withTransfer(100, 200, 1, 200, 10)));
    EXPECT_EQ(r.writerCounters().rejected_records, 5u);
    EXPECT_EQ(r.writerCounters().idle_records, 1u);
    ReadCursor cursor;
    auto b = r.readObservedSince(cursor);
    ASSERT_TRUE(b.isOk());
    ASSERT_EQ(b.value().records.size(), 1u);
    EXPECT_EQ(b.value().records[0].transfer_start_ns, 200);
}

TEST_F(ChannelRoundTrip, WindowHistoryKeepsEverySetInOrder) {
    ChannelWriter w = makeWriter({16, 8});
    ChannelReader r = makeReader();
    clock_.set(10);
    std::vector<PredictedWindow> a = {window(100, 200), window(300, 400)};
    ASSERT_EQ(w.publishPredictions(a), 2u);
    clock_.set(20);
    ASSERT_EQ(w.publishPredictions({}), 0u);
    clock_.set(30);
    std::vector<PredictedWindow> b = {window(500, 600)};
    ASSERT_EQ(w.publishPredictions(b), 1u);
    ReadCursor cursor;
    auto h = r.readWindowsSince(cursor);
    ASSERT_TRUE(h.isOk());
    const auto& rec = h.value().records;
    ASSERT_EQ(rec.size(), 4u);
    EXPECT_EQ(rec[0].set_id, 1u);
    EXPECT_EQ(rec[0].set_count, 2u);
    EXPECT_EQ(rec[1].set_index, 1u);
    EXPECT_EQ(rec[1].published_ns, 10);
    EXPECT_EQ(rec[2].set_id, 2u);
    EXPECT_EQ(rec[2].set_count, 0u);  // the empty-set marker
    EXPECT_EQ(rec[3].set_id, 3u);
    EXPECT_EQ(rec[3].published_ns, 30);
    EXPECT_EQ(rec[3].window.start_ns, 500);
}

TEST_F(ChannelRoundTrip, StateAndStatsReadBackAsOneSnapshot) {
    ChannelWriter w = makeWriter();
    ChannelReader r = makeReader();
    auto s0 = r.readState();
    ASSERT_TRUE(s0.isOk());
    EXPECT_EQ(s0.value().state, PredictorState::kStarting);
    EXPECT_EQ(s0.value().stats.idle_fraction_ppm, kUnknownPpm);

    clock_.set(2'000'000'000);
    w.setStatus(PredictorState::kLearning, StatusReason::kWarmup);
    clock_.set(3'000'000'000);
    w.setStatus(PredictorState::kLearning, StatusReason::kWarmup);  // unchanged: since stays
    ChannelStats st;
    st.period_ns = 250'000'000;
    st.period_confidence_ppm = 800000;
    st.idle_fraction_ppm = 310000;
    st.iteration = 42;
    st.coverage_ppm = 700000;
    st.precision_ppm = 650000;
    w.setStats(st);
    auto s1 = r.readState();
    ASSERT_TRUE(s1.isOk());
    EXPECT_EQ(s1.value().state, PredictorState::kLearning);
    EXPECT_EQ(s1.value().reason, StatusReason::kWarmup);
    EXPECT_EQ(s1.value().since_ns, 2'000'000'000);
    EXPECT_EQ(s1.value().stats_updated_ns, 3'000'000'000);
    EXPECT_EQ(s1.value().stats.period_ns, 250'000'000);
    EXPECT_EQ(s1.value().stats.period_confidence_ppm, 800000u);
    EXPECT_EQ(s1.value().stats.idle_fraction_ppm, 310000u);
    EXPECT_EQ(s1.value().stats.iteration, 42u);
    EXPECT_EQ(s1.value().stats.coverage_ppm, 700000u);
    EXPECT_EQ(s1.value().stats.precision_ppm, 650000u);
}

TEST_F(ChannelRoundTrip, DestroyUnlinksUnlessKept) {
    { ChannelWriter w = makeWriter(); }
    auto gone = ChannelReader::open(guard_.name());
    ASSERT_FALSE(gone.isOk());
    EXPECT_EQ(gone.status().code(), Code::kUnavailable);
    EXPECT_NE(gone.status().message().find("does not exist"), std::string::npos);

    WriterOptions keep;
    keep.keep_on_close = true;
    {
        ChannelWriter w = makeWriter({16, 32}, keep);
        ASSERT_TRUE(w.publishObserved({1, 2, 3}));
    }
    auto kept = ChannelReader::open(guard_.name());
    ASSERT_TRUE(kept.isOk()) << kept.status().toString();
    EXPECT_EQ(kept.value().lifecycle(), Lifecycle::kClosed);
    auto refreshed = kept.value().refresh();
    ASSERT_TRUE(refreshed.isOk());
    EXPECT_EQ(refreshed.value(), RefreshOutcome::kWriterClosed);
    ReadCursor cursor;
    auto b = kept.value().readObservedSince(cursor);
    ASSERT_TRUE(b.isOk());
    ASSERT_EQ(b.value().records.size(), 1u);
    EXPECT_EQ(b.value().records[0].iteration, 3u);
}

TEST_F(ChannelRoundTrip, WriterRestartBumpsGenerationAndReaderResyncs) {
    ChannelWriter w1 = makeWriter({16, 32});
    ChannelReader r = makeReader();
    ReadCursor cursor;
    for (int i = 0; i < 5; ++i) {
        ASSERT_TRUE(w1.publishObserved({i, i + 1, static_cast<uint64_t>(i)}));
    }
    ASSERT_EQ(r.readObservedSince(cursor).value().records.size(), 5u);

    // Restart in the same process (e.g. the plugin re-initialised): allowed without
    // take_over since the old writer's pid is ours.
    clock_.set(9'000'000'000);
    ChannelWriter w2 = makeWriter({16, 32});
    EXPECT_EQ(w2.generation(), 2u);
    EXPECT_TRUE(w1.retired());
    ASSERT_TRUE(w2.publishObserved({7000, 7100, 0}));

    // The old segment is retired: the next read follows the name to the new one.
    auto b = r.readObservedSince(cursor);
    ASSERT_TRUE(b.isOk()) << b.status().toString();
    EXPECT_TRUE(b.value().resynced);
    EXPECT_EQ(b.value().generation, 2u);
    ASSERT_EQ(b.value().records.size(), 1u);
    EXPECT_EQ(b.value().records[0].start_ns, 7000);
    EXPECT_EQ(r.info().generation, 2u);
    EXPECT_EQ(r.info().writer_start_ns, 9'000'000'000);
    EXPECT_EQ(r.counters().restarts, 1u);
    EXPECT_EQ(r.refresh().value(), RefreshOutcome::kUnchanged);

    // The retired writer's close must not unlink the name its successor now owns.
    w1.close();
    EXPECT_TRUE(ChannelReader::open(guard_.name()).isOk());
}

TEST_F(ChannelRoundTrip, RestartAfterUnlinkIsDetectedByWriterStartTime) {
    ReadCursor cursor;
    auto w1 = std::make_unique<ChannelWriter>(makeWriter());
    ChannelReader r = makeReader();
    ASSERT_TRUE(w1->publishObserved({1, 2, 0}));
    ASSERT_EQ(r.readObservedSince(cursor).value().records.size(), 1u);
    w1.reset();  // closes and unlinks: the next writer starts at generation 1 again
    EXPECT_EQ(r.refresh().value(), RefreshOutcome::kGone);

    clock_.set(4'000'000'000);
    ChannelWriter w2 = makeWriter();
    EXPECT_EQ(w2.generation(), 1u);
    ASSERT_TRUE(w2.publishObserved({10, 20, 0}));
    EXPECT_EQ(r.refresh().value(), RefreshOutcome::kRestarted);
    auto b = r.readObservedSince(cursor);
    ASSERT_TRUE(b.isOk());
    EXPECT_TRUE(b.value().resynced);
    ASSERT_EQ(b.value().records.size(), 1u);
    EXPECT_EQ(b.value().records[0].start_ns, 10);
}

// Runs `child` in a forked process that signals readiness through a pipe and then waits for
// the parent to close its end. Returns the child's pid, or -1.
template <typename Fn>
pid_t forkHolder(Fn child, int& release_fd) {
    int ready[2];
    int hold[2];
    if (::pipe(ready) != 0 || ::pipe(hold) != 0) {
        return -1;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(ready[0]);
        ::close(hold[1]);
        const char ok = child() ? 'y' : 'n';
        (void)!::write(ready[1], &ok, 1);
        char c;
        (void)!::read(hold[0], &c, 1);  // returns when the parent closes the pipe
        ::_exit(0);
    }
    ::close(ready[1]);
    ::close(hold[0]);
    char c = 'n';
    (void)!::read(ready[0], &c, 1);
    ::close(ready[0]);
    release_fd = hold[1];
    return c == 'y' ? pid : -1;
}

TEST_F(ChannelRoundTrip, LiveWriterInAnotherProcessIsNotReplacedWithoutTakeOver) {
    const std::string name = guard_.name();
    int release_fd = -1;
    const pid_t pid = forkHolder(
        [&] {
            auto w = ChannelWriter::create(name, {16, 32});
            if (!w.isOk()) {
                return false;
            }
            // Leak the mapping on purpose: the child must hold the segment until released,
            // and its exit must not unlink it.
            new ChannelWriter(std::move(w.value()));
            return true;
        },
        release_fd);
    ASSERT_GT(pid, 0);
    auto refused = ChannelWriter::create(name, {16, 32});
    ASSERT_FALSE(refused.isOk());
    EXPECT_EQ(refused.status().code(), Code::kInvalidUsage);
    EXPECT_NE(refused.status().message().find("live writer pid " + std::to_string(pid)),
              std::string::npos)
        << refused.status().message();

    WriterOptions take;
    take.take_over = true;
    auto taken = ChannelWriter::create(name, {16, 32}, take);
    ASSERT_TRUE(taken.isOk()) << taken.status().toString();
    EXPECT_EQ(taken.value().generation(), 2u);
    ::close(release_fd);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
}

TEST_F(ChannelRoundTrip, CrashedWriterIsReportedDead) {
    const std::string name = guard_.name();
    int release_fd = -1;
    const pid_t pid = forkHolder(
        [&] {
            auto w = ChannelWriter::create(name, {16, 32});
            if (!w.isOk()) {
                return false;
            }
            new ChannelWriter(std::move(w.value()));  // never closed: like a crash
            return true;
        },
        release_fd);
    ASSERT_GT(pid, 0);
    ::close(release_fd);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);  // reaped: the pid no longer exists

    auto r = ChannelReader::open(name);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r.value().lifecycle(), Lifecycle::kLive);
    EXPECT_FALSE(r.value().writerAlive());
    EXPECT_EQ(r.value().refresh().value(), RefreshOutcome::kWriterDead);

    // A new writer may take the name without take_over, continuing the generation.
    ChannelWriter w = makeWriter();
    EXPECT_EQ(w.generation(), 2u);
    EXPECT_EQ(r.value().refresh().value(), RefreshOutcome::kRestarted);
    EXPECT_EQ(r.value().info().generation, 2u);
}

TEST_F(ChannelRoundTrip, CreateRejectsBadArguments) {
    auto bad_name = ChannelWriter::create("no-slash", {16, 32});
    ASSERT_FALSE(bad_name.isOk());
    EXPECT_EQ(bad_name.status().code(), Code::kInvalidArgument);
    auto too_small = ChannelWriter::create(guard_.name(), {2, 32});
    ASSERT_FALSE(too_small.isOk());
    EXPECT_NE(too_small.status().message().find("window capacity 2"), std::string::npos);
    auto too_big = ChannelWriter::create(guard_.name(), {16, kMaxIdleCapacity + 1});
    ASSERT_FALSE(too_big.isOk());
    EXPECT_NE(too_big.status().message().find("idle capacity"), std::string::npos);
}

TEST_F(ChannelRoundTrip, MovedWriterKeepsPublishing) {
    ChannelWriter a = makeWriter();
    ASSERT_TRUE(a.publishObserved({1, 2, 0}));
    ChannelWriter b = std::move(a);
    EXPECT_FALSE(a.isOpen());
    EXPECT_FALSE(a.publishObserved({3, 4, 0}));
    ASSERT_TRUE(b.publishObserved({5, 6, 0}));
    ChannelReader r = makeReader();
    ReadCursor cursor;
    auto batch = r.readObservedSince(cursor);
    ASSERT_TRUE(batch.isOk());
    ASSERT_EQ(batch.value().records.size(), 2u);
    EXPECT_EQ(batch.value().records[1].start_ns, 5);
}

}  // namespace
}  // namespace atlas::channel
