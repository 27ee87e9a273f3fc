#include "plugin/wan/client_gate.h"

#include <algorithm>

#include "scheduler/temporal_state.h"

namespace atlas::plugin::wan {

using Mode = ArbiterClient::Mode;
using Hold = sched::GrantHold;

ClientGate::ClientGate(std::shared_ptr<ArbiterClient::Impl> c, uint32_t flow, std::string link,
                       const arbiter::WireClass& cls, std::function<void()> waker,
                       std::shared_ptr<LinkRate> rate)
    : HoldingGate(std::move(waker), std::move(rate)),
      c_(std::move(c)),
      flow_(flow),
      link_(std::move(link)),
      cls_(cls) {}

ClientGate::~ClientGate() {
    // After this block the I/O thread cannot reach the gate, so the waker is never called
    // again (FlowGate contract). The arbiter drops the flow's transfer (and grant) on Close.
    std::lock_guard<std::mutex> reg(c_->reg_mu);
    c_->gates.erase(flow_);
    if (c_->mode.load(std::memory_order_acquire) == Mode::kArbitrated) {
        c_->post(arbiter::Close{flow_});
    }
}

bool ClientGate::arbitrated() {
    // kConnecting: the first attempt is under way (bounded by the connect timeout): wait.
    const Mode m = c_->mode.load(std::memory_order_acquire);
    return m == Mode::kArbitrated || m == Mode::kConnecting;
}

bool ClientGate::ask(uint64_t queued_bytes, Nanos, Nanos*) {
    queued_ = queued_bytes;
    if (c_->mode.load(std::memory_order_acquire) == Mode::kArbitrated) {
        requestLocked();
    }
    return false;  // the grant comes as a message (onGrant)
}

void ClientGate::requestLocked() {
    const uint64_t e = c_->epoch.load(std::memory_order_acquire);
    if (requested_epoch_ == e) {
        return;  // already asked in this session: the arbiter keeps the transfer pending
    }
    requested_epoch_ = e;
    c_->post(arbiter::Request{flow_, std::max<uint64_t>(queued_, 1)});
    c_->n_requests.fetch_add(1, std::memory_order_relaxed);
}

void ClientGate::giveBack(uint64_t bytes, Nanos) {
    // A grant from an earlier session died with it: the arbiter cancelled the transfer.
    if (c_->mode.load(std::memory_order_acquire) == Mode::kArbitrated &&
        grant_epoch_ == c_->epoch.load(std::memory_order_acquire)) {
        c_->post(arbiter::Release{flow_, seq_, bytes});
        c_->n_releases.fetch_add(1, std::memory_order_relaxed);
    }
    requested_epoch_ = 0;
}

void ClientGate::onGrant(uint64_t seq, Nanos slot_ns, Nanos now_ns) {
    Hold::Granted g;
    {
        std::lock_guard<std::mutex> lock(mu_);
        // slot_ns 0: until released (the decoder rejects negative slots).
        g = grantLocked(now_ns, sched::slotLeaseEnd(now_ns, slot_ns));
        if (g == Hold::Granted::kUnwanted) {
            // The flow drained (or fell back to fail-open) meanwhile: give it back now, so the
            // link is not held by an idle flow until the slot ends.
            c_->post(arbiter::Release{flow_, seq, 0});
            c_->n_unwanted.fetch_add(1, std::memory_order_relaxed);
        } else {
            seq_ = seq;
            grant_epoch_ = c_->epoch.load(std::memory_order_acquire);
        }
    }
    if (g == Hold::Granted::kWake) {
        waker_();
    }
}

void ClientGate::sessionUp(bool fair) {
    bool wake = false;
    {
        std::lock_guard<std::mutex> lock(mu_);
        const Hold::Phase p = hold_.phase();
        if (fair) {
            if (p == Hold::Phase::kWaiting) {
                hold_.open();
                wake = true;
            }
        } else if (p == Hold::Phase::kWaiting) {
            requestLocked();
        } else if (p == Hold::Phase::kOpen) {
            // Unarbitrated since the outage: stop at the next piece; the engine releases and
            // asks again, now through the arbiter.
            hold_.reset();
        }
        publishLocked();
    }
    if (wake) {
        waker_();
    }
}

}  // namespace atlas::plugin::wan
