// Node-local arbitration segment: the versioned POD layout that every process on one host
// maps (/dev/shm/<ATLAS_NODE_SHM>.<link>), its validation and its repair.
//
// What it stores: the link's FIFO state exactly as scheduler/ defines it (sched::TemporalLink
// and one sched::TemporalEntry per flow, with the flow's admission priority: TemporalCore
// runs over it, the same rule TemporalFifo runs in atlas-arbiter and atlas-sim), plus what
// only the node needs: a table of processes (pid, start time, heartbeat, doorbell) and, per
// flow, its owner and class; and the link's measured rate, pooled over every process of the
// node (sched::PathRate, the estimator MeasuredLinkRate runs; plugin/wan/link_rate.h).
//
// Protocol (docs/arbitration.md):
//  - Every field below `lock` except the atomics in ShmProc is guarded by it: a
//    process-shared, robust pthread mutex, held only for short, bounded sections (O(flows),
//    no syscall but the futex, never a /proc read or kill()). A process that dies inside
//    leaves EOWNERDEAD to the next locker, which runs repairSegmentTable() (structure only)
//    and sets `sweep`, so that the watchers look for the dead process outside the lock.
//  - acquire/release/the watcher's decisions are TemporalCore's: join, leave, decidePriority
//    with leases of slot_ns and the aging bound max_wait_ns. Whoever makes a new holder bumps its
//    process's doorbell (a futex word) after unlocking, which wakes that process's watcher.
//  - Liveness (ShmArbiter's watcher, outside the lock): a holder whose heartbeat is older
//    than lease_ns loses the link; so does every flow of a process that is gone (kill(pid,
//    0), zombie state, /proc start time against pid reuse).
//
// Versioning: magic, version, layout size and table sizes are checked at attach time
// (validateSegmentHeader); anything else is another build (kShmVersion 1 had its own FIFO
// fields, 2 no priorities and no max_wait_ns). Pointers never live in the segment; times are
// CLOCK_MONOTONIC ns (system-wide). The mutex makes the layout specific to one libc: every process
// mapping it must use the same glibc (true for processes on one host from one install) and share a
// PID namespace (for the liveness check).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "atlas/common/status.h"
#include "scheduler/path_rate.h"
#include "scheduler/temporal_state.h"

namespace atlas::plugin::wan {

inline constexpr uint64_t kShmMagic = 0x3142524153414c54ull;  // "TLASARB1" little-endian
// 2: the FIFO is scheduler/'s TemporalLink + TemporalEntry[]; per-process start time atomic.
// 3: TemporalEntry::priority (was reserved) and the header's max_wait_ns.
// 4: the pooled rate (rate, rate_bps) after the flows.
inline constexpr uint32_t kShmVersion = 4;
inline constexpr uint32_t kShmMaxProcs = 64;
inline constexpr uint32_t kShmMaxFlows = 256;

// One registered process. Written under the lock (registration, freeing); read lock-free by
// other processes' watchers (pid, start_time: the liveness sweep) and stamped lock-free by
// its own watcher (alive_ns). Registration stores start_time before pid (release).
struct alignas(64) ShmProc {
    std::atomic<int32_t> pid;  // 0: free entry
    uint32_t reserved;
    std::atomic<uint64_t> start_time;  // /proc/<pid>/stat starttime (0: unknown)
    std::atomic<int64_t> alive_ns;     // heartbeat of the process's watcher
    std::atomic<uint32_t> doorbell;    // futex word: bumped when one of its flows is granted
};

// Per flow, beside its FIFO entry of the same index (meaningful while that entry is used).
struct ShmFlow {
    int32_t proc;  // index into procs
    int32_t pipeline;
    int32_t stage;
    uint8_t direction;  // 0 forward, 1 backward
    uint8_t reserved[3];
    uint64_t bytes;  // sent under its grants, for statistics
};

struct ShmSegment {
    // Immutable after creation.
    uint64_t magic;
    uint32_t version;
    uint32_t layout_size;  // sizeof(ShmSegment)
    uint32_t max_procs;
    uint32_t max_flows;
    int64_t slot_ns;      // lease of one grant; 0: until released
    int64_t lease_ns;     // liveness lease of a holder
    int64_t max_wait_ns;  // a waiter this old goes first whatever its priority (> 0)
    pthread_mutex_t lock;
    // Guarded by lock.
    sched::TemporalLink fifo;  // holder, lease end, waiting count, next sequence, grants
    uint32_t sweep;            // != 0: someone died inside the lock; watchers check everyone
    uint32_t reserved;
    uint64_t revocations;  // grants taken from dead or silent holders
    uint64_t recoveries;   // EOWNERDEAD repairs
    ShmProc procs[kShmMaxProcs];
    sched::TemporalEntry entries[kShmMaxFlows];  // the FIFO's per-flow state
    ShmFlow flows[kShmMaxFlows];
    // The link's trains from every process of the node (guarded by lock), and its estimate
    // after the last of them (written under lock, read lock-free by every release).
    sched::PathRate rate;
    std::atomic<uint64_t> rate_bps;
};

static_assert(std::is_standard_layout_v<ShmSegment>);
static_assert(std::is_trivially_copyable_v<sched::PathRate>, "lives in the segment");
static_assert(std::atomic<int32_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<int64_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word must be 32 bits");
static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
static_assert(sizeof(ShmProc) == 64);
static_assert(sizeof(ShmFlow) == 24);
static_assert(offsetof(ShmSegment, magic) == 0);
static_assert(offsetof(ShmSegment, version) == 8);
static_assert(offsetof(ShmSegment, layout_size) == 12);
static_assert(offsetof(ShmSegment, max_procs) == 16);
static_assert(offsetof(ShmSegment, max_flows) == 20);
static_assert(offsetof(ShmSegment, slot_ns) == 24);
static_assert(offsetof(ShmSegment, lease_ns) == 32);
static_assert(offsetof(ShmSegment, max_wait_ns) == 40);
static_assert(offsetof(ShmSegment, lock) == 48);
static_assert(offsetof(ShmSegment, procs) % 64 == 0);
static_assert(offsetof(ShmSegment, flows) ==
              offsetof(ShmSegment, entries) + kShmMaxFlows * sizeof(sched::TemporalEntry));

// The FIFO over a segment (caller holds the lock, or owns the bytes).
inline sched::TemporalCore segmentFifo(ShmSegment& seg) {
    return sched::TemporalCore(seg.fifo, seg.entries);
}

// Lock held: adds one train to the pooled rate and publishes the estimate after it (also
// *live: the samples it rests on). A rate state that fails PathRate::consistent() (another
// process wrote anything) starts over first. Bounded, no syscalls. Used by the node's rate
// pool (ShmArbiter::ratePool) and the fuzz target.
uint64_t addSegmentRateSample(ShmSegment& seg, uint64_t bytes, Nanos first_ns, Nanos last_ns,
                              size_t* live);

// Checks a mapped segment's immutable header (magic, version, sizes, slot, lease, max wait) without
// taking the lock. Errors name the problem and the fix. `size` is the mapping's size. Used at
// attach time and by the fuzz target (fuzz_arbiter_shm).
Status validateSegmentHeader(const void* base, size_t size);
// Checks the guarded part: the FIFO's invariants (TemporalCore::validate: priorities in range
// included), every used flow naming a registered process, and the pooled rate's state
// (PathRate::consistent). The caller holds the lock or owns the
// bytes.
Status validateSegmentTable(const ShmSegment& seg);
// Restores what validateSegmentTable checks, with the least change (TemporalCore::repair;
// a used flow of an invalid or free process is closed; an inconsistent rate starts over,
// unknown), counts a recovery and sets `sweep`.
// Bounded and free of syscalls: it runs inside the lock, after EOWNERDEAD. Returns the fixes.
uint32_t repairSegmentTable(ShmSegment& seg);

}  // namespace atlas::plugin::wan
