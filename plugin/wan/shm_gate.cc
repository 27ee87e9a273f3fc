#include "plugin/wan/shm_gate.h"

namespace atlas::plugin::wan {

ShmGate::ShmGate(std::shared_ptr<ShmArbiter::Impl> a, uint32_t index, std::function<void()> waker,
                 std::shared_ptr<LinkRate> rate)
    : HoldingGate(std::move(waker), std::move(rate)), a_(std::move(a)), index_(index) {}

ShmGate::~ShmGate() {
    {
        // After this the watcher cannot reach us: no waker call after the destructor.
        std::lock_guard<std::mutex> reg(a_->reg_mu);
        a_->gates.erase(this);
    }
    if (a_->broken.load(std::memory_order_acquire) || !a_->lock()) {
        return;
    }
    Doorbells ring;
    if (!a_->stopped) {
        // A held grant goes with the flow: the next waiter gets the link.
        a_->fifo().close(index_);
        a_->decideLocked(a_->cfg.clock->nowNs(), &ring);
    }
    a_->unlock();
    a_->ring(ring);
}

bool ShmGate::arbitrated() {
    return !a_->broken.load(std::memory_order_acquire);
}

bool ShmGate::ask(uint64_t, Nanos now_ns, Nanos* until_ns) {
    if (!a_->lock()) {
        hold_.open();  // the mutex is unusable: send unarbitrated
        return false;
    }
    if (a_->stopped) {
        a_->unlock();
        hold_.open();
        return false;
    }
    sched::TemporalCore fifo = a_->fifo();
    if (fifo.entry(index_).state == sched::kEntryUnused) {
        // The table lost this flow (a repair closed it, or another process took ours for
        // dead): it cannot take a turn any more, so it sends unarbitrated.
        a_->unlock();
        hold_.open();
        return false;
    }
    Doorbells ring;
    a_->decideLocked(now_ns, &ring);  // an expired lease first: the holder may be us
    fifo.join(index_, now_ns);        // no-op while waiting: a repeated ask keeps its turn
    a_->decideLocked(now_ns, &ring);  // FIFO: picks us unless others wait
    const bool got = fifo.holder() == index_;
    if (got) {
        *until_ns = fifo.leaseEndNs();
    }
    a_->unlock();
    a_->ring(ring);
    return got;
}

bool ShmGate::stillHeld(Nanos) {
    // The watcher may have revoked the grant from this process (silent past the lease).
    if (!a_->lock()) {
        return true;  // broken: the next acquire sends unarbitrated anyway
    }
    const bool held = !a_->stopped && a_->fifo().holder() == index_;
    a_->unlock();
    return held;
}

bool ShmGate::othersWaiting(Nanos) {
    if (!a_->lock()) {
        return true;  // broken: the next ask sends unarbitrated anyway
    }
    // This flow holds the link while it drains, so every waiting entry is another flow's.
    const bool others = !a_->stopped && a_->fifo().waiting() > 0;
    a_->unlock();
    return others;
}

void ShmGate::giveBack(uint64_t bytes, Nanos now_ns) {
    if (a_->broken.load(std::memory_order_acquire) || !a_->lock()) {
        return;
    }
    Doorbells ring;
    if (!a_->stopped) {
        a_->seg->flows[index_].bytes += bytes;
        a_->fifo().leave(index_);  // no-op if preempted or revoked meanwhile
        a_->decideLocked(now_ns, &ring);
    }
    a_->unlock();
    a_->ring(ring);
}

bool ShmGate::waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return hold_.waiting();
}

void ShmGate::pollGrant(Nanos now_ns) {
    sched::GrantHold::Granted g = sched::GrantHold::Granted::kUnwanted;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (!hold_.waiting() || !a_->lock()) {
            return;
        }
        const bool mine = !a_->stopped && a_->fifo().holder() == index_;
        const Nanos until = a_->fifo().leaseEndNs();
        a_->unlock();
        if (!mine) {
            return;
        }
        g = grantLocked(now_ns, until);
    }
    if (g == sched::GrantHold::Granted::kWake) {
        waker_();
    }
}

}  // namespace atlas::plugin::wan
