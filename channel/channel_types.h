// Value types of the bubble channel API (channel/). These are what the writer takes
// and the reader returns; the shared-memory representation is in atlas/bubble_channel.h.
// Plain copyable structs, no invariants beyond the ones noted; times are CLOCK_MONOTONIC ns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atlas/bubble_channel.h"
#include "atlas/common/clock.h"

namespace atlas::channel {

// An observed GPU idle interval [start_ns, end_ns), with the transfer the GPU waited for.
// Valid intervals are those validIdleInterval() accepts (the writer refuses the others).
struct IdleInterval {
    Nanos start_ns = 0;
    Nanos end_ns = 0;
    uint64_t iteration = kUnknownIteration;
    Nanos transfer_start_ns = 0;  // first data of the awaited message landed; 0 = unknown
    uint64_t transfer_bytes = 0;  // size of the awaited message in bytes; 0 = unknown
    // What the writer's publishing step saw of the wait (IdleRecord, "Publisher steps" in
    // docs/bubble-channel.md): step times, 0 = unknown (not seen, an older writer, or too far
    // from the field it is stored relative to).
    Nanos taken_step_ns = 0;          // the step that took the finished wait in
    Nanos open_from_step_ns = 0;      // the first step that saw it open
    Nanos open_to_step_ns = 0;        // the last step that saw it open
    Nanos transfer_seen_step_ns = 0;  // the first step that saw its transfer's first data
};

// The IdleRecord invariants (atlas/bubble_channel.h): start_ns <= end_ns; the transfer is
// either unknown (transfer_start_ns == 0 and transfer_bytes == 0) or known (both nonzero)
// with 0 < transfer_start_ns <= end_ns. transfer_start_ns may precede start_ns: the data was
// buffered before the receive was posted (the plugin then reports transfer_start_ns ==
// start_ns). ChannelWriter::publishObserved refuses, and readers drop as invalid, the rest.
constexpr bool validIdleInterval(const IdleInterval& v) noexcept {
    if (v.end_ns < v.start_ns) {
        return false;
    }
    if (v.transfer_start_ns == 0 || v.transfer_bytes == 0) {
        return v.transfer_start_ns == 0 && v.transfer_bytes == 0;
    }
    return v.transfer_start_ns > 0 && v.transfer_start_ns <= v.end_ns;
}

// A predicted idle window [start_ns, end_ns).
struct PredictedWindow {
    Nanos start_ns = 0;
    Nanos end_ns = 0;
    uint32_t confidence_ppm = 0;  // 0..kPpmOne
    uint64_t iteration = kUnknownIteration;
    WindowSource source = WindowSource::kPredictor;
};

// A window as read back from the ring, with the set it was published in.
struct WindowRecordView {
    PredictedWindow window;
    uint64_t set_id = 0;
    Nanos published_ns = 0;
    uint16_t set_count = 0;  // 0: an empty set (no window; `window` is meaningless)
    uint16_t set_index = 0;
};

// Ring sizes, in records. Bounds: kMin/kMaxWindowCapacity, kMin/kMaxIdleCapacity.
struct ChannelCapacities {
    uint32_t windows = 256;
    uint32_t idle = 4096;
};

// Published statistics. Unknown values: period_ns 0, *_ppm kUnknownPpm, iteration
// kUnknownIteration.
struct ChannelStats {
    Nanos period_ns = 0;
    uint32_t period_confidence_ppm = 0;
    uint32_t idle_fraction_ppm = kUnknownPpm;
    uint64_t iteration = kUnknownIteration;
    uint32_t coverage_ppm = kUnknownPpm;
    uint32_t precision_ppm = kUnknownPpm;
};

// Status and stats as one consistent snapshot (the state block is one seqlock).
struct StateSnapshot {
    PredictorState state = PredictorState::kStarting;
    StatusReason reason = StatusReason::kNone;
    Nanos since_ns = 0;
    Nanos stats_updated_ns = 0;
    ChannelStats stats;
};

// The prediction set that is current when read.
struct PredictionSet {
    uint64_t generation = 0;
    uint64_t set_id = 0;  // 0: the writer has not published any set yet
    Nanos published_ns = 0;
    std::vector<PredictedWindow> windows;  // in the order the writer published them
};

// A reader's position in one ring. The reader owns it; the channel never stores it.
// A cursor belongs to one segment, identified by (generation, writer_start_ns): a writer
// that closes and unlinks its segment lets the next writer start at generation 1 again.
// generation 0 means "not started": the first read starts at the oldest retained record.
struct ReadCursor {
    uint64_t generation = 0;
    Nanos writer_start_ns = 0;
    uint64_t next = 0;  // record number of the next record to read
};

template <typename T>
struct Batch {
    std::vector<T> records;
    uint64_t lost = 0;        // records overwritten before this reader got to them
    uint64_t invalid = 0;     // records skipped because their contents were invalid
    bool resynced = false;    // cursor was from another generation (writer restart) or reset
    uint64_t generation = 0;  // generation the records come from
};
using ObservedBatch = Batch<IdleInterval>;
using WindowBatch = Batch<WindowRecordView>;

// Immutable facts about the segment a reader has mapped.
struct SegmentInfo {
    std::string name;  // empty for an in-memory image
    uint64_t generation = 0;
    int32_t writer_pid = 0;
    Nanos writer_start_ns = 0;
    uint32_t window_capacity = 0;
    uint32_t idle_capacity = 0;
    uint64_t layout_size = 0;
    uint64_t mapped_size = 0;
};

const char* stateName(PredictorState state);
const char* reasonName(StatusReason reason);  // "unknown" for values this build doesn't know
const char* sourceName(WindowSource source);
const char* lifecycleName(Lifecycle lifecycle);

// Parts per million to [0, 1]; kUnknownPpm maps to NaN. The other way: toPpm()
// (atlas/bubble_channel.h).
double fromPpm(uint32_t ppm);

}  // namespace atlas::channel
