// The traffic-kind rule over NCCL's setNetAttr hints and the priority order (plugin/net_hints.h).
#include <gtest/gtest.h>

#include "atlas/nccl/net.h"
#include "plugin/net_hints.h"

namespace atlas::plugin {
namespace {

constexpr uint32_t bit(int i) {
    return 1u << i;
}

TEST(TrafficKind, FromNcclOpMasks) {
    // Per-transfer masks: one bit, 1 << collAPI.
    EXPECT_EQ(trafficKindOf(true, bit(ncclFuncSend)), TrafficKind::kPipeline);
    EXPECT_EQ(trafficKindOf(true, bit(ncclFuncRecv)), TrafficKind::kPipeline);
    EXPECT_EQ(trafficKindOf(true, bit(ncclFuncSendRecv)), TrafficKind::kPipeline);
    for (int f : {ncclFuncBroadcast, ncclFuncReduce, ncclFuncAllGather, ncclFuncReduceScatter,
                  ncclFuncAllReduce, ncclFuncAllGatherV, ncclFuncAlltoAll, ncclFuncScatter,
                  ncclFuncGather}) {
        EXPECT_EQ(trafficKindOf(true, bit(f)), TrafficKind::kDataParallel) << "func " << f;
    }
    // Connection masks: a p2p-only connection, and a ring/tree one (UNDEF).
    const uint32_t p2p = bit(ncclFuncSend) | bit(ncclFuncRecv) | bit(ncclFuncAlltoAll) |
                         bit(ncclFuncScatter) | bit(ncclFuncGather);
    EXPECT_EQ(trafficKindOf(true, p2p), TrafficKind::kPipeline);
    EXPECT_EQ(trafficKindOf(true, kHintMaskUndef), TrafficKind::kDataParallel);
    // A collective bit wins over send/recv in a mixed mask.
    EXPECT_EQ(trafficKindOf(true, bit(ncclFuncSend) | bit(ncclFuncAllReduce)),
              TrafficKind::kDataParallel);
    // No hints, or a mask with nothing Atlas knows.
    EXPECT_EQ(trafficKindOf(false, bit(ncclFuncSend)), TrafficKind::kUnknown);
    EXPECT_EQ(trafficKindOf(true, 0), TrafficKind::kUnknown);
    EXPECT_EQ(trafficKindOf(true, bit(ncclFuncSignal)), TrafficKind::kUnknown);
}

TEST(TrafficKind, PriorityOrders) {
    using K = TrafficKind;
    using O = PriorityOrder;
    EXPECT_EQ(admissionPriority(K::kPipeline, O::kPipelineFirst), 0);
    EXPECT_EQ(admissionPriority(K::kUnknown, O::kPipelineFirst), 1);
    EXPECT_EQ(admissionPriority(K::kDataParallel, O::kPipelineFirst), 2);
    EXPECT_EQ(admissionPriority(K::kPipeline, O::kCollectiveFirst), 2);
    EXPECT_EQ(admissionPriority(K::kDataParallel, O::kCollectiveFirst), 0);
    for (K k : {K::kPipeline, K::kUnknown, K::kDataParallel}) {
        EXPECT_EQ(admissionPriority(k, O::kEqual), 1);
    }
}

TEST(TrafficKind, ParsePriorityOrder) {
    EXPECT_EQ(parsePriorityOrder("").value(), PriorityOrder::kPipelineFirst);
    EXPECT_EQ(parsePriorityOrder("Pipeline").value(), PriorityOrder::kPipelineFirst);
    EXPECT_EQ(parsePriorityOrder("collective").value(), PriorityOrder::kCollectiveFirst);
    EXPECT_EQ(parsePriorityOrder("equal").value(), PriorityOrder::kEqual);
    Result<PriorityOrder> bad = parsePriorityOrder("dp");
    ASSERT_FALSE(bad.isOk());
    EXPECT_EQ(bad.status().code(), Code::kInvalidUsage);
    EXPECT_NE(bad.status().message().find("ATLAS_TRAFFIC_PRIORITY"), std::string::npos);
}

TEST(TrafficKind, DescribeHints) {
    NetHints h;
    h.op = bit(ncclFuncAllReduce);
    h.algo = bit(1);
    h.proto = bit(2);
    h.send = {2, 2, 4, 4};
    EXPECT_EQ(describeHints(h),
              "op=AllReduce algo=Ring proto=Simple send(peers 2..2 flows 4..4) recv(peers -..- "
              "flows -..-)");
    EXPECT_EQ(describeHints(NetHints{}).substr(0, 22), "op=* algo=* proto=* se");
}

}  // namespace
}  // namespace atlas::plugin
