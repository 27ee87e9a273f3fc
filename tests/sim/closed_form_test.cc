// Closed forms the simulator must hit exactly on small configurations.
#include <gtest/gtest.h>

#include "perf/atlas-sim/wan.h"
#include "tests/sim/sim_test_util.h"

namespace atlas::sim {
namespace {

using testing::activities;
using testing::freeCommPipeline;
using testing::mustParse;
using testing::mustRun;
using testing::twoDcPipeline;

// Bubble fraction (p - 1) / (m + p - 1) with free communication: checked on integers,
// idle * (m + p - 1) == wall * (p - 1), for every group, plus the iteration length
// (m + p - 1) * (tf + tb).
void expectBubbleFormula(const char* schedule, int pp, int m) {
    const Nanos tf = 3 * kNsPerMs;
    const Nanos tb = 7 * kNsPerMs;
    const SimConfig c = mustParse(freeCommPipeline(pp, m, schedule, 3.0, 7.0));
    const RunReport rep = mustRun(c);
    const RunResult& r = rep.base;
    const Nanos wall = r.end_ns - r.measure_start_ns;
    ASSERT_EQ(wall, static_cast<Nanos>(m + pp - 1) * (tf + tb))
        << schedule << " pp=" << pp << " m=" << m;
    for (size_t g = 0; g < r.groups.size(); ++g) {
        const Nanos idle = wall - r.groups[g].compute_ns - r.groups[g].allreduce_ns;
        EXPECT_EQ(r.groups[g].compute_ns, static_cast<Nanos>(m) * (tf + tb));
        EXPECT_EQ(idle * (m + pp - 1), wall * (pp - 1)) << "group " << g;
    }
    EXPECT_DOUBLE_EQ(rep.summary.bubble_fraction,
                     static_cast<double>(pp - 1) / static_cast<double>(m + pp - 1));
}

TEST(SimClosedForm, GpipeBubbleFraction) {
    for (int pp : {1, 2, 4, 7}) {
        for (int m : {1, 3, 8, 16}) {
            expectBubbleFormula("gpipe", pp, m);
        }
    }
}

TEST(SimClosedForm, OneFOneBBubbleFractionMatchesGpipe) {
    for (int pp : {2, 4, 5}) {
        for (int m : {1, 4, 9}) {
            expectBubbleFormula("1f1b", pp, m);
        }
    }
}

// Drives one WanNetwork link until idle and returns the deliveries in time order.
std::vector<WanDelivery> drainLink(WanNetwork& w, int link) {
    std::vector<WanDelivery> out;
    for (int guard = 0; guard < 10000; ++guard) {
        const Nanos next = w.nextEventNs(link);
        if (next == sched::kNever) {
            break;
        }
        EXPECT_TRUE(w.advance(link, next, &out).isOk());
    }
    return out;
}

struct LinkFixture {
    ClusterSpec cluster;
    NetworkSpec net;
    // 1 Gbit/s, RTT 10 ms (one-way d = 5 ms), no loss.
    LinkFixture() {
        cluster.dcs = {{"A", 1}, {"B", 1}};
        cluster.wan.assign(4, WanPath{1e9 / 8, 10 * kNsPerMs, 0.0});
        net.transport = TransportKind::kIdeal;
    }
};

constexpr uint64_t kBytes = 1'000'000;   // S
constexpr Nanos kSerial = 8 * kNsPerMs;  // S * 8 / B at 1 Gbit/s
constexpr Nanos kOneWay = 5 * kNsPerMs;  // d

TEST(SimClosedForm, OneTransferTakesSerializationPlusDelay) {
    for (sched::PolicyKind kind :
         {sched::PolicyKind::kFair, sched::PolicyKind::kTemporal, sched::PolicyKind::kWorkload}) {
        LinkFixture f;
        f.net.policy = kind;
        auto w = WanNetwork::create(f.cluster, f.net, false);
        ASSERT_TRUE(w.isOk());
        const int link = w.value()->linkIndex(0, 1);
        const Nanos t0 = 2 * kNsPerSec;
        std::vector<WanDelivery> out;
        ASSERT_TRUE(w.value()
                        ->send(link, 1, {0, 0, sched::Direction::kForward}, kBytes, 42, t0, &out)
                        .isOk());
        EXPECT_TRUE(out.empty());
        std::vector<WanDelivery> d = drainLink(*w.value(), link);
        ASSERT_EQ(d.size(), 1u) << sched::policyKindName(kind);
        EXPECT_EQ(d[0].tag, 42u);
        EXPECT_EQ(d[0].time_ns, t0 + kSerial + kOneWay) << sched::policyKindName(kind);
    }
}

// Transfers of kBytes on the fixture's link, one per entry of `starts` (its own connection,
// tag = index + 1): their deliveries in time order; *recoveries = the link's loss recoveries.
std::vector<WanDelivery> transfersOnLink(const LinkFixture& f, const std::vector<Nanos>& starts,
                                         uint64_t* recoveries = nullptr) {
    auto w = WanNetwork::create(f.cluster, f.net, false);
    EXPECT_TRUE(w.isOk());
    const int link = w.value()->linkIndex(0, 1);
    std::vector<WanDelivery> out;
    for (size_t i = 0; i < starts.size(); ++i) {
        const sched::FlowClass cls{static_cast<int32_t>(i), 0, sched::Direction::kForward};
        EXPECT_TRUE(w.value()->send(link, i + 1, cls, kBytes, i + 1, starts[i], &out).isOk());
    }
    std::vector<WanDelivery> d = drainLink(*w.value(), link);
    d.insert(d.end(), out.begin(), out.end());
    std::sort(d.begin(), d.end(), [](const WanDelivery& a, const WanDelivery& b) {
        return a.time_ns < b.time_ns || (a.time_ns == b.time_ns && a.tag < b.tag);
    });
    if (recoveries != nullptr) {
        *recoveries = 0;
        for (const LinkStats& ls : w.value()->stats()) {
            *recoveries += ls.loss_recoveries;
        }
    }
    return d;
}

// Contention loss (cluster.wan[].buffer_ms): transfers that shared an overflowing bottleneck
// (buffer below network.contention_queue_bdp x RTT) for at least an RTT arrive one RTT late.
std::vector<WanDelivery> twoTransfersWithBuffer(sched::PolicyKind kind, Nanos buffer_ns,
                                                Nanos second_at = 0,
                                                uint64_t* recoveries = nullptr) {
    LinkFixture f;
    f.net.policy = kind;
    for (WanPath& p : f.cluster.wan) {
        p.buffer_ns = buffer_ns;
    }
    return transfersOnLink(f, {0, second_at}, recoveries);
}

std::vector<WanDelivery> twoTransfers(sched::PolicyKind kind) {
    return twoTransfersWithBuffer(kind, 0);
}

TEST(SimClosedForm, TwoTransfersUnderFairShareFinishTogether) {
    const std::vector<WanDelivery> d = twoTransfers(sched::PolicyKind::kFair);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].time_ns, 2 * kSerial + kOneWay);
    EXPECT_EQ(d[1].time_ns, 2 * kSerial + kOneWay);
}

TEST(SimClosedForm, TwoTransfersUnderTemporalFifoFinishStaggered) {
    const std::vector<WanDelivery> d = twoTransfers(sched::PolicyKind::kTemporal);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].tag, 1u);  // first come, first served
    EXPECT_EQ(d[0].time_ns, kSerial + kOneWay);
    EXPECT_EQ(d[1].time_ns, 2 * kSerial + kOneWay);
}

TEST(SimClosedForm, MessagesOfOneConnectionAreSentInOrder) {
    LinkFixture f;
    f.net.policy = sched::PolicyKind::kFair;
    auto w = WanNetwork::create(f.cluster, f.net, false);
    ASSERT_TRUE(w.isOk());
    const int link = w.value()->linkIndex(0, 1);
    std::vector<WanDelivery> out;
    // Same connection: the second waits for the first even under processor sharing.
    ASSERT_TRUE(
        w.value()->send(link, 7, {0, 0, sched::Direction::kForward}, kBytes, 1, 0, &out).isOk());
    ASSERT_TRUE(
        w.value()->send(link, 7, {0, 0, sched::Direction::kForward}, kBytes, 2, 0, &out).isOk());
    const std::vector<WanDelivery> d = drainLink(*w.value(), link);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].time_ns, kSerial + kOneWay);
    EXPECT_EQ(d[1].time_ns, 2 * kSerial + kOneWay);
}

TEST(SimClosedForm, SingleStreamIsBoundedByWindowOverRtt) {
    LinkFixture f;
    f.net.policy = sched::PolicyKind::kTemporal;
    f.net.transport = TransportKind::kSingle;
    // 1 Gbit/s link, RTT 10 ms, window 250 kB: one stream reaches 25 MB/s = 200 Mbit/s.
    f.net.tcp_window_bytes = 250'000;
    const std::vector<WanDelivery> d = transfersOnLink(f, {0});
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].time_ns, 40 * kNsPerMs + kOneWay);  // 1 MB at 25 MB/s
}

// Header overhead (network.header_bytes): the link carries mss / (mss + header) as payload.
TEST(SimClosedForm, HeadersTakeTheirShareOfTheLink) {
    LinkFixture f;
    f.net.policy = sched::PolicyKind::kTemporal;
    f.net.mss_bytes = 1448;
    f.net.header_bytes = 52;
    const std::vector<WanDelivery> d = transfersOnLink(f, {0});
    ASSERT_EQ(d.size(), 1u);
    // 1 MB at 1 Gbit/s x 1448 / 1500: 8 ms x 1500 / 1448 = 8.287 ms.
    EXPECT_NEAR(static_cast<double>(d[0].time_ns - kOneWay), 8e6 * 1500 / 1448, 2.0);
}

TEST(SimClosedForm, FairContentionOnAShallowBufferCostsEachTransferARecovery) {
    constexpr Nanos kRtt = 2 * kOneWay;
    // Half a BDP (5 ms at RTT 10 ms): below BBR's standing queue of 1.5 BDP. The two share
    // the link for 16 ms >= one RTT: both lose and recover, an RTT and the 5 ms buffer late.
    uint64_t lost = 0;
    auto d = twoTransfersWithBuffer(sched::PolicyKind::kFair, 5 * kNsPerMs, 0, &lost);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(lost, 2u);
    EXPECT_EQ(d[0].time_ns, 2 * kSerial + kOneWay + kRtt + 5 * kNsPerMs);
    EXPECT_EQ(d[1].time_ns, 2 * kSerial + kOneWay + kRtt + 5 * kNsPerMs);
    // Two BDPs hold the standing queue: nothing lost.
    d = twoTransfersWithBuffer(sched::PolicyKind::kFair, 20 * kNsPerMs, 0, &lost);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(lost, 0u);
    EXPECT_EQ(d[1].time_ns, 2 * kSerial + kOneWay);
    // No buffer given: not modelled.
    d = twoTransfersWithBuffer(sched::PolicyKind::kFair, 0);
    EXPECT_EQ(d[1].time_ns, 2 * kSerial + kOneWay);
    // One transfer at a time builds no standing queue, whatever the buffer.
    d = twoTransfersWithBuffer(sched::PolicyKind::kTemporal, 5 * kNsPerMs);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(d[0].time_ns, kSerial + kOneWay);
    EXPECT_EQ(d[1].time_ns, 2 * kSerial + kOneWay);
    // Sharing for less than an RTT: the second starts 7 ms into the first's 8. The first
    // sends 7 ms alone, then its last eighth at half the rate (until 9 ms); the second then
    // sends its rest alone (until 16 ms). They share 2 ms: neither loses.
    d = twoTransfersWithBuffer(sched::PolicyKind::kFair, 5 * kNsPerMs, 7 * kNsPerMs, &lost);
    ASSERT_EQ(d.size(), 2u);
    EXPECT_EQ(lost, 0u);
    EXPECT_EQ(d[0].time_ns, 9 * kNsPerMs + kOneWay);
    EXPECT_EQ(d[1].time_ns, 16 * kNsPerMs + kOneWay);
}

// The same closed forms through the whole simulator: 2 stages in 2 DCs.
TEST(SimClosedForm, OneMicroBatchAcrossTheWan) {
    // tf = 4 ms, tb = 6 ms, S = 1 MB on 1 Gbit/s (8 ms), RTT 10 ms (d = 5 ms).
    const SimConfig c = mustParse(twoDcPipeline(1, 1, 4, 6, 1e6, 1, 10, "fair"));
    const RunReport rep = mustRun(c);
    const Nanos expected = 4 * kNsPerMs + (kSerial + kOneWay) + 4 * kNsPerMs + 6 * kNsPerMs +
                           (kSerial + kOneWay) + 6 * kNsPerMs;
    EXPECT_EQ(rep.base.end_ns - rep.base.measure_start_ns, expected);
}

// Two pipelines send their first activation at the same instant over the same link: under
// FairShare both arrive at tf + 2X + d, under TemporalFifo at tf + X + d and tf + 2X + d.
TEST(SimClosedForm, TwoPipelinesShareTheLinkAsThePolicySays) {
    const Nanos tf = 4 * kNsPerMs;
    for (const char* policy : {"fair", "temporal"}) {
        const SimConfig c = mustParse(twoDcPipeline(2, 1, 4, 6, 1e6, 1, 10, policy));
        RunFlags flags;
        flags.record_timeline = true;
        flags.record_iterations = 2;
        const RunReport rep = mustRun(c, flags);
        std::vector<Nanos> starts;
        for (int d = 0; d < 2; ++d) {
            const size_t stage1 = static_cast<size_t>(d) * 2 + 1;
            const auto f = activities(rep.base, stage1, ActivityKind::kForward, 0);
            ASSERT_EQ(f.size(), 1u);
            starts.push_back(f[0].start_ns);
        }
        std::sort(starts.begin(), starts.end());
        if (std::string(policy) == "fair") {
            EXPECT_EQ(starts[0], tf + 2 * kSerial + kOneWay);
            EXPECT_EQ(starts[1], tf + 2 * kSerial + kOneWay);
        } else {
            EXPECT_EQ(starts[0], tf + kSerial + kOneWay);
            EXPECT_EQ(starts[1], tf + 2 * kSerial + kOneWay);
        }
    }
}

TEST(SimClosedForm, IntraDcAllReduceIsTheRingFormula) {
    // 4 replicas of one stage in one DC, 1 GB of gradients at 100 Gbit/s, 5 us per step:
    // 2 * 3/4 * 1e9 / 12.5e9 s = 120 ms, plus 6 steps * 5 us.
    nlohmann::json j = testing::freeCommPipeline(1, 1, "gpipe", 1.0, 2.0);
    j["parallelism"]["dp"] = 4;
    j["cluster"]["dcs"][0]["gpus"] = 4;
    j["cluster"]["intra_dc"] = {{"gbps", 100}, {"latency_us", 5}};
    j["job"]["stages"][0]["grad_bytes"] = 1e9;
    const RunReport rep = mustRun(mustParse(j));
    EXPECT_EQ(rep.base.end_ns - rep.base.measure_start_ns,
              3 * kNsPerMs + 120 * kNsPerMs + 6 * 5 * kNsPerUs);
}

}  // namespace
}  // namespace atlas::sim
