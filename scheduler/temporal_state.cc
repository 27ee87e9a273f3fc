#include "scheduler/temporal_state.h"

#include <algorithm>
#include <string>

namespace atlas::sched {

Nanos slotLeaseEnd(Nanos now_ns, Nanos slot_ns) {
    if (slot_ns <= 0) {
        return kNever;
    }
    return now_ns > kNever - slot_ns ? kNever : now_ns + slot_ns;
}

void TemporalCore::reset(TemporalLink& link) {
    link = TemporalLink{};
    link.holder = -1;
    link.lease_end_ns = kNever;
}

bool TemporalCore::open(uint32_t e, uint8_t priority) {
    if (entries_[e].state != kEntryUnused) {
        return false;
    }
    entries_[e] = TemporalEntry{};
    entries_[e].state = kEntryIdle;
    entries_[e].priority = std::min<uint8_t>(priority, kPriorityLevels - 1);
    return true;
}

void TemporalCore::renumber() {
    // Selection in (seq, index) order, the FIFO's own order: O(waiting * entries), only after
    // a corruption or 2^64 joins. A renumbered waiter is parked in a state no valid entry has
    // until all are done, so the scan skips it without scratch space in the entries.
    constexpr uint32_t kRenumbered = 0x52454e55;
    uint64_t next = 0;
    for (uint32_t head = fifoHead(); head != kNone; head = fifoHead()) {
        entries_[head].seq = next++;
        entries_[head].state = kRenumbered;
    }
    for (TemporalEntry& t : entries_) {
        if (t.state == kRenumbered) {
            t.state = kEntryWaiting;
        }
    }
    link_.next_seq = next;
}

void TemporalCore::enqueue(uint32_t e, Nanos now_ns) {
    if (link_.next_seq == UINT64_MAX) {
        renumber();  // keeps the order; the next sequence stays above every waiter's
    }
    TemporalEntry& t = entries_[e];
    t.state = kEntryWaiting;
    t.seq = link_.next_seq++;
    t.queued_ns = now_ns;
    ++link_.waiting;
}

bool TemporalCore::join(uint32_t e, Nanos now_ns) {
    if (entries_[e].state != kEntryIdle) {
        return false;
    }
    enqueue(e, now_ns);
    return true;
}

bool TemporalCore::leave(uint32_t e) {
    TemporalEntry& t = entries_[e];
    if (t.state == kEntryWaiting) {
        --link_.waiting;
    } else if (t.state == kEntryHolding) {
        if (link_.holder == static_cast<int32_t>(e)) {
            link_.holder = -1;
            link_.lease_end_ns = kNever;
        }
    } else {
        return false;
    }
    t.state = kEntryIdle;
    return true;
}

void TemporalCore::close(uint32_t e) {
    leave(e);
    entries_[e].state = kEntryUnused;
}

bool TemporalCore::decidePriority(Nanos now_ns, Nanos slot_ns, Nanos max_wait_ns) {
    return decide(
        now_ns, [this, max_wait_ns](Nanos now) { return priorityHead(now, max_wait_ns); },
        [slot_ns](uint32_t, Nanos now) { return slotLeaseEnd(now, slot_ns); });
}

bool TemporalCore::aged(Nanos queued_ns, Nanos now_ns, Nanos max_wait_ns) {
    Nanos threshold = 0;  // the latest queue time that has aged by now
    if (max_wait_ns == kNever || __builtin_sub_overflow(now_ns, max_wait_ns, &threshold)) {
        return false;
    }
    return queued_ns <= threshold;
}

uint32_t TemporalCore::agedHead(Nanos now_ns, Nanos max_wait_ns) const {
    uint32_t best = kNone;
    for (uint32_t i = 0; i < entries_.size(); ++i) {
        const TemporalEntry& t = entries_[i];
        if (t.state == kEntryWaiting && aged(t.queued_ns, now_ns, max_wait_ns) &&
            (best == kNone || t.seq < entries_[best].seq)) {
            best = i;
        }
    }
    return best;
}

uint32_t TemporalCore::priorityHead(Nanos now_ns, Nanos max_wait_ns) const {
    uint32_t aged_best = kNone;
    uint32_t best = kNone;
    for (uint32_t i = 0; i < entries_.size(); ++i) {
        const TemporalEntry& t = entries_[i];
        if (t.state != kEntryWaiting) {
            continue;
        }
        if (aged(t.queued_ns, now_ns, max_wait_ns) &&
            (aged_best == kNone || t.seq < entries_[aged_best].seq)) {
            aged_best = i;
        }
        if (best == kNone || t.priority < entries_[best].priority ||
            (t.priority == entries_[best].priority && t.seq < entries_[best].seq)) {
            best = i;
        }
    }
    return aged_best != kNone ? aged_best : best;
}

uint32_t TemporalCore::fifoHead() const {
    uint32_t best = kNone;
    for (uint32_t i = 0; i < entries_.size(); ++i) {
        if (entries_[i].state == kEntryWaiting &&
            (best == kNone || entries_[i].seq < entries_[best].seq)) {
            best = i;
        }
    }
    return best;
}

Status TemporalCore::validate() const {
    const auto n = static_cast<int64_t>(entries_.size());
    if (link_.holder < -1 || link_.holder >= n) {
        return {Code::kInternal, "holder index " + std::to_string(link_.holder) + " out of range"};
    }
    if (link_.holder >= 0 && entries_[link_.holder].state != kEntryHolding) {
        return {Code::kInternal, "holder " + std::to_string(link_.holder) + " does not hold"};
    }
    if (link_.holder < 0 && link_.lease_end_ns != kNever) {
        return {Code::kInternal, "a free link has a lease end"};
    }
    uint32_t waiting = 0;
    for (uint32_t i = 0; i < entries_.size(); ++i) {
        const TemporalEntry& t = entries_[i];
        if (t.state > kEntryHolding) {
            return {Code::kInternal, "entry " + std::to_string(i) + " has an invalid state"};
        }
        if (t.state == kEntryHolding && static_cast<int32_t>(i) != link_.holder) {
            return {Code::kInternal, "entry " + std::to_string(i) + " holds but is not the holder"};
        }
        if (t.state != kEntryUnused && t.priority >= kPriorityLevels) {
            return {Code::kInternal, "entry " + std::to_string(i) + " has an invalid priority"};
        }
        if (t.state == kEntryWaiting) {
            ++waiting;
            if (t.seq >= link_.next_seq) {
                return {Code::kInternal,
                        "entry " + std::to_string(i) + " has a sequence from the future"};
            }
        }
    }
    if (waiting != link_.waiting) {
        return {Code::kInternal, "waiting count " + std::to_string(link_.waiting) + ", entries " +
                                     std::to_string(waiting)};
    }
    return Status::ok();
}

uint32_t TemporalCore::repair() {
    uint32_t fixes = 0;
    const auto n = static_cast<int64_t>(entries_.size());
    if (link_.holder < -1 || link_.holder >= n ||
        (link_.holder >= 0 && entries_[link_.holder].state != kEntryHolding)) {
        link_.holder = -1;
        ++fixes;
    }
    if (link_.holder < 0 && link_.lease_end_ns != kNever) {
        link_.lease_end_ns = kNever;
        ++fixes;
    }
    uint32_t waiting = 0;
    uint64_t max_seq = 0;
    for (uint32_t i = 0; i < entries_.size(); ++i) {
        TemporalEntry& t = entries_[i];
        if (t.state > kEntryHolding ||
            (t.state == kEntryHolding && static_cast<int32_t>(i) != link_.holder)) {
            t.state = kEntryIdle;  // the flow asks again at its next acquire
            ++fixes;
        }
        if (t.state != kEntryUnused && t.priority >= kPriorityLevels) {
            t.priority = kDefaultPriority;
            ++fixes;
        }
        if (t.state == kEntryWaiting) {
            ++waiting;
            max_seq = std::max(max_seq, t.seq);
        }
    }
    if (waiting != link_.waiting) {
        link_.waiting = waiting;
        ++fixes;
    }
    if (waiting > 0 && link_.next_seq <= max_seq) {
        renumber();  // next_seq = max + 1 could overflow
        ++fixes;
    }
    return fixes;
}

}  // namespace atlas::sched
