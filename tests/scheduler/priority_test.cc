// The admission priority rule (scheduler/temporal_state.h, "the pick"): waiting flows are
// served by FlowClass::priority, first come first served within one priority, a holder's
// lease is never cut short by a higher-priority arrival, and a flow that has waited
// max_wait_ns goes next whatever its priority (the starvation bound). Time is a ManualClock
// that the test moves; the policies only see the `now` it reads.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "atlas/common/clock.h"
#include "scheduler/temporal_policy.h"
#include "scheduler/temporal_state.h"
#include "scheduler/traffic_priority.h"
#include "scheduler/workload_aware.h"

namespace atlas::sched {
namespace {

constexpr Nanos kSlot = 1 * kNsPerMs;
constexpr uint64_t kLong = uint64_t{1} << 40;  // never completes within a test

FlowClass classOf(TrafficKind kind, PriorityOrder order, int32_t stage = 0) {
    FlowClass c;
    c.stage = stage;
    c.priority = admissionPriority(kind, order);
    return c;
}

// The flow holding the link after decide(now), 0 if none.
FlowId holderAt(LinkPolicy& p, Nanos now) {
    const auto g = p.decide(now);
    return g.empty() ? 0 : g[0].flow;
}

TEST(TrafficPriority, OrdersMapKindsToPriorities) {
    using K = TrafficKind;
    using O = PriorityOrder;
    EXPECT_LT(admissionPriority(K::kPipeline, O::kPipelineFirst),
              admissionPriority(K::kDataParallel, O::kPipelineFirst));
    EXPECT_LT(admissionPriority(K::kDataParallel, O::kCollectiveFirst),
              admissionPriority(K::kPipeline, O::kCollectiveFirst));
    for (K k : {K::kUnknown, K::kPipeline, K::kDataParallel}) {
        EXPECT_EQ(admissionPriority(k, O::kEqual), kDefaultPriority) << trafficKindName(k);
    }
    EXPECT_EQ(admissionPriority(K::kUnknown, O::kPipelineFirst), kDefaultPriority);
    auto bad = parsePriorityOrder("fast", "network.traffic_priority");
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("network.traffic_priority='fast'"), std::string::npos);
    EXPECT_EQ(parsePriorityOrder("Collective").value(), O::kCollectiveFirst);
}

// A pipeline transfer that arrives after a queued collective is granted before it, once the
// current holder's lease ends (not earlier: the lease is a promise). Under `equal` the
// collective goes first (arrival order), as before priorities existed.
void pipelineOvertakesAQueuedCollective(PolicyKind kind) {
    for (PriorityOrder order : {PriorityOrder::kPipelineFirst, PriorityOrder::kEqual}) {
        SCOPED_TRACE(priorityOrderName(order));
        PolicyConfig cfg;
        cfg.max_slot_ns = kSlot;
        cfg.max_wait_ns = 100 * kSlot;  // no aging within this test
        auto made = makePolicy(kind, cfg);
        ASSERT_TRUE(made.isOk());
        LinkPolicy& p = *made.value();
        ManualClock clock(0);
        const FlowClass collective = classOf(TrafficKind::kDataParallel, order, 1);
        const FlowClass pipeline = classOf(TrafficKind::kPipeline, order, 2);
        ASSERT_TRUE(p.onRequest(1, collective, kLong, clock.nowNs()).isOk());  // holds
        EXPECT_EQ(holderAt(p, clock.nowNs()), 1u);
        clock.advance(kSlot / 4);
        ASSERT_TRUE(p.onRequest(2, collective, kLong, clock.nowNs()).isOk());  // queued first
        clock.advance(kSlot / 4);
        ASSERT_TRUE(p.onRequest(3, pipeline, kLong, clock.nowNs()).isOk());  // queued later
        EXPECT_EQ(holderAt(p, clock.nowNs()), 1u) << "no preemption before the lease ends";
        clock.set(kSlot);
        const FlowId first = holderAt(p, clock.nowNs());
        if (order == PriorityOrder::kEqual) {
            EXPECT_EQ(first, 2u) << "equal priorities: first come first served";
        } else {
            EXPECT_EQ(first, 3u) << "the pipeline transfer goes ahead of the queued collective";
            clock.set(2 * kSlot);
            EXPECT_EQ(holderAt(p, clock.nowNs()), 3u)
                << "the pipeline flow keeps priority over the waiting collectives";
            ASSERT_TRUE(p.onComplete(3, clock.nowNs()).isOk());
            EXPECT_EQ(holderAt(p, clock.nowNs()), 2u) << "then the collectives, in arrival order";
        }
    }
}

TEST(PriorityTest, TemporalFifoServesAPipelineTransferBeforeAQueuedCollective) {
    pipelineOvertakesAQueuedCollective(PolicyKind::kTemporal);
}

TEST(PriorityTest, WorkloadAwareServesAPipelineTransferBeforeAQueuedCollective) {
    pipelineOvertakesAQueuedCollective(PolicyKind::kWorkload);
}

// Two pipeline flows that always have bytes to send would keep a collective waiting for ever;
// the age bound serves it at the first decision after it has waited max_wait_ns, and after
// its lease the pipeline flows go first again.
void agedCollectiveIsServed(PolicyKind kind) {
    PolicyConfig cfg;
    cfg.max_slot_ns = kSlot;
    cfg.max_wait_ns = 5 * kSlot;
    auto made = makePolicy(kind, cfg);
    ASSERT_TRUE(made.isOk());
    LinkPolicy& p = *made.value();
    ManualClock clock(0);
    const auto order = PriorityOrder::kPipelineFirst;
    ASSERT_TRUE(p.onRequest(1, classOf(TrafficKind::kPipeline, order, 0), kLong, 0).isOk());
    ASSERT_TRUE(p.onRequest(2, classOf(TrafficKind::kPipeline, order, 1), kLong, 0).isOk());
    EXPECT_EQ(holderAt(p, clock.nowNs()), 1u);  // leases end on whole slots from here
    clock.set(kSlot / 2);
    const Nanos asked = clock.nowNs();
    ASSERT_TRUE(p.onRequest(3, classOf(TrafficKind::kDataParallel, order, 2), kLong, asked).isOk());
    Nanos granted = kNever;
    std::vector<FlowId> holders;
    while (clock.nowNs() <= 20 * kSlot) {
        const FlowId h = holderAt(p, clock.nowNs());
        holders.push_back(h);
        if (h == 3 && granted == kNever) {
            granted = clock.nowNs();
        }
        clock.set(p.nextDecisionNs(clock.nowNs()));
    }
    ASSERT_NE(granted, kNever) << "the collective starved behind the pipeline flows";
    EXPECT_GE(granted - asked, cfg.max_wait_ns) << "served before it aged: priority ignored";
    // Bound: the first lease end after it aged (n = 3 contenders: max_wait + n slots).
    EXPECT_LE(granted - asked, cfg.max_wait_ns + 3 * kSlot);
    EXPECT_EQ(granted, 6 * kSlot) << "the first lease end after 0.5 + 5 slots";
    // After its one lease it waits again (a new arrival, priority 2): the pipeline flows
    // take the next grants.
    size_t after = 0;
    while (after < holders.size() && holders[after] != 3) {
        ++after;
    }
    ASSERT_LT(after + 1, holders.size());
    EXPECT_NE(holders[after + 1], 3u);
}

TEST(PriorityTest, TemporalFifoServesAnAgedCollectiveWithinTheBound) {
    agedCollectiveIsServed(PolicyKind::kTemporal);
}

TEST(PriorityTest, WorkloadAwareServesAnAgedCollectiveWithinTheBound) {
    agedCollectiveIsServed(PolicyKind::kWorkload);
}

// The pick itself over plain state: priority first, FIFO within a priority, an aged waiter
// before all (FIFO among the aged), and plain FIFO when every priority is the same.
TEST(PriorityTest, PriorityHeadOrdersByPriorityThenSequenceAgedFirst) {
    TemporalLink link{};
    std::array<TemporalEntry, 6> entries{};
    TemporalCore::reset(link);
    TemporalCore c(link, entries);
    const uint8_t prio[6] = {2, 0, 1, 0, 2, 9};  // 9: out of range, counts as the last level
    for (uint32_t e = 0; e < 6; ++e) {
        ASSERT_TRUE(c.open(e, prio[e]));
    }
    EXPECT_EQ(entries[5].priority, kPriorityLevels - 1);
    constexpr Nanos kWait = 100;
    const Nanos joined[6] = {0, 10, 20, 30, 40, 50};
    for (uint32_t e = 0; e < 6; ++e) {
        ASSERT_TRUE(c.join(e, joined[e]));
    }
    EXPECT_EQ(c.priorityHead(60, kWait), 1u) << "priority 0, earliest of the two";
    EXPECT_EQ(c.priorityHead(60, kNever), 1u);
    EXPECT_EQ(c.agedHead(99, kWait), TemporalCore::kNone);
    EXPECT_EQ(c.priorityHead(100, kWait), 0u) << "entry 0 waited 100: aged, goes first";
    EXPECT_EQ(c.agedHead(125, kWait), 0u) << "FIFO among the aged";
    c.leave(0);
    EXPECT_EQ(c.priorityHead(125, kWait), 1u) << "entry 1 aged too, and first of the aged";
    c.leave(1);
    EXPECT_EQ(c.priorityHead(125, kWait), 2u) << "aged entry 2 (priority 1) before entry 3 (0)";
    EXPECT_EQ(c.priorityHead(125, kNever), 3u) << "without aging: priority 0";
    EXPECT_TRUE(c.validate().isOk());

    // One priority for all: the pick is fifoHead() at any time (joins happen in time order,
    // so the smallest sequence is also the longest waiter, aged or not).
    TemporalLink l2{};
    std::array<TemporalEntry, 6> e2{};
    TemporalCore::reset(l2);
    TemporalCore f(l2, e2);
    Nanos t = 0;
    for (uint32_t e : {4u, 1u, 5u, 0u}) {
        f.open(e, 3);
        f.join(e, t);
        t += 10;
    }
    for (Nanos now : {Nanos{0}, Nanos{15}, Nanos{45}, Nanos{1000}}) {
        EXPECT_EQ(f.priorityHead(now, 20), f.fifoHead()) << "now " << now;
    }
}

TEST(PriorityTest, ValidateAndRepairCoverThePriority) {
    TemporalLink link{};
    std::array<TemporalEntry, 4> entries{};
    TemporalCore::reset(link);
    TemporalCore c(link, entries);
    c.open(1, 0);
    c.join(1, 5);
    entries[1].priority = kPriorityLevels;  // a stray write in shared memory
    EXPECT_NE(c.validate().message().find("invalid priority"), std::string::npos);
    EXPECT_EQ(c.repair(), 1u);
    EXPECT_EQ(entries[1].priority, kDefaultPriority);
    EXPECT_TRUE(c.validate().isOk());
    EXPECT_EQ(c.priorityHead(5, kNever), 1u);
}

TEST(PriorityTest, AgingBoundDefaultsToTwentySlots) {
    PolicyConfig cfg;
    cfg.max_slot_ns = 250 * kNsPerMs;
    cfg.max_wait_ns = 0;
    EXPECT_EQ(agingBoundNs(cfg), 5 * kNsPerSec);
    cfg.max_slot_ns = 0;
    EXPECT_EQ(agingBoundNs(cfg), 200 * kNsPerMs);
    cfg.max_wait_ns = 7;
    EXPECT_EQ(agingBoundNs(cfg), 7);
    cfg.max_wait_ns = 0;
    cfg.max_slot_ns = kNever / 2;
    EXPECT_EQ(agingBoundNs(cfg), kNever) << "saturates";
    EXPECT_FALSE(TemporalCore::aged(0, kNever, kNever)) << "kNever never ages";
    EXPECT_FALSE(TemporalCore::aged(0, -5, 10)) << "no overflow below the epoch";
}

}  // namespace
}  // namespace atlas::sched
