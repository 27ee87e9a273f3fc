// Bubble measurement and publication: the idle recorder's interval rule, its lock-free ring
// under concurrent producers, and the publisher writing a real shared-memory channel that a
// real reader decodes (time driven by a ManualClock: no sleeps).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "channel/channel_reader.h"
#include "plugin/bubbles.h"

namespace atlas::plugin {
namespace {

constexpr Nanos kMs = kNsPerMs;
constexpr uint64_t kMiB = 1 << 20;

std::vector<sched::Interval> drain(IdleRecorder& r) {
    std::vector<sched::Interval> out;
    ObservedWait w;
    while (r.pop(&w)) {
        out.push_back(w.idle);
    }
    return out;
}

TEST(IdleRecorder, IntervalRunsFromFirstPostToThatReceivesData) {
    IdleRecorder r;
    CommIdleObserver a(&r, 1);
    a.posted(0, 100);
    a.posted(1, 150);     // prefetch while the first is still outstanding
    a.completed(0, 300);  // GPU resumes here: interval [100, 300)
    a.completed(1, 320);  // arrived while computing: not idle
    a.posted(2, 400);
    a.completed(2, 450);
    auto got = drain(r);
    ASSERT_EQ(got.size(), 2u);
    EXPECT_EQ(got[0], (sched::Interval{100, 300}));
    EXPECT_EQ(got[1], (sched::Interval{400, 450}));
    EXPECT_EQ(r.outstanding(), 0);
}

TEST(IdleRecorder, KeepsTheTransferOfTheReceiveThatLeadsTheWait) {
    IdleRecorder r;
    CommIdleObserver a(&r, 1);
    a.posted(0, 100);
    a.posted(1, 110);
    a.arrived(1, 4096, 120);  // a prefetch's data: not what the GPU waits for
    OpenWait open = r.openWait();
    EXPECT_EQ(open.idle.start_ns, 100);
    EXPECT_EQ(open.transfer_start_ns, 0);
    a.arrived(0, 1 << 20, 200);
    open = r.openWait();
    EXPECT_EQ(open.transfer_start_ns, 200);
    EXPECT_EQ(open.transfer_bytes, 1u << 20);
    a.completed(0, 250);
    a.completed(1, 260);
    ObservedWait w;
    ASSERT_TRUE(r.pop(&w));
    EXPECT_EQ(w.idle, (sched::Interval{100, 250}));
    EXPECT_EQ(w.transfer_start_ns, 200);
    EXPECT_EQ(w.transfer_bytes, 1u << 20);
    EXPECT_FALSE(r.pop(&w));
    EXPECT_EQ(r.openWait().idle.start_ns, 0) << "no wait is open";

    // The next wait starts without a transfer; data stamped before the wait (another
    // thread's clock read) counts from the wait's start.
    a.posted(2, 300);
    EXPECT_EQ(r.openWait().transfer_start_ns, 0);
    a.arrived(2, 64, 290);
    EXPECT_EQ(r.openWait().transfer_start_ns, 300);
    a.completed(2, 310);
    ASSERT_TRUE(r.pop(&w));
    EXPECT_EQ(w.transfer_start_ns, 300);
    EXPECT_EQ(w.transfer_bytes, 64u);
}

TEST(IdleRecorder, MergesAcrossCommsAndForgetsClosedOnes) {
    IdleRecorder r;
    CommIdleObserver a(&r, 1), b(&r, 2);
    a.posted(0, 10);
    b.posted(0, 20);  // another comm's receive while one is outstanding: same interval
    b.completed(0, 30);
    a.completed(0, 50);
    EXPECT_EQ(drain(r), (std::vector<sched::Interval>{{10, 50}}));
    // A comm closing with its leading receive pending: no interval, counts released.
    b.posted(1, 60);
    a.posted(1, 70);
    b.closed(80);
    EXPECT_EQ(r.outstanding(), 1);
    a.completed(1, 90);
    EXPECT_TRUE(drain(r).empty()) << "the interval's opening receive never completed";
    EXPECT_EQ(r.outstanding(), 0);
    a.posted(2, 100);
    a.completed(2, 120);
    EXPECT_EQ(drain(r), (std::vector<sched::Interval>{{100, 120}}));
}

// Comm ids are unique for the life of the process. They used to be masked to 16 bits, so the
// 65,536th WAN recv comm after another got its id and its keys: its receive ended the other
// comm's wait, and its close dropped it.
TEST(IdleRecorder, CommIdsStayDistinctAcrossASixteenBitWrap) {
    const uint64_t first = CommIdleObserver::nextCommId();
    uint64_t last = first;
    for (int i = 0; i < 65536; ++i) {
        last = CommIdleObserver::nextCommId();
    }
    ASSERT_EQ(last, first + 65536) << "ids wrapped";
    EXPECT_NE(CommIdleObserver::key(first, 0), CommIdleObserver::key(last, 0));
    EXPECT_EQ(CommIdleObserver::commIdOf(CommIdleObserver::key(last, 7)), last);
    IdleRecorder r;
    CommIdleObserver a(&r, first), b(&r, last);
    a.posted(0, 10);  // leads the wait
    b.posted(0, 20);
    b.completed(0, 30);  // another comm's receive: the GPU still waits for a's data
    EXPECT_TRUE(drain(r).empty());
    b.posted(1, 40);
    b.closed(50);  // b's close leaves a's wait alone
    a.completed(0, 60);
    EXPECT_EQ(drain(r), (std::vector<sched::Interval>{{10, 60}}));
    EXPECT_EQ(r.outstanding(), 0);
}

TEST(IdleRecorder, ConcurrentProducersLoseNothingUntilFull) {
    IdleRecorder r;
    constexpr int kThreads = 4;
    constexpr int kPer = 200;  // 800 intervals < capacity
    std::vector<std::thread> ts;
    std::atomic<int> ready{0};
    for (int t = 0; t < kThreads; ++t) {
        ts.emplace_back([&, t] {
            CommIdleObserver o(&r, static_cast<uint64_t>(t + 1));
            ready.fetch_add(1);
            while (ready.load() < kThreads) {
            }
            for (int i = 0; i < kPer; ++i) {
                o.posted(static_cast<uint64_t>(i), i * 10);
                o.arrived(static_cast<uint64_t>(i), kMiB, i * 10 + 2);
                o.completed(static_cast<uint64_t>(i), i * 10 + 5);
            }
        });
    }
    // The publisher's view of the open wait, read while the producers run.
    std::atomic<bool> done{false};
    int torn_open = 0;
    std::thread watcher([&] {
        while (!done.load()) {
            const OpenWait w = r.openWait();
            const bool known = w.transfer_start_ns != 0;
            if (known != (w.transfer_bytes != 0) || (known && w.transfer_bytes != kMiB)) {
                ++torn_open;
            }
        }
    });
    for (auto& t : ts) {
        t.join();
    }
    done.store(true);
    watcher.join();
    EXPECT_EQ(torn_open, 0);
    ObservedWait w;
    size_t got = 0;
    // Threads interleave, so several posts can share one interval (a wait opens only when no
    // receive is outstanding, so how many open depends on the interleaving: anything from one
    // to every post). Each interval is valid, its transfer (when its leader's arrived) lies
    // inside it, and every wait that opened came out of the ring: none lost, dropped or torn.
    while (r.pop(&w)) {
        ++got;
        EXPECT_LE(w.idle.start_ns, w.idle.end_ns);
        if (w.transfer_start_ns != 0) {
            EXPECT_EQ(w.transfer_bytes, kMiB);
            EXPECT_GE(w.transfer_start_ns, w.idle.start_ns);
            EXPECT_LE(w.transfer_start_ns, w.idle.end_ns);
        } else {
            EXPECT_EQ(w.transfer_bytes, 0u);
        }
    }
    EXPECT_GE(got, 1u);
    EXPECT_LE(got, static_cast<size_t>(kThreads * kPer));
    EXPECT_EQ(got, r.opened());
    EXPECT_EQ(r.dropped(), 0u);
    EXPECT_EQ(r.outstanding(), 0);
}

TEST(IdleRecorder, OverflowDropsAndCounts) {
    IdleRecorder r;
    CommIdleObserver o(&r, 1);
    for (uint64_t i = 0; i < IdleRecorder::kCapacity + 10; ++i) {
        o.posted(i, static_cast<Nanos>(i));
        o.completed(i, static_cast<Nanos>(i) + 1);
    }
    EXPECT_EQ(drain(r).size(), IdleRecorder::kCapacity);
    EXPECT_EQ(r.dropped(), 10u);
}

class PublisherTest : public ::testing::Test {
  protected:
    void SetUp() override {
        name_ = "/atlas-test-bubbles-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name();
        BubbleConfig cfg;
        cfg.channel_name = name_;
        cfg.pipeline.predictor.guard_ns = 1 * kMs;
        configure(cfg);
        auto p = BubblePublisher::manual(cfg, &rec_, clock_, Logger());
        ASSERT_TRUE(p.isOk()) << p.status().toString();
        pub_ = std::move(p.value());
        auto r = channel::ChannelReader::open(name_);
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        reader_ = std::make_unique<channel::ChannelReader>(std::move(r.value()));
    }
    virtual void configure(BubbleConfig&) {}
    static Nanos iterationStart(int k) { return 1000 * kMs + k * 100 * kMs; }
    // One training iteration of 100 ms with two receive waits (fill and drain bubbles), each
    // ended by a 1 MiB transfer whose first data arrives 10 ms before its end.
    void iteration(int k) {
        const Nanos base = iterationStart(k);
        obs_.posted(seq_, base + 5 * kMs);
        obs_.arrived(seq_, kMiB, base + 20 * kMs);
        clock_.set(base + 30 * kMs);
        obs_.completed(seq_++, base + 30 * kMs);
        obs_.posted(seq_, base + 60 * kMs);
        obs_.arrived(seq_, kMiB, base + 70 * kMs);
        clock_.set(base + 80 * kMs);
        obs_.completed(seq_++, base + 80 * kMs);
        pub_->step();
        clock_.set(base + 100 * kMs);
        pub_->step();
    }

    std::string name_;
    ManualClock clock_{1000 * kMs};
    IdleRecorder rec_;
    CommIdleObserver obs_{&rec_, 1};
    uint64_t seq_ = 0;
    std::unique_ptr<BubblePublisher> pub_;
    std::unique_ptr<channel::ChannelReader> reader_;
};

TEST_F(PublisherTest, LearnsThePeriodThenPublishesAccurateWindows) {
    auto st = reader_->readState();
    ASSERT_TRUE(st.isOk());
    EXPECT_EQ(st->state, channel::PredictorState::kLearning);
    for (int k = 0; k < 30; ++k) {
        iteration(k);
    }
    st = reader_->readState();
    ASSERT_TRUE(st.isOk());
    EXPECT_EQ(st->state, channel::PredictorState::kPredicting);
    EXPECT_NEAR(static_cast<double>(st->stats.period_ns), 100.0 * kMs, 1.0 * kMs);
    // Idle 45 ms of every 100 ms.
    EXPECT_NEAR(st->stats.idle_fraction_ppm / 1e6, 0.45, 0.05);
    ASSERT_NE(st->stats.coverage_ppm, channel::kUnknownPpm);
    ASSERT_NE(st->stats.precision_ppm, channel::kUnknownPpm);
    EXPECT_GE(st->stats.precision_ppm / 1e6, 0.95);
    EXPECT_GE(st->stats.coverage_ppm / 1e6, 0.8);

    auto preds = reader_->readPredictions();
    ASSERT_TRUE(preds.isOk());
    ASSERT_FALSE(preds->windows.empty());
    // Windows sit on the bubbles of coming iterations, shrunk by the guard band.
    for (const auto& w : preds->windows) {
        const Nanos off = (w.start_ns - 1000 * kMs) % (100 * kMs);
        const Nanos len = w.end_ns - w.start_ns;
        const bool fill = off >= 5 * kMs && off <= 8 * kMs && len <= 24 * kMs;
        const bool drain_b = off >= 60 * kMs && off <= 63 * kMs && len <= 19 * kMs;
        EXPECT_TRUE(fill || drain_b) << "offset " << off / kMs << " ms, length " << len / kMs;
    }
    // The observed ring carries what was measured.
    channel::ReadCursor cur;
    auto batch = reader_->readObservedSince(cur);
    ASSERT_TRUE(batch.isOk());
    EXPECT_EQ(batch->records.size(), 60u);
}

TEST_F(PublisherTest, PauseWithdrawsPredictions) {
    for (int k = 0; k < 30; ++k) {
        iteration(k);
    }
    ASSERT_EQ(reader_->readState()->state, channel::PredictorState::kPredicting);
    // Training stops (checkpoint): time passes with no receives.
    clock_.advance(2000 * kMs);
    pub_->step();
    auto st = reader_->readState();
    ASSERT_TRUE(st.isOk());
    EXPECT_NE(st->state, channel::PredictorState::kPredicting);
    auto preds = reader_->readPredictions();
    ASSERT_TRUE(preds.isOk());
    EXPECT_TRUE(preds->windows.empty()) << "stale predictions must be withdrawn";
}

// As the plugin runs it: windows go into force when their wait is seen to begin.
class ConfirmedPublisherTest : public PublisherTest {
  protected:
    void configure(BubbleConfig& cfg) override { cfg.pipeline.predictor.confirm_open = true; }
    // The open window of the latest prediction set (end 0: none).
    channel::PredictedWindow openWindow() {
        auto preds = reader_->readPredictions();
        EXPECT_TRUE(preds.isOk());
        for (const auto& w : preds->windows) {
            if (w.source == channel::WindowSource::kPredictorOpen) {
                return w;
            }
        }
        return {};
    }
};

TEST_F(ConfirmedPublisherTest, OpenWindowEndsWhenItsTransferWillHaveLanded) {
    for (int k = 0; k < 30; ++k) {
        iteration(k);
    }
    ASSERT_EQ(reader_->readState()->state, channel::PredictorState::kPredicting);
    // The fill wait of the next iteration opens; its window ends with the track's 25 ms.
    const Nanos base = iterationStart(30);
    obs_.posted(seq_, base + 5 * kMs);
    clock_.set(base + 6 * kMs);
    pub_->step();
    EXPECT_EQ(openWindow().end_ns, base + 29 * kMs);
    // The sender is late (its link was granted to another pipeline first): the data starts
    // arriving 20 ms later than usual, and the wait ends 10 ms (1 MiB) after that.
    obs_.arrived(seq_, kMiB, base + 40 * kMs);
    clock_.set(base + 41 * kMs);
    pub_->step();
    const channel::PredictedWindow w = openWindow();
    EXPECT_EQ(w.start_ns, base + 6 * kMs);
    EXPECT_EQ(w.end_ns, base + 49 * kMs) << "first data + 10 ms per MiB - 1 ms guard";
}

}  // namespace
}  // namespace atlas::plugin
