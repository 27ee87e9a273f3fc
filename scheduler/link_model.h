// Fluid model of one link, for the simulator (perf/atlas-sim) and the scheduler tests.
//
// LinkModel: between two decisions every granted transfer moves share * rate bytes per
// second; it answers when the next granted transfer drains. Bytes are tracked as doubles so
// shares such as 1/3 do not accumulate rounding; completion times are rounded up to whole
// nanoseconds (a transfer is never reported done before its last byte could have moved).
//
// FluidLink: drives a LinkPolicy over a LinkModel. The owner submits arrivals and advances
// time; FluidLink reports completions to the policy, asks it for the next decision at every
// completion and lease end, and returns the completion times. A discrete-event simulator
// interleaves its own events with FluidLink::nextEventNs().
//
// Threads: one owner; no clock is read (time is whatever the caller passes).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "atlas/common/status.h"
#include "scheduler/link_policy.h"
#include "scheduler/types.h"

namespace atlas::sched {

class LinkModel {
  public:
    // bytes_per_sec > 0.
    explicit LinkModel(double bytes_per_sec);

    Status add(FlowId flow, uint64_t bytes);
    Status remove(FlowId flow);
    bool contains(FlowId flow) const { return remaining_.count(flow) != 0; }
    double remainingBytes(FlowId flow) const;
    double bytesPerSec() const { return bytes_per_ns_ * 1e9; }

    // Earliest time >= now_ns at which a transfer holding a grant drains; kNever if none can.
    Nanos nextCompletionNs(std::span<const Grant> grants, Nanos now_ns) const;

    // Moves bytes under `grants` over [from_ns, to_ns) and appends the transfers that drained
    // to `drained` (in grant order). Drained transfers leave the model.
    void advance(std::span<const Grant> grants, Nanos from_ns, Nanos to_ns,
                 std::vector<FlowId>* drained);

  private:
    double bytes_per_ns_;
    std::unordered_map<FlowId, double> remaining_;
};

struct Completion {
    FlowId flow = 0;
    Nanos time_ns = 0;
};

class FluidLink {
  public:
    // `policy` must outlive the FluidLink; FluidLink is its only caller while it exists.
    FluidLink(LinkPolicy& policy, double bytes_per_sec, Nanos start_ns = 0);

    // A transfer arrives at now_ns (>= nowNs(); the link is first advanced to now_ns, so
    // completions before now_ns are appended to `completed`).
    Status submit(FlowId flow, const FlowClass& cls, uint64_t bytes, Nanos now_ns,
                  std::vector<Completion>* completed);

    // Drops a transfer (the sender vanished): onCancel to the policy, bytes forgotten.
    Status cancel(FlowId flow, Nanos now_ns, std::vector<Completion>* completed);

    // Next time the link changes by itself (a completion or a policy decision); kNever
    // when idle.
    Nanos nextEventNs() const;

    // Processes every link event up to and including to_ns, in time order.
    Status advanceTo(Nanos to_ns, std::vector<Completion>* completed);

    Nanos nowNs() const { return now_ns_; }
    std::span<const Grant> grants() const { return grants_; }
    // Time during which at least one transfer was sending (sum of shares > 0).
    Nanos busyNs() const { return busy_ns_; }
    const LinkModel& model() const { return model_; }

  private:
    void step(Nanos to_ns, std::vector<FlowId>* drained);
    void redecide();

    LinkPolicy& policy_;
    LinkModel model_;
    Nanos now_ns_;
    Nanos busy_ns_ = 0;
    std::vector<Grant> grants_;
    std::vector<FlowId> drained_;
};

}  // namespace atlas::sched
