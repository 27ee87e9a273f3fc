// Vocabulary shared by every part of the scheduler library: flow identity and class, link
// grants, time intervals. Plain value types; no threads, no I/O.
//
// Units: time is int64 nanoseconds on one monotonic timeline chosen by the caller (the
// plugin uses CLOCK_MONOTONIC, the simulator its virtual time); bytes are uint64.
#pragma once

#include <cstdint>
#include <limits>

#include "atlas/common/clock.h"

namespace atlas::sched {

// A time that never comes: "no lease end", "no decision pending".
inline constexpr Nanos kNever = std::numeric_limits<Nanos>::max();

// Identifies one sender on the link (e.g. one plugin send comm, or one simulated transfer).
// A flow has at most one outstanding transfer; after onComplete/onCancel the same id may
// request again. Ids are chosen by the caller and only compared for equality.
using FlowId = uint64_t;

// Which way a pipeline transfer goes: activations flow forward (stage s -> s+1), gradients
// flow backward (stage s+1 -> s).
enum class Direction : uint8_t { kForward, kBackward };

// Admission priority of a flow on a shared link: when several wait, the temporal policies
// serve the smallest value first, first come first served within one value, and a waiter
// older than PolicyConfig::max_wait_ns before anyone (the starvation bound; docs/arbitration.md,
// "Priorities"). Values are 0 .. kPriorityLevels - 1. kDefaultPriority is what a flow gets
// when nothing says otherwise (no traffic hints, an old client): the middle of the three
// values traffic_priority.h assigns, so such flows keep their place between the two kinds.
inline constexpr uint8_t kPriorityLevels = 8;
inline constexpr uint8_t kDefaultPriority = 1;

// What a transfer is, in training terms. `pipeline` is the data-parallel replica, `stage` the
// sending pipeline stage. The workload-aware policy learns one periodic pattern per class
// {pipeline, stage, direction}; `priority` orders waiting transfers (see above).
struct FlowClass {
    int32_t pipeline = 0;
    int32_t stage = 0;
    Direction direction = Direction::kForward;
    uint8_t priority = kDefaultPriority;

    friend bool operator==(const FlowClass&, const FlowClass&) = default;
};

// "Flow `flow` may send at `share` of the link rate until `until_ns`."
// share is in (0, 1]; the shares of one decision sum to at most 1. until_ns is a promise:
// a policy never takes the link from a holder before until_ns unless the flow completes or
// is cancelled (the arbiter hands it out as a lease). kNever means "until the next event".
struct Grant {
    FlowId flow = 0;
    double share = 0.0;
    Nanos until_ns = kNever;

    friend bool operator==(const Grant&, const Grant&) = default;
};

// A half-open time interval [start_ns, end_ns). Used for observed GPU-idle intervals,
// predicted idle windows and accuracy accounting.
struct Interval {
    Nanos start_ns = 0;
    Nanos end_ns = 0;

    Nanos length() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
    friend bool operator==(const Interval&, const Interval&) = default;
};

const char* directionName(Direction direction);

}  // namespace atlas::sched
