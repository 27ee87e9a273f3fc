// ShmArbiter: node-local temporal link sharing between the processes of one host, through
// the shared-memory segment of shm_layout.h (one segment per link name).
//
// Policy: sched::TemporalCore over the segment's state, i.e. exactly sched::TemporalFifo's
// decisions: by priority (the flow class's, from NCCL's hints and ATLAS_TRAFFIC_PRIORITY),
// first come first served within one, a waiter older than max_wait_ns first; leases of at
// most slot_ns; at a lease end the holder queues again (behind the waiters of its priority)
// or is renewed when alone.
// `workload` is not available node-locally: its learned plan lives in one process, which
// the DC-wide arbiter provides; the plugin falls back to this FIFO (docs/arbitration.md).
// Each flow's side of a grant is ShmGate (shm_gate.h), which runs the hold/drain rule shared
// with the arbiter client's gates (HoldingGate).
//
// Per process and segment: one ShmArbiter, shared by the gates of that link, with one
// watcher thread that stamps the process's liveness, sleeps on the process's doorbell
// futex, turns grants into gate wakeups, ends drains, hands an expired lease on while a flow
// of this process waits, and checks the liveness of the others: a holder silent past the
// lease, and processes that are gone. Those checks (kill(), /proc reads) run only here and
// never under the segment mutex: engine threads take that mutex only for the short, bounded
// FIFO operations, so one slow /proc read cannot stall a data path. shutdown() (plugin
// finalize) joins the watcher.
//
// Fail-open: when the segment cannot be created or mapped, or is rejected (foreign, other
// version, other owner), open() fails with the reason; the plugin logs one WARN and lets
// the link's flows send unarbitrated. A mutex that becomes unrecoverable does the same.
//
// Threads: makeGate/snapshot/runWatcher from any thread; gates per FlowGate (engine thread).
// holds() is an atomic load and a compare; acquire/release take the flow's own mutex and the
// segment's (no syscall unless contended).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "arbiter/protocol.h"
#include "atlas/admission.h"
#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "plugin/wan/link_rate.h"
#include "plugin/wan/shm_segment.h"

namespace atlas::plugin::wan {

struct ShmConfig {
    std::string name;  // file name under /dev/shm, [A-Za-z0-9._-], <= 200 bytes
    std::string dir = "/dev/shm";
    Nanos slot_ns = 250 * kNsPerMs;  // used when this process creates the segment
    Nanos lease_ns = 200 * kNsPerMs;
    // The aging bound (sched::PolicyConfig::max_wait_ns) when this process creates the
    // segment; 0 = sched::agingBoundNs (20 slots, 200 ms without slots).
    Nanos max_wait_ns = 0;
    Logger logger;
    // The watcher's time and the gates' own (registration, close). The segment records
    // CLOCK_MONOTONIC across processes, so production uses that; the transports feeding the
    // gates must use the same timeline (a test drives one process's by a ManualClock).
    const Clock* clock = &MonotonicClock::instance();
    // Liveness of the other processes; called by the watcher only, outside the mutex.
    const ProcessProbe* probe = &systemProcessProbe();
    // false: no watcher thread; the owner calls runWatcher() (tests driving a ManualClock).
    bool watcher_thread = true;
};

class ShmArbiter {
  public:
    struct Snapshot {
        int holder_pid = 0;  // 0: link free
        int holder_flow = -1;
        uint32_t waiting = 0;
        uint32_t procs = 0;
        uint64_t grants = 0;
        uint64_t revocations = 0;
        uint64_t recoveries = 0;
        Nanos slot_ns = 0;
        Nanos lease_ns = 0;
        Nanos max_wait_ns = 0;
    };

    // Creates the segment (atomically: built under a temporary name, then linked) or
    // attaches to an existing one after validating it, frees the entries of processes that
    // are gone, registers this process and starts the watcher.
    static Result<std::shared_ptr<ShmArbiter>> open(const ShmConfig& config);
    ~ShmArbiter();
    ShmArbiter(const ShmArbiter&) = delete;
    ShmArbiter& operator=(const ShmArbiter&) = delete;

    // Joins the watcher, gives back this process's grant and frees its table entries. Gates
    // that outlive it send unarbitrated. Idempotent.
    void shutdown();

    // Fails (kUnavailable) when the link's flow table is full; the caller sends unarbitrated.
    // The flow waits with cls.priority (values >= sched::kPriorityLevels count as the last).
    // `rate`: the link's rate for the hold/drain rule (null or 0: give a grant back as soon
    // as the queue drains).
    Result<std::unique_ptr<FlowGate>> makeGate(const arbiter::WireClass& cls,
                                               std::function<void()> waker,
                                               std::shared_ptr<LinkRate> rate = nullptr);

    // One round of the watcher's work at now_ns (heartbeat, drains, grants, lease ends,
    // liveness); returns when it wants to run again. The watcher thread calls it in a loop;
    // with ShmConfig::watcher_thread = false, the owner does. Not concurrently with itself.
    Nanos runWatcher(Nanos now_ns);

    Snapshot snapshot();
    const std::string& path() const;

    // The link's rate pool in the segment: trains reported to any process of the node feed
    // one estimate (MeasuredLinkRate over it). While the segment is unusable, add() keeps
    // nothing and the estimate stays what it was last.
    std::shared_ptr<RatePool> ratePool();

    struct Impl;

  private:
    explicit ShmArbiter(std::shared_ptr<Impl> impl);
    std::shared_ptr<Impl> impl_;
};

// "/dev/shm/<prefix>.<link with '>' and '/' mapped to '_'>": the segment name for a link.
std::string shmNameForLink(const std::string& prefix, const std::string& link);

}  // namespace atlas::plugin::wan
