#include "scheduler/fair_share.h"

#include <algorithm>

namespace atlas::sched {

FairShare::FairShare(const PolicyConfig&) {}

Status FairShare::onRequest(FlowId flow, const FlowClass& cls, uint64_t bytes, Nanos now_ns) {
    ATLAS_RETURN_IF_ERROR(checkTime(last_ns_, now_ns));
    uint32_t index = 0;
    ATLAS_RETURN_IF_ERROR(flows_.add(flow, cls, bytes, now_ns, &index));
    last_ns_ = now_ns;
    active_.push_back(index);
    dirty_ = true;
    return Status::ok();
}

Status FairShare::onProgress(FlowId flow, uint64_t bytes_done, Nanos now_ns) {
    ATLAS_RETURN_IF_ERROR(checkTime(last_ns_, now_ns));
    ATLAS_RETURN_IF_ERROR(flows_.recordProgress(flow, bytes_done));
    last_ns_ = now_ns;
    return Status::ok();
}

Status FairShare::onComplete(FlowId flow, Nanos now_ns) {
    return remove(flow, now_ns);
}

Status FairShare::onCancel(FlowId flow, Nanos now_ns) {
    return remove(flow, now_ns);
}

Status FairShare::remove(FlowId flow, Nanos now_ns) {
    ATLAS_RETURN_IF_ERROR(checkTime(last_ns_, now_ns));
    const uint32_t index = flows_.find(flow);
    if (index == FlowTable::kNone) {
        return Status(Code::kInvalidArgument, "completion or cancel for an unknown flow");
    }
    last_ns_ = now_ns;
    active_.erase(std::find(active_.begin(), active_.end(), index));
    flows_.remove(index);
    dirty_ = true;
    return Status::ok();
}

std::span<const Grant> FairShare::decide(Nanos now_ns) {
    (void)now_ns;
    if (dirty_) {
        grants_.clear();
        const double share = active_.empty() ? 0.0 : 1.0 / static_cast<double>(active_.size());
        for (uint32_t index : active_) {
            grants_.push_back(Grant{flows_.at(index).id, share, kNever});
        }
        dirty_ = false;
    }
    return grants_;
}

Nanos FairShare::nextDecisionNs(Nanos now_ns) const {
    return dirty_ ? now_ns : kNever;
}

}  // namespace atlas::sched
