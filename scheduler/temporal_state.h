// Temporal link sharing as plain data: the state of one link (one holder at a time under a
// lease, a FIFO of waiters) and TemporalCore, the one rule that runs over it.
//
// Why plain data: the same rule runs where the state has different owners.
//  - TemporalPolicy (temporal_policy.h), the LinkPolicy that atlas-arbiter and atlas-sim run,
//    keeps the state in its own vectors;
//  - the plugin's node-local arbitration keeps it in the shared-memory segment that every
//    process of a host maps (plugin/wan/shm_layout.h), under the segment's robust mutex.
// So the state has no pointers, only fixed-size fields, and a layout that is part of that
// segment's ABI (the static_asserts below; changing it means bumping kShmVersion).
//
// The rule (TemporalFifo's, docs/scheduler.md):
//  - open: a flow takes an entry, with its admission priority (FlowClass::priority).
//  - join: an idle entry (a flow with nothing to send) requests the link and waits, with the
//    next sequence number (the FIFO key) and its queue time.
//  - decide(now): if the holder's lease is over, a waiter preempts it (the holder joins the
//    wait list again as a new arrival, so a long transfer yields to everyone of its priority
//    who came before its lease ended), else the lone holder gets a fresh lease; then, if the
//    link is free and someone waits, the pick becomes the holder with a lease.
//  - the pick (priorityHead): a waiter queued for at least max_wait_ns (aged) first, the
//    smallest sequence among those; else the smallest priority value, FIFO within it. With
//    one priority for everyone this is plain FIFO. A higher-priority arrival never takes
//    the link from a holder before its lease ends (the lease is a promise); it goes first at
//    the next pick. Starvation bound: a waiter is first granted within max_wait_ns + n
//    leases (n = contenders); with equal priorities within n - 1 leases.
//  - leave: the transfer completed or was cancelled; a holder frees the link (the next
//    decide hands it on), a waiter leaves the wait list.
// Work-conserving: whenever someone waits and nobody holds the link, decide() grants.
//
// TemporalCore is a view: it owns nothing and is built on the fly over the state (cheap:
// two pointers and a size). It neither locks nor reads a clock; the owner serialises calls
// (one thread, or the segment mutex) and passes `now` (int64 ns on one monotonic timeline).
// Entry indices passed in must be < the view's size. Every operation stays inside the
// entries whatever the state holds (a corrupt holder index reads as "free"), so state from
// untrusted memory is memory-safe to run on; validate() and repair() restore its logic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

#include "atlas/common/status.h"
#include "scheduler/types.h"

namespace atlas::sched {

enum TemporalEntryState : uint32_t {
    kEntryUnused = 0,   // no flow (a free entry of the table)
    kEntryIdle = 1,     // a flow with no transfer pending
    kEntryWaiting = 2,  // requested the link, waits in FIFO order
    kEntryHolding = 3,  // holds the link (exactly the entry TemporalLink::holder names)
};

// One flow's entry.
struct TemporalEntry {
    uint32_t state;       // TemporalEntryState
    uint8_t priority;     // admission priority, < kPriorityLevels: smaller is served first
    uint8_t reserved[3];  // zero
    uint64_t seq;         // FIFO key: order of joining the wait list (request or preemption)
    Nanos queued_ns;      // when it last joined the wait list
};

// The link's part.
struct TemporalLink {
    int32_t holder;      // entry index; -1: the link is free
    uint32_t waiting;    // entries in kEntryWaiting
    uint64_t next_seq;   // sequence the next joiner gets
    Nanos lease_end_ns;  // the holder's lease end (kNever: until it leaves); kNever if free
    uint64_t grants;     // holders chosen so far (fresh grants; renewals not counted)
};

static_assert(std::is_standard_layout_v<TemporalEntry> &&
              std::is_trivially_copyable_v<TemporalEntry>);
static_assert(std::is_standard_layout_v<TemporalLink> &&
              std::is_trivially_copyable_v<TemporalLink>);
static_assert(sizeof(TemporalEntry) == 24 && alignof(TemporalEntry) == 8);
static_assert(offsetof(TemporalEntry, priority) == 4 && offsetof(TemporalEntry, seq) == 8);
static_assert(sizeof(TemporalLink) == 32 && alignof(TemporalLink) == 8);

// Lease end for a holder granted at now_ns with slots of slot_ns: now + slot (saturating),
// kNever when slot_ns <= 0 (no bound: the holder keeps the link until it leaves).
Nanos slotLeaseEnd(Nanos now_ns, Nanos slot_ns);

class TemporalCore {
  public:
    static constexpr uint32_t kNone = UINT32_MAX;

    TemporalCore(TemporalLink& link, std::span<TemporalEntry> entries)
        : link_(link), entries_(entries) {}

    // Read-only view over const state: only the const members may be called on it.
    static const TemporalCore view(const TemporalLink& link,
                                   std::span<const TemporalEntry> entries) {
        return TemporalCore(const_cast<TemporalLink&>(link),
                            {const_cast<TemporalEntry*>(entries.data()), entries.size()});
    }

    // A link with no holder and no waiters (entries are the caller's: zero them = unused).
    static void reset(TemporalLink& link);

    // ---- Entry lifecycle. Each precondition is on the entry's state; a call that does not
    // meet it changes nothing and returns false.
    // unused -> idle, with the flow's priority (a value >= kPriorityLevels counts as the last).
    bool open(uint32_t e, uint8_t priority = kDefaultPriority);
    bool join(uint32_t e, Nanos now_ns);  // idle -> waiting (a request)
    // waiting or holding -> idle (completion, cancellation, revocation). A holder leaving
    // frees the link; the next decide() hands it on.
    bool leave(uint32_t e);
    void close(uint32_t e);  // leave(), then unused

    // ---- Decisions. `pick(now)` returns the next holder among the waiting entries (called
    // only when at least one waits; an index that does not name a waiting entry falls back
    // to the FIFO head); `lease(e, now)` returns the lease end of entry e granted at now.
    // Returns true when a new holder was chosen (the caller tells it).
    template <class Pick, class Lease>
    bool decide(Nanos now_ns, Pick&& pick, Lease&& lease);
    // TemporalFifo's decision: the priorityHead() pick, leases of slot_ns (0: unbounded).
    bool decidePriority(Nanos now_ns, Nanos slot_ns, Nanos max_wait_ns);

    // Earliest time >= now at which decide() may change something without an event: now if
    // someone waits for a free link, the lease end while held, kNever when idle.
    Nanos nextDecisionNs(Nanos now_ns) const {  // inline: decide()'s fast path asks it
        if (holder() != kNone) {
            return link_.lease_end_ns > now_ns ? link_.lease_end_ns : now_ns;
        }
        return link_.waiting > 0 ? now_ns : kNever;
    }
    // The waiting entry with the smallest sequence, kNone if nobody waits. O(entries).
    uint32_t fifoHead() const;
    // Whether a waiting entry queued at queued_ns has waited at least max_wait_ns at now_ns
    // (kNever: never ages).
    static bool aged(Nanos queued_ns, Nanos now_ns, Nanos max_wait_ns);
    // The aged waiter with the smallest sequence, kNone if none. O(entries).
    uint32_t agedHead(Nanos now_ns, Nanos max_wait_ns) const;
    // The next holder by the priority rule (above): agedHead(), else the waiter with the
    // smallest (priority, sequence); kNone if nobody waits. O(entries).
    uint32_t priorityHead(Nanos now_ns, Nanos max_wait_ns) const;

    // kNone when the link is free (or the index is out of range: corrupt shared state).
    uint32_t holder() const {
        return link_.holder < 0 || static_cast<size_t>(link_.holder) >= entries_.size()
                   ? kNone
                   : static_cast<uint32_t>(link_.holder);
    }
    Nanos leaseEndNs() const { return holder() == kNone ? kNever : link_.lease_end_ns; }
    uint32_t waiting() const { return link_.waiting; }
    uint32_t size() const { return static_cast<uint32_t>(entries_.size()); }
    const TemporalEntry& entry(uint32_t e) const { return entries_[e]; }
    const TemporalLink& link() const { return link_; }

    // ---- Untrusted state (shared memory). validate(): every invariant the rule relies on
    // (states in range, exactly the holder holding, the waiting count, sequences below
    // next_seq, priorities of used entries below kPriorityLevels), with a message naming the
    // first violation. repair(): restores them with the least change (an invalid state or a
    // stray holder becomes idle, an invalid holder frees the link, the count and next_seq are
    // recomputed, an invalid priority becomes kDefaultPriority); returns the number of fixes. After
    // repair(), validate() passes.
    Status validate() const;
    uint32_t repair();

  private:
    void enqueue(uint32_t e, Nanos now_ns);
    // Renumbers the waiters 0..n-1 in their order; next_seq = n.
    void renumber();

    TemporalLink& link_;
    std::span<TemporalEntry> entries_;
};

template <class Pick, class Lease>
bool TemporalCore::decide(Nanos now_ns, Pick&& pick, Lease&& lease) {
    if (link_.holder >= 0 && holder() == kNone) {
        link_.holder = -1;  // out of range (corrupt shared state): the link is free
        link_.lease_end_ns = kNever;
    }
    if (link_.holder >= 0 && now_ns >= link_.lease_end_ns) {
        const auto h = static_cast<uint32_t>(link_.holder);
        if (link_.waiting > 0) {
            // Preempt: the holder queues again as a new arrival and competes with the rest.
            link_.holder = -1;
            link_.lease_end_ns = kNever;
            enqueue(h, now_ns);
        } else {
            link_.lease_end_ns = lease(h, now_ns);  // alone: a fresh lease
        }
    }
    if (link_.holder >= 0 || link_.waiting == 0) {
        return false;
    }
    uint32_t next = pick(now_ns);
    if (next >= entries_.size() || entries_[next].state != kEntryWaiting) {
        next = fifoHead();
        if (next == kNone) {
            link_.waiting = 0;  // a count that disagrees with the states (cannot happen once
            return false;       // validated): nobody waits
        }
    }
    entries_[next].state = kEntryHolding;
    --link_.waiting;
    link_.holder = static_cast<int32_t>(next);
    link_.lease_end_ns = lease(next, now_ns);
    ++link_.grants;
    return true;
}

}  // namespace atlas::sched
