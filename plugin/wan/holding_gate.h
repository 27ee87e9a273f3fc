// HoldingGate: the FlowGate half that every arbitrated WAN flow shares, whoever grants the
// link. It runs the one hold/drain rule (sched::GrantHold: a released grant is kept until
// its bytes crossed the link, and a message in that window resumes it) and publishes the
// grant's slot end for holds(). Subclasses only say how the link is asked for and given back:
//  - ClientGate (client_gate.h): messages to atlas-arbiter over the ArbiterClient session;
//  - ShmGate (shm_gate.h): the node segment's FIFO (sched::TemporalCore) under its mutex.
//
// Threads and locks:
//  - acquire/holds/release: the flow's engine thread (FlowGate). holds() is one atomic load
//    and a compare. acquire/release take mu_ (this flow's own mutex, uncontended but for the
//    backend's timer thread) and call the hooks under it.
//  - finishDrain/failOpen and the subclasses' grant delivery: the backend's timer thread (the
//    ArbiterClient I/O thread, the ShmArbiter watcher), with the backend's gate registry lock
//    held so the gate is alive. Lock order: registry lock, then mu_, then the backend's own
//    (the client's out queue, the segment mutex).
//  - The waker is called without mu_, never after the destructor of the subclass returned
//    (subclasses unregister first).
//
// Time: every `now` comes from the caller (FlowGate passes the transport's clock; timer
// threads read the backend's injected Clock); the gate reads no clock of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "atlas/admission.h"
#include "plugin/wan/link_rate.h"
#include "scheduler/grant_hold.h"

namespace atlas::plugin::wan {

class HoldingGate : public FlowGate {
  public:
    bool acquire(uint64_t queued_bytes, Nanos now_ns) final;
    bool holds(Nanos now_ns) const final;
    uint64_t budgetBytes() const final { return budget_.load(std::memory_order_acquire); }
    uint64_t paceBps() const final { return pace_.load(std::memory_order_acquire); }
    void release(uint64_t bytes, Nanos now_ns) final;
    // A receiver's message train: the link's rate learns from it (LinkRate::addSample).
    void onPathSample(uint64_t bytes, Nanos dispersion_ns, Nanos now_ns, Nanos stalled_ns) final {
        if (rate_) {
            rate_->addSample(bytes, dispersion_ns, now_ns, stalled_ns);
        }
    }

    // Timer thread: gives a drained grant back once its time came, and asks for the link
    // again when the flow spent its slot and waits (GrantHold kAfterDrain; the engine is
    // woken when that grant comes). Returns when the pending drain ends (the timer's next
    // deadline), kNever when none is pending.
    Nanos finishDrain(Nanos now_ns);
    // Timer thread: the backend is unusable (arbiter unreachable, segment broken, shut
    // down): the flow sends unarbitrated; an engine that waited is woken.
    void failOpen();

  protected:
    HoldingGate(std::function<void()> waker, std::shared_ptr<LinkRate> rate);

    // ---- Hooks, all called with mu_ held.
    // False: send unarbitrated now (fail-open, fair arbiter, stopped backend).
    virtual bool arbitrated() = 0;
    // The flow waits (hold_ is kWaiting): ask for the link. True when it is granted at once,
    // with the slot end in *until_ns.
    virtual bool ask(uint64_t queued_bytes, Nanos now_ns, Nanos* until_ns) = 0;
    // Before a held or resumed grant is used again: is it still ours at the backend? (The
    // node segment may have revoked it from a process that stopped past its lease.)
    virtual bool stillHeld(Nanos /*now_ns*/) { return true; }
    // Give the grant back; `bytes` were sent under it.
    virtual void giveBack(uint64_t bytes, Nanos now_ns) = 0;
    // A drain is pending until hold_.dueNs(): make the timer thread look again.
    virtual void drainArmed() {}
    // The flow went idle without a grant to give back (a request may still be pending at
    // the backend: withdraw it).
    virtual void wentIdle(Nanos /*now_ns*/) {}
    // An acquire resumed a draining grant (no new turn, no round trip): statistics.
    virtual void resumed() {}
    // Does another flow wait for this flow's link? A draining grant resumes for new bytes
    // only when not (GrantHold: a turn per transfer). Unknown counts as yes.
    virtual bool othersWaiting(Nanos now_ns) = 0;

    // Applies a grant that arrived for this flow; publishes. The caller handles kUnwanted
    // (give it back) and, after unlocking mu_, calls waker_ on kWake.
    sched::GrantHold::Granted grantLocked(Nanos now_ns, Nanos until_ns);
    void publishLocked();

    std::mutex mu_;
    sched::GrantHold hold_;  // guarded by mu_
    const std::function<void()> waker_;

  private:
    std::shared_ptr<LinkRate> rate_;
    // hold_.untilNs() for holds(), hold_.budgetBytes() for budgetBytes() and hold_.paceBps()
    // for paceBps(): written under mu_ (release), read lock-free (acquire).
    std::atomic<Nanos> until_{0};
    std::atomic<uint64_t> budget_{0};
    std::atomic<uint64_t> pace_{0};
};

}  // namespace atlas::plugin::wan
