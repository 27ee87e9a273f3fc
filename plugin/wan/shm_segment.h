// The operating-system side of node-local arbitration: creating or attaching the segment
// file (shm_layout.h), the futex doorbells, and the liveness probe of other processes.
//
// Creation is atomic: the segment is built under a private name and published with link(),
// so nobody maps a half-initialised segment and two creators cannot both win. Attaching
// validates before use: a regular file owned by this user, then size, magic, version and
// layout (validateSegmentHeader). Errors name the fix (another ATLAS_NODE_SHM, one build).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "plugin/wan/shm_layout.h"

namespace atlas::plugin::wan {

// Is the process that registered as (pid, start_time) still there? The system probe calls
// kill(pid, 0) and reads /proc/<pid>/stat (zombie state; start time against pid reuse), so it
// may block on a slow /proc: only watcher threads call it, and never with the segment mutex
// held (ShmArbiter). Tests inject their own. Thread-safe.
class ProcessProbe {
  public:
    virtual ~ProcessProbe() = default;
    virtual bool alive(int pid, uint64_t start_time) const = 0;
    // The start time to record for `pid` at registration (0: unknown).
    virtual uint64_t startTime(int pid) const = 0;
};
const ProcessProbe& systemProcessProbe();

// [A-Za-z0-9._-], 1..200 characters, not starting with '.'.
bool validSegmentName(const std::string& name);

// Maps `path`: attaches to a valid existing segment, or creates one with slot_ns / lease_ns /
// max_wait_ns (*created says which; an existing segment keeps its creator's values). The
// mapping is sizeof(ShmSegment) bytes; unmapSegment() releases it.
Result<ShmSegment*> mapSegment(const std::string& path, Nanos slot_ns, Nanos lease_ns,
                               Nanos max_wait_ns, bool* created);
void unmapSegment(ShmSegment* seg);

// Futex on a process-shared word (not FUTEX_PRIVATE). wait returns at a wake, when *word !=
// expected, or after timeout_ns; wakeAll wakes every waiter.
void futexWait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout_ns);
void futexWakeAll(std::atomic<uint32_t>* word);

}  // namespace atlas::plugin::wan
