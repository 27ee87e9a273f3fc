#include "scheduler/link_policy.h"

#include <string>

#include "scheduler/fair_share.h"
#include "scheduler/temporal_policy.h"
#include "scheduler/workload_aware.h"

namespace atlas::sched {

const char* directionName(Direction direction) {
    return direction == Direction::kForward ? "forward" : "backward";
}

const char* policyKindName(PolicyKind kind) {
    switch (kind) {
        case PolicyKind::kFair:
            return "fair";
        case PolicyKind::kTemporal:
            return "temporal";
        case PolicyKind::kWorkload:
            return "workload";
    }
    return "unknown";
}

Result<PolicyKind> parsePolicyKind(std::string_view name) {
    for (PolicyKind kind : {PolicyKind::kFair, PolicyKind::kTemporal, PolicyKind::kWorkload}) {
        if (name == policyKindName(kind)) {
            return kind;
        }
    }
    return Status(Code::kInvalidUsage, "unknown link policy '" + std::string(name) +
                                           "' (expected one of: fair, temporal, workload)");
}

Status validate(const PolicyConfig& c) {
    if (c.max_slot_ns < 0 || c.min_slot_ns < 0 || c.max_wait_ns < 0) {
        return Status(Code::kInvalidArgument, "PolicyConfig: negative duration");
    }
    if (c.max_slot_ns > 0 && c.min_slot_ns > c.max_slot_ns) {
        return Status(Code::kInvalidArgument, "PolicyConfig: min_slot_ns > max_slot_ns");
    }
    if (!(c.min_confidence >= 0.0 && c.min_confidence <= 1.0)) {
        return Status(Code::kInvalidArgument, "PolicyConfig: min_confidence must be in [0, 1]");
    }
    return validate(c.detector);
}

Nanos agingBoundNs(const PolicyConfig& c) {
    constexpr Nanos kNoSlots = 200 * kNsPerMs;
    constexpr Nanos kSlots = 20;
    if (c.max_wait_ns > 0) {
        return c.max_wait_ns;
    }
    if (c.max_slot_ns <= 0) {
        return kNoSlots;
    }
    return c.max_slot_ns > kNever / kSlots ? kNever : kSlots * c.max_slot_ns;
}

Result<std::unique_ptr<LinkPolicy>> makePolicy(PolicyKind kind, const PolicyConfig& config) {
    Status s = validate(config);
    if (!s.isOk()) {
        return s;
    }
    switch (kind) {
        case PolicyKind::kFair:
            return std::unique_ptr<LinkPolicy>(new FairShare(config));
        case PolicyKind::kTemporal:
            return std::unique_ptr<LinkPolicy>(new TemporalFifo(config));
        case PolicyKind::kWorkload:
            return std::unique_ptr<LinkPolicy>(new WorkloadAware(config));
    }
    return Status(Code::kInvalidArgument, "makePolicy: unknown policy kind");
}

}  // namespace atlas::sched
