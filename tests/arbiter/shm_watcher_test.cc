// Node-local arbitration driven by hand: a ManualClock, no watcher thread (the test calls
// ShmArbiter::runWatcher), and a fake ProcessProbe, over a real segment in /dev/shm. Other
// processes are entries the test writes into the segment, as another process would.
// Covered: FIFO order, the hold/drain rule, a lease end handed on by the waiter's watcher, a
// silent or dead holder revoked by the watcher while the engine path never probes and never
// waits for a probe, a dead waiter dropped before its turn, a corrupt table repaired.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "plugin/wan/shm_arbiter.h"
#include "plugin/wan/shm_layout.h"
#include "tests/arbiter/test_util.h"

namespace atlas::plugin::wan {
namespace {

using arbiter::testing::CaptureLog;
using arbiter::testing::Waker;

constexpr Nanos kT0 = 1000 * kNsPerSec;
constexpr Nanos kLease = 200 * kNsPerMs;

// Liveness by table: alive unless marked dead; optionally blocks (a slow /proc) until
// released. Records which threads called it.
class FakeProbe final : public ProcessProbe {
  public:
    bool alive(int pid, uint64_t) const override {
        std::unique_lock<std::mutex> lock(mu_);
        callers_.push_back(std::this_thread::get_id());
        entered_ = true;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !blocking_; });
        return dead_.count(pid) == 0;
    }
    uint64_t startTime(int) const override { return 42; }

    void markDead(int pid) {
        std::lock_guard<std::mutex> lock(mu_);
        dead_.insert(pid);
    }
    void block() {
        std::lock_guard<std::mutex> lock(mu_);
        blocking_ = true;
        entered_ = false;
    }
    bool waitEntered() {
        std::unique_lock<std::mutex> lock(mu_);
        return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return entered_; });
    }
    void unblock() {
        std::lock_guard<std::mutex> lock(mu_);
        blocking_ = false;
        cv_.notify_all();
    }
    std::vector<std::thread::id> callers() const {
        std::lock_guard<std::mutex> lock(mu_);
        return callers_;
    }

  private:
    mutable std::mutex mu_;
    mutable std::condition_variable cv_;
    mutable std::vector<std::thread::id> callers_;
    mutable bool entered_ = false;
    bool blocking_ = false;
    std::set<int> dead_;
};

class ShmWatcherTest : public ::testing::Test {
  protected:
    void SetUp() override {
        static int n = 0;
        name_ = "atlas-wtest-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
    }
    void TearDown() override {
        if (view_ != nullptr) {
            ::munmap(view_, sizeof(ShmSegment));
        }
        arbiter_.reset();
        ::unlink(("/dev/shm/" + name_).c_str());
    }
    ShmArbiter& open(Nanos slot = 0) {
        ShmConfig c;
        c.name = name_;
        c.slot_ns = slot;
        c.lease_ns = kLease;
        c.logger = log_.logger();
        c.clock = &clock_;
        c.probe = &probe_;
        c.watcher_thread = false;
        auto r = ShmArbiter::open(c);
        EXPECT_TRUE(r.isOk()) << r.status().toString();
        arbiter_ = r.value();
        return *arbiter_;
    }
    std::unique_ptr<FlowGate> gate(Waker& w, std::shared_ptr<LinkRate> rate = nullptr) {
        auto g = arbiter_->makeGate({0, 0, 0}, w.fn(), std::move(rate));
        EXPECT_TRUE(g.isOk()) << g.status().toString();
        return std::move(g.value());
    }
    // The segment as another process maps it.
    ShmSegment& seg() {
        if (view_ == nullptr) {
            const int fd = ::open(("/dev/shm/" + name_).c_str(), O_RDWR);
            void* m =
                ::mmap(nullptr, sizeof(ShmSegment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            ::close(fd);
            EXPECT_NE(m, MAP_FAILED);
            view_ = static_cast<ShmSegment*>(m);
        }
        return *view_;
    }
    // Registers a fake process `pid` (heartbeat at alive_ns) owning a new flow that joins the
    // FIFO at now: what another process's ShmArbiter and gate would write. Returns the flow.
    uint32_t otherProcessJoins(int pid, Nanos alive_ns, Nanos now) {
        ShmSegment& s = seg();
        pthread_mutex_lock(&s.lock);
        int p = 0;
        while (s.procs[p].pid.load() != 0 && s.procs[p].pid.load() != pid) {
            ++p;
        }
        s.procs[p].start_time.store(7);
        s.procs[p].alive_ns.store(alive_ns);
        s.procs[p].pid.store(pid);
        sched::TemporalCore f = segmentFifo(s);
        uint32_t e = 0;
        while (!f.open(e)) {
            ++e;
        }
        s.flows[e].proc = p;
        f.join(e, now);
        f.decidePriority(now, s.slot_ns, s.max_wait_ns);
        pthread_mutex_unlock(&s.lock);
        return e;
    }

    std::string name_;
    CaptureLog log_;
    ManualClock clock_{kT0};
    FakeProbe probe_;
    std::shared_ptr<ShmArbiter> arbiter_;
    ShmSegment* view_ = nullptr;
};

TEST_F(ShmWatcherTest, GrantsInFifoOrderAndTheWatcherDeliversThem) {
    ShmArbiter& a = open();
    Waker w[3];
    auto g0 = gate(w[0]);
    auto g1 = gate(w[1]);
    auto g2 = gate(w[2]);
    ASSERT_TRUE(g0->acquire(1, kT0)) << "free link: granted at once";
    EXPECT_FALSE(g2->acquire(1, kT0 + 1));
    EXPECT_FALSE(g1->acquire(1, kT0 + 2));
    EXPECT_FALSE(g2->acquire(1, kT0 + 3)) << "asking again keeps the turn";
    g0->release(10, kT0 + 4);  // no rate: the link goes to the FIFO head at once
    EXPECT_EQ(w[2].calls.load(), 0) << "delivered by the watcher, not the releasing engine";
    a.runWatcher(kT0 + 5);
    EXPECT_EQ(w[2].calls.load(), 1);
    EXPECT_EQ(w[1].calls.load(), 0);
    EXPECT_TRUE(g2->acquire(1, kT0 + 6));
    g2->release(10, kT0 + 7);
    a.runWatcher(kT0 + 8);
    EXPECT_EQ(w[1].calls.load(), 1);
    EXPECT_TRUE(g1->acquire(1, kT0 + 9));
    g1->release(10, kT0 + 10);
    EXPECT_EQ(a.snapshot().grants, 3u);
    EXPECT_EQ(a.snapshot().holder_flow, -1);
}

TEST_F(ShmWatcherTest, DrainedFlowKeepsTheLinkUntilItsBytesCrossedIt) {
    ShmArbiter& a = open();
    auto rate = std::make_shared<FixedLinkRate>(8'000'000);  // 1 MB/s: 1 KB takes 1 ms
    Waker w1, w2;
    auto g1 = gate(w1, rate);
    auto g2 = gate(w2, rate);
    ASSERT_TRUE(g1->acquire(6'000, kT0));
    g1->release(6'000, kT0 + kNsPerMs);  // the kernel took it all at once
    EXPECT_TRUE(g1->acquire(4'000, kT0 + 2 * kNsPerMs)) << "alone: resumed while draining";
    g1->release(4'000, kT0 + 3 * kNsPerMs);  // 10 KB under the grant: through at 10 ms
    EXPECT_FALSE(g2->acquire(1'000, kT0 + 4 * kNsPerMs));
    // g1's third message finds g2 waiting: no resume, it takes a turn after g2's.
    EXPECT_FALSE(g1->acquire(2'000, kT0 + 5 * kNsPerMs)) << "resumed ahead of a waiter";
    EXPECT_EQ(a.runWatcher(kT0 + 5 * kNsPerMs), kT0 + 10 * kNsPerMs) << "wakes at the drain end";
    a.runWatcher(kT0 + 10 * kNsPerMs - 1);
    EXPECT_EQ(w2.calls.load(), 0) << "10 KB are not through yet";
    a.runWatcher(kT0 + 10 * kNsPerMs);
    EXPECT_EQ(w2.calls.load(), 1);
    EXPECT_EQ(w1.calls.load(), 0);
    EXPECT_TRUE(g2->acquire(1'000, kT0 + 11 * kNsPerMs));
    g2->release(1'000, kT0 + 11 * kNsPerMs);  // through at 12 ms
    a.runWatcher(kT0 + 12 * kNsPerMs);
    EXPECT_EQ(w1.calls.load(), 1) << "g1's third message, after g2";
    EXPECT_TRUE(g1->acquire(2'000, kT0 + 13 * kNsPerMs));
    EXPECT_EQ(a.snapshot().grants, 3u) << "the resumed grant was not a new one";
    g1->release(2'000, kT0 + 13 * kNsPerMs);
}

TEST_F(ShmWatcherTest, AnExpiredLeaseIsHandedOnWithoutTheHoldersEngine) {
    const Nanos slot = 20 * kNsPerMs;
    ShmArbiter& a = open(slot);
    Waker w1, w2;
    auto g1 = gate(w1);
    auto g2 = gate(w2);
    ASSERT_TRUE(g1->acquire(1, kT0));
    EXPECT_FALSE(g2->acquire(1, kT0 + 1));
    EXPECT_EQ(a.runWatcher(kT0 + 2), kT0 + slot) << "the waiter's watcher wakes at the lease end";
    a.runWatcher(kT0 + slot - 1);
    EXPECT_EQ(w2.calls.load(), 0) << "a lease is a promise";
    // g1's engine is busy elsewhere and has not noticed its slot ended: the link moves on.
    a.runWatcher(kT0 + slot);
    EXPECT_EQ(w2.calls.load(), 1);
    EXPECT_FALSE(g1->holds(kT0 + slot));
    EXPECT_TRUE(g2->acquire(1, kT0 + slot + 1));
    // g1 comes back: releases and asks again, behind g2.
    g1->release(1, kT0 + slot + 2);
    EXPECT_FALSE(g1->acquire(1, kT0 + slot + 3));
    g2->release(1, kT0 + slot + 4);
    a.runWatcher(kT0 + slot + 5);
    EXPECT_EQ(w1.calls.load(), 1);
    EXPECT_TRUE(g1->acquire(1, kT0 + slot + 6));
}

TEST_F(ShmWatcherTest, LivenessProbesRunOnTheWatcherOutsideTheLockNeverOnTheEngine) {
    ShmArbiter& a = open();
    Waker w, w_other;
    auto g = gate(w);
    auto other_gate = gate(w_other);
    // Another process holds the link; its heartbeat stopped a lease ago.
    otherProcessJoins(424242, kT0 - 2 * kLease, kT0);
    ASSERT_FALSE(g->acquire(1, kT0)) << "the other process holds the link";
    probe_.markDead(424242);
    probe_.block();  // a /proc read that takes its time
    std::thread watcher;
    std::future<bool> engine;
    // However the test ends: the probe answers, the engine finishes, the watcher is joined.
    struct Finally {
        FakeProbe& probe;
        std::thread& watcher;
        ~Finally() {
            probe.unblock();
            if (watcher.joinable()) {
                watcher.join();
            }
        }
    } finally{probe_, watcher};
    watcher = std::thread([&] { a.runWatcher(kT0 + 1); });
    const std::thread::id watcher_id = watcher.get_id();
    ASSERT_TRUE(probe_.waitEntered());
    // While the watcher waits on the probe, the engine path and the service path go on.
    std::thread::id engine_id;
    engine = std::async(std::launch::async, [&] {
        engine_id = std::this_thread::get_id();
        const bool got = other_gate->acquire(1, kT0 + 2);  // queues behind g
        other_gate->release(0, kT0 + 3);                   // and gives up its turn
        return got;
    });
    ASSERT_EQ(engine.wait_for(std::chrono::seconds(5)), std::future_status::ready)
        << "the engine waited for a liveness probe: a lock is held across it";
    EXPECT_FALSE(engine.get());
    EXPECT_EQ(a.snapshot().holder_pid, 424242) << "not revoked yet: the probe has not answered";
    probe_.unblock();
    watcher.join();
    EXPECT_EQ(a.snapshot().revocations, 1u);
    EXPECT_GE(log_.count(LogLevel::kWarn, "is gone"), 1) << log_.all();
    a.runWatcher(kT0 + 4);
    EXPECT_EQ(w.calls.load(), 1) << "the next in line got the link";
    EXPECT_TRUE(g->acquire(1, kT0 + 5));
    const auto callers = probe_.callers();
    EXPECT_NE(std::find(callers.begin(), callers.end(), watcher_id), callers.end());
    EXPECT_EQ(std::find(callers.begin(), callers.end(), engine_id), callers.end())
        << "probed on the engine's thread";
}

TEST_F(ShmWatcherTest, ASilentButLiveHolderLosesTheLinkAfterTheLease) {
    ShmArbiter& a = open();
    Waker w;
    auto g = gate(w);
    otherProcessJoins(515151, kT0, kT0);  // alive, stamped now
    ASSERT_FALSE(g->acquire(1, kT0));
    a.runWatcher(kT0 + kLease - kLease / 8);  // after our heartbeats: the next is later
    EXPECT_EQ(a.runWatcher(kT0 + kLease - 1), kT0 + kLease + 1) << "wakes at its deadline";
    a.runWatcher(kT0 + kLease);
    EXPECT_EQ(w.calls.load(), 0) << "not before the lease ran out";
    a.runWatcher(kT0 + kLease + 1);
    a.runWatcher(kT0 + kLease + 2);
    EXPECT_EQ(w.calls.load(), 1);
    EXPECT_TRUE(g->acquire(1, kT0 + kLease + 3));
    EXPECT_EQ(a.snapshot().revocations, 1u);
    EXPECT_GE(log_.count(LogLevel::kWarn, "silent"), 1) << log_.all();
    EXPECT_EQ(a.snapshot().procs, 2u) << "alive: it stays registered";
}

TEST_F(ShmWatcherTest, ADeadWaiterAheadIsDroppedBeforeItsTurn) {
    ShmArbiter& a = open();
    Waker w1, w2;
    auto g1 = gate(w1);
    auto g2 = gate(w2);
    ASSERT_TRUE(g1->acquire(1, kT0));
    otherProcessJoins(616161, kT0, kT0 + 1);  // waits ahead of g2 ...
    EXPECT_FALSE(g2->acquire(1, kT0 + 2));
    probe_.markDead(616161);  // ... and dies
    a.runWatcher(kT0 + 3);    // g2 waits: the watcher checks the other contenders
    EXPECT_EQ(a.snapshot().procs, 1u) << "its entry and flows are gone";
    g1->release(1, kT0 + 4);
    a.runWatcher(kT0 + 5);
    EXPECT_EQ(w2.calls.load(), 1) << "g2 next, not a lease's wait for a dead holder";
    EXPECT_TRUE(g2->acquire(1, kT0 + 6));
}

TEST_F(ShmWatcherTest, AStrayWriteIsRepairedByTheWatcher) {
    ShmArbiter& a = open();
    Waker w;
    auto g = gate(w);
    ShmSegment& s = seg();
    pthread_mutex_lock(&s.lock);
    s.fifo.holder = 200;  // names a flow that does not hold
    s.fifo.lease_end_ns = kT0 + kNsPerSec;
    pthread_mutex_unlock(&s.lock);
    a.runWatcher(kT0);
    EXPECT_EQ(a.snapshot().recoveries, 1u);
    EXPECT_GE(log_.count(LogLevel::kWarn, "repaired"), 1) << log_.all();
    EXPECT_TRUE(g->acquire(1, kT0 + 1)) << "the bogus holder was dropped";
}

}  // namespace
}  // namespace atlas::plugin::wan
