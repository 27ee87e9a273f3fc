// FlowTable: the active transfers of one policy. Records live in a slab (a vector plus a free
// list) so that selection scans touch contiguous memory without hashing; the FlowId index is
// only used on events. Internal to the policies; not thread-safe (one owner).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "atlas/common/status.h"
#include "scheduler/types.h"

namespace atlas::sched {

struct FlowRecord {
    FlowId id = 0;
    FlowClass cls;
    uint64_t bytes = 0;
    uint64_t bytes_done = 0;
    Nanos arrival_ns = 0;     // when the transfer was requested
    uint32_t class_slot = 0;  // policy-specific (WorkloadAware: its class table index)
    uint32_t order = 0;       // policy-specific (WorkloadAware: index within the cycle)
};
// (The temporal policies keep their wait-list state, FIFO keys included, in a TemporalEntry
// per slot: temporal_state.h.)

class FlowTable {
  public:
    static constexpr uint32_t kNone = UINT32_MAX;

    // Adds a record; kInvalidArgument if `id` already has an outstanding transfer.
    // Slots are reused after remove(); a new slot is the next index (size of the slab).
    Status add(FlowId id, const FlowClass& cls, uint64_t bytes, Nanos now_ns, uint32_t* slot_out) {
        auto [it, inserted] = index_.try_emplace(id, kNone);
        if (!inserted) {
            return Status(Code::kInvalidArgument, "flow already has an outstanding transfer");
        }
        uint32_t slot;
        if (!free_.empty()) {
            slot = free_.back();
            free_.pop_back();
        } else {
            slot = static_cast<uint32_t>(records_.size());
            records_.emplace_back();
        }
        it->second = slot;
        FlowRecord& r = records_[slot];
        r = FlowRecord{};
        r.id = id;
        r.cls = cls;
        r.bytes = bytes;
        r.arrival_ns = now_ns;
        *slot_out = slot;
        return Status::ok();
    }

    // Slot of `id`, or kNone.
    uint32_t find(FlowId id) const {
        auto it = index_.find(id);
        return it == index_.end() ? kNone : it->second;
    }

    FlowRecord& at(uint32_t slot) { return records_[slot]; }
    const FlowRecord& at(uint32_t slot) const { return records_[slot]; }

    void remove(uint32_t slot) {
        index_.erase(records_[slot].id);
        free_.push_back(slot);
    }

    size_t size() const { return index_.size(); }

    // Records cumulative progress of `id`'s transfer: kInvalidArgument for an unknown flow or
    // progress that goes backwards or past the transfer's size (nothing is changed then).
    Status recordProgress(FlowId id, uint64_t bytes_done) {
        const uint32_t slot = find(id);
        if (slot == kNone) {
            return Status(Code::kInvalidArgument, "progress for an unknown flow");
        }
        FlowRecord& r = records_[slot];
        if (bytes_done > r.bytes || bytes_done < r.bytes_done) {
            return Status(Code::kInvalidArgument, "progress out of range or going backwards");
        }
        r.bytes_done = bytes_done;
        return Status::ok();
    }

  private:
    std::unordered_map<FlowId, uint32_t> index_;
    std::vector<FlowRecord> records_;
    std::vector<uint32_t> free_;
};

// Shared event validation: time must not go backwards. The caller records now_ns as the
// last time only once the whole event was accepted.
inline Status checkTime(Nanos last_ns, Nanos now_ns) {
    if (now_ns < last_ns) {
        return Status(Code::kInvalidArgument, "policy event time went backwards");
    }
    return Status::ok();
}

}  // namespace atlas::sched
