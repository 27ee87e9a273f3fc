// ShmArbiter::Impl: one process's attachment to a node segment, shared by the ShmArbiter
// (watcher, registration) and its ShmGates (shm_gate.cc). Internal to plugin/wan.
//
// Locks, in this order: reg_mu (the gate registry), a gate's own mutex, the segment mutex
// (lock()/unlock()). Sections under the segment mutex are TemporalCore operations and table
// scans: bounded, no syscall but the futex wake after unlocking, never the ProcessProbe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "plugin/wan/shm_arbiter.h"
#include "plugin/wan/shm_layout.h"

namespace atlas::plugin::wan {

class ShmGate;

// Processes whose doorbell to ring once the segment lock is released (new holders).
struct Doorbells {
    std::array<int, 8> procs{};
    int n = 0;
    void add(int p) {
        for (int i = 0; i < n; ++i) {
            if (procs[i] == p) {
                return;
            }
        }
        if (n < static_cast<int>(procs.size())) {
            procs[n++] = p;  // more than 8 new holders in one section cannot happen
        }
    }
};

struct ShmArbiter::Impl {
    ~Impl() { unmapSegment(seg); }

    // Takes the segment lock. After EOWNERDEAD it repairs the table's structure
    // (repairSegmentTable: bounded, no syscalls; the dead process's flows go at the next
    // liveness sweep it requests) and keeps the lock. False when the mutex is unusable: the
    // arbiter is then broken (every gate fails open).
    bool lock();
    // Releases it; logs a repair made under it.
    void unlock();
    sched::TemporalCore fifo() { return segmentFifo(*seg); }
    // Lock held: the owner process index of entry e, -1 if the table names none in range
    // (another process may have written anything: indices are checked before use).
    int procOf(uint32_t e) const {
        const int32_t p = seg->flows[e].proc;
        return p >= 0 && p < static_cast<int32_t>(kShmMaxProcs) ? p : -1;
    }
    // Lock held: the FIFO's decision at now (hands an expired lease on, grants a free link);
    // a new holder's process goes to `ring`.
    void decideLocked(Nanos now, Doorbells* ring);
    // Lock held: closes every flow of process p and frees its entry. True if one held the link.
    bool freeProcLocked(int p);
    void ring(const Doorbells& d);
    void ringSelf();
    void markBroken(const char* why);
    void failOpenAll();

    // ---- Watcher (one thread at a time).
    // What one round learns about the link under the lock.
    struct LinkView {
        uint32_t holder = sched::TemporalCore::kNone;
        Nanos lease_end = sched::kNever;
        int hp = -1;  // the holder's process
        int holder_pid = 0;
        uint64_t holder_start = 0;
        Nanos holder_alive = 0;
        uint64_t contenders = 0;  // bit p: procs[p] has a flow that waits or holds
        bool sweep_all = false;   // seg->sweep was set
    };
    Nanos watchStep(Nanos now);
    // Takes the lock: validates (repairs) the table, decides when `decide` (a flow of ours
    // waits), fills *v, rings new holders. False when the segment is unusable or we stopped.
    bool observe(Nanos now, bool decide, LinkView* v);
    void watch();
    // Probes (outside the lock) the processes in `mask` (bit p: procs[p]) and frees those
    // that are gone (under it, if still the same process). Clears `sweep` when `all`.
    void sweep(uint64_t mask, bool all, Nanos now);
    // The holder (entry, of process p registered as pid/start) went silent past the lease:
    // probe it outside the lock, then revoke its grant (its process's flows too if gone).
    void revokeSilentHolder(uint32_t entry, int p, int pid, uint64_t start, Nanos now);

    ShmConfig cfg;
    std::string path;
    ShmSegment* seg = nullptr;
    int me = -1;  // our index in seg->procs
    int pid = 0;
    Nanos beat_ns = kNsPerMs;  // heartbeat period: lease / 4
    std::atomic<bool> stop{false};
    std::atomic<bool> broken{false};  // fail open from now on
    bool stopped = false;             // guarded by the segment lock: our entry is freed
    const char* repaired = nullptr;   // guarded by the segment lock: a repair to log (why)
    std::thread watcher;
    std::mutex join_mu;
    bool shut = false;  // guarded by join_mu
    std::mutex reg_mu;
    std::set<ShmGate*> gates;  // guarded by reg_mu
    Nanos next_beat = 0;       // watcher only
    Nanos next_sweep = 0;      // watcher only
};

}  // namespace atlas::plugin::wan
