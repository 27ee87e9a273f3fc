// ChannelReader: one reader's view of a bubble channel segment (bubbletea, atlas-bubbles).
// Format and protocols: atlas/bubble_channel.h.
//
// Ownership: owns a read-only mapping of the segment (or a private copy of an image). It
// never writes shared memory, so a reader can never disturb the writer or other readers.
// Threads: not thread-safe; use one ChannelReader per thread (they are cheap). Any number
// of readers, in any processes, may read one segment while its writer publishes.
// Blocking: nothing blocks or sleeps. Seqlock copies retry at most
// ReaderOptions::max_attempts times and then report kUnavailable "writer busy".
// Errors: every method is noexcept and reports through Status. Segment contents are
// untrusted: a garbage, truncated, foreign or wrong-version segment yields a kRemote (or
// kUnavailable while a writer is initialising) Status whose message says what is wrong.
//
// Writer restarts: a restarted writer creates a new segment under the same name and marks
// the old one Lifecycle::kRetired. Reads notice kRetired and reopen the name by themselves;
// refresh() also notices a writer that died, closed, or replaced the object without
// retiring it. Cursors from an older segment resync on their next read (Batch::resynced).
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "atlas/bubble_channel.h"
#include "atlas/common/status.h"
#include "channel/channel_types.h"
#include "channel/segment.h"

namespace atlas::channel {

struct ReaderOptions {
    // Seqlock copy attempts before a read gives up with "writer busy".
    int max_attempts = 64;
};

enum class RefreshOutcome {
    kUnchanged,     // same segment, writer live
    kRestarted,     // switched to a new segment under the name (new generation or writer)
    kWriterClosed,  // the writer closed the segment cleanly and no successor exists yet
    kWriterDead,    // the segment says live, but its writer pid no longer exists
    kGone,          // the name no longer exists (writer closed and unlinked it)
};
const char* refreshOutcomeName(RefreshOutcome outcome);

// Monotonic counters the writer exposes (relaxed hints, for display).
struct WriterCounters {
    uint64_t window_records = 0;
    uint64_t idle_records = 0;
    uint64_t prediction_sets = 0;
    uint64_t rejected_records = 0;
    Nanos last_write_ns = 0;
};

// What went wrong on this reader's side, for display and tests.
struct ReaderCounters {
    uint64_t restarts = 0;  // times the reader switched to a newer segment
    uint64_t busy = 0;      // reads that gave up with "writer busy"
    uint64_t lost = 0;      // ring records overwritten before this reader read them
    uint64_t invalid = 0;   // records dropped as invalid
};

class ChannelReader {
  public:
    static constexpr size_t kAll = std::numeric_limits<size_t>::max();

    // Opens and validates the segment `name`. kUnavailable when it does not exist or is not
    // initialised yet; kRemote when its contents are not a valid channel.
    static Result<ChannelReader> open(const std::string& name, ReaderOptions options = {}) noexcept;
    // Validates a copy of the bytes `data[0, size)` as a segment image (tests, fuzzing,
    // post-mortem dumps). The reader owns the copy; refresh() never reopens anything.
    static Result<ChannelReader> fromImage(const void* data, size_t size,
                                           ReaderOptions options = {}) noexcept;

    ChannelReader(ChannelReader&&) noexcept = default;
    ChannelReader& operator=(ChannelReader&&) noexcept = default;
    ChannelReader(const ChannelReader&) = delete;
    ChannelReader& operator=(const ChannelReader&) = delete;
    ~ChannelReader() = default;

    const SegmentInfo& info() const noexcept { return info_; }
    Lifecycle lifecycle() const noexcept;
    // kill(pid, 0) on the writer pid. Only meaningful in the writer's pid namespace; a
    // recycled pid reads as alive. Always true for an image.
    bool writerAlive() const noexcept;
    WriterCounters writerCounters() const noexcept;
    const ReaderCounters& counters() const noexcept { return counters_; }

    // The current prediction set (set_id 0 before the first one).
    Result<PredictionSet> readPredictions() noexcept;
    // Observed idle intervals from cursor.next on (at most max_records), advancing cursor.
    // Records that fail validIdleInterval() (only a corrupt segment has them) are skipped
    // and counted in Batch::invalid.
    // A fresh cursor starts at the oldest record still in the ring.
    Result<ObservedBatch> readObservedSince(ReadCursor& cursor, size_t max_records = kAll) noexcept;
    // Every predicted-window record from cursor.next on (history of all sets, for
    // recorders), advancing cursor.
    Result<WindowBatch> readWindowsSince(ReadCursor& cursor, size_t max_records = kAll) noexcept;
    // Status and statistics, one consistent snapshot.
    Result<StateSnapshot> readState() noexcept;

    // Checks whether the writer is still there and whether the name now points to another
    // segment, and switches to it if so. On an error (e.g. the successor is still
    // initialising) the reader keeps its current segment.
    Result<RefreshOutcome> refresh() noexcept;

  private:
    ChannelReader() = default;
    Status attach(detail::ShmMapping mapping, const void* base, size_t size);
    // Reopens the name when the current segment is retired. Errors leave things as they are.
    void followRetirement() noexcept;
    bool cursorIsCurrent(const ReadCursor& cursor) const;
    void resetCursor(ReadCursor& cursor, uint64_t head, uint32_t capacity) const;

    struct AlignedFree {
        void operator()(std::byte* p) const;
    };

    std::string name_;
    ReaderOptions options_;
    detail::ShmMapping mapping_;
    std::unique_ptr<std::byte, AlignedFree> image_;
    const SegmentHeader* header_ = nullptr;
    const WindowRecord* windows_ = nullptr;
    const IdleRecord* idle_ = nullptr;
    SegmentInfo info_;
    ReaderCounters counters_;
};

}  // namespace atlas::channel
