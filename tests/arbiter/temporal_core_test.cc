// TemporalCore over plain state (scheduler/temporal_state.h), the FIFO that TemporalFifo and
// the node-local shared-memory arbitration both run: order, preemption at a lease end,
// renewal of a lone holder, leaving, and validation / repair of untrusted state.
#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <random>

#include "scheduler/temporal_policy.h"
#include "scheduler/temporal_state.h"

namespace atlas::sched {
namespace {

constexpr Nanos kSlot = 10 * kNsPerMs;

// A fixed table, as the shm segment stores it.
struct Table {
    Table() { TemporalCore::reset(link); }
    TemporalCore core() { return TemporalCore(link, entries); }
    TemporalLink link{};
    std::array<TemporalEntry, 8> entries{};
};

TEST(TemporalCore, GrantsInJoinOrderOneAtATime) {
    Table t;
    for (uint32_t e = 0; e < 5; ++e) {
        ASSERT_TRUE(t.core().open(e));
    }
    for (uint32_t e : {3u, 1u, 4u}) {
        ASSERT_TRUE(t.core().join(e, 100));
    }
    EXPECT_FALSE(t.core().join(3, 101)) << "already waiting";
    EXPECT_EQ(t.core().nextDecisionNs(100), 100) << "someone waits for a free link";
    std::vector<uint32_t> order;
    Nanos now = 100;
    for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(t.core().decidePriority(now, 0, kNever));
        order.push_back(t.core().holder());
        EXPECT_EQ(t.core().leaseEndNs(), kNever) << "slot 0: until it leaves";
        EXPECT_FALSE(t.core().decidePriority(now + 1, 0, kNever)) << "idempotent while held";
        EXPECT_TRUE(t.core().leave(order.back()));
        now += 10;
    }
    EXPECT_EQ(order, (std::vector<uint32_t>{3, 1, 4}));
    EXPECT_EQ(t.core().holder(), TemporalCore::kNone);
    EXPECT_EQ(t.link.grants, 3u);
    EXPECT_EQ(t.core().nextDecisionNs(now), kNever);
    EXPECT_TRUE(t.core().validate().isOk());
}

TEST(TemporalCore, LeaseEndPreemptsForAWaiterAndRenewsALoneHolder) {
    Table t;
    t.core().open(0);
    t.core().open(1);
    t.core().join(0, 0);
    ASSERT_TRUE(t.core().decidePriority(0, kSlot, kNever));
    EXPECT_EQ(t.core().leaseEndNs(), kSlot);
    EXPECT_EQ(t.core().nextDecisionNs(1), kSlot);
    // Alone at its lease end: a fresh lease, not a new grant.
    EXPECT_FALSE(t.core().decidePriority(kSlot, kSlot, kNever));
    EXPECT_EQ(t.core().holder(), 0u);
    EXPECT_EQ(t.core().leaseEndNs(), 2 * kSlot);
    EXPECT_EQ(t.link.grants, 1u);
    // A waiter arrives: the lease is a promise, so nothing changes before it ends ...
    t.core().join(1, kSlot + 1);
    EXPECT_FALSE(t.core().decidePriority(2 * kSlot - 1, kSlot, kNever));
    EXPECT_EQ(t.core().holder(), 0u);
    // ... and at its end the holder queues again behind the waiter.
    EXPECT_TRUE(t.core().decidePriority(2 * kSlot, kSlot, kNever));
    EXPECT_EQ(t.core().holder(), 1u);
    EXPECT_EQ(t.entries[0].state, kEntryWaiting);
    EXPECT_EQ(t.entries[0].queued_ns, 2 * kSlot);
    EXPECT_GT(t.entries[0].seq, t.entries[1].seq);
    EXPECT_TRUE(t.core().validate().isOk());
    // Closing the holder frees the link for the next decision.
    t.core().close(1);
    EXPECT_EQ(t.entries[1].state, kEntryUnused);
    EXPECT_TRUE(t.core().decidePriority(2 * kSlot + 1, kSlot, kNever));
    EXPECT_EQ(t.core().holder(), 0u);
}

TEST(TemporalCore, PickHookChoosesAndABadPickFallsBackToFifo) {
    Table t;
    for (uint32_t e = 0; e < 3; ++e) {
        t.core().open(e);
        t.core().join(e, e);
    }
    auto lease = [](uint32_t, Nanos now) { return now + 5; };
    EXPECT_TRUE(t.core().decide(
        10, [](Nanos) { return 2u; }, lease));
    EXPECT_EQ(t.core().holder(), 2u);
    EXPECT_EQ(t.core().leaseEndNs(), 15);
    t.core().leave(2);
    EXPECT_TRUE(t.core().decide(
        20, [](Nanos) { return 7u; }, lease))
        << "7 is not waiting";
    EXPECT_EQ(t.core().holder(), 0u) << "the FIFO head instead";
}

// A list-based model of first come first served with leases, written independently of the
// core: the core over a fixed table must pick exactly the same holders.
TEST(TemporalCore, MatchesAQueueModelOverRandomEvents) {
    std::mt19937 rng(7);
    Table t;
    for (uint32_t e = 0; e < t.entries.size(); ++e) {
        t.core().open(e);
    }
    std::deque<uint32_t> queue;
    int holder = -1;
    Nanos lease_end = 0;
    Nanos now = 0;
    for (int step = 0; step < 5000; ++step) {
        now += rng() % (kSlot / 2);
        const auto e = static_cast<uint32_t>(rng() % t.entries.size());
        switch (rng() % 3) {
            case 0:  // request
                if (t.core().join(e, now)) {
                    queue.push_back(e);
                }
                break;
            case 1:  // completion of the holder or cancellation of a waiter
                if (t.core().leave(e)) {
                    if (static_cast<int>(e) == holder) {
                        holder = -1;
                    } else {
                        queue.erase(std::find(queue.begin(), queue.end(), e));
                    }
                }
                break;
            default:
                break;
        }
        t.core().decidePriority(now, kSlot, kNever);
        if (holder >= 0 && now >= lease_end) {
            if (!queue.empty()) {
                queue.push_back(static_cast<uint32_t>(holder));
                holder = -1;
            } else {
                lease_end = now + kSlot;
            }
        }
        if (holder < 0 && !queue.empty()) {
            holder = static_cast<int>(queue.front());
            queue.pop_front();
            lease_end = now + kSlot;
        }
        ASSERT_EQ(t.link.holder, holder) << "step " << step;
        ASSERT_EQ(t.link.waiting, queue.size());
        if (holder >= 0) {
            ASSERT_EQ(t.core().leaseEndNs(), lease_end);
        }
    }
}

TEST(TemporalCore, ValidateNamesCorruptionsAndRepairRestoresEveryInvariant) {
    Table t;
    t.core().open(0);
    t.core().open(1);
    t.core().join(0, 1);
    t.core().join(1, 2);
    t.core().decidePriority(3, kSlot, kNever);
    ASSERT_TRUE(t.core().validate().isOk());

    Table bad = t;
    bad.link.holder = 1;  // holds in name only
    EXPECT_NE(bad.core().validate().message().find("does not hold"), std::string::npos);
    bad = t;
    bad.entries[5].state = kEntryHolding;
    EXPECT_NE(bad.core().validate().message().find("not the holder"), std::string::npos);
    bad = t;
    bad.link.waiting = 3;
    EXPECT_NE(bad.core().validate().message().find("waiting count"), std::string::npos);
    bad = t;
    bad.entries[1].seq = bad.link.next_seq;
    EXPECT_NE(bad.core().validate().message().find("future"), std::string::npos);
    bad = t;
    bad.link.holder = 99;
    EXPECT_NE(bad.core().validate().message().find("out of range"), std::string::npos);

    // Random garbage: repair() always ends in a state validate() accepts, and the core can
    // run on it.
    std::mt19937_64 rng(11);
    for (int round = 0; round < 2000; ++round) {
        Table g;
        auto* words = reinterpret_cast<uint64_t*>(&g.link);
        for (size_t i = 0; i < sizeof(g.link) / 8; ++i) {
            words[i] = rng() % 4 == 0 ? rng() : rng() % 9;
        }
        for (auto& e : g.entries) {
            e.state = static_cast<uint32_t>(rng() % 6);
            e.seq = rng() % 3 == 0 ? ~0ull - rng() % 3 : rng() % 16;
            e.queued_ns = static_cast<Nanos>(rng() % 1000);
        }
        g.core().repair();
        ASSERT_TRUE(g.core().validate().isOk()) << g.core().validate().message();
        g.core().decidePriority(2000, kSlot, kNever);
        ASSERT_TRUE(g.core().validate().isOk()) << g.core().validate().message();
    }
    EXPECT_EQ(t.core().repair(), 0u) << "a valid state is left alone";
}

TEST(TemporalCore, RepairKeepsTheWaitersOrderWhenItRenumbers) {
    Table t;
    for (uint32_t e = 0; e < 3; ++e) {
        t.core().open(e);
        t.core().join(e, 0);
    }
    t.entries[0].seq = ~0ull;  // a sequence from the future, last in line
    t.entries[1].seq = 5;
    t.entries[2].seq = 9;
    EXPECT_GT(t.core().repair(), 0u);
    ASSERT_TRUE(t.core().validate().isOk());
    std::vector<uint32_t> order;
    for (int i = 0; i < 3; ++i) {
        t.core().decidePriority(1, 0, kNever);
        order.push_back(t.core().holder());
        t.core().leave(order.back());
    }
    EXPECT_EQ(order, (std::vector<uint32_t>{1, 2, 0}));
}

TEST(TemporalCore, LeaseEndsSaturate) {
    EXPECT_EQ(slotLeaseEnd(5, 0), kNever);
    EXPECT_EQ(slotLeaseEnd(5, -1), kNever);
    EXPECT_EQ(slotLeaseEnd(5, 10), 15);
    EXPECT_EQ(slotLeaseEnd(kNever - 3, 10), kNever);
}

// The LinkPolicy keeps its state in the same plain form: its introspection reads the core.
TEST(TemporalCore, TemporalFifoRunsOnTheCore) {
    TemporalFifo p(PolicyConfig{.max_slot_ns = kSlot});
    ASSERT_TRUE(p.onRequest(7, {}, 100, 0).isOk());
    ASSERT_TRUE(p.onRequest(8, {}, 100, 1).isOk());
    auto g = p.decide(2);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].flow, 7u);
    EXPECT_EQ(g[0].until_ns, 2 + kSlot);
    EXPECT_EQ(p.waitingFlows(), 1u);
    g = p.decide(2 + kSlot);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].flow, 8u) << "preempted at the lease end";
    EXPECT_EQ(p.holder(), std::optional<FlowId>(8));
}

}  // namespace
}  // namespace atlas::sched
