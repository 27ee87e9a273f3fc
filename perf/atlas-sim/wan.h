// The simulated WAN: one bottleneck per directed DC pair, each arbitrated by the scheduler
// library's LinkPolicy (fair / temporal / workload) over its fluid link model (FluidLink),
// the same decision code the plugin and atlas-arbiter run.
//
// Transport: a transfer can never go faster than its transport allows on that path
// (model.h transferRateBytesPerSec: one TCP stream's window/RTT and Mathis bounds, or N
// streams). RateCappedPolicy caps every grant's share at that rate / link rate, so a fair
// share of n flows sends at min(link/n, cap) each and a temporal holder at min(link, cap).
// Transfers between the same two groups in the same direction use one connection and are
// sent in order (a FIFO per connection; only its head is on the link), as NCCL does.
// Delivery = the moment the last byte leaves the bottleneck + the path's one-way delay
// (RTT / 2). With network.header_bytes the link carries mss / (mss + header) of its rate as
// payload (the rest is TCP/IP headers).
//
// Contention loss (a path with buffer_ms): concurrent TCP flows at one bottleneck keep a
// standing queue of network.contention_queue_bdp BDPs (BBR: 1.5); a drop-tail buffer shorter
// than that overflows, and a transfer that shared the link for at least one RTT loses a
// segment and is delivered one RTT plus one buffer later (its loss recovery: the loss is
// noticed an RTT later, and the resent segment queues behind the full buffer). One transfer
// at a time (the temporal policies) builds no standing queue and loses nothing. The
// retransmitted bytes' link time and slow start are not modelled.
//
// Threads: one owner (the simulator). Time only enters through arguments.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "atlas/common/status.h"
#include "perf/atlas-sim/config.h"
#include "scheduler/link_model.h"
#include "scheduler/link_policy.h"

namespace atlas::sim {

// Decorator: forwards every event to `inner` and caps the shares it grants.
class RateCappedPolicy final : public sched::LinkPolicy {
  public:
    RateCappedPolicy(std::unique_ptr<sched::LinkPolicy> inner, double max_share)
        : inner_(std::move(inner)), max_share_(max_share) {}

    sched::PolicyKind kind() const override { return inner_->kind(); }
    Status onRequest(sched::FlowId f, const sched::FlowClass& c, uint64_t bytes,
                     Nanos now_ns) override {
        return inner_->onRequest(f, c, bytes, now_ns);
    }
    Status onProgress(sched::FlowId f, uint64_t done, Nanos now_ns) override {
        return inner_->onProgress(f, done, now_ns);
    }
    Status onComplete(sched::FlowId f, Nanos now_ns) override {
        return inner_->onComplete(f, now_ns);
    }
    Status onCancel(sched::FlowId f, Nanos now_ns) override { return inner_->onCancel(f, now_ns); }
    std::span<const sched::Grant> decide(Nanos now_ns) override;
    Nanos nextDecisionNs(Nanos now_ns) const override { return inner_->nextDecisionNs(now_ns); }
    size_t activeFlows() const override { return inner_->activeFlows(); }
    const sched::LinkPolicy& inner() const { return *inner_; }

  private:
    std::unique_ptr<sched::LinkPolicy> inner_;
    double max_share_;
    std::vector<sched::Grant> capped_;
};

struct WanDelivery {
    uint64_t tag = 0;
    Nanos time_ns = 0;  // arrival at the receiver
};

// A piecewise-constant aggregate sending rate of one link (recorded on request, for the
// capacity invariant and plots).
struct RateSegment {
    Nanos start_ns = 0;
    double bytes_per_sec = 0.0;
};

struct LinkStats {
    int from = 0;
    int to = 0;
    double capacity_bytes_per_sec = 0.0;
    double transfer_cap_bytes_per_sec = 0.0;
    uint64_t bytes = 0;            // delivered
    uint64_t transfers = 0;        // delivered
    Nanos busy_ns = 0;             // time with at least one transfer sending
    size_t max_active = 0;         // most transfers on the link at once
    uint64_t loss_recoveries = 0;  // transfers delivered an RTT and a buffer late (contention loss)
    double max_share_sum = 0;      // largest sum of granted shares seen (<= 1)
    std::vector<RateSegment> rate;  // when recording
    // WorkloadAware only: how its holder choices were made (see scheduler/workload_aware.h).
    uint64_t planned_picks = 0;
    uint64_t fallback_picks = 0;
    uint64_t aged_picks = 0;
    uint64_t shaped_leases = 0;
    std::string workload_plan;  // plan in use at the end ("stagger", "fifo", ...; "*" = on trial)
};

class WanNetwork {
  public:
    // Fails if the policy config is invalid.
    static Result<std::unique_ptr<WanNetwork>> create(const ClusterSpec& cluster,
                                                      const NetworkSpec& net, bool record);

    // Index of the directed link from -> to (from != to).
    int linkIndex(int from, int to) const { return from * ndc_ + to; }
    Nanos oneWayNs(int link) const { return links_[static_cast<size_t>(link)].one_way_ns; }

    // Queues `bytes` on connection `conn` of `link` at now_ns (>= every earlier call's time).
    // Deliveries that became due at now_ns are appended to *out.
    Status send(int link, uint64_t conn, const sched::FlowClass& cls, uint64_t bytes, uint64_t tag,
                Nanos now_ns, std::vector<WanDelivery>* out);

    // Processes the link's own events up to now_ns (completions, lease ends).
    Status advance(int link, Nanos now_ns, std::vector<WanDelivery>* out);

    // Next time `link` changes by itself; kNever when idle.
    Nanos nextEventNs(int link) const;

    int linkCount() const { return static_cast<int>(links_.size()); }
    // Stats of links that carried traffic (or all links with `all`).
    std::vector<LinkStats> stats(bool all = false) const;

  private:
    struct Transfer {
        uint64_t conn = 0;
        sched::FlowClass cls;
        uint64_t bytes = 0;
        uint64_t tag = 0;
        Nanos shared_ns = 0;  // time on the link beside another transfer
    };
    struct Link {
        std::unique_ptr<RateCappedPolicy> policy;
        std::unique_ptr<sched::FluidLink> fluid;
        Nanos one_way_ns = 0;
        Nanos rtt_ns = 0;
        Nanos buffer_ns = 0;
        bool lossy = false;     // its buffer is below the contention queue
        Nanos shared_from = 0;  // the grants have been what they are since
        LinkStats stats;
        std::unordered_map<uint64_t, std::deque<uint32_t>> conns;  // conn -> transfer indices
        std::vector<Transfer> transfers;                           // slab; flow id = index
        std::vector<uint32_t> free;
        std::vector<sched::Completion> completed;  // scratch
    };

    WanNetwork(int ndc, bool record) : ndc_(ndc), record_(record) {}
    Status drain(Link& l, std::vector<WanDelivery>* out);
    Status submit(Link& l, uint32_t index, Nanos now_ns);
    // Adds [shared_from, now_ns) to every granted transfer's shared time when two or more
    // share the link; call before the grants change.
    void accountShared(Link& l, Nanos now_ns);
    void observe(Link& l);

    int ndc_;
    bool record_;
    std::vector<Link> links_;
};

}  // namespace atlas::sim
