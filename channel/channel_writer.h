// ChannelWriter: the single writer of one bubble channel segment (the NCCL plugin, or
// `atlas-bubbles synth`). Format and protocols: atlas/bubble_channel.h.
//
// Ownership: a ChannelWriter owns its mapping and, unless WriterOptions::keep_on_close, the
// shm name (unlinked on close/destruction if the name still points to this segment).
// Threads: not thread-safe. Exactly one thread at a time may call the publish/set methods
// (the plugin calls them from its owner engine thread); the segment has one writer.
// Hot path: publishObserved, publishPredictions, setStatus and setStats are wait-free (a
// bounded number of stores, no locks, no retries), allocation-free, noexcept, and make no
// syscalls beyond Clock::nowNs() (vDSO clock_gettime for the default clock), which
// publishObserved does not even call.
// create() and close() are control-path: they do syscalls and may allocate.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "atlas/bubble_channel.h"
#include "atlas/common/clock.h"
#include "atlas/common/status.h"
#include "channel/channel_types.h"
#include "channel/segment.h"

namespace atlas::channel {

struct WriterOptions {
    // Permission bits of the segment. 0600 keeps it to the writer's user; use 0644 when
    // bubbletea runs as another user.
    mode_t mode = 0600;
    // Leave the segment (marked Lifecycle::kClosed) on close, for post-mortem reading.
    bool keep_on_close = false;
    // Replace a segment whose writer is still alive. Without it, create() refuses, since a
    // live writer on the same name usually means two processes share a local rank.
    bool take_over = false;
    // Source of published_ns/last_write_ns/since timestamps; must read CLOCK_MONOTONIC in
    // production. Not owned; must outlive the writer. nullptr: MonotonicClock::instance().
    const Clock* clock = nullptr;
};

class ChannelWriter {
  public:
    // Creates the segment `name` (a fresh shm object, see "Lifecycle" in
    // docs/bubble-channel.md): an existing valid segment under the name is marked
    // Lifecycle::kRetired for its readers and unlinked, and the new segment's generation is
    // its generation + 1 (1 when there was none). Errors: kInvalidArgument (bad name or
    // capacities), kInvalidUsage (a live writer owns the name and !take_over), kSystem.
    static Result<ChannelWriter> create(const std::string& name, ChannelCapacities capacities,
                                        WriterOptions options = {}) noexcept;

    ChannelWriter(ChannelWriter&& other) noexcept;
    ChannelWriter& operator=(ChannelWriter&& other) noexcept;
    ChannelWriter(const ChannelWriter&) = delete;
    ChannelWriter& operator=(const ChannelWriter&) = delete;
    ~ChannelWriter();

    // Appends one observed idle interval. Returns false (and counts it in the header's
    // rejected_records) when !validIdleInterval(interval): end_ns < start_ns, a transfer
    // start after end_ns (or negative), or only one of transfer_start_ns/transfer_bytes
    // known. Nothing is published then.
    bool publishObserved(const IdleInterval& interval) noexcept;

    // Replaces the current prediction set: readers see the old set or all of the new one.
    // Windows with end_ns < start_ns are skipped, confidence is clamped to kPpmOne, and at
    // most maxPredictionSet() windows are taken (the first ones). An empty span (or one
    // with no valid window) publishes an empty set, withdrawing all predictions.
    // Returns the number of windows published.
    size_t publishPredictions(std::span<const PredictedWindow> windows) noexcept;

    // Sets the predictor state; state_since_ns moves only when state or reason changes.
    void setStatus(PredictorState state, StatusReason reason) noexcept;
    // Replaces the published statistics.
    void setStats(const ChannelStats& stats) noexcept;

    // Marks the segment closed (unless a newer writer already retired it) and unlinks the
    // name unless keep_on_close. Idempotent; the destructor calls it.
    void close() noexcept;

    const std::string& name() const { return name_; }
    uint64_t generation() const { return generation_; }
    size_t maxPredictionSet() const { return max_set_; }
    bool isOpen() const { return header_ != nullptr; }
    // True once a newer writer took the name over (WriterOptions::take_over): this
    // writer's publishes then reach no reader that reopens by name.
    bool retired() const noexcept;

  private:
    ChannelWriter() = default;
    void writeStateBlock() noexcept;

    std::string name_;
    WriterOptions options_;
    detail::ShmMapping mapping_;
    SegmentHeader* header_ = nullptr;
    WindowRecord* windows_ = nullptr;
    IdleRecord* idle_ = nullptr;
    uint32_t window_capacity_ = 0;
    uint32_t idle_capacity_ = 0;
    size_t max_set_ = 0;
    uint64_t generation_ = 0;
    // Writer-local copies of what only this writer changes, so publishing never has to
    // read shared memory back.
    uint64_t window_head_ = 0;
    uint64_t idle_head_ = 0;
    uint64_t set_id_ = 0;
    uint64_t rejected_ = 0;
    uint64_t state_seq_ = 0;
    PredictorState state_ = PredictorState::kStarting;
    StatusReason reason_ = StatusReason::kNone;
    Nanos since_ns_ = 0;
    Nanos stats_updated_ns_ = 0;
    ChannelStats stats_;
};

}  // namespace atlas::channel
