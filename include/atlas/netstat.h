// The Atlas stats segment: one POSIX shared-memory file per process using the plugin
// (/dev/shm/atlas-netstat-<uid>-<pid>), through which the plugin publishes per comm and per
// stream counters, and from which `atlas-netstat` (any number of readers, other processes)
// reads them. docs/netstat.md has the field tables.
//
// This header IS the contract: fixed-width integers and lock-free std::atomic words, no
// pointers, offsets checked by static_assert, standard library only.
//
// Layout (offsets from the start of the file, all 64-byte aligned):
//   0              SegmentHeader (kHeaderSize bytes)
//   comms_offset   comm_capacity x [CommRecord, stream_capacity x StreamRecord]
//   layout_size    end
// with comms_offset = kHeaderSize; a reader recomputes every offset (expectedLayout()) and
// rejects a header that disagrees or a file shorter than layout_size.
//
// Writers. The segment has one writer process. Within it each field has exactly one writer
// thread: a comm record's identity is written by the thread that claims the record (NCCL's
// service thread, in connect/accept), `bytes`/`messages` by the thread NCCL drives the comm
// with (its progress thread, in test()), the gate counters and every stream record by the
// comm's owner engine thread (sampled every ATLAS_NETSTAT_INTERVAL_MS, off the data path).
// Single-writer fields are updated with a relaxed load and a relaxed store (no locked
// instruction on the data path).
//
// Memory orders:
//   N1 magic: the writer initialises the header, then magic.store(kMagic, release); a reader
//      loads magic with acquire before it trusts any other header field.
//   N2 comm record lifecycle (gen), a seqlock over the identity fields: 0 = never used, odd =
//      free or being (re)written, even = live. Claim: gen.store(g+2 odd, relaxed);
//      fence(release); identity and zeroed counters (relaxed); gen.store(g+3, release).
//      Release: gen.store(g+1, release). Reader: g1 = gen.load(acquire); skip unless even and
//      nonzero; copy (relaxed); fence(acquire); g2 = gen.load(relaxed); valid iff g2 == g1.
//   N3 counters are monotonic hints (relaxed): a copy may mix values of two sampling points,
//      never values of two comms (N2). Nothing a reader does depends on their consistency.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <ctime>

namespace atlas::netstat {

inline constexpr uint64_t kMagic = 0x4154534E534C5441ull;  // "ATLSNSTA" little-endian
inline constexpr uint32_t kAbiVersion = 1;
inline constexpr uint32_t kHeaderSize = 256;
inline constexpr uint32_t kClockIdMonotonic = CLOCK_MONOTONIC;
// Bounds a reader enforces before it computes a layout.
inline constexpr uint32_t kMaxComms = 65536;
inline constexpr uint32_t kMaxStreamRecords = 65;  // control + 64 data streams
inline constexpr uint32_t kTextWords = 8;          // 64 bytes of text per address field
inline constexpr uint32_t kLinkWords = 4;          // 32 bytes

using Word = std::atomic<uint64_t>;
static_assert(Word::is_always_lock_free, "shared-memory words must be lock-free");
static_assert(sizeof(Word) == 8);

enum SegmentState : uint64_t { kSegmentLive = 1, kSegmentClosed = 2 };
enum Role : uint64_t { kRoleSend = 0, kRoleRecv = 1 };
// Same values as plugin::TrafficKind.
enum Traffic : uint64_t { kTrafficUnknown = 0, kTrafficPipeline = 1, kTrafficDataParallel = 2 };

struct SegmentHeader {
    Word magic;                   // N1
    uint32_t abi_version;         // kAbiVersion
    uint32_t header_size;         // kHeaderSize
    uint64_t layout_size;         // bytes the reader must be able to map
    uint32_t comm_capacity;       // comm records
    uint32_t stream_capacity;     // stream records after each comm record
    uint32_t comm_record_size;    // sizeof(CommRecord)
    uint32_t stream_record_size;  // sizeof(StreamRecord)
    uint64_t comms_offset;        // kHeaderSize
    int64_t pid;                  // the writer process
    uint64_t start_mono_ns;       // CLOCK_MONOTONIC when the segment was created
    uint64_t start_real_ns;       // CLOCK_REALTIME at the same moment
    uint32_t clock_id;            // kClockIdMonotonic: every *_ns below is on it
    uint32_t reserved0;
    char host[64];     // NUL-terminated host name
    char process[32];  // NUL-terminated /proc/self/comm
    // Written after publication (relaxed, N3):
    Word heartbeat_ns;   // the writer's last sample (engine threads)
    Word auth_failures;  // connections the process's listeners dropped for failed authentication
    Word comms_dropped;  // comms that found no free record (raise ATLAS_NETSTAT_COMMS)
    Word state;          // SegmentState
    uint8_t reserved1[48];
};

struct CommRecord {
    Word gen;  // N2
    // Identity (under gen):
    Word comm_id;     // NCCL's commId (v11+ init), 0 before
    Word session_id;  // the transport session (same number on both ends of the connection)
    Word role;        // Role
    Word dev;         // net device index
    Word nstreams;    // data streams (stream record 0 is the control stream)
    Word traffic;     // Traffic, from NCCL's setNetAttr hints
    Word priority;    // admission priority (0 first), ATLAS_TRAFFIC_PRIORITY
    Word wan;         // 1: classified WAN (docs/arbitration.md)
    Word handshake_rtt_ns;
    Word open_ns;           // when the comm was created
    Word peer[kTextWords];  // "addr:port", NUL-padded
    Word local[kTextWords];
    Word link[kLinkWords];  // WAN link name ("dc0->dc1"), empty when not WAN
    // Counters (N3):
    Word bytes;         // progress thread: bytes of completed messages
    Word messages;      // progress thread: completed messages
    Word last_done_ns;  // progress thread: last completion
    Word gate_waits;    // engine: admission made the comm wait for the link
    Word gate_grants;   // engine: admission granted the link
    Word sample_ns;     // engine: last stream sample
    Word resets;        // resilience (issue 16): stream resets; 0 until it lands
    Word rejoins;       // resilience: streams re-established
    Word resent_bytes;  // resilience: bytes resent after a reset
};

struct StreamRecord {
    Word stream;  // 0: control stream, 1..nstreams: data streams
    Word valid;   // 1: a TCP_INFO sample is present
    Word bytes;   // payload bytes this stream moved
    Word rtt_us;
    Word rttvar_us;
    Word min_rtt_us;
    Word snd_cwnd;       // segments
    Word snd_mss;        // bytes
    Word total_retrans;  // segments
    Word bytes_retrans;
    Word delivery_rate;  // bytes/s
    Word pacing_rate;    // bytes/s
    Word unacked;        // segments in flight
    Word tcp_state;      // tcpi_state | ca_state << 8 | app_limited << 16
    Word sample_ns;
    Word reserved;
};

static_assert(sizeof(SegmentHeader) == kHeaderSize);
static_assert(offsetof(SegmentHeader, heartbeat_ns) == 176);
static_assert(offsetof(SegmentHeader, state) == 200);
static_assert(sizeof(CommRecord) == 320);
static_assert(offsetof(CommRecord, peer) == 88);
static_assert(offsetof(CommRecord, bytes) == 248);
static_assert(sizeof(StreamRecord) == 128);

// Offsets implied by capacities; what writer and reader agree on.
struct Layout {
    uint64_t comms_offset = kHeaderSize;
    uint64_t comm_stride = 0;  // one comm record plus its stream records
    uint64_t size = 0;
};
constexpr Layout expectedLayout(uint32_t comm_capacity, uint32_t stream_capacity) {
    Layout l;
    l.comm_stride = sizeof(CommRecord) + uint64_t{stream_capacity} * sizeof(StreamRecord);
    l.size = l.comms_offset + uint64_t{comm_capacity} * l.comm_stride;
    return l;
}
static_assert(expectedLayout(1, 1).size == 256 + 320 + 128);

// "atlas-netstat-<uid>-<pid>": the file name (in /dev/shm unless ATLAS_NETSTAT_DIR).
inline constexpr const char* kNamePrefix = "atlas-netstat-";
// Where the segments live by default: the plugin's ATLAS_NETSTAT_DIR default and the one
// atlas-netstat --dir reads (one definition, so writer and reader meet without configuration).
inline constexpr const char* kDefaultSegmentDir = "/dev/shm";

}  // namespace atlas::netstat
