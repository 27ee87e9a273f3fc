// ArbiterCore: grants follow the scheduler/ policy exactly, leases, stale releases, lost
// sessions, 64 flows without deadlock or starvation, metrics.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "arbiter/arbiter_core.h"
#include "arbiter/metrics.h"
#include "scheduler/link_policy.h"

namespace atlas::arbiter {
namespace {

constexpr Nanos kSlot = 10 * kNsPerMs;
const std::string kLink = "east->west";

std::unique_ptr<ArbiterCore> makeCore(sched::PolicyKind kind, Nanos slot = kSlot) {
    CoreConfig c;
    c.policy = kind;
    c.policy_config.max_slot_ns = slot;
    auto r = ArbiterCore::create(c);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return std::move(r.value());
}

std::vector<GrantOut> decide(ArbiterCore& core, Nanos now) {
    std::vector<GrantOut> out;
    core.decide(now, &out);
    return out;
}

TEST(ArbiterCore, TemporalGrantsInRequestOrderOneAtATime) {
    auto core = makeCore(sched::PolicyKind::kTemporal, 0);
    for (uint32_t f = 1; f <= 5; ++f) {
        ASSERT_TRUE(core->open(1, f, {static_cast<int32_t>(f), 0, 0}, kLink, 0).isOk());
    }
    // Requests arrive in the order 3, 1, 5, 2, 4.
    const uint32_t order[] = {3, 1, 5, 2, 4};
    Nanos t = 0;
    for (uint32_t f : order) {
        ASSERT_TRUE(core->request(1, f, 1000, ++t).isOk());
    }
    std::vector<uint32_t> served;
    auto g = decide(*core, ++t);
    while (!g.empty()) {
        ASSERT_EQ(g.size(), 1u);
        ASSERT_EQ(core->holders(kLink).size(), 1u);
        served.push_back(g[0].flow);
        EXPECT_EQ(g[0].slot_ns, 0) << "slot 0 = until released";
        ASSERT_TRUE(core->release(1, g[0].flow, g[0].seq, 1000, ++t).isOk());
        g = decide(*core, ++t);
    }
    EXPECT_EQ(served, std::vector<uint32_t>(std::begin(order), std::end(order)));
    const LinkStats* s = core->linkStats(kLink);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->requests, 5u);
    EXPECT_EQ(s->first_grants, 5u);
    EXPECT_EQ(s->bytes, 5000u);
    EXPECT_EQ(s->waited, 5u);  // every request waited at least one tick
}

// Differential test: the core's holders are exactly the reference policy's grants after the
// same event sequence (the arbiter adds transport, never its own ordering).
void differential(sched::PolicyKind kind, uint64_t seed) {
    auto core = makeCore(kind);
    auto ref = sched::makePolicy(kind, [] {
        sched::PolicyConfig c;
        c.max_slot_ns = kSlot;
        return c;
    }());
    ASSERT_TRUE(ref.isOk());
    std::mt19937_64 rng(seed);
    constexpr uint32_t kFlows = 12;
    for (uint32_t f = 0; f < kFlows; ++f) {
        const WireClass cls{static_cast<int32_t>(f % 4), static_cast<int32_t>(f / 4),
                            static_cast<uint8_t>(f % 2)};
        ASSERT_TRUE(core->open(9, f, cls, kLink, 0).isOk());
    }
    std::map<uint32_t, uint64_t> seq;  // current grant seq per flow
    std::vector<bool> pending(kFlows, false);
    Nanos now = 0;
    for (int step = 0; step < 3000; ++step) {
        now += static_cast<Nanos>(rng() % (3 * kNsPerMs));
        const uint32_t f = static_cast<uint32_t>(rng() % kFlows);
        const sched::FlowId id = f + 1;  // the core numbers policy flows from 1 in open order
        const sched::FlowClass cls{
            static_cast<int32_t>(f % 4), static_cast<int32_t>(f / 4),
            f % 2 ? sched::Direction::kBackward : sched::Direction::kForward};
        if (!pending[f]) {
            ASSERT_TRUE(core->request(9, f, 1 + rng() % 100000, now).isOk());
            ASSERT_TRUE((*ref)->onRequest(id, cls, 1, now).isOk());
            pending[f] = true;
        } else if (seq.count(f) != 0 && rng() % 2 == 0) {
            const auto holders = core->holders(kLink);
            const bool holding = !holders.empty() && holders[0].second == f;
            ASSERT_TRUE(core->release(9, f, seq[f], 10, now).isOk());
            if (holding) {
                ASSERT_TRUE((*ref)->onComplete(id, now).isOk());
                pending[f] = false;
                seq.erase(f);
            }
        }
        for (const GrantOut& g : decide(*core, now)) {
            seq[g.flow] = g.seq;
        }
        auto want = (*ref)->decide(now);
        auto got = core->holders(kLink);
        ASSERT_EQ(got.size(), want.size()) << "step " << step;
        for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_EQ(got[i].second + 1, want[i].flow) << "step " << step;
        }
    }
}

TEST(ArbiterCore, HoldersMatchTemporalFifoOnRandomEvents) {
    differential(sched::PolicyKind::kTemporal, 1);
    differential(sched::PolicyKind::kTemporal, 2);
}

TEST(ArbiterCore, HoldersMatchWorkloadAwareOnRandomEvents) {
    differential(sched::PolicyKind::kWorkload, 3);
    differential(sched::PolicyKind::kWorkload, 4);
}

TEST(ArbiterCore, LoneHolderIsRenewedAtSlotEndAndOldSeqIsStale) {
    auto core = makeCore(sched::PolicyKind::kTemporal);
    ASSERT_TRUE(core->open(1, 1, {}, kLink, 0).isOk());
    ASSERT_TRUE(core->request(1, 1, 100, 0).isOk());
    auto g1 = decide(*core, 0);
    ASSERT_EQ(g1.size(), 1u);
    EXPECT_EQ(g1[0].slot_ns, kSlot);
    EXPECT_EQ(core->nextDecisionNs(0), kSlot);
    auto g2 = decide(*core, kSlot);
    ASSERT_EQ(g2.size(), 1u) << "renewal";
    EXPECT_GT(g2[0].seq, g1[0].seq);
    // The client's release of the first grant crossed the renewal: stale, nothing changes.
    ASSERT_TRUE(core->release(1, 1, g1[0].seq, 50, kSlot + 1).isOk());
    EXPECT_EQ(core->linkStats(kLink)->stale_releases, 1u);
    EXPECT_EQ(core->holders(kLink).size(), 1u);
    // A request while the transfer is pending is ignored (the client re-asks after slots).
    ASSERT_TRUE(core->request(1, 1, 100, kSlot + 2).isOk());
    EXPECT_EQ(core->linkStats(kLink)->requests, 1u);
    ASSERT_TRUE(core->release(1, 1, g2[0].seq, 50, kSlot + 3).isOk());
    EXPECT_TRUE(core->holders(kLink).empty());
    EXPECT_EQ(core->linkStats(kLink)->bytes, 100u);
}

TEST(ArbiterCore, SlotEndPreemptsForAWaiterWithoutMessagingTheHolder) {
    auto core = makeCore(sched::PolicyKind::kTemporal);
    ASSERT_TRUE(core->open(1, 1, {}, kLink, 0).isOk());
    ASSERT_TRUE(core->open(2, 1, {}, kLink, 0).isOk());
    ASSERT_TRUE(core->request(1, 1, 100, 0).isOk());
    auto a = decide(*core, 0);
    ASSERT_TRUE(core->request(2, 1, 100, 1).isOk());
    EXPECT_TRUE(decide(*core, 1).empty()) << "B waits while A's slot lasts";
    auto b = decide(*core, kSlot);
    ASSERT_EQ(b.size(), 1u);
    EXPECT_EQ(b[0].session, 2u);
    EXPECT_EQ(core->holders(kLink), (std::vector<std::pair<SessionId, uint32_t>>{{2, 1}}));
    // A releases its old grant (its own slot ended too): stale; A stays queued.
    ASSERT_TRUE(core->release(1, 1, a[0].seq, 10, kSlot + 1).isOk());
    ASSERT_TRUE(core->release(2, 1, b[0].seq, 10, kSlot + 2).isOk());
    auto again = decide(*core, kSlot + 2);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].session, 1u) << "the preempted transfer is served again";
}

TEST(ArbiterCore, DroppingTheHoldersSessionPassesTheLinkAtOnce) {
    auto core = makeCore(sched::PolicyKind::kTemporal, 0);
    ASSERT_TRUE(core->open(1, 1, {}, kLink, 0).isOk());
    ASSERT_TRUE(core->open(2, 7, {}, kLink, 0).isOk());
    ASSERT_TRUE(core->request(1, 1, 100, 0).isOk());
    ASSERT_TRUE(core->request(2, 7, 100, 0).isOk());
    auto g = decide(*core, 0);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].session, 1u);
    EXPECT_EQ(core->nextDecisionNs(1), sched::kNever) << "no lease end: only events move it";
    core->dropSession(1, 5);
    auto next = decide(*core, 5);
    ASSERT_EQ(next.size(), 1u);
    EXPECT_EQ(next[0].session, 2u);
    EXPECT_EQ(next[0].flow, 7u);
    EXPECT_EQ(core->linkStats(kLink)->cancels, 1u);
    EXPECT_EQ(core->flowCount(), 1u);
}

TEST(ArbiterCore, DemandTimeCountsWaitingAndHoldingNotIdle) {
    // The link's demand time (the denominator of utilization while flows are queued): from
    // the first request while nothing is pending to the last release or cancel, idle gaps out.
    auto core = makeCore(sched::PolicyKind::kTemporal, 0);
    ASSERT_TRUE(core->open(1, 1, {}, kLink, 0).isOk());
    ASSERT_TRUE(core->open(2, 7, {}, kLink, 0).isOk());
    const Nanos ms = kNsPerMs;
    ASSERT_TRUE(core->request(1, 1, 100, 10 * ms).isOk());
    auto g = decide(*core, 10 * ms);
    ASSERT_EQ(g.size(), 1u);
    ASSERT_TRUE(core->request(2, 7, 100, 20 * ms).isOk());  // waits behind flow 1
    EXPECT_EQ(core->demandNs(kLink, 30 * ms), 20 * ms) << "an open period counts up to now";
    ASSERT_TRUE(core->release(1, 1, g[0].seq, 100, 50 * ms).isOk());
    auto g2 = decide(*core, 50 * ms);
    ASSERT_EQ(g2.size(), 1u);
    ASSERT_TRUE(core->release(2, 7, g2[0].seq, 100, 80 * ms).isOk());
    EXPECT_EQ(core->demandNs(kLink, 200 * ms), 70 * ms) << "10..80 ms; the idle time after it not";
    EXPECT_EQ(core->linkStats(kLink)->demand_ns, 70 * ms);
    // A second period that ends with the requester's session dropped (a cancel).
    ASSERT_TRUE(core->request(2, 7, 100, 300 * ms).isOk());
    core->dropSession(2, 320 * ms);
    EXPECT_EQ(core->demandNs(kLink, 400 * ms), 90 * ms);
    // A repeated request of a pending flow starts nothing new.
    ASSERT_TRUE(core->request(1, 1, 100, 500 * ms).isOk());
    ASSERT_TRUE(core->request(1, 1, 100, 510 * ms).isOk());
    EXPECT_EQ(core->demandNs(kLink, 520 * ms), 110 * ms);
    EXPECT_EQ(core->demandNs("no->link", 520 * ms), 0);
}

TEST(ArbiterCore, RejectsUnknownFlowsBadLinksAndDuplicates) {
    auto core = makeCore(sched::PolicyKind::kTemporal);
    EXPECT_FALSE(core->request(1, 1, 10, 0).isOk());
    EXPECT_FALSE(core->release(1, 1, 1, 10, 0).isOk());
    EXPECT_FALSE(core->close(1, 1, 0).isOk());
    EXPECT_FALSE(core->open(1, 1, {}, "bad link", 0).isOk());
    EXPECT_FALSE(core->open(1, 1, {}, "", 0).isOk());
    ASSERT_TRUE(core->open(1, 1, {}, kLink, 0).isOk());
    EXPECT_FALSE(core->open(1, 1, {}, kLink, 0).isOk());
    EXPECT_TRUE(core->open(2, 1, {}, kLink, 0).isOk()) << "flow ids are per session";
}

TEST(ArbiterCore, LinksAreIndependent) {
    auto core = makeCore(sched::PolicyKind::kTemporal, 0);
    ASSERT_TRUE(core->open(1, 1, {}, "a->b", 0).isOk());
    ASSERT_TRUE(core->open(1, 2, {}, "b->a", 0).isOk());
    ASSERT_TRUE(core->request(1, 1, 10, 0).isOk());
    ASSERT_TRUE(core->request(1, 2, 10, 0).isOk());
    EXPECT_EQ(decide(*core, 0).size(), 2u) << "each direction is its own bottleneck";
}

// 64 flows with random transfer sizes on one link; a simulated client sends at the link rate
// while it holds a grant and releases when done or when its slot ends (then re-requests).
// Everything completes, nobody waits longer than the FIFO bound, the link is never idle
// while someone waits, and at most one flow holds it at a time.
TEST(ArbiterCore, SixtyFourFlowsNoDeadlockNoStarvation) {
    constexpr int kFlows = 64;
    constexpr double kBytesPerNs = 0.125;  // 1 Gbit/s
    auto core = makeCore(sched::PolicyKind::kTemporal, kSlot);
    std::mt19937_64 rng(64);
    struct Sim {
        uint64_t left = 0;
        int rounds = 0;
        Nanos requested = 0;
        Nanos max_wait = 0;
        uint64_t seq = 0;
        Nanos slot_end = 0;
        bool holding = false;
        bool done = false;
    };
    std::vector<Sim> sim(kFlows);
    for (int f = 0; f < kFlows; ++f) {
        ASSERT_TRUE(core->open(1, static_cast<uint32_t>(f), {f, 0, 0}, kLink, 0).isOk());
        sim[f].left = 100'000 + rng() % 4'000'000;  // up to 32 ms at 1 Gbit/s: some need 4 slots
        sim[f].rounds = 3;
        ASSERT_TRUE(core->request(1, static_cast<uint32_t>(f), sim[f].left, 0).isOk());
    }
    Nanos now = 0;
    Nanos idle_with_waiters = 0;
    int completed = 0;
    for (int step = 0; step < 200000 && completed < kFlows; ++step) {
        for (const GrantOut& g : decide(*core, now)) {
            Sim& s = sim[g.flow];
            if (!s.holding) {
                s.max_wait = std::max(s.max_wait, now - s.requested);
            }
            s.holding = true;
            s.seq = g.seq;
            s.slot_end = g.slot_ns == 0 ? sched::kNever : now + g.slot_ns;
        }
        int holders = 0;
        int holder = -1;
        for (int f = 0; f < kFlows; ++f) {
            holders += sim[f].holding ? 1 : 0;
            if (sim[f].holding) {
                holder = f;
            }
        }
        ASSERT_LE(holders, 1) << "temporal: one holder at a time";
        const Nanos next_decision = core->nextDecisionNs(now);
        if (holder < 0) {
            bool waiting = false;
            for (const Sim& s : sim) {
                waiting = waiting || (!s.done && s.left > 0);
            }
            ASSERT_FALSE(waiting && next_decision == sched::kNever) << "deadlock at " << now;
            if (next_decision != sched::kNever) {
                idle_with_waiters += waiting ? next_decision - now : 0;
                now = std::max(now + 1, next_decision);
            }
            continue;
        }
        Sim& s = sim[holder];
        const Nanos finish = now + static_cast<Nanos>(static_cast<double>(s.left) / kBytesPerNs);
        const Nanos until = std::min({finish, s.slot_end, next_decision});
        const auto sent = static_cast<uint64_t>(static_cast<double>(until - now) * kBytesPerNs);
        s.left -= std::min(s.left, sent);
        now = std::max(until, now + 1);
        if (s.left == 0) {
            ASSERT_TRUE(core->release(1, holder, s.seq, sent, now).isOk());
            s.holding = false;
            if (--s.rounds == 0) {
                s.done = true;
                ++completed;
            } else {
                s.left = 100'000 + rng() % 4'000'000;
                s.requested = now;
                ASSERT_TRUE(core->request(1, holder, s.left, now).isOk());
            }
        } else if (now >= s.slot_end) {
            // Slot over: the client releases and asks again, like the transport does.
            ASSERT_TRUE(core->release(1, holder, s.seq, sent, now).isOk());
            s.holding = false;
            s.requested = now;
            ASSERT_TRUE(core->request(1, holder, s.left, now).isOk());
        }
    }
    EXPECT_EQ(completed, kFlows);
    for (int f = 0; f < kFlows; ++f) {
        // FIFO bound: everyone ahead holds at most one slot (plus the tick granularity).
        EXPECT_LE(sim[f].max_wait, (kFlows - 1) * kSlot + kNsPerMs) << "flow " << f;
    }
    EXPECT_EQ(idle_with_waiters, 0) << "the link idled while transfers waited";
    const LinkStats* st = core->linkStats(kLink);
    EXPECT_EQ(st->first_grants, st->requests);
}

// Protocol 3: the trains of every session feed the link's one estimate, and grants carry it.
// Session 1 measured three exclusive 2.5 MiB transfers; session 2 never sent a train of its
// own, and its grant brings it session 1's rate.
TEST(ArbiterCore, TrainsOfEverySessionPoolIntoTheRateItsGrantsCarry) {
    auto core = makeCore(sched::PolicyKind::kTemporal, 0);
    ASSERT_TRUE(core->open(1, 1, {0, 0, 0}, kLink, 0).isOk());
    ASSERT_TRUE(core->open(2, 1, {1, 0, 0}, kLink, 0).isOk());
    constexpr uint64_t kBytes = 2560 * 1024;
    const Nanos disp = 21 * kNsPerMs;  // 0.998 Gbit/s
    const uint64_t bps = kBytes * 8 * kNsPerSec / static_cast<uint64_t>(disp);
    EXPECT_FALSE(core->train("nowhere", kBytes, disp, kNsPerSec)) << "no flow opened that link";
    EXPECT_FALSE(core->train(kLink, 1000, disp, kNsPerSec)) << "too small to be a sample";
    EXPECT_FALSE(core->train(kLink, kBytes, 0, kNsPerSec));
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(core->rateBps(kLink, kNsPerSec + i), 0u) << "unknown before three samples";
        EXPECT_TRUE(core->train(kLink, kBytes, disp, kNsPerSec + i + 1));
    }
    EXPECT_EQ(core->rateBps(kLink, kNsPerSec + 4), bps);
    EXPECT_EQ(core->linkStats(kLink)->trains, 3u);
    ASSERT_TRUE(core->request(2, 1, kBytes, kNsPerSec + 5).isOk());
    auto g = decide(*core, kNsPerSec + 6);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_EQ(g[0].session, 2u);
    EXPECT_EQ(g[0].rate_bps, bps) << "the grant carries what the DC measured";
    const std::string text = renderMetrics(*core, {}, kNsPerSec + 7);
    EXPECT_NE(text.find("atlas_arbiter_link_trains_total{link=\"east->west\"} 3\n"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("atlas_arbiter_link_rate_bits_per_second{link=\"east->west\"} 9"),
              std::string::npos)
        << text;
    // Samples age out like the plugin's (sched::PathRate's window and max age).
    EXPECT_EQ(core->rateBps(kLink, kNsPerSec + 20 * kNsPerSec), 0u);
}

TEST(ArbiterMetrics, PrometheusTextHasEveryFamilyAndTheNumbers) {
    auto core = makeCore(sched::PolicyKind::kTemporal, 0);
    ASSERT_TRUE(core->open(3, 1, {2, 1, 1}, kLink, 0).isOk());
    ASSERT_TRUE(core->request(3, 1, 4096, 0).isOk());
    auto g = decide(*core, kNsPerSec);
    ASSERT_EQ(g.size(), 1u);
    ASSERT_TRUE(core->release(3, 1, g[0].seq, 4096, 2 * kNsPerSec).isOk());
    ServerCounters c;
    c.sessions_current = 1;
    c.sessions_total = 4;
    const std::string text = renderMetrics(*core, c, 4 * kNsPerSec);
    auto has = [&](const std::string& line) { return text.find(line + "\n") != std::string::npos; };
    EXPECT_TRUE(has("atlas_arbiter_sessions 1")) << text;
    EXPECT_TRUE(has("atlas_arbiter_sessions_total 4"));
    EXPECT_TRUE(has("atlas_arbiter_grants_total{link=\"east->west\"} 1"));
    EXPECT_TRUE(has("atlas_arbiter_waits_total{link=\"east->west\"} 1"));
    EXPECT_TRUE(has("atlas_arbiter_wait_seconds_sum{link=\"east->west\"} 1"));
    EXPECT_TRUE(has("atlas_arbiter_link_busy_seconds_total{link=\"east->west\"} 1"));
    // Requested at 0, granted at 1 s, released at 2 s: two seconds of demand.
    EXPECT_TRUE(has("atlas_arbiter_link_demand_seconds_total{link=\"east->west\"} 2"));
    EXPECT_TRUE(has("atlas_arbiter_slot_utilization{link=\"east->west\"} 0.25"));
    EXPECT_TRUE(
        has("atlas_arbiter_flow_bytes_total{link=\"east->west\",session=\"3\",flow=\"1\","
            "pipeline=\"2\",stage=\"1\",direction=\"bwd\",priority=\"1\"} 4096"));
    EXPECT_NE(text.find("# TYPE atlas_arbiter_grants_total counter"), std::string::npos);
    EXPECT_EQ(text.find("atlas_arbiter_workload_picks_total{"), std::string::npos)
        << "temporal links have no workload counters";
}

TEST(ArbiterMetrics, WorkloadLinksReportTheirPickModes) {
    auto core = makeCore(sched::PolicyKind::kWorkload, 0);
    ASSERT_TRUE(core->open(1, 1, {0, 0, 0}, kLink, 0).isOk());
    ASSERT_TRUE(core->open(1, 2, {1, 0, 0}, kLink, 0).isOk());
    ASSERT_TRUE(core->request(1, 1, 10, 0).isOk());
    ASSERT_TRUE(core->request(1, 2, 10, 0).isOk());
    auto g = decide(*core, 1);
    ASSERT_EQ(g.size(), 1u);
    ASSERT_TRUE(core->release(1, g[0].flow, g[0].seq, 10, 2).isOk());
    ASSERT_EQ(decide(*core, 2).size(), 1u);
    const std::string text = renderMetrics(*core, {}, 3);
    EXPECT_NE(
        text.find("atlas_arbiter_workload_picks_total{link=\"east->west\",kind=\"fallback\"} 2"),
        std::string::npos)
        << "nothing learned yet: FIFO fallback\n"
        << text;
}

}  // namespace
}  // namespace atlas::arbiter
