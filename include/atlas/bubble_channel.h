// The bubble channel wire format: one POSIX shared-memory segment per local GPU through which
// the NCCL plugin (the single writer) publishes observed GPU idle intervals and predicted idle
// windows, and from which bubbletea and `atlas-bubbles` (any number of readers, in other
// processes) read them. docs/bubble-channel.md has the field tables and the protocols.
//
// This header IS the contract: plain structs of fixed-width integers and lock-free
// std::atomic words, no pointers, offsets checked by static_assert. It depends only on the
// C++ standard library and POSIX, so a reader outside Atlas can include it on its own.
//
// Segment layout (all offsets in bytes from the start of the segment, all 64-byte aligned):
//
//   0                    SegmentHeader  (kHeaderSize bytes)
//   windows_offset       window_capacity x WindowRecord  (predicted windows ring)
//   idle_offset          idle_capacity   x IdleRecord    (observed idle intervals ring)
//   layout_size          end (rounded up to 64)
//
// with windows_offset = kHeaderSize and the rest computed by expectedLayout(); a reader
// rejects a header whose offsets differ from that computation.
//
// Time: every *_ns field is CLOCK_MONOTONIC nanoseconds (header.clock_id records it), so
// values are comparable across processes on one host and meaningless across hosts.
//
// Concurrency: exactly one writer per segment, any number of readers. Readers map the
// segment read-only and never write. Every field a reader may load while the writer stores
// it is a std::atomic; the rest (the identity block) is written once before `magic` is
// published and never again. The writer never resizes a segment it has published: a writer
// restart creates a NEW segment under the same name (see "Lifecycle"), so a mapping a
// reader holds never shrinks under it (no SIGBUS).
//
// Memory orders (each pair is named on both sides):
//   M1 magic:  the writer initialises the whole segment, then magic.store(kMagic, release);
//              a reader loads magic with acquire before it trusts any other field.
//   M2 record cell seqlock (WindowRecord::seq, IdleRecord::seq), for record number n:
//        writer: seq.store(2n+1, relaxed); fence(release); fields.store(relaxed);
//                seq.store(2n+2, release)
//        reader: s1 = seq.load(acquire); require s1 == 2n+2; fields.load(relaxed);
//                fence(acquire); s2 = seq.load(relaxed); the copy is valid iff s2 == s1.
//      The release store of 2n+2 pairs with the reader's acquire load of s1 (the reader sees
//      every field of record n). The writer's release fence pairs with the reader's acquire
//      fence: if the reader loaded any field value stored after the fence (a later record
//      reusing the cell), it must then load a seq >= that record's odd value, so s2 != s1.
//      Sequence numbers grow forever, so a cell reused by a later lap never matches 2n+2.
//   M3 ring heads (window_head, idle_head): after record n is complete the writer stores
//      head = n+1 with release; a reader loads head with acquire, so every record below head
//      has seq >= its 2n+2 when the reader looks (== unless already overwritten).
//      A prediction set of k windows is written as k records and published by ONE head store
//      (head += k): readers see either the whole new set or the old one, never a mix.
//   M4 state block seqlock (state_seq): same shape as M2 with an unbounded counter: the
//      writer makes it odd, fences (release), stores the fields (relaxed) and makes it even
//      (release); a reader retries while it is odd or changed across its copy.
//   M5 lifecycle: the writer stores kClosed/kRetired with release after its last record;
//      a reader that loads it with acquire has seen every record published before.
//   Counters (prediction_sets, rejected_records, last_write_ns) are relaxed: monotonic hints
//   for humans and tools, never used to validate other data.
//
// Lifecycle and naming: see defaultChannelName() below and docs/bubble-channel.md.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <type_traits>

namespace atlas::channel {

// "ATLSBUBL" when the segment is dumped as bytes on a little-endian host.
inline constexpr uint64_t kMagic = 0x4C425542534C5441ull;
// The magic as seen when a segment written on a host of the other byte order is read.
inline constexpr uint64_t kMagicByteSwapped = 0x41544C534255424Cull;
// Bumped on any incompatible change of a struct below or of the protocols above.
// v2: IdleRecord grew to 64 bytes and carries the awaited transfer (transfer_start_ns,
// transfer_bytes); a v1 segment is rejected by a v2 reader and vice versa.
inline constexpr uint32_t kAbiVersion = 2;
inline constexpr uint32_t kClockIdMonotonic = CLOCK_MONOTONIC;

inline constexpr uint32_t kMinWindowCapacity = 4;
inline constexpr uint32_t kMaxWindowCapacity = 65536;
inline constexpr uint32_t kMinIdleCapacity = 4;
inline constexpr uint32_t kMaxIdleCapacity = 1u << 20;
// A prediction set may fill at most half the window ring, so publishing the next set never
// overwrites the current one: a reader only has to retry when two sets are published while
// it copies one.
inline constexpr uint32_t maxPredictionSet(uint32_t window_capacity) {
    return window_capacity / 2 < 65535 ? window_capacity / 2 : 65535;
}

inline constexpr uint64_t kUnknownIteration = ~0ull;
inline constexpr uint32_t kUnknownPpm = ~0u;  // for *_ppm fields: "not measured"
inline constexpr uint32_t kPpmOne = 1000000;  // 1.0 in parts per million

// SegmentHeader::lifecycle.
enum class Lifecycle : uint32_t {
    kLive = 1,     // a writer owns the segment
    kClosed = 2,   // the writer shut down cleanly (segment kept for post-mortem reading)
    kRetired = 3,  // a newer writer replaced this segment under the same name: reopen by name
};

// SegmentHeader::state: what the predictor is doing.
enum class PredictorState : uint32_t {
    kStarting = 0,    // writer up, nothing measured yet
    kLearning = 1,    // measuring iterations, no period locked yet
    kPredicting = 2,  // period locked, predicted windows are published
    kPeriodLost = 3,  // the period stopped matching; predictions withdrawn until relearned
    kIdle = 4,        // no WAN receive traffic (training paused or finished)
    kDisabled = 5,    // prediction switched off by configuration
};

// SegmentHeader::reason: why the state is what it is. Readers print unknown values as
// numbers; new reasons may be added without an ABI bump.
enum class StatusReason : uint32_t {
    kNone = 0,
    kWarmup = 1,          // fewer iterations seen than the predictor needs
    kNoTraffic = 2,       // no WAN receives for a while
    kPeriodChanged = 3,   // iteration period moved beyond tolerance
    kJitterTooHigh = 4,   // iteration-to-iteration variance too high to predict
    kLowConfidence = 5,   // period found but confidence under threshold
    kConfigDisabled = 6,  // ATLAS_* configuration disabled prediction
    kSynthetic = 7,       // written by `atlas-bubbles synth`, not by a real job
    kWriterShutdown = 8,  // the writer is closing
};

// WindowRecord::source: who produced a predicted window.
enum class WindowSource : uint16_t {
    kPredictor = 1,    // the plugin's bubble predictor
    kArbiterPlan = 2,  // derived from the WAN arbiter's periodic slot plan
    // A predictor window whose idle interval has begun: its start is observed, its end
    // predicted. A writer that publishes these withdraws a kPredictor window once its start
    // has come without the wait beginning; readers start work only in kPredictorOpen windows
    // of such a writer (docs/bubble-channel.md, "Window sources").
    kPredictorOpen = 3,
};

// Offset 0. Lines 0-1 are the identity (plain fields, written once before magic is
// published); lines 2-3 change while the writer runs (atomics).
struct alignas(64) SegmentHeader {
    // ---- line 0: format identity ----
    std::atomic<uint64_t> magic;  // kMagic; 0 while the writer is still initialising (M1)
    uint32_t abi_version;         // kAbiVersion
    uint32_t header_size;         // sizeof(SegmentHeader)
    uint64_t layout_size;         // bytes of the whole segment as laid out by the writer
    uint32_t clock_id;            // kClockIdMonotonic
    uint32_t flags;               // 0 (no flags are defined in ABI v2)
    uint32_t window_capacity;     // cells in the window ring
    uint32_t window_record_size;  // sizeof(WindowRecord)
    uint32_t idle_capacity;       // cells in the observed-idle ring
    uint32_t idle_record_size;    // sizeof(IdleRecord)
    uint64_t windows_offset;      // byte offset of WindowRecord[0]
    uint64_t idle_offset;         // byte offset of IdleRecord[0]
    // ---- line 1: writer identity ----
    // 1 for the first writer that ever created this name, previous generation + 1 for each
    // writer (re)start, so a reader that reopens the name can tell a restart from the same
    // segment.
    uint64_t generation;
    int64_t writer_start_ns;             // when this writer created the segment
    int32_t writer_pid;                  // the writer's pid (in the writer's pid namespace)
    std::atomic<uint32_t> lifecycle;     // Lifecycle (M5)
    std::atomic<int64_t> last_write_ns;  // latest publish (observed: its end_ns; relaxed hint)
    uint8_t reserved1[32];
    // ---- line 2: ring heads and counters ----
    std::atomic<uint64_t> window_head;       // window records ever published (M3)
    std::atomic<uint64_t> idle_head;         // idle records ever published (M3)
    std::atomic<uint64_t> prediction_sets;   // prediction sets ever published (relaxed)
    std::atomic<uint64_t> rejected_records;  // records the writer refused (invalid; relaxed)
    uint8_t reserved2[32];
    // ---- line 3: state block, seqlock'd by state_seq (M4) ----
    std::atomic<uint64_t> state_seq;
    std::atomic<uint32_t> state;                  // PredictorState
    std::atomic<uint32_t> reason;                 // StatusReason
    std::atomic<int64_t> state_since_ns;          // when state/reason last changed
    std::atomic<int64_t> stats_updated_ns;        // when the stats below were last set
    std::atomic<int64_t> period_ns;               // learned iteration period, 0 = unknown
    std::atomic<uint32_t> period_confidence_ppm;  // confidence in period_ns, 0..kPpmOne
    std::atomic<uint32_t> idle_fraction_ppm;      // recent observed idle fraction, or unknown
    std::atomic<uint64_t> iteration;              // latest iteration seen, or kUnknownIteration
    std::atomic<uint32_t> coverage_ppm;   // writer's running estimate (docs/bubble-channel.md)
    std::atomic<uint32_t> precision_ppm;  // writer's running estimate (docs/bubble-channel.md)
};

// One predicted idle window. Cell i of the ring holds record numbers n with n % capacity == i.
struct alignas(64) WindowRecord {
    std::atomic<uint64_t> seq;      // 2n+1 while being written, 2n+2 when complete (M2)
    std::atomic<int64_t> start_ns;  // predicted idle window [start_ns, end_ns)
    std::atomic<int64_t> end_ns;
    std::atomic<uint64_t> iteration;       // iteration the window belongs to, or unknown
    std::atomic<uint64_t> set_id;          // 1, 2, ...: the prediction set this record is in
    std::atomic<int64_t> published_ns;     // when its set was published
    std::atomic<uint32_t> confidence_ppm;  // 0..kPpmOne
    std::atomic<uint16_t> source;          // WindowSource
    // Windows in this record's set (0 marks an empty set: the record carries no window and
    // withdraws all predictions), and this record's index in it (0..set_count-1).
    std::atomic<uint16_t> set_count;
    std::atomic<uint16_t> set_index;
    uint16_t reserved[3];
};

// One observed idle interval (the GPU waited on a WAN receive). The interval opens when a
// receive is posted with none outstanding and closes when THAT receive's data has landed; the
// transfer fields describe that awaited message. Invariants the writer enforces (a record
// breaking one is refused and counted in rejected_records):
//   start_ns <= end_ns;
//   transfer_start_ns == 0 if and only if transfer_bytes == 0 (both unknown, or both known);
//   a known transfer_start_ns is > 0 and <= end_ns: the first data may have landed before the
//   wait opened (buffered before the receive was posted; the plugin then reports start_ns),
//   but never after the wait ended.
// Readers drop (and count as invalid) a record that breaks one.
struct alignas(64) IdleRecord {
    std::atomic<uint64_t> seq;      // 2n+1 while being written, 2n+2 when complete (M2)
    std::atomic<int64_t> start_ns;  // observed idle interval [start_ns, end_ns)
    std::atomic<int64_t> end_ns;
    std::atomic<uint64_t> iteration;  // iteration it was observed in, or kUnknownIteration
    // When the first data of the awaited message arrived, CLOCK_MONOTONIC ns; 0 = unknown.
    std::atomic<int64_t> transfer_start_ns;
    std::atomic<uint64_t> transfer_bytes;  // the awaited message's size in bytes; 0 = unknown
    // What the writer's publishing step saw of this wait, so that a replay can step the
    // publisher exactly as it stepped (docs/bubble-channel.md, "Publisher steps"): each a
    // step time as an offset from another field of the record, encoded by encodeStepOffset()
    // (0 = not known; writers before these fields leave the bytes 0). The step that took the
    // finished wait in (from end_ns), the first and the last step that saw it open (from
    // start_ns and end_ns), the first step that saw its transfer's first data (from
    // transfer_start_ns). Added within ABI v2, in what were 16 reserved bytes.
    std::atomic<uint32_t> taken_step;
    std::atomic<uint32_t> open_from_step;
    std::atomic<uint32_t> open_to_step;
    std::atomic<uint32_t> transfer_seen_step;
};

// IdleRecord step offsets: offset_ns + 2^31, so 0 stays "unknown"; offsets outside
// (-2^31, 2^31) ns (about 2.1 s) are not representable and encode as unknown. Overflow-safe
// for any input, since a reader decodes untrusted bytes.
inline constexpr int64_t kStepOffsetBias = int64_t{1} << 31;
inline constexpr uint32_t encodeStepOffset(int64_t offset_ns) {
    return offset_ns > -kStepOffsetBias && offset_ns < kStepOffsetBias
               ? static_cast<uint32_t>(offset_ns + kStepOffsetBias)
               : 0u;
}
// The encoding of step time `step_ns` (0: unknown) relative to `base_ns`.
inline constexpr uint32_t encodeStepTime(int64_t step_ns, int64_t base_ns) {
    int64_t offset = 0;
    return step_ns == 0 || __builtin_sub_overflow(step_ns, base_ns, &offset)
               ? 0u
               : encodeStepOffset(offset);
}
// The step time `encoded` is relative to `base_ns`; 0 when unknown or not representable.
inline constexpr int64_t decodeStepTime(uint32_t encoded, int64_t base_ns) {
    int64_t step = 0;
    return encoded == 0 || __builtin_add_overflow(
                               base_ns, static_cast<int64_t>(encoded) - kStepOffsetBias, &step)
               ? 0
               : step;
}

// [0, 1] in parts per million, rounded to the nearest and clamped (NaN: 0). The one encoding
// of every *_ppm field a writer publishes.
inline uint32_t toPpm(double fraction) {
    if (!(fraction > 0.0)) {  // also NaN
        return 0;
    }
    if (fraction >= 1.0) {
        return kPpmOne;
    }
    return static_cast<uint32_t>(std::lround(fraction * kPpmOne));
}

inline constexpr uint64_t kHeaderSize = sizeof(SegmentHeader);

// The only layout ABI v2 allows for given capacities.
struct SegmentLayout {
    uint64_t windows_offset;
    uint64_t idle_offset;
    uint64_t layout_size;
};
constexpr SegmentLayout expectedLayout(uint32_t window_capacity, uint32_t idle_capacity) {
    const uint64_t windows_offset = kHeaderSize;
    const uint64_t idle_offset = windows_offset + uint64_t{window_capacity} * sizeof(WindowRecord);
    const uint64_t end = idle_offset + uint64_t{idle_capacity} * sizeof(IdleRecord);
    return {windows_offset, idle_offset, (end + 63) / 64 * 64};
}

// ---- ABI checks: a change here is an ABI change (bump kAbiVersion) ----
static_assert(std::atomic<uint64_t>::is_always_lock_free, "shm words must be lock-free");
static_assert(std::atomic<int64_t>::is_always_lock_free, "shm words must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shm words must be lock-free");
static_assert(std::atomic<uint16_t>::is_always_lock_free, "shm words must be lock-free");
static_assert(sizeof(std::atomic<uint64_t>) == 8 && alignof(std::atomic<uint64_t>) == 8);
static_assert(sizeof(std::atomic<uint32_t>) == 4 && sizeof(std::atomic<uint16_t>) == 2);
static_assert(std::is_standard_layout_v<SegmentHeader>);
static_assert(std::is_standard_layout_v<WindowRecord>);
static_assert(std::is_standard_layout_v<IdleRecord>);
static_assert(sizeof(SegmentHeader) == 256);
static_assert(offsetof(SegmentHeader, magic) == 0);
static_assert(offsetof(SegmentHeader, abi_version) == 8);
static_assert(offsetof(SegmentHeader, header_size) == 12);
static_assert(offsetof(SegmentHeader, layout_size) == 16);
static_assert(offsetof(SegmentHeader, clock_id) == 24);
static_assert(offsetof(SegmentHeader, flags) == 28);
static_assert(offsetof(SegmentHeader, window_capacity) == 32);
static_assert(offsetof(SegmentHeader, window_record_size) == 36);
static_assert(offsetof(SegmentHeader, idle_capacity) == 40);
static_assert(offsetof(SegmentHeader, idle_record_size) == 44);
static_assert(offsetof(SegmentHeader, windows_offset) == 48);
static_assert(offsetof(SegmentHeader, idle_offset) == 56);
static_assert(offsetof(SegmentHeader, generation) == 64);
static_assert(offsetof(SegmentHeader, writer_start_ns) == 72);
static_assert(offsetof(SegmentHeader, writer_pid) == 80);
static_assert(offsetof(SegmentHeader, lifecycle) == 84);
static_assert(offsetof(SegmentHeader, last_write_ns) == 88);
static_assert(offsetof(SegmentHeader, window_head) == 128);
static_assert(offsetof(SegmentHeader, idle_head) == 136);
static_assert(offsetof(SegmentHeader, prediction_sets) == 144);
static_assert(offsetof(SegmentHeader, rejected_records) == 152);
static_assert(offsetof(SegmentHeader, state_seq) == 192);
static_assert(offsetof(SegmentHeader, state) == 200);
static_assert(offsetof(SegmentHeader, reason) == 204);
static_assert(offsetof(SegmentHeader, state_since_ns) == 208);
static_assert(offsetof(SegmentHeader, stats_updated_ns) == 216);
static_assert(offsetof(SegmentHeader, period_ns) == 224);
static_assert(offsetof(SegmentHeader, period_confidence_ppm) == 232);
static_assert(offsetof(SegmentHeader, idle_fraction_ppm) == 236);
static_assert(offsetof(SegmentHeader, iteration) == 240);
static_assert(offsetof(SegmentHeader, coverage_ppm) == 248);
static_assert(offsetof(SegmentHeader, precision_ppm) == 252);
static_assert(sizeof(WindowRecord) == 64);
static_assert(offsetof(WindowRecord, seq) == 0);
static_assert(offsetof(WindowRecord, start_ns) == 8);
static_assert(offsetof(WindowRecord, end_ns) == 16);
static_assert(offsetof(WindowRecord, iteration) == 24);
static_assert(offsetof(WindowRecord, set_id) == 32);
static_assert(offsetof(WindowRecord, published_ns) == 40);
static_assert(offsetof(WindowRecord, confidence_ppm) == 48);
static_assert(offsetof(WindowRecord, source) == 52);
static_assert(offsetof(WindowRecord, set_count) == 54);
static_assert(offsetof(WindowRecord, set_index) == 56);
static_assert(sizeof(IdleRecord) == 64 && alignof(IdleRecord) == 64);
static_assert(offsetof(IdleRecord, seq) == 0);
static_assert(offsetof(IdleRecord, start_ns) == 8);
static_assert(offsetof(IdleRecord, end_ns) == 16);
static_assert(offsetof(IdleRecord, iteration) == 24);
static_assert(offsetof(IdleRecord, transfer_start_ns) == 32);
static_assert(offsetof(IdleRecord, transfer_bytes) == 40);
static_assert(offsetof(IdleRecord, taken_step) == 48);
static_assert(offsetof(IdleRecord, open_from_step) == 52);
static_assert(offsetof(IdleRecord, open_to_step) == 56);
static_assert(offsetof(IdleRecord, transfer_seen_step) == 60);
static_assert(decodeStepTime(encodeStepTime(123, 100), 100) == 123);
static_assert(decodeStepTime(encodeStepTime(100, 123), 123) == 100);
static_assert(encodeStepTime(0, 100) == 0 && encodeStepOffset(kStepOffsetBias) == 0);
static_assert(decodeStepTime(~0u, INT64_MAX) == 0 && encodeStepTime(INT64_MAX, -1) == 0);
static_assert(expectedLayout(4, 4).layout_size == 256 + 4 * 64 + 4 * 64);

// ---- Naming ----
// One segment per local GPU. The plugin resolves the name once at init:
//   1. ATLAS_BUBBLE_CHANNEL set and non-empty: that value, with every "{local_rank}" replaced
//      by the local rank (so one value in a node-wide environment still names one segment
//      per GPU). It must start with '/', contain no other '/', and be at most 255 bytes.
//   2. otherwise defaultChannelName(local_rank) = "/atlas-bubbles-<uid>-<local_rank>", the
//      uid keeping users on a shared host apart. Linux shows it as /dev/shm/atlas-bubbles-*.
// The library never reads the environment: the plugin's parameter registry reads
// ATLAS_BUBBLE_CHANNEL and passes the value to resolveChannelName() (channel_name.h).
inline constexpr const char kDefaultNamePrefix[] = "/atlas-bubbles-";
inline constexpr const char kLocalRankPlaceholder[] = "{local_rank}";

// Writes the default name into out (NUL-terminated). Returns the name length, or -1 if it
// does not fit. Allocation-free, for callers on restricted paths.
inline int formatDefaultChannelName(char* out, size_t out_size, int local_rank) {
    const int n = std::snprintf(out, out_size, "%s%u-%d", kDefaultNamePrefix,
                                static_cast<unsigned>(::getuid()), local_rank);
    return (n < 0 || static_cast<size_t>(n) >= out_size) ? -1 : n;
}

inline std::string defaultChannelName(int local_rank) {
    char buf[64];
    const int n = formatDefaultChannelName(buf, sizeof(buf), local_rank);
    return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}

}  // namespace atlas::channel
