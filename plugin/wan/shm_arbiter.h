// ShmArbiter: node-local temporal link sharing between the processes of one host, through
// the shared-memory segment of shm_layout.h (one segment per link name).
//
// Policy: first come first served with slots of at most slot_ns, i.e. sched::TemporalFifo
// (a flow whose slot ends while it still has data releases and queues again at the back).
// `workload` is not available node-locally: its learned plan lives in one process, which the
// DC-wide arbiter provides; the plugin falls back to this FIFO (docs/arbitration.md).
//
// Per process and segment: one ShmArbiter, shared by the gates of that link, with one
// watcher thread that stamps the process's liveness, sleeps on the process's doorbell
// futex, turns grants into gate wakeups and revokes the grant of a dead or silent holder.
// shutdown() (plugin finalize) joins it.
//
// Fail-open: when the segment cannot be created or mapped, or is rejected (foreign, other
// version, other owner), open() fails with the reason; the plugin logs one WARN and lets
// the link's flows send unarbitrated. A mutex that becomes unrecoverable does the same.
//
// Threads: makeGate/snapshot from any thread; gates per FlowGate (engine thread). holds()
// is an atomic load and a compare; acquire/release take the segment's mutex (no syscall
// unless contended).
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

namespace atlas::plugin::wan {

struct ShmConfig {
    std::string name;  // file name under /dev/shm, [A-Za-z0-9._-], <= 200 bytes
    std::string dir = "/dev/shm";
    Nanos slot_ns = 250 * kNsPerMs;  // used when this process creates the segment
    Nanos lease_ns = 200 * kNsPerMs;
    // Rate of the link (ATLAS_LINK_GBPS): a drained flow keeps the link until its bytes could
    // have crossed it (see ArbiterClientConfig::link_bps). 0 = release when the queue drains.
    uint64_t link_bps = 0;
    Logger logger;
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
    };

    // Creates the segment (atomically: built under a temporary name, then linked) or
    // attaches to an existing one after validating it, registers this process and starts
    // the watcher.
    static Result<std::shared_ptr<ShmArbiter>> open(const ShmConfig& config);
    ~ShmArbiter();
    ShmArbiter(const ShmArbiter&) = delete;
    ShmArbiter& operator=(const ShmArbiter&) = delete;

    // Joins the watcher, gives back this process's grant and frees its table entries. Gates
    // that outlive it send unarbitrated. Idempotent.
    void shutdown();

    // Fails (kUnavailable) when the link's flow table is full; the caller sends unarbitrated.
    Result<std::unique_ptr<FlowGate>> makeGate(const arbiter::WireClass& cls,
                                               std::function<void()> waker);

    Snapshot snapshot();
    const std::string& path() const;

    struct Impl;

  private:
    explicit ShmArbiter(std::shared_ptr<Impl> impl);
    std::shared_ptr<Impl> impl_;
};

// "/dev/shm/<prefix>.<link with '>' and '/' mapped to '_'>": the segment name for a link.
std::string shmNameForLink(const std::string& prefix, const std::string& link);

}  // namespace atlas::plugin::wan
