// Node-local arbitration through shared memory: FIFO order, mutual exclusion across
// processes, a SIGKILLed or stopped holder losing the link within the lease, repair after a
// process died holding the mutex, rejection of foreign or other-version segments, and the
// link rate pooled across the node's processes.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "plugin/wan/link_rate.h"
#include "plugin/wan/shm_arbiter.h"
#include "plugin/wan/shm_layout.h"
#include "plugin_host/plugin_host.h"
#include "tests/arbiter/test_util.h"

namespace atlas::plugin::wan {
namespace {

using arbiter::testing::CaptureLog;
using arbiter::testing::waitFor;
using arbiter::testing::Waker;
using std::chrono::milliseconds;

// A unique segment name per test, removed afterwards.
class ShmTest : public ::testing::Test {
  protected:
    void SetUp() override {
        static int n = 0;
        name_ = "atlas-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
    }
    void TearDown() override { ::unlink(path().c_str()); }
    std::string path() const { return "/dev/shm/" + name_; }
    ShmConfig config(Nanos slot = 0, Nanos lease = 150 * kNsPerMs) {
        ShmConfig c;
        c.name = name_;
        c.slot_ns = slot;
        c.lease_ns = lease;
        c.logger = log_.logger();
        return c;
    }
    std::shared_ptr<ShmArbiter> open(Nanos slot = 0, Nanos lease = 150 * kNsPerMs) {
        auto r = ShmArbiter::open(config(slot, lease));
        EXPECT_TRUE(r.isOk()) << r.status().toString();
        return r.isOk() ? r.value() : nullptr;
    }
    std::unique_ptr<FlowGate> gate(ShmArbiter& a, Waker& w, int pipeline = 0) {
        auto g = a.makeGate({pipeline, 0, 0}, w.fn());
        EXPECT_TRUE(g.isOk()) << g.status().toString();
        return g.isOk() ? std::move(g.value()) : nullptr;
    }

    std::string name_;
    CaptureLog log_;
};

bool acquireWithin(FlowGate& g, Waker& w, milliseconds budget) {
    // The waker count is read before each ask, so a grant that lands between the ask and the
    // wait is not missed; a wake-up that brings no grant asks again.
    const auto end = std::chrono::steady_clock::now() + budget;
    for (;;) {
        const int seen = w.calls.load();
        if (g.acquire(1, monotonicNowNs())) {
            return true;
        }
        const auto left =
            std::chrono::duration_cast<milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0 || !waitFor([&] { return w.calls.load() > seen; }, left)) {
            return false;
        }
    }
}

TEST_F(ShmTest, FirstComeFirstServedOneAtATime) {
    auto a = open();
    ASSERT_NE(a, nullptr);
    Waker w[4];
    std::unique_ptr<FlowGate> g[4];
    for (int i = 0; i < 4; ++i) {
        g[i] = gate(*a, w[i], i);
    }
    ASSERT_TRUE(g[0]->acquire(1, monotonicNowNs())) << "free link: granted at once";
    EXPECT_TRUE(g[0]->holds(monotonicNowNs()));
    for (int i : {2, 3, 1}) {
        EXPECT_FALSE(g[i]->acquire(1, monotonicNowNs()));
    }
    EXPECT_EQ(a->snapshot().waiting, 3u);
    std::vector<int> order;
    int holder = 0;
    for (int round = 0; round < 3; ++round) {
        g[holder]->release(10, monotonicNowNs());
        int next = -1;
        ASSERT_TRUE(waitFor([&] {
            for (int i = 0; i < 4; ++i) {
                if (w[i].calls.load() > 0) {
                    next = i;
                    return true;
                }
            }
            return false;
        }));
        ASSERT_TRUE(g[next]->acquire(1, monotonicNowNs()));
        order.push_back(next);
        for (auto& x : w) {
            x.calls.store(0);
        }
        holder = next;
    }
    g[holder]->release(10, monotonicNowNs());
    EXPECT_EQ(order, (std::vector<int>{2, 3, 1}));
    EXPECT_EQ(a->snapshot().grants, 4u);
    EXPECT_EQ(a->snapshot().holder_flow, -1);
}

TEST_F(ShmTest, SlotEndsAreEnforcedAndTheHolderQueuesAgain) {
    auto a = open(20 * kNsPerMs);
    ASSERT_NE(a, nullptr);
    Waker w1, w2;
    auto g1 = gate(*a, w1);
    auto g2 = gate(*a, w2);
    const Nanos t0 = monotonicNowNs();
    ASSERT_TRUE(g1->acquire(1, t0));
    EXPECT_TRUE(g1->holds(t0 + 10 * kNsPerMs));
    EXPECT_FALSE(g1->holds(t0 + 21 * kNsPerMs));
    EXPECT_FALSE(g2->acquire(1, t0));
    // Slot over with data left: the transport releases and asks again; g2 goes first.
    g1->release(1, t0 + 21 * kNsPerMs);
    EXPECT_FALSE(g1->acquire(1, t0 + 21 * kNsPerMs));
    ASSERT_TRUE(waitFor([&] { return w2.calls.load() > 0; }));
    EXPECT_TRUE(g2->acquire(1, monotonicNowNs()));
    g2->release(1, monotonicNowNs());
    ASSERT_TRUE(waitFor([&] { return w1.calls.load() > 0; }));
    EXPECT_TRUE(g1->acquire(1, monotonicNowNs()));
    g1->release(1, monotonicNowNs());
}

TEST_F(ShmTest, SixtyFourFlowsInFourProcessesNeverOverlap) {
    // Shared counters: holders right now, the most ever seen, and completed rounds.
    auto* shared = static_cast<std::atomic<int>*>(
        ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    ASSERT_NE(shared, MAP_FAILED);
    new (&shared[0]) std::atomic<int>(0);
    new (&shared[1]) std::atomic<int>(0);
    new (&shared[2]) std::atomic<int>(0);
    const ShmConfig cfg = config(0, 500 * kNsPerMs);
    constexpr int kProcs = 4;
    constexpr int kFlows = 16;
    constexpr int kRounds = 5;
    std::vector<abi::ChildProcess> kids;
    for (int p = 0; p < kProcs; ++p) {
        auto child = abi::ChildProcess::spawn([&, p](int) {
            auto a = ShmArbiter::open(cfg);
            if (!a) {
                std::fprintf(stderr, "open: %s\n", a.status().toString().c_str());
                return 2;
            }
            std::vector<Waker> w(kFlows);
            std::vector<std::unique_ptr<FlowGate>> g;
            for (int i = 0; i < kFlows; ++i) {
                auto r = a.value()->makeGate({p * kFlows + i, 0, 0}, w[i].fn());
                if (!r) {
                    return 3;
                }
                g.push_back(std::move(r.value()));
            }
            std::vector<int> rounds(kFlows, 0);
            int finished = 0;
            const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while (finished < kFlows && std::chrono::steady_clock::now() < end) {
                bool progressed = false;
                for (int i = 0; i < kFlows; ++i) {
                    if (rounds[i] < kRounds && g[i]->acquire(1, monotonicNowNs())) {
                        const int h = shared[0].fetch_add(1) + 1;
                        int m = shared[1].load();
                        while (h > m && !shared[1].compare_exchange_weak(m, h)) {
                        }
                        shared[0].fetch_sub(1);
                        g[i]->release(1, monotonicNowNs());
                        shared[2].fetch_add(1);
                        finished += ++rounds[i] == kRounds ? 1 : 0;
                        progressed = true;
                    }
                }
                if (!progressed) {
                    std::this_thread::sleep_for(std::chrono::microseconds(100));
                }
            }
            g.clear();
            a.value()->shutdown();
            return finished == kFlows ? 0 : 4;
        });
        ASSERT_TRUE(child.isOk());
        kids.push_back(std::move(child.value()));
    }
    for (auto& k : kids) {
        auto st = k.wait(abi::Deadline::afterMs(90000));
        ASSERT_TRUE(st.isOk());
        EXPECT_EQ(st.value(), 0) << abi::describeWaitStatus(st.value());
    }
    EXPECT_EQ(shared[2].load(), kProcs * kFlows * kRounds);
    EXPECT_EQ(shared[1].load(), 1) << "one holder at a time across processes";
    ::munmap(shared, 4096);
}

// A child takes the link and reports; the parent's flow waits behind it.
abi::ChildProcess holderChild(const ShmConfig& cfg) {
    auto child = abi::ChildProcess::spawn([cfg](int fd) {
        auto a = ShmArbiter::open(cfg);
        if (!a) {
            return 2;
        }
        Waker w;
        auto g = a.value()->makeGate({9, 0, 0}, w.fn());
        if (!g || !acquireWithin(*g.value(), w, milliseconds(5000))) {
            return 3;
        }
        const uint8_t one = 1;
        if (::write(fd, &one, 1) != 1) {
            return 4;
        }
        for (;;) {
            ::pause();
        }
    });
    EXPECT_TRUE(child.isOk());
    return std::move(child.value());
}

TEST_F(ShmTest, SigkilledHolderLosesTheLinkWithinTheLease) {
    const Nanos lease = 150 * kNsPerMs;
    // Forked before this process opens its arbiter (whose watcher thread would make the fork
    // multi-threaded; the child starts its own watcher, which TSan forbids after such a fork).
    auto child = holderChild(config(0, lease));
    ASSERT_TRUE(abi::recvByte(child.fd(), abi::Deadline::afterMs(10000)).isOk());
    auto a = open(0, lease);
    ASSERT_NE(a, nullptr);
    Waker w;
    auto g = gate(*a, w);
    EXPECT_FALSE(acquireWithin(*g, w, milliseconds(300))) << "the child holds the link";
    const auto t0 = std::chrono::steady_clock::now();
    child.kill(SIGKILL);
    ASSERT_TRUE(acquireWithin(*g, w, milliseconds(5000)));
    const auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_LE(waited, milliseconds(150 + 150 / 4 + 1000)) << "lease + heartbeat + slack (CI)";
    EXPECT_GE(a->snapshot().revocations, 1u);
    EXPECT_GE(log_.count(LogLevel::kWarn, "is gone"), 1) << log_.all();
    g->release(1, monotonicNowNs());
}

TEST_F(ShmTest, StoppedHolderLosesTheLinkAfterTheLease) {
    const Nanos lease = 150 * kNsPerMs;
    // Forked before this process opens its arbiter (whose watcher thread would make the fork
    // multi-threaded; the child starts its own watcher, which TSan forbids after such a fork).
    auto child = holderChild(config(0, lease));
    ASSERT_TRUE(abi::recvByte(child.fd(), abi::Deadline::afterMs(10000)).isOk());
    auto a = open(0, lease);
    ASSERT_NE(a, nullptr);
    Waker w;
    auto g = gate(*a, w);
    EXPECT_FALSE(g->acquire(1, monotonicNowNs()));
    const auto t0 = std::chrono::steady_clock::now();
    child.kill(SIGSTOP);  // alive but silent: a hung or partitioned holder
    ASSERT_TRUE(acquireWithin(*g, w, milliseconds(5000)));
    const auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(waited, milliseconds(100)) << "not before its heartbeat went stale";
    EXPECT_LE(waited, milliseconds(1500));
    EXPECT_GE(log_.count(LogLevel::kWarn, "silent"), 1) << log_.all();
    g->release(1, monotonicNowNs());
    child.kill(SIGKILL);
}

TEST_F(ShmTest, ProcessDyingInsideTheLockIsRepaired) {
    auto a = open();
    ASSERT_NE(a, nullptr);
    const std::string p = path();
    auto child = abi::ChildProcess::spawn([p](int) {
        const int fd = ::open(p.c_str(), O_RDWR);
        void* m = ::mmap(nullptr, sizeof(ShmSegment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            return 2;
        }
        auto* seg = static_cast<ShmSegment*>(m);
        pthread_mutex_lock(&seg->lock);
        seg->fifo.holder = 77;  // a half-done update: names a flow that was never granted
        ::_exit(0);             // dies holding the mutex
    });
    ASSERT_TRUE(child.isOk());
    auto st = child.value().wait(abi::Deadline::afterMs(10000));
    ASSERT_TRUE(st.isOk());
    Waker w;
    auto g = gate(*a, w);  // locks: EOWNERDEAD, repaired
    ASSERT_NE(g, nullptr);
    EXPECT_TRUE(g->acquire(1, monotonicNowNs())) << "the bogus holder was dropped";
    EXPECT_EQ(a->snapshot().recoveries, 1u);
    EXPECT_GE(log_.count(LogLevel::kWarn, "repaired"), 1);
    g->release(1, monotonicNowNs());
}

TEST_F(ShmTest, ForeignOtherVersionAndOtherOwnerSegmentsAreRejected) {
    {
        std::ofstream f(path());
        f << "definitely not an arbitration segment";
    }
    auto r = ShmArbiter::open(config());
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("not an Atlas arbitration segment"), std::string::npos)
        << r.status().message();

    // Right size and magic, another version: the next one, and version 1 (whose FIFO fields
    // were the plugin's own) left behind by an older build.
    for (uint32_t version : {kShmVersion + 1, 1u}) {
        std::vector<uint8_t> img(sizeof(ShmSegment), 0);
        auto* s = reinterpret_cast<ShmSegment*>(img.data());
        s->magic = kShmMagic;
        s->version = version;
        s->layout_size = sizeof(ShmSegment);
        s->max_procs = kShmMaxProcs;
        s->max_flows = kShmMaxFlows;
        s->lease_ns = 1;
        {
            std::ofstream f(path(), std::ios::binary | std::ios::trunc);
            f.write(reinterpret_cast<const char*>(img.data()),
                    static_cast<std::streamsize>(img.size()));
        }
        r = ShmArbiter::open(config());
        ASSERT_FALSE(r.isOk());
        EXPECT_NE(r.status().message().find("version " + std::to_string(version)),
                  std::string::npos)
            << r.status().message();
    }

    // Another user's file (only root can hand a file to another user).
    if (::geteuid() != 0) {
        return;
    }
    ASSERT_EQ(::chown(path().c_str(), 65534, 65534), 0);
    r = ShmArbiter::open(config());
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("foreign"), std::string::npos) << r.status().message();
}

TEST_F(ShmTest, ValidationCatchesCorruptTablesAndRepairFixesThem) {
    std::vector<uint8_t> img(sizeof(ShmSegment) + 64, 0);
    // Aligned as a mapping is (the segment holds atomics and a mutex).
    auto* s = reinterpret_cast<ShmSegment*>(
        img.data() + (64 - reinterpret_cast<uintptr_t>(img.data()) % 64) % 64);
    s->magic = kShmMagic;
    s->version = kShmVersion;
    s->layout_size = sizeof(ShmSegment);
    s->max_procs = kShmMaxProcs;
    s->max_flows = kShmMaxFlows;
    s->lease_ns = kNsPerMs;
    s->max_wait_ns = kNsPerSec;
    sched::TemporalCore::reset(s->fifo);
    EXPECT_FALSE(validateSegmentTable(*s).isOk()) << "a zeroed rate has no config to run on";
    s->rate = sched::PathRate();
    EXPECT_TRUE(validateSegmentHeader(s, sizeof(ShmSegment)).isOk());
    EXPECT_TRUE(validateSegmentTable(*s).isOk());
    EXPECT_FALSE(validateSegmentHeader(s, sizeof(ShmSegment) - 1).isOk());
    s->slot_ns = -1;
    EXPECT_FALSE(validateSegmentHeader(s, sizeof(ShmSegment)).isOk());
    s->slot_ns = 0;
    // A flow of process 0 holds the link: valid once process 0 is registered.
    sched::TemporalCore f = segmentFifo(*s);
    f.open(3);
    f.join(3, 1);
    f.decidePriority(1, 0, s->max_wait_ns);
    s->flows[3].proc = 0;
    EXPECT_NE(validateSegmentTable(*s).message().find("no registered process"), std::string::npos);
    s->procs[0].pid.store(1234);
    EXPECT_TRUE(validateSegmentTable(*s).isOk());
    s->fifo.holder = 4;  // not holding
    EXPECT_FALSE(validateSegmentTable(*s).isOk());
    s->fifo.holder = 3;
    s->entries[5].state = 9;
    s->flows[5].proc = 70;
    EXPECT_FALSE(validateSegmentTable(*s).isOk());
    const uint64_t before = s->recoveries;
    EXPECT_GT(repairSegmentTable(*s), 0u);
    EXPECT_TRUE(validateSegmentTable(*s).isOk()) << validateSegmentTable(*s).message();
    EXPECT_EQ(s->recoveries, before + 1);
    EXPECT_EQ(s->sweep, 1u) << "the watchers look for dead processes next";
    EXPECT_EQ(f.holder(), 3u) << "the valid holder is kept";

    // The pooled rate: a state another process corrupted is caught, and starts over.
    size_t live = 0;
    for (int i = 1; i <= 3; ++i) {
        addSegmentRateSample(*s, 10 << 20, i * kNsPerSec, i * kNsPerSec + 84 * kNsPerMs, &live);
    }
    EXPECT_EQ(live, 3u);
    EXPECT_GT(s->rate_bps.load(), 900'000'000u);
    std::vector<uint8_t> saved(sizeof(sched::PathRate));
    std::memcpy(saved.data(), &s->rate, saved.size());
    // Past the config (5 x 8 bytes) and the ring (16 x 16): the ring's next index.
    reinterpret_cast<uint64_t*>(&s->rate)[5 + 32] = 99;
    EXPECT_NE(validateSegmentTable(*s).message().find("rate"), std::string::npos);
    EXPECT_GT(repairSegmentTable(*s), 0u);
    EXPECT_TRUE(validateSegmentTable(*s).isOk()) << validateSegmentTable(*s).message();
    EXPECT_EQ(s->rate_bps.load(), 0u) << "a repaired rate is unknown again";
    std::memcpy(&s->rate, saved.data(), saved.size());
    reinterpret_cast<uint64_t*>(&s->rate)[5 + 32] = 99;
    // A sample added to a corrupt state starts it over instead of writing past the ring.
    addSegmentRateSample(*s, 10 << 20, 5 * kNsPerSec, 5 * kNsPerSec + 84 * kNsPerMs, &live);
    EXPECT_EQ(live, 1u);
    EXPECT_TRUE(s->rate.consistent());
}

// The rate is the node's, not the process's: trains one process's receivers reported set
// the estimate another process holds its grants by (docs/arbitration.md "Measured link
// rate"), before that process has a sample of its own.
TEST_F(ShmTest, TrainsReportedInOneProcessSetTheRateOfAnother) {
    // The child goes first: a process forked after this one started its watcher thread
    // could not start its own under TSan. The samples stay in the segment after it left.
    const ShmConfig cfg = config();
    auto child = abi::ChildProcess::spawn([&](int) {
        auto b = ShmArbiter::open(cfg);
        if (!b) {
            return 2;
        }
        MeasuredLinkRate theirs(0, "dc0->dc1", {}, b.value()->ratePool());
        for (int i = 0; i < 3; ++i) {  // 10 MiB in 84 ms: 0.998 Gbit/s
            theirs.addSample(10 << 20, 84 * kNsPerMs, monotonicNowNs(), 0);
        }
        const bool known = theirs.measuredBps() > 0;
        b.value()->shutdown();
        return known ? 0 : 3;
    });
    ASSERT_TRUE(child.isOk()) << child.status().toString();
    auto st = child.value().wait(abi::Deadline::afterMs(30000));
    ASSERT_TRUE(st.isOk());
    ASSERT_EQ(st.value(), 0) << abi::describeWaitStatus(st.value());
    auto a = open();
    ASSERT_NE(a, nullptr);
    MeasuredLinkRate mine(0, "dc0->dc1", {}, a->ratePool());
    const double gbps = static_cast<double>(mine.bitsPerSec(monotonicNowNs())) / 1e9;
    EXPECT_NEAR(gbps, 0.998, 0.01) << "the other process's trains are this process's rate";
    // Our own train joins the same pool (four samples: the 75th percentile is still 0.998).
    mine.addSample(10 << 20, 168 * kNsPerMs, monotonicNowNs(), 0);
    EXPECT_NEAR(static_cast<double>(mine.measuredBps()) / 1e9, 0.998, 0.01);
    EXPECT_EQ(a->snapshot().procs, 1u) << "the child left the segment";
}

}  // namespace
}  // namespace atlas::plugin::wan
