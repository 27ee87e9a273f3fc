// NCCL's transfer hints (setNetAttr, ncclNet v11/v12) and what Atlas derives from them.
//
// NCCL calls setNetAttr(ctx, attr) on a communicator's context (the one init returned):
//  - on its proxy service thread right before each connect/accept, with the connection's
//    attributes: a p2p-only connection announces op = Send|Recv|AlltoAll|Scatter|Gather, a
//    collective (ring/tree) connection leaves op = NCCL_NET_ATTR_UNDEF;
//  - on its progress thread before the transfers of an operation when they differ from the
//    last call: op = 1 << collAPI (ncclFunc_t), algo/proto = 1 << algorithm/protocol (UNDEF
//    for point-to-point), the peer and flow counts from the operation's nPeers/nChannels.
// So the hints in force when a comm connects say what kind of traffic it will carry.
//
// The rule (docs/arbitration.md, "Traffic kinds"), one definition, pure:
//   op has a reduction/gather collective bit (Broadcast, Reduce, AllGather, ReduceScatter,
//     AllReduce, AllGatherV), or is UNDEF on a context that did get hints  -> data-parallel
//   else op has Send, Recv or SendRecv                                   -> pipeline
//   else op has AlltoAll, Scatter or Gather (expert/data parallel over p2p) -> data-parallel
//   no hints at all (NCCL < 2.28, v8..v10 tables)                         -> unknown
// The priority of a kind on a shared WAN link follows ATLAS_TRAFFIC_PRIORITY.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "atlas/common/status.h"
#include "scheduler/traffic_priority.h"

namespace atlas::plugin {

constexpr int32_t kHintUndef = -1;                              // NCCL_NET_ATTR_UNDEF
constexpr uint32_t kHintMaskUndef = static_cast<uint32_t>(-1);  // an UNDEF bitmask

// One side's counts; kHintUndef where NCCL gave none.
struct CommAttrHint {
    int32_t max_peers = kHintUndef;
    int32_t min_peers = kHintUndef;
    int32_t max_flows = kHintUndef;  // flows per peer (NCCL channels)
    int32_t min_flows = kHintUndef;
    friend bool operator==(const CommAttrHint&, const CommAttrHint&) = default;
};

// Version-independent copy of ncclNetAttr_v11_t / _v12_t (same layout in both).
struct NetHints {
    CommAttrHint send;
    CommAttrHint recv;
    uint32_t op = kHintMaskUndef;     // bitmask of ncclFunc_t
    uint32_t algo = kHintMaskUndef;   // bitmask of NCCL algorithms
    uint32_t proto = kHintMaskUndef;  // bitmask of NCCL protocols
    friend bool operator==(const NetHints&, const NetHints&) = default;
};

// What a WAN flow carries and the admission priority a configured order gives it: one
// definition in scheduler/ (traffic_priority.h), shared with atlas-sim.
using sched::TrafficKind;
using sched::trafficKindName;

// The rule above. `have_hints`: setNetAttr was called on the context at least once.
TrafficKind trafficKindOf(bool have_hints, uint32_t op);

// ATLAS_TRAFFIC_PRIORITY (pipeline | collective | equal): which kind goes first when both wait
// for one shared link. admissionPriority() turns a kind into FlowClass::priority, which the
// link policy orders waiting flows by (scheduler/temporal_state.h, docs/arbitration.md).
using sched::admissionPriority;
using sched::parsePriorityOrder;
using sched::PriorityOrder;
using sched::priorityOrderName;

// "op=Send|Recv algo=* proto=* send(peers 1..1 flows 2..2) recv(peers -..- flows -..-)".
std::string describeHints(const NetHints& hints);

}  // namespace atlas::plugin
