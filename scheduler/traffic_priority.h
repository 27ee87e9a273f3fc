// Which kind of training traffic a WAN flow carries, and the admission priority
// (FlowClass::priority) a configured order gives each kind. One definition for every driver:
// the plugin derives the kind from NCCL's setNetAttr hints (plugin/net_hints.h) and applies
// ATLAS_TRAFFIC_PRIORITY; atlas-sim applies network.traffic_priority to its pipeline and
// all-reduce flows. Pure functions; no state.
#pragma once

#include <cstdint>
#include <string_view>

#include "atlas/common/status.h"
#include "scheduler/types.h"

namespace atlas::sched {

// What a WAN flow carries (docs/arbitration.md, "Traffic kinds").
enum class TrafficKind : uint8_t { kUnknown = 0, kPipeline = 1, kDataParallel = 2 };
const char* trafficKindName(TrafficKind kind);

// Which kind goes first when both wait for one shared link.
enum class PriorityOrder : uint8_t {
    kPipelineFirst,    // default: a late pipeline transfer stalls every later stage, DP overlaps
    kCollectiveFirst,  // e.g. a job whose collectives sit on the critical path
    kEqual,            // arrival order only (FIFO), the behaviour before priorities existed
};
// "pipeline" (also the empty text) | "collective" | "equal", case-insensitive. The error
// (kInvalidUsage) names `what` (the variable or option) and the accepted values.
Result<PriorityOrder> parsePriorityOrder(std::string_view text,
                                         std::string_view what = "ATLAS_TRAFFIC_PRIORITY");
const char* priorityOrderName(PriorityOrder order);

// The priority of a flow of `kind`: 0 for the kind the order puts first, 2 for the other,
// kDefaultPriority (1) for unknown traffic and for every flow under kEqual, so that flows
// without hints keep today's treatment relative to each other.
uint8_t admissionPriority(TrafficKind kind, PriorityOrder order);

}  // namespace atlas::sched
