#include "scheduler/temporal_policy.h"

#include <algorithm>

namespace atlas::sched {

TemporalPolicy::TemporalPolicy(const PolicyConfig& config) : config_(config) {}

Status TemporalPolicy::onRequest(FlowId flow, const FlowClass& cls, uint64_t bytes, Nanos now_ns) {
    ATLAS_RETURN_IF_ERROR(checkTime(last_ns_, now_ns));
    uint32_t slot = 0;
    ATLAS_RETURN_IF_ERROR(flows_.add(flow, cls, bytes, now_ns, 0, &slot));
    last_ns_ = now_ns;
    noteRequest(flows_.at(slot), now_ns);
    enqueue(slot, now_ns);
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
    const uint32_t slot = flows_.find(flow);
    if (slot == FlowTable::kNone) {
        return Status(Code::kInvalidArgument, "completion or cancel for an unknown flow");
    }
    last_ns_ = now_ns;
    if (slot == holder_) {
        holder_ = FlowTable::kNone;
        lease_end_ns_ = kNever;
    } else if (flows_.at(slot).waiting_pos >= 0) {
        dequeue(slot);
    }
    flows_.remove(slot);
    dirty_ = true;
    return Status::ok();
}

void TemporalPolicy::enqueue(uint32_t slot, Nanos now_ns) {
    FlowRecord& r = flows_.at(slot);
    r.queued_ns = now_ns;
    r.seq = next_seq_++;
    r.waiting_pos = static_cast<int32_t>(waiting_.size());
    waiting_.push_back(slot);
}

void TemporalPolicy::dequeue(uint32_t slot) {
    FlowRecord& r = flows_.at(slot);
    const auto pos = static_cast<size_t>(r.waiting_pos);
    const uint32_t moved = waiting_.back();
    waiting_[pos] = moved;
    flows_.at(moved).waiting_pos = static_cast<int32_t>(pos);
    waiting_.pop_back();
    r.waiting_pos = -1;
}

size_t TemporalPolicy::fifoPick() const {
    size_t best = 0;
    for (size_t i = 1; i < waiting_.size(); ++i) {
        if (flows_.at(waiting_[i]).seq < flows_.at(waiting_[best]).seq) {
            best = i;
        }
    }
    return best;
}

size_t TemporalPolicy::pickNext(Nanos) {
    return fifoPick();
}

Nanos TemporalPolicy::leaseEnd(const FlowRecord&, Nanos now_ns) {
    return config_.max_slot_ns > 0 ? now_ns + config_.max_slot_ns : kNever;
}

std::span<const Grant> TemporalPolicy::decide(Nanos now_ns) {
    // A decision never happens before the last event it has seen.
    now_ns = std::max(now_ns, last_ns_);
    const bool lease_over = holder_ != FlowTable::kNone && now_ns >= lease_end_ns_;
    const bool idle_with_waiters = holder_ == FlowTable::kNone && !waiting_.empty();
    if (!dirty_ && !lease_over && !idle_with_waiters) {
        return {grant_.data(), grant_count_};
    }
    if (lease_over) {
        if (!waiting_.empty()) {
            // Preempt: the holder queues again as a new arrival and competes with the rest.
            enqueue(holder_, now_ns);
            holder_ = FlowTable::kNone;
        } else {
            lease_end_ns_ = leaseEnd(flows_.at(holder_), now_ns);
        }
    }
    if (holder_ == FlowTable::kNone && !waiting_.empty()) {
        const size_t idx = pickNext(now_ns);
        holder_ = waiting_[idx];
        dequeue(holder_);
        lease_end_ns_ = leaseEnd(flows_.at(holder_), now_ns);
    }
    if (holder_ != FlowTable::kNone) {
        grant_[0] = Grant{flows_.at(holder_).id, 1.0, lease_end_ns_};
        grant_count_ = 1;
    } else {
        grant_count_ = 0;
    }
    dirty_ = false;
    return {grant_.data(), grant_count_};
}

Nanos TemporalPolicy::nextDecisionNs(Nanos now_ns) const {
    if (dirty_ || (holder_ == FlowTable::kNone && !waiting_.empty())) {
        return now_ns;
    }
    if (holder_ != FlowTable::kNone) {
        return std::max(lease_end_ns_, now_ns);
    }
    return kNever;
}

std::optional<FlowId> TemporalPolicy::holder() const {
    if (holder_ == FlowTable::kNone) {
        return std::nullopt;
    }
    return flows_.at(holder_).id;
}

}  // namespace atlas::sched
