// ShmGate: the FlowGate of one flow under node-local arbitration (ShmArbiter::makeGate).
// The hold/drain rule is HoldingGate's; this class maps it onto the segment's FIFO
// (sched::TemporalCore on entry `index`): asking is join + decide, giving back is leave +
// decide (a new holder's process is rung), a grant is the FIFO naming this entry holder,
// which the engine sees at its next acquire or the watcher delivers (pollGrant).
//
// Threads: FlowGate calls on the flow's engine thread; pollGrant/finishDrain/failOpen on the
// watcher with the registry lock held, which the destructor takes to unregister first.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "plugin/wan/holding_gate.h"
#include "plugin/wan/shm_arbiter_impl.h"

namespace atlas::plugin::wan {

class ShmGate final : public HoldingGate {
  public:
    ShmGate(std::shared_ptr<ShmArbiter::Impl> a, uint32_t index, std::function<void()> waker,
            std::shared_ptr<LinkRate> rate);
    ~ShmGate() override;

    uint32_t index() const { return index_; }
    // ---- Watcher, registry lock held.
    bool waiting();
    // The FIFO named this entry holder: if the flow waits, it takes the grant and is woken.
    void pollGrant(Nanos now_ns);

  private:
    bool arbitrated() override;
    bool ask(uint64_t queued_bytes, Nanos now_ns, Nanos* until_ns) override;
    bool stillHeld(Nanos now_ns) override;
    bool othersWaiting(Nanos now_ns) override;
    void giveBack(uint64_t bytes, Nanos now_ns) override;
    void wentIdle(Nanos now_ns) override { giveBack(0, now_ns); }  // leaves the wait list
    void drainArmed() override { a_->ringSelf(); }                 // the watcher times the drain

    const std::shared_ptr<ShmArbiter::Impl> a_;
    const uint32_t index_;
};

}  // namespace atlas::plugin::wan
