// LinkPolicy: who may send on one WAN link, at what share of its rate, and until when.
//
// One instance arbitrates one bottleneck (typically one direction of one inter-DC link).
// The same code runs in three places: perf/atlas-sim (fluid model), atlas-arbiter (leases
// to plugin flows) and the plugin's node-local arbitration.
//
// Call protocol (single owner thread; the policy owns no threads, does no I/O, reads no clock):
//  1. Report events as they happen, with non-decreasing now_ns:
//       onRequest   a transfer of `bytes` arrives for flow `flow` (the flow has none pending),
//       onProgress  cumulative bytes moved so far (optional; feeds statistics only),
//       onComplete  the transfer drained,
//       onCancel    the holder is gone (lease expired, peer died); the transfer is dropped.
//     Events return kInvalidArgument for contract violations (unknown flow, duplicate request,
//     time going backwards, progress beyond the size) and leave the state unchanged, so an
//     arbiter can feed untrusted input without corrupting its policy.
//  2. After events, or once now_ns reaches nextDecisionNs(), call decide(now_ns). The grants
//     hold from now_ns until the next event or nextDecisionNs(), whichever comes first.
//     decide() is deterministic (a pure function of the event sequence and the times passed)
//     and idempotent for equal now_ns. The returned span stays valid until the next
//     non-const call.
//
// Grant leases: Grant::until_ns is a promise. A temporal policy never gives the link to
// someone else before the holder's until_ns unless the holder completes or is cancelled.
// A holder still sending at until_ns is preempted if another request waits (and otherwise
// receives a fresh lease), which bounds starvation by PolicyConfig::max_slot_ns.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "atlas/common/status.h"
#include "scheduler/period_detector.h"
#include "scheduler/types.h"

namespace atlas::sched {

enum class PolicyKind : uint8_t {
    kFair,      // processor sharing: every active flow gets 1/n (the baseline)
    kTemporal,  // one transfer at a time at full rate, first come first served
    kWorkload,  // temporal, ordered by a learned periodic plan; FIFO until it is learned
};

const char* policyKindName(PolicyKind kind);

// "fair" | "temporal" | "workload" (exact, lower case). The error lists the accepted names.
Result<PolicyKind> parsePolicyKind(std::string_view name);

// Defaults every driver of these policies shares (the plugin's ATLAS_SHARING and
// ATLAS_SLOT_MS, atlas-arbiter's --sharing and --slot-ms, atlas-sim's network.policy is its
// own): one definition each. Fair by default: without configuration no flow is ever held
// back, which is what a plugin loaded into every NCCL job must do; arbitration is opted into.
inline constexpr PolicyKind kDefaultSharing = PolicyKind::kFair;
inline constexpr const char* kDefaultSharingName = "fair";  // policyKindName(kDefaultSharing)
// The longest slot of one grant: long enough for a pipeline stage's activation transfer over a
// few Gbit/s, short enough to bound the wait behind it.
inline constexpr Nanos kDefaultMaxSlotNs = 250 * kNsPerMs;

struct PolicyConfig {
    // Temporal policies: the longest lease one grant carries. 0 = no bound (a transfer runs
    // to completion once granted; no starvation bound). Starvation bounds (first grant after
    // a request, n = active flows): TemporalFifo (n-1) * max_slot_ns when every flow has the
    // same priority, else max_wait_ns + n * max_slot_ns; WorkloadAware max_wait_ns + n *
    // max_slot_ns.
    Nanos max_slot_ns = kDefaultMaxSlotNs;
    // WorkloadAware: shortest lease it shapes a slot down to (so that a predicted arrival
    // cannot make the link thrash between holders).
    Nanos min_slot_ns = 500 * kNsPerUs;
    // Temporal policies: a request that has waited this long is served before every other
    // (FIFO among such), whatever its priority (FlowClass::priority) or WorkloadAware's plan:
    // the starvation bound of low-priority traffic. 0 = the default, agingBoundNs().
    Nanos max_wait_ns = 0;
    // WorkloadAware: a class's pattern counts as known at this detector confidence.
    double min_confidence = 0.5;
    // WorkloadAware: how each flow class's request period is detected.
    PeriodDetectorConfig detector = {};
};

Status validate(const PolicyConfig& config);

// The effective max_wait_ns: the configured value, else 20 * max_slot_ns, else (no slots)
// 200 ms. Also the node-local segment's default (plugin/wan/shm_layout.h).
Nanos agingBoundNs(const PolicyConfig& config);

class LinkPolicy {
  public:
    virtual ~LinkPolicy() = default;

    virtual PolicyKind kind() const = 0;

    virtual Status onRequest(FlowId flow, const FlowClass& cls, uint64_t bytes, Nanos now_ns) = 0;
    virtual Status onProgress(FlowId flow, uint64_t bytes_done, Nanos now_ns) = 0;
    virtual Status onComplete(FlowId flow, Nanos now_ns) = 0;
    virtual Status onCancel(FlowId flow, Nanos now_ns) = 0;

    // The allocation from now_ns on. Cheap: O(1) when nothing changed since the last call,
    // O(active flows) when a new holder must be chosen (see perf/micro/scheduler_bench).
    virtual std::span<const Grant> decide(Nanos now_ns) = 0;

    // Earliest time >= now_ns at which decide() may answer differently without a new event:
    // the current lease end for temporal policies, now_ns if a decision is pending (an event
    // arrived since the last decide), kNever if nothing can change by itself.
    virtual Nanos nextDecisionNs(Nanos now_ns) const = 0;

    // Transfers requested and not yet completed or cancelled.
    virtual size_t activeFlows() const = 0;
};

// Builds a policy. Fails with kInvalidArgument on an invalid config.
Result<std::unique_ptr<LinkPolicy>> makePolicy(PolicyKind kind, const PolicyConfig& config);

}  // namespace atlas::sched
