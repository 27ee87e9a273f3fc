// FairShare: processor sharing, the baseline. Every active transfer sends at 1/n of the link
// rate (n = active transfers), which is what n TCP flows sharing one bottleneck converge to.
// Grants carry no lease end (kNever): the allocation only changes on events.
//
// Threads: one owner. Cost: decide() is O(1) when nothing changed, O(n) after an event.
#pragma once

#include <vector>

#include "scheduler/flow_table.h"
#include "scheduler/link_policy.h"

namespace atlas::sched {

class FairShare final : public LinkPolicy {
  public:
    explicit FairShare(const PolicyConfig& config = {});

    PolicyKind kind() const override { return PolicyKind::kFair; }
    Status onRequest(FlowId flow, const FlowClass& cls, uint64_t bytes, Nanos now_ns) override;
    Status onProgress(FlowId flow, uint64_t bytes_done, Nanos now_ns) override;
    Status onComplete(FlowId flow, Nanos now_ns) override;
    Status onCancel(FlowId flow, Nanos now_ns) override;
    std::span<const Grant> decide(Nanos now_ns) override;
    Nanos nextDecisionNs(Nanos now_ns) const override;
    size_t activeFlows() const override { return flows_.size(); }

  private:
    Status remove(FlowId flow, Nanos now_ns);

    FlowTable flows_;
    std::vector<uint32_t> active_;  // indices in arrival order (grants are listed in this order)
    std::vector<Grant> grants_;
    Nanos last_ns_ = 0;
    bool dirty_ = false;
};

}  // namespace atlas::sched
