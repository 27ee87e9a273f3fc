// Admission: who may put bytes on a shared WAN link, when (temporal bandwidth sharing).
//
// transport/ asks a FlowGate before it hands new pieces of a message to its streams; plugin/
// implements gates on top of scheduler/ policies (node-local arbitration through shared
// memory, DC-wide through atlas-arbiter). Neither side includes the other: this header is
// the whole contract.
//
// Threads: acquire/holds/release run on the flow's engine thread. When a requested grant
// arrives, the gate calls the flow's waker (transport::SendComm::waker(), callable from any
// thread), which makes the engine call acquire() again. A gate must stop calling the waker
// before its destructor returns; the comm destroys its gate when it closes.
//
// Cost: holds() runs for every piece of a granted flow; it must not lock, allocate or make a
// syscall (an atomic load and a vDSO clock read at most).
#pragma once

#include <cstdint>

#include "atlas/common/clock.h"

namespace atlas {

class FlowGate {
  public:
    virtual ~FlowGate() = default;
    // The flow has `queued_bytes` waiting. True: it holds the link now and may send until
    // holds() turns false. False: the link was requested; wake() follows a grant.
    virtual bool acquire(uint64_t queued_bytes, Nanos now_ns) = 0;
    // Still inside the granted slot?
    virtual bool holds(Nanos now_ns) const = 0;
    // How many bytes the engine may still commit (hand to its streams) under the grant that
    // its last successful acquire() (or wake) brought: the slot's link time at the link's
    // rate (sched::GrantHold::budgetBytes). When they are spent, the engine releases as at a
    // slot end and acquires again. Engine thread, lock-free. Default: unbounded.
    virtual uint64_t budgetBytes() const { return UINT64_MAX; }
    // How fast, in bits/s, the flow's data streams may send together under that grant
    // (sched::GrantHold::paceBps: the link's rate with headroom); 0: no new pace (not
    // granted, or the rate unknown). Before a pump's first write the engine splits it over
    // the streams in proportion to their unsent bytes (SO_MAX_PACING_RATE), on streams that
    // run atlas_rate only (docs/tcp-cc.md); a 0 keeps the caps it set, which are lifted once
    // budgetBytes() is unbounded (the gate is open: unarbitrated). Engine thread, lock-free.
    // Default: 0.
    virtual uint64_t paceBps() const { return 0; }
    // The flow's queue drained or its slot ended: the link is given back. `bytes` were sent
    // under the grant (for accounting and the workload-aware policy's learning).
    virtual void release(uint64_t bytes, Nanos now_ns) = 0;
    // The receiver reported a message train of this flow: `bytes` of payload that reached it
    // over `dispersion_ns` (docs/protocol.md, "Confirmation"), a sample of the path's rate.
    // `stalled_ns`: how long this gate stopped the flow in the middle of a message while the
    // train's bytes were sent (the engine's GateStalls, transport/train.h); the sample
    // measured that wait too. Engine thread; must not block. Default: ignored.
    virtual void onPathSample(uint64_t bytes, Nanos dispersion_ns, Nanos now_ns, Nanos stalled_ns) {
        (void)bytes;
        (void)dispersion_ns;
        (void)now_ns;
        (void)stalled_ns;
    }
};

}  // namespace atlas
