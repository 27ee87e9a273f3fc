#include "plugin/wan/holding_gate.h"

namespace atlas::plugin::wan {

using Hold = sched::GrantHold;

HoldingGate::HoldingGate(std::function<void()> waker, std::shared_ptr<LinkRate> rate)
    : hold_(rate ? rate->handoffLeadNs() : 0), waker_(std::move(waker)), rate_(std::move(rate)) {}

void HoldingGate::publishLocked() {
    // The rate as of its last sample: neither LinkRate reads `now` (an estimate changes only
    // when a train arrives), so the publishers without a clock at hand (failOpen, a client's
    // reconnect) publish the same budget as the rest.
    const uint64_t bps = rate_ ? rate_->bitsPerSec(0) : 0;
    budget_.store(hold_.budgetBytes(bps), std::memory_order_release);
    pace_.store(hold_.paceBps(bps), std::memory_order_release);
    until_.store(hold_.untilNs(), std::memory_order_release);
}

bool HoldingGate::acquire(uint64_t queued_bytes, Nanos now_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!arbitrated()) {
        hold_.open();
        publishLocked();
        return true;
    }
    // Whether others wait matters only where a draining grant could resume (a segment lock
    // or nothing: not on the data path).
    const bool contended = hold_.phase() == Hold::Phase::kDraining && othersWaiting(now_ns);
    const Hold::Acquire a = hold_.acquire(now_ns, queued_bytes, contended);
    if (a == Hold::Acquire::kHolds || a == Hold::Acquire::kResumed) {
        if (stillHeld(now_ns)) {
            if (a == Hold::Acquire::kResumed) {
                resumed();
            }
            publishLocked();
            return true;
        }
        hold_.reset();  // revoked meanwhile: nothing to give back, ask like a new request
        hold_.acquire(now_ns, queued_bytes, false);
    } else if (a == Hold::Acquire::kGiveBack) {
        giveBack(hold_.grantBytes(), now_ns);  // the drain outlived its slot
    } else if (a == Hold::Acquire::kAfterDrain) {
        publishLocked();  // budget 0: the engine waits; finishDrain asks and wakes it
        return false;
    }
    Nanos until = 0;
    if (ask(queued_bytes, now_ns, &until)) {
        hold_.onGrant(now_ns, until);
    }
    publishLocked();
    return hold_.phase() == Hold::Phase::kGranted;
}

bool HoldingGate::holds(Nanos now_ns) const {
    // Pairs with publishLocked(): a grant's phase is visible together with its slot end.
    return now_ns < until_.load(std::memory_order_acquire);
}

void HoldingGate::release(uint64_t bytes, Nanos now_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t bps = rate_ ? rate_->bitsPerSec(now_ns) : 0;
    switch (hold_.release(bytes, now_ns, bps)) {
        case Hold::Release::kNone:
            wentIdle(now_ns);
            break;
        case Hold::Release::kHold:
            drainArmed();  // the timer thread gives the grant back at hold_.dueNs()
            break;
        case Hold::Release::kGiveBack:
            giveBack(hold_.grantBytes(), now_ns);
            break;
    }
    publishLocked();
}

Nanos HoldingGate::finishDrain(Nanos now_ns) {
    bool wake = false;
    Nanos next = sched::kNever;
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (hold_.finishDrain(now_ns)) {
            giveBack(hold_.grantBytes(), now_ns);
            if (hold_.waiting()) {
                // The flow spent its slot and waited for its own bytes: its turn again.
                Nanos until = 0;
                if (ask(hold_.askedBytes(), now_ns, &until)) {
                    wake = hold_.onGrant(now_ns, until) == Hold::Granted::kWake;
                } else {
                    wake = hold_.phase() == Hold::Phase::kOpen;  // ask() failed open
                }
            }
            publishLocked();
        }
        next = hold_.dueNs();
    }
    if (wake) {
        waker_();
    }
    return next;
}

void HoldingGate::failOpen() {
    bool wake = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        const Hold::Phase p = hold_.phase();
        if (p == Hold::Phase::kWaiting || p == Hold::Phase::kGranted ||
            p == Hold::Phase::kDraining) {
            wake = p == Hold::Phase::kWaiting;
            hold_.open();
            publishLocked();
        }
    }
    if (wake) {
        waker_();
    }
}

Hold::Granted HoldingGate::grantLocked(Nanos now_ns, Nanos until_ns) {
    const Hold::Granted g = hold_.onGrant(now_ns, until_ns);
    publishLocked();
    return g;
}

}  // namespace atlas::plugin::wan
