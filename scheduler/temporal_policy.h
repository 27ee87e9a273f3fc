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
// TemporalFifo serves in order of joining the wait list (first come first served, with
// preempted holders going to the back). Starvation bound: a request is first granted within
// (n - 1) * max_slot_ns of its arrival, n = active transfers (each one ahead of it holds at
// most one lease before it).
//
// Threads: one owner. decide() is O(1) while the lease holds and nothing changed; choosing a
// new holder is O(waiting) with no allocation.
#pragma once

#include <array>
#include <optional>
#include <vector>

#include "scheduler/flow_table.h"
#include "scheduler/link_policy.h"

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
    Nanos leaseEndNs() const { return holder_ == FlowTable::kNone ? kNever : lease_end_ns_; }
    size_t waitingFlows() const { return waiting_.size(); }

  protected:
    explicit TemporalPolicy(const PolicyConfig& config);

    // Hook: a transfer arrived (record already in the table, not yet waiting). Subclasses
    // learn here and may fill FlowRecord::class_slot / order.
    virtual void noteRequest(FlowRecord& /*record*/, Nanos /*now_ns*/) {}
    // Hook: choose the next holder. Returns an index into waiting_ (never empty here).
    // Default: FIFO, the smallest seq.
    virtual size_t pickNext(Nanos now_ns);
    // Hook: lease end for a holder granted at now_ns. Default: now + max_slot_ns.
    virtual Nanos leaseEnd(const FlowRecord& record, Nanos now_ns);

    size_t fifoPick() const;

    const PolicyConfig config_;
    FlowTable flows_;
    std::vector<uint32_t> waiting_;  // slots, unordered (selection scans)

  private:
    Status remove(FlowId flow, Nanos now_ns);
    void enqueue(uint32_t slot, Nanos now_ns);
    void dequeue(uint32_t slot);

    uint32_t holder_ = FlowTable::kNone;
    Nanos lease_end_ns_ = kNever;
    std::array<Grant, 1> grant_{};
    size_t grant_count_ = 0;
    uint64_t next_seq_ = 0;
    Nanos last_ns_ = 0;
    bool dirty_ = false;
};

class TemporalFifo final : public TemporalPolicy {
  public:
    explicit TemporalFifo(const PolicyConfig& config = {}) : TemporalPolicy(config) {}
    PolicyKind kind() const override { return PolicyKind::kTemporal; }
};

}  // namespace atlas::sched
