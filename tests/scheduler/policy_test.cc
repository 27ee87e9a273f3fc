// Link policy semantics with exact numbers, over the fluid link model.
#include <gtest/gtest.h>

#include <map>

#include "scheduler/fair_share.h"
#include "scheduler/link_model.h"
#include "scheduler/link_policy.h"
#include "scheduler/temporal_policy.h"
#include "scheduler/workload_aware.h"

namespace atlas::sched {
namespace {

constexpr double kRate = 1e9;        // bytes per second: 1 byte per ns
constexpr uint64_t kS = 1'000'000;   // 1 MB = 1 ms at kRate
constexpr Nanos kSB = 1 * kNsPerMs;  // S / B
constexpr FlowClass kClass{0, 0, Direction::kForward};

std::unique_ptr<LinkPolicy> make(PolicyKind kind, PolicyConfig cfg = {}) {
    auto r = makePolicy(kind, cfg);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return std::move(r.value());
}

// Runs the link until it is idle; returns completion time per flow.
std::map<FlowId, Nanos> drain(FluidLink& link, std::vector<Completion> done = {}) {
    for (Nanos t = link.nextEventNs(); t != kNever; t = link.nextEventNs()) {
        EXPECT_TRUE(link.advanceTo(t, &done).isOk());
    }
    std::map<FlowId, Nanos> out;
    for (const Completion& c : done) {
        out[c.flow] = c.time_ns;
    }
    return out;
}

TEST(FairShareTest, TwoEqualTransfersFinishTogetherAtTwiceSOverB) {
    auto policy = make(PolicyKind::kFair);
    FluidLink link(*policy, kRate);
    std::vector<Completion> done;
    ASSERT_TRUE(link.submit(1, kClass, kS, 0, &done).isOk());
    ASSERT_TRUE(link.submit(2, kClass, kS, 0, &done).isOk());
    ASSERT_EQ(link.grants().size(), 2u);
    EXPECT_DOUBLE_EQ(link.grants()[0].share, 0.5);
    EXPECT_EQ(link.grants()[0].until_ns, kNever);
    auto finish = drain(link, done);
    EXPECT_EQ(finish.at(1), 2 * kSB);
    EXPECT_EQ(finish.at(2), 2 * kSB);
    EXPECT_EQ(link.busyNs(), 2 * kSB);
}

TEST(FairShareTest, UnequalTransfersFollowProcessorSharing) {
    auto policy = make(PolicyKind::kFair);
    FluidLink link(*policy, kRate);
    std::vector<Completion> done;
    for (FlowId f = 1; f <= 3; ++f) {
        ASSERT_TRUE(link.submit(f, kClass, f * kS, 0, &done).isOk());
    }
    auto finish = drain(link, done);
    // Three at 1/3 until the 1 MB one drains (3 ms); two at 1/2 until the next has moved its
    // second MB (5 ms); the last alone for its final MB (6 ms).
    EXPECT_EQ(finish.at(1), 3 * kSB);
    EXPECT_EQ(finish.at(2), 5 * kSB);
    EXPECT_EQ(finish.at(3), 6 * kSB);
}

TEST(TemporalFifoTest, TwoEqualTransfersFinishAtSOverBAndTwiceSOverB) {
    auto policy = make(PolicyKind::kTemporal);
    FluidLink link(*policy, kRate);
    std::vector<Completion> done;
    ASSERT_TRUE(link.submit(1, kClass, kS, 0, &done).isOk());
    ASSERT_TRUE(link.submit(2, kClass, kS, 0, &done).isOk());
    ASSERT_EQ(link.grants().size(), 1u);
    EXPECT_EQ(link.grants()[0].flow, 1u);
    EXPECT_DOUBLE_EQ(link.grants()[0].share, 1.0);
    EXPECT_EQ(link.grants()[0].until_ns, PolicyConfig{}.max_slot_ns);
    auto finish = drain(link, done);
    EXPECT_EQ(finish.at(1), kSB);
    EXPECT_EQ(finish.at(2), 2 * kSB);
    EXPECT_EQ(link.busyNs(), 2 * kSB);  // work-conserving: never idle while one waits
}

TEST(TemporalFifoTest, SlotBoundPreemptsALongTransfer) {
    PolicyConfig cfg;
    cfg.max_slot_ns = kSB;
    auto policy = make(PolicyKind::kTemporal, cfg);
    FluidLink link(*policy, kRate);
    std::vector<Completion> done;
    ASSERT_TRUE(link.submit(1, kClass, 10 * kS, 0, &done).isOk());  // 10 ms alone
    ASSERT_TRUE(link.submit(2, kClass, kS, kSB / 2, &done).isOk());
    // The lease is a promise: the newcomer waits until the holder's slot ends.
    ASSERT_EQ(link.grants().size(), 1u);
    EXPECT_EQ(link.grants()[0].flow, 1u);
    EXPECT_EQ(link.grants()[0].until_ns, kSB);
    EXPECT_EQ(policy->nextDecisionNs(kSB / 2), kSB);
    auto finish = drain(link, done);
    // Flow 1 holds [0, 1 ms), flow 2 [1, 2 ms), flow 1 the remaining 9 MB [2, 11 ms).
    EXPECT_EQ(finish.at(2), 2 * kSB);
    EXPECT_EQ(finish.at(1), 11 * kSB);
}

TEST(TemporalFifoTest, WithoutSlotBoundATransferRunsToCompletion) {
    PolicyConfig cfg;
    cfg.max_slot_ns = 0;
    auto policy = make(PolicyKind::kTemporal, cfg);
    FluidLink link(*policy, kRate);
    std::vector<Completion> done;
    ASSERT_TRUE(link.submit(1, kClass, 10 * kS, 0, &done).isOk());
    ASSERT_TRUE(link.submit(2, kClass, kS, kSB / 2, &done).isOk());
    EXPECT_EQ(link.grants()[0].until_ns, kNever);
    auto finish = drain(link, done);
    EXPECT_EQ(finish.at(1), 10 * kSB);
    EXPECT_EQ(finish.at(2), 11 * kSB);
}

TEST(TemporalFifoTest, LoneHolderGetsFreshLeases) {
    PolicyConfig cfg;
    cfg.max_slot_ns = kSB;
    TemporalFifo policy(cfg);
    ASSERT_TRUE(policy.onRequest(7, kClass, 5 * kS, 0).isOk());
    EXPECT_EQ(policy.nextDecisionNs(0), 0);  // a decision is pending
    auto g = policy.decide(0);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0], (Grant{7, 1.0, kSB}));
    EXPECT_EQ(policy.nextDecisionNs(kSB / 2), kSB);
    g = policy.decide(kSB);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0], (Grant{7, 1.0, 2 * kSB}));
    // decide() is idempotent for equal times.
    EXPECT_EQ(policy.decide(kSB)[0], (Grant{7, 1.0, 2 * kSB}));
    ASSERT_TRUE(policy.onComplete(7, kSB + 10).isOk());
    EXPECT_TRUE(policy.decide(kSB + 10).empty());
    EXPECT_EQ(policy.nextDecisionNs(kSB + 10), kNever);
}

TEST(TemporalFifoTest, CancelledHolderHandsTheLinkOn) {
    TemporalFifo policy;
    ASSERT_TRUE(policy.onRequest(1, kClass, kS, 0).isOk());
    ASSERT_TRUE(policy.onRequest(2, kClass, kS, 0).isOk());
    EXPECT_EQ(policy.decide(0)[0].flow, 1u);
    ASSERT_TRUE(policy.onCancel(1, 100).isOk());
    auto g = policy.decide(100);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].flow, 2u);
    EXPECT_EQ(policy.activeFlows(), 1u);
    // A waiting flow can be cancelled too.
    ASSERT_TRUE(policy.onRequest(3, kClass, kS, 200).isOk());
    ASSERT_TRUE(policy.onCancel(3, 300).isOk());
    EXPECT_EQ(policy.waitingFlows(), 0u);
}

// 64 flows with 100 MB each (100 ms alone) arrive 1 us apart. With 1 ms slots, every flow is
// first granted within (n - 1) * max_slot_ns = 63 ms of its arrival (TemporalFifo), and
// within max_wait_ns + n * max_slot_ns (WorkloadAware).
void checkNoStarvation(PolicyKind kind, Nanos bound_ns) {
    PolicyConfig cfg;
    cfg.max_slot_ns = kSB;
    cfg.max_wait_ns = 20 * kSB;
    auto policy = make(kind, cfg);
    FluidLink link(*policy, kRate);
    constexpr int kFlows = 64;
    std::vector<Completion> done;
    std::map<FlowId, Nanos> arrival;
    std::map<FlowId, Nanos> first_grant;
    auto note = [&](Nanos now) {
        for (const Grant& g : link.grants()) {
            first_grant.try_emplace(g.flow, now);
        }
    };
    for (int i = 0; i < kFlows; ++i) {
        const FlowId f = static_cast<FlowId>(i + 1);
        const FlowClass cls{i, 0, Direction::kForward};
        arrival[f] = i * kNsPerUs;
        ASSERT_TRUE(link.submit(f, cls, 100 * kS, arrival[f], &done).isOk());
        note(arrival[f]);
    }
    while (first_grant.size() < kFlows) {
        const Nanos t = link.nextEventNs();
        ASSERT_NE(t, kNever);
        ASSERT_TRUE(link.advanceTo(t, &done).isOk());
        note(t);
    }
    Nanos worst = 0;
    for (const auto& [f, t] : first_grant) {
        worst = std::max(worst, t - arrival.at(f));
    }
    EXPECT_LE(worst, bound_ns);
    EXPECT_GT(worst, 0);
    // And the link never idled: 64 transfers of 100 ms each.
    auto finish = drain(link, done);
    EXPECT_EQ(finish.size(), static_cast<size_t>(kFlows));
    EXPECT_EQ(link.busyNs(), kFlows * 100 * kSB);
}

TEST(StarvationTest, TemporalFifoServesEveryFlowWithinTheBound) {
    checkNoStarvation(PolicyKind::kTemporal, 63 * kSB);
}

TEST(StarvationTest, WorkloadAwareServesEveryFlowWithinTheBound) {
    checkNoStarvation(PolicyKind::kWorkload, 20 * kSB + 64 * kSB);
}

TEST(PolicyEventsTest, ContractViolationsAreRejectedWithoutSideEffects) {
    for (PolicyKind kind : {PolicyKind::kFair, PolicyKind::kTemporal, PolicyKind::kWorkload}) {
        SCOPED_TRACE(policyKindName(kind));
        auto p = make(kind);
        ASSERT_TRUE(p->onRequest(1, kClass, kS, 100).isOk());
        EXPECT_EQ(p->onRequest(1, kClass, kS, 100).code(), Code::kInvalidArgument);
        EXPECT_EQ(p->onComplete(2, 100).code(), Code::kInvalidArgument);
        EXPECT_EQ(p->onCancel(2, 100).code(), Code::kInvalidArgument);
        EXPECT_EQ(p->onProgress(2, 10, 100).code(), Code::kInvalidArgument);
        EXPECT_EQ(p->onProgress(1, kS + 1, 100).code(), Code::kInvalidArgument);
        EXPECT_EQ(p->onRequest(3, kClass, kS, 99).code(), Code::kInvalidArgument);  // past
        ASSERT_TRUE(p->onProgress(1, 10, 100).isOk());
        EXPECT_EQ(p->onProgress(1, 9, 100).code(), Code::kInvalidArgument);  // backwards
        EXPECT_EQ(p->activeFlows(), 1u);
        auto g = p->decide(100);
        ASSERT_EQ(g.size(), 1u);
        EXPECT_EQ(g[0].flow, 1u);
        ASSERT_TRUE(p->onComplete(1, 200).isOk());
        EXPECT_EQ(p->activeFlows(), 0u);
        EXPECT_TRUE(p->decide(200).empty());
        // The id is free again.
        EXPECT_TRUE(p->onRequest(1, kClass, kS, 300).isOk());
    }
}

TEST(PolicyFactoryTest, ParsesKindsWithAClearError) {
    EXPECT_EQ(parsePolicyKind("fair").value(), PolicyKind::kFair);
    EXPECT_EQ(parsePolicyKind("temporal").value(), PolicyKind::kTemporal);
    EXPECT_EQ(parsePolicyKind("workload").value(), PolicyKind::kWorkload);
    const auto bad = parsePolicyKind("Fair");
    ASSERT_FALSE(bad.isOk());
    EXPECT_EQ(bad.status().code(), Code::kInvalidUsage);
    EXPECT_NE(bad.status().message().find("'Fair'"), std::string::npos);
    EXPECT_NE(bad.status().message().find("fair, temporal, workload"), std::string::npos);
    for (PolicyKind k : {PolicyKind::kFair, PolicyKind::kTemporal, PolicyKind::kWorkload}) {
        EXPECT_EQ(parsePolicyKind(policyKindName(k)).value(), k);
        EXPECT_EQ(make(k)->kind(), k);
    }
}

TEST(PolicyFactoryTest, RejectsInvalidConfig) {
    PolicyConfig cfg;
    cfg.min_slot_ns = cfg.max_slot_ns + 1;
    EXPECT_EQ(makePolicy(PolicyKind::kWorkload, cfg).status().code(), Code::kInvalidArgument);
    cfg = {};
    cfg.detector.tolerance = 0.0;
    EXPECT_EQ(makePolicy(PolicyKind::kTemporal, cfg).status().code(), Code::kInvalidArgument);
    cfg = {};
    cfg.max_slot_ns = -1;
    EXPECT_EQ(makePolicy(PolicyKind::kFair, cfg).status().code(), Code::kInvalidArgument);
}

TEST(LinkModelTest, AdvancesBySharesAndRoundsCompletionUp) {
    LinkModel m(kRate);
    ASSERT_TRUE(m.add(1, 1000).isOk());
    ASSERT_TRUE(m.add(2, 1000).isOk());
    EXPECT_EQ(m.add(1, 5).code(), Code::kInvalidArgument);
    const std::vector<Grant> grants = {{1, 1.0 / 3.0, kNever}, {2, 2.0 / 3.0, kNever}};
    EXPECT_EQ(m.nextCompletionNs(grants, 0), 1500);  // 1000 B at 2/3 B/ns
    std::vector<FlowId> drained;
    m.advance(grants, 0, 1500, &drained);
    ASSERT_EQ(drained, std::vector<FlowId>{2});
    EXPECT_NEAR(m.remainingBytes(1), 500.0, 1e-6);
    EXPECT_FALSE(m.contains(2));
    EXPECT_EQ(m.nextCompletionNs({}, 1500), kNever);
    ASSERT_TRUE(m.remove(1).isOk());
    EXPECT_EQ(m.remove(1).code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace atlas::sched
