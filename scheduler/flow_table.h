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
    Nanos arrival_ns = 0;      // when the transfer was requested
    uint32_t class_index = 0;  // policy-specific (WorkloadAware: its class table index)
    uint32_t order = 0;        // policy-specific (WorkloadAware: index within the cycle)
};
// (The temporal policies keep their wait-list state, FIFO keys included, in a TemporalEntry
// per entry: temporal_state.h.)

class FlowTable {
  public:
    static constexpr uint32_t kNone = UINT32_MAX;

    // Adds a record; kInvalidArgument if `id` already has an outstanding transfer.
    // Entries are reused after remove(); a new entry is the next index (size of the slab).
    Status add(FlowId id, const FlowClass& cls, uint64_t bytes, Nanos now_ns, uint32_t* index_out) {
        auto [it, inserted] = index_.try_emplace(id, kNone);
        if (!inserted) {
            return Status(Code::kInvalidArgument, "flow already has an outstanding transfer");
        }
        uint32_t index;
        if (!free_.empty()) {
            index = free_.back();
            free_.pop_back();
        } else {
            index = static_cast<uint32_t>(records_.size());
            records_.emplace_back();
        }
        it->second = index;
        FlowRecord& r = records_[index];
        r = FlowRecord{};
        r.id = id;
        r.cls = cls;
        r.bytes = bytes;
        r.arrival_ns = now_ns;
        *index_out = index;
        return Status::ok();
    }

    // Index of `id`, or kNone.
    uint32_t find(FlowId id) const {
        auto it = index_.find(id);
        return it == index_.end() ? kNone : it->second;
    }

    FlowRecord& at(uint32_t index) { return records_[index]; }
    const FlowRecord& at(uint32_t index) const { return records_[index]; }

    void remove(uint32_t index) {
        index_.erase(records_[index].id);
        free_.push_back(index);
    }

    size_t size() const { return index_.size(); }

    // Records cumulative progress of `id`'s transfer: kInvalidArgument for an unknown flow or
    // progress that goes backwards or past the transfer's size (nothing is changed then).
    Status recordProgress(FlowId id, uint64_t bytes_done) {
        const uint32_t index = find(id);
        if (index == kNone) {
            return Status(Code::kInvalidArgument, "progress for an unknown flow");
        }
        FlowRecord& r = records_[index];
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
