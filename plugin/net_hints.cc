#include "plugin/net_hints.h"

#include <string>

namespace atlas::plugin {
namespace {

constexpr uint32_t bit(int i) {
    return 1u << i;
}
// ncclFunc_t positions (include/atlas/nccl/types.h); spelled out here so this file needs no
// NCCL header.
constexpr uint32_t kCollectiveBits = bit(0) | bit(1) | bit(2) | bit(3) | bit(4) | bit(11);
constexpr uint32_t kSendRecvBits = bit(5) | bit(6) | bit(7);
constexpr uint32_t kP2pCollectiveBits = bit(8) | bit(9) | bit(10);

constexpr const char* kFuncNames[] = {"Broadcast", "Reduce",   "AllGather", "ReduceScatter",
                                      "AllReduce", "SendRecv", "Send",      "Recv",
                                      "AlltoAll",  "Scatter",  "Gather",    "AllGatherV",
                                      "PutSignal", "Signal",   "WaitSignal"};
constexpr const char* kAlgoNames[] = {"Tree",     "Ring", "CollNetDirect", "CollNetChain", "NVLS",
                                      "NVLSTree", "PAT"};
constexpr const char* kProtoNames[] = {"LL", "LL128", "Simple"};

template <size_t N>
std::string maskText(uint32_t mask, const char* const (&names)[N]) {
    if (mask == kHintMaskUndef) {
        return "*";
    }
    std::string out;
    for (uint32_t i = 0; i < 32; ++i) {
        if ((mask & bit(static_cast<int>(i))) == 0) {
            continue;
        }
        if (!out.empty()) {
            out += '|';
        }
        out += i < N ? std::string(names[i]) : "bit" + std::to_string(i);
    }
    return out.empty() ? "0" : out;
}

std::string countText(int32_t v) {
    return v == kHintUndef ? "-" : std::to_string(v);
}

std::string sideText(const CommAttrHint& h) {
    return "(peers " + countText(h.min_peers) + ".." + countText(h.max_peers) + " flows " +
           countText(h.min_flows) + ".." + countText(h.max_flows) + ")";
}

}  // namespace

TrafficKind trafficKindOf(bool have_hints, uint32_t op) {
    if (!have_hints) {
        return TrafficKind::kUnknown;
    }
    // UNDEF (all bits) lands here too: NCCL announces ring/tree connections that way.
    if ((op & kCollectiveBits) != 0) {
        return TrafficKind::kDataParallel;
    }
    if ((op & kSendRecvBits) != 0) {
        return TrafficKind::kPipeline;
    }
    if ((op & kP2pCollectiveBits) != 0) {
        return TrafficKind::kDataParallel;
    }
    return TrafficKind::kUnknown;
}

std::string describeHints(const NetHints& h) {
    return "op=" + maskText(h.op, kFuncNames) + " algo=" + maskText(h.algo, kAlgoNames) +
           " proto=" + maskText(h.proto, kProtoNames) + " send" + sideText(h.send) + " recv" +
           sideText(h.recv);
}

}  // namespace atlas::plugin
