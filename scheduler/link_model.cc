#include "scheduler/link_model.h"

#include <algorithm>
#include <cmath>

namespace atlas::sched {

namespace {

// Remaining bytes below this are float dust from share arithmetic, not data.
constexpr double kDrainedBytes = 1e-6;

}  // namespace

LinkModel::LinkModel(double bytes_per_sec) : bytes_per_ns_(bytes_per_sec / 1e9) {}

Status LinkModel::add(FlowId flow, uint64_t bytes) {
    if (!remaining_.emplace(flow, static_cast<double>(bytes)).second) {
        return Status(Code::kInvalidArgument, "LinkModel: flow already present");
    }
    return Status::ok();
}

Status LinkModel::remove(FlowId flow) {
    if (remaining_.erase(flow) == 0) {
        return Status(Code::kInvalidArgument, "LinkModel: unknown flow");
    }
    return Status::ok();
}

double LinkModel::remainingBytes(FlowId flow) const {
    auto it = remaining_.find(flow);
    return it == remaining_.end() ? 0.0 : it->second;
}

Nanos LinkModel::nextCompletionNs(std::span<const Grant> grants, Nanos now_ns) const {
    Nanos best = kNever;
    for (const Grant& g : grants) {
        auto it = remaining_.find(g.flow);
        if (it == remaining_.end() || g.share <= 0.0) {
            continue;
        }
        const double ns = it->second / (g.share * bytes_per_ns_);
        // Shave a relative 1e-12 before rounding up so that an exact quotient computed as
        // x.0000000001 does not land one nanosecond late.
        const auto dt = static_cast<Nanos>(std::ceil(ns * (1.0 - 1e-12)));
        best = std::min(best, now_ns + std::max<Nanos>(dt, 0));
    }
    return best;
}

void LinkModel::advance(std::span<const Grant> grants, Nanos from_ns, Nanos to_ns,
                        std::vector<FlowId>* drained) {
    const double dt = static_cast<double>(std::max<Nanos>(to_ns - from_ns, 0));
    for (const Grant& g : grants) {
        auto it = remaining_.find(g.flow);
        if (it == remaining_.end() || g.share <= 0.0) {
            continue;
        }
        it->second -= g.share * bytes_per_ns_ * dt;
        if (it->second <= kDrainedBytes) {
            drained->push_back(g.flow);
            remaining_.erase(it);
        }
    }
}

FluidLink::FluidLink(LinkPolicy& policy, double bytes_per_sec, Nanos start_ns)
    : policy_(policy), model_(bytes_per_sec), now_ns_(start_ns) {}

void FluidLink::redecide() {
    std::span<const Grant> g = policy_.decide(now_ns_);
    grants_.assign(g.begin(), g.end());
}

void FluidLink::step(Nanos to_ns, std::vector<FlowId>* drained) {
    double shares = 0.0;
    for (const Grant& g : grants_) {
        shares += g.share;
    }
    if (shares > 0.0) {
        busy_ns_ += to_ns - now_ns_;
    }
    model_.advance(grants_, now_ns_, to_ns, drained);
    now_ns_ = to_ns;
}

Nanos FluidLink::nextEventNs() const {
    return std::min(model_.nextCompletionNs(grants_, now_ns_), policy_.nextDecisionNs(now_ns_));
}

Status FluidLink::advanceTo(Nanos to_ns, std::vector<Completion>* completed) {
    if (to_ns < now_ns_) {
        return Status(Code::kInvalidArgument, "FluidLink: time went backwards");
    }
    // Events at one instant (completions, a pending decision) must settle; a policy that
    // keeps asking for a decision at the same instant is broken.
    constexpr int kMaxStepsPerInstant = 1 << 16;
    int steps_here = 0;
    for (;;) {
        const Nanos next = nextEventNs();
        const Nanos target = std::min(next, to_ns);
        steps_here = target == now_ns_ ? steps_here + 1 : 0;
        if (steps_here > kMaxStepsPerInstant) {
            return Status(Code::kInternal, "FluidLink: policy does not settle at one instant");
        }
        drained_.clear();
        step(target, &drained_);
        for (FlowId f : drained_) {
            ATLAS_RETURN_IF_ERROR(policy_.onComplete(f, now_ns_));
            if (completed != nullptr) {
                completed->push_back({f, now_ns_});
            }
        }
        if (next > to_ns && drained_.empty()) {
            break;
        }
        redecide();
    }
    return Status::ok();
}

Status FluidLink::submit(FlowId flow, const FlowClass& cls, uint64_t bytes, Nanos now_ns,
                         std::vector<Completion>* completed) {
    ATLAS_RETURN_IF_ERROR(advanceTo(now_ns, completed));
    ATLAS_RETURN_IF_ERROR(policy_.onRequest(flow, cls, bytes, now_ns));
    ATLAS_RETURN_IF_ERROR(model_.add(flow, bytes));
    redecide();
    return Status::ok();
}

Status FluidLink::cancel(FlowId flow, Nanos now_ns, std::vector<Completion>* completed) {
    ATLAS_RETURN_IF_ERROR(advanceTo(now_ns, completed));
    ATLAS_RETURN_IF_ERROR(policy_.onCancel(flow, now_ns));
    ATLAS_RETURN_IF_ERROR(model_.remove(flow));
    redecide();
    return Status::ok();
}

}  // namespace atlas::sched
