#include "scheduler/temporal_policy.h"

#include <algorithm>

namespace atlas::sched {

TemporalPolicy::TemporalPolicy(const PolicyConfig& config)
    : config_(config), max_wait_ns_(agingBoundNs(config)) {
    TemporalCore::reset(link_);
}

Status TemporalPolicy::onRequest(FlowId flow, const FlowClass& cls, uint64_t bytes, Nanos now_ns) {
    ATLAS_RETURN_IF_ERROR(checkTime(last_ns_, now_ns));
    uint32_t index = 0;
    ATLAS_RETURN_IF_ERROR(flows_.add(flow, cls, bytes, now_ns, &index));
    last_ns_ = now_ns;
    if (index >= entries_.size()) {
        entries_.resize(index + 1, TemporalEntry{});  // kEntryUnused
    }
    noteRequest(flows_.at(index), now_ns);
    TemporalCore c = core();
    c.open(index, cls.priority);
    c.join(index, now_ns);
    dirty_ = true;
    return Status::ok();
}

Status TemporalPolicy::onProgress(FlowId flow, uint64_t bytes_done, Nanos now_ns) {
    ATLAS_RETURN_IF_ERROR(checkTime(last_ns_, now_ns));
    ATLAS_RETURN_IF_ERROR(flows_.recordProgress(flow, bytes_done));
    last_ns_ = now_ns;
    return Status::ok();
}

Status TemporalPolicy::onComplete(FlowId flow, Nanos now_ns) {
    return remove(flow, now_ns);
}

Status TemporalPolicy::onCancel(FlowId flow, Nanos now_ns) {
    return remove(flow, now_ns);
}

Status TemporalPolicy::remove(FlowId flow, Nanos now_ns) {
    ATLAS_RETURN_IF_ERROR(checkTime(last_ns_, now_ns));
    const uint32_t index = flows_.find(flow);
    if (index == FlowTable::kNone) {
        return Status(Code::kInvalidArgument, "completion or cancel for an unknown flow");
    }
    last_ns_ = now_ns;
    core().close(index);
    flows_.remove(index);
    dirty_ = true;
    return Status::ok();
}

uint32_t TemporalPolicy::pickNext(Nanos now_ns) {
    return state().priorityHead(now_ns, max_wait_ns_);
}

Nanos TemporalPolicy::leaseEnd(const FlowRecord&, Nanos now_ns) {
    return slotLeaseEnd(now_ns, config_.max_slot_ns);
}

std::span<const Grant> TemporalPolicy::decide(Nanos now_ns) {
    // A decision never happens before the last event it has seen.
    now_ns = std::max(now_ns, last_ns_);
    const bool lease_over = link_.holder >= 0 && now_ns >= link_.lease_end_ns;
    const bool idle_with_waiters = link_.holder < 0 && link_.waiting > 0;
    if (!dirty_ && !lease_over && !idle_with_waiters) {
        return {grant_.data(), grant_count_};  // the lease holds and nothing changed
    }
    core().decide(
        now_ns, [this](Nanos now) { return pickNext(now); },
        [this](uint32_t index, Nanos now) { return leaseEnd(flows_.at(index), now); });
    const uint32_t h = state().holder();
    if (h != TemporalCore::kNone) {
        grant_[0] = Grant{flows_.at(h).id, 1.0, link_.lease_end_ns};
        grant_count_ = 1;
    } else {
        grant_count_ = 0;
    }
    dirty_ = false;
    return {grant_.data(), grant_count_};
}

Nanos TemporalPolicy::nextDecisionNs(Nanos now_ns) const {
    return dirty_ ? now_ns : state().nextDecisionNs(now_ns);
}

std::optional<FlowId> TemporalPolicy::holder() const {
    const uint32_t h = state().holder();
    if (h == TemporalCore::kNone) {
        return std::nullopt;
    }
    return flows_.at(h).id;
}

}  // namespace atlas::sched
