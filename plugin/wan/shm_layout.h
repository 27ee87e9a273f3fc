// Node-local arbitration segment: the versioned POD layout that every process on one host
// maps (/dev/shm/<ATLAS_NODE_SHM>.<link>), and its validation.
//
// Protocol (a FIFO with leases that mirrors sched::TemporalFifo; docs/arbitration.md):
//  - All fields below `lock` are guarded by it: a process-shared, robust pthread mutex. A
//    process that dies inside the critical section leaves EOWNERDEAD to the next locker,
//    which repairs the table (drops dead processes, re-validates the holder) and marks the
//    mutex consistent.
//  - acquire: if nobody holds the link, take it (slot end = now + slot_ns); else join the
//    wait list with the next sequence number.
//  - release: drop the link and hand it to the waiting flow with the smallest sequence whose
//    process is alive; bump that process's doorbell (a futex word) to wake its watcher.
//  - liveness: each process's watcher thread stamps alive_ns every lease/4. A waiter that
//    finds the holder's stamp older than the lease, or the holder's process gone (kill(pid,
//    0) and the /proc start time, against pid reuse), revokes the grant and passes the link
//    on. So a holder that dies loses the link within about one lease.
//
// Pointers never live in the segment; times are CLOCK_MONOTONIC ns (system-wide). The mutex
// makes the layout specific to one libc: every process mapping it must use the same glibc
// (true for processes on one host from one install) and share a PID namespace (for the
// liveness check).
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "atlas/common/status.h"

namespace atlas::plugin::wan {

inline constexpr uint64_t kShmMagic = 0x3142524153414c54ull;  // "TLASARB1" little-endian
inline constexpr uint32_t kShmVersion = 1;
inline constexpr uint32_t kShmMaxProcs = 64;
inline constexpr uint32_t kShmMaxFlows = 256;

enum ShmFlowState : int32_t {
    kShmFlowFree = 0,
    kShmFlowIdle = 1,
    kShmFlowWaiting = 2,
    kShmFlowGranted = 3,
};

struct alignas(64) ShmProc {
    std::atomic<int32_t> pid;  // 0: free slot
    uint32_t reserved;
    uint64_t start_time;             // /proc/<pid>/stat starttime (0: unknown)
    std::atomic<int64_t> alive_ns;   // heartbeat of the process's watcher (lock-free writes)
    std::atomic<uint32_t> doorbell;  // futex word: bumped when one of its flows is granted
};

struct ShmFlow {
    int32_t state;  // ShmFlowState
    int32_t proc;   // index into procs
    uint64_t seq;   // FIFO order while waiting
    uint64_t grant_seq;
    int64_t slot_end_ns;  // INT64_MAX: until released
    int64_t requested_ns;
    uint64_t bytes;  // released bytes, for statistics
    int32_t pipeline;
    int32_t stage;
    uint8_t direction;
    uint8_t reserved[7];
};

struct ShmSegment {
    // Immutable after creation.
    uint64_t magic;
    uint32_t version;
    uint32_t layout_size;  // sizeof(ShmSegment)
    uint32_t max_procs;
    uint32_t max_flows;
    int64_t slot_ns;   // 0: a grant lasts until release
    int64_t lease_ns;  // liveness lease of a holder
    pthread_mutex_t lock;
    // Guarded by lock.
    int32_t holder;  // flow index, -1: link free
    uint32_t reserved;
    uint64_t next_seq;
    uint64_t next_grant_seq;
    uint64_t grants;
    uint64_t revocations;  // grants taken from dead or silent holders
    uint64_t recoveries;   // EOWNERDEAD repairs
    ShmProc procs[kShmMaxProcs];
    ShmFlow flows[kShmMaxFlows];
};

static_assert(std::is_standard_layout_v<ShmSegment>);
static_assert(std::atomic<int32_t>::is_always_lock_free);
static_assert(std::atomic<int64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word must be 32 bits");
static_assert(sizeof(ShmFlow) == 64);
static_assert(offsetof(ShmSegment, magic) == 0);
static_assert(offsetof(ShmSegment, layout_size) == 12);

// Checks a mapped segment's immutable header (magic, version, sizes) and the guarded fields'
// ranges, without taking the lock. Errors name the problem and the fix. `size` is the
// mapping's size. Used at attach time and by the fuzz target (fuzz_arbiter_shm).
Status validateSegmentHeader(const void* base, size_t size);
// Range check of the guarded part (holder index, flow/proc indices and states); the caller
// holds the lock or owns the bytes. Used after EOWNERDEAD and by the fuzzer.
Status validateSegmentTable(const ShmSegment& seg);

}  // namespace atlas::plugin::wan
