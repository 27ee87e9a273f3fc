// Temporal link sharing: one transfer holds the whole link at a time, under a lease.
//
// TemporalPolicy is the common machinery (holder, leases, wait list, preemption at lease
// end); subclasses only choose who goes next (pickNext) and how long a lease is (leaseEnd).
//  - Work-conserving: whenever a request waits and nobody holds the link, decide() grants.
//  - Leases are promises: the holder keeps the link until until_ns, its completion, or its
//    cancellation. At until_ns the holder rejoins the wait list as a new arrival (fresh seq
//    and queued_ns) and the subclass picks again, so with FIFO order a long transfer yields
//    to everyone who arrived before its lease ended.
//
// TemporalFifo serves by priority (FlowClass::priority, smallest first) and in order of
// joining the wait list within one priority (first come first served, with preempted holders
// going to the back); a request that has waited max_wait_ns goes first (TemporalCore's
// priorityHead). A higher-priority arrival waits for the holder's lease to end. Starvation
// bound: with one priority for all, a request is first granted within (n - 1) * max_slot_ns
// of its arrival, n = active transfers (each one ahead of it holds at most one lease before
// it); with several, within max_wait_ns + n * max_slot_ns.
//
// The state (holder, lease, wait list with its FIFO keys) is a TemporalLink plus one
// TemporalEntry per flow-table entry, and every transition is TemporalCore's (temporal_state.h):
// the same code, over the same plain data, that the plugin's node-local arbitration runs in
// shared memory. This class adds what a LinkPolicy needs around it: FlowIds, event
// validation, the cached grant span.
//
// Threads: one owner. decide() is O(1) while the lease holds and nothing changed; choosing a
// new holder is O(flow-table entries) with no allocation.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "scheduler/flow_table.h"
#include "scheduler/link_policy.h"
#include "scheduler/temporal_state.h"

namespace atlas::sched {

class TemporalPolicy : public LinkPolicy {
  public:
    Status onRequest(FlowId flow, const FlowClass& cls, uint64_t bytes, Nanos now_ns) final;
    Status onProgress(FlowId flow, uint64_t bytes_done, Nanos now_ns) final;
    Status onComplete(FlowId flow, Nanos now_ns) final;
    Status onCancel(FlowId flow, Nanos now_ns) final;
    std::span<const Grant> decide(Nanos now_ns) final;
    Nanos nextDecisionNs(Nanos now_ns) const final;
    size_t activeFlows() const final { return flows_.size(); }

    // Introspection (the arbiter reports these; tests check them).
    std::optional<FlowId> holder() const;
    Nanos leaseEndNs() const { return state().leaseEndNs(); }
    size_t waitingFlows() const { return link_.waiting; }

  protected:
    explicit TemporalPolicy(const PolicyConfig& config);

    // Hook: a transfer arrived (record already in the table, not yet waiting). Subclasses
    // learn here and may fill FlowRecord::class_index / order.
    virtual void noteRequest(FlowRecord& /*record*/, Nanos /*now_ns*/) {}
    // Hook: choose the next holder among the waiting entries (at least one waits). Default:
    // the priority rule, state().priorityHead(now_ns, max_wait_ns_).
    virtual uint32_t pickNext(Nanos now_ns);
    // Hook: lease end for a holder granted at now_ns. Default: now + max_slot_ns.
    virtual Nanos leaseEnd(const FlowRecord& record, Nanos now_ns);

    // Read-only view of the FIFO state: entry(index).seq / queued_ns / priority, fifoHead(),
    // agedHead(), priorityHead().
    const TemporalCore state() const { return TemporalCore::view(link_, entries_); }
    // Calls f(index, record, entry) for every waiting flow, in index order.
    template <class F>
    void forEachWaiting(F&& f) const {
        for (uint32_t index = 0; index < entries_.size(); ++index) {
            if (entries_[index].state == kEntryWaiting) {
                f(index, flows_.at(index), entries_[index]);
            }
        }
    }

    const PolicyConfig config_;
    const Nanos max_wait_ns_;  // agingBoundNs(config_)
    FlowTable flows_;

  private:
    TemporalCore core() { return TemporalCore(link_, entries_); }
    Status remove(FlowId flow, Nanos now_ns);

    std::vector<TemporalEntry> entries_;  // indexed like flows_' entries
    TemporalLink link_{};
    std::array<Grant, 1> grant_{};
    size_t grant_count_ = 0;
    Nanos last_ns_ = 0;
    bool dirty_ = false;
};

class TemporalFifo final : public TemporalPolicy {
  public:
    explicit TemporalFifo(const PolicyConfig& config = {}) : TemporalPolicy(config) {}
    PolicyKind kind() const override { return PolicyKind::kTemporal; }
};

}  // namespace atlas::sched
