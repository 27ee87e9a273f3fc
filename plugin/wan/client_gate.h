// ClientGate: the FlowGate of one flow arbitrated by atlas-arbiter (ATLAS_ARBITER), made by
// ArbiterClient::makeGate. The hold/drain rule is HoldingGate's; this class maps it onto the
// protocol (arbiter/protocol.h): asking is a Request (once per session and turn), giving
// back is a Release of the current grant's sequence with its bytes, a grant is a Grant.
//
// Threads: FlowGate calls on the flow's engine thread; onGrant/sessionUp/failOpen/
// finishDrain on the client's I/O thread with the registry lock (Impl::reg_mu) held, which
// the destructor takes to unregister, so none runs after it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "plugin/wan/arbiter_session.h"
#include "plugin/wan/holding_gate.h"

namespace atlas::plugin::wan {

class ClientGate final : public HoldingGate {
  public:
    ClientGate(std::shared_ptr<ArbiterClient::Impl> c, uint32_t flow, std::string link,
               const arbiter::WireClass& cls, std::function<void()> waker,
               std::shared_ptr<LinkRate> rate);
    ~ClientGate() override;

    // ---- I/O thread, registry lock held.
    // A Grant{seq, slot_ns} for this flow arrived at now_ns.
    void onGrant(uint64_t seq, Nanos slot_ns, Nanos now_ns);
    // A session is up (epoch already bumped, Open already queued); fair: no gating.
    void sessionUp(bool fair);

    uint32_t flow() const { return flow_; }
    const std::string& link() const { return link_; }
    const arbiter::WireClass& cls() const { return cls_; }

  private:
    bool arbitrated() override;
    bool ask(uint64_t queued_bytes, Nanos now_ns, Nanos* until_ns) override;
    void giveBack(uint64_t bytes, Nanos now_ns) override;
    void drainArmed() override { c_->wake(); }
    // The arbiter keeps a pending request: its grant comes back unwanted and is released.
    void wentIdle(Nanos) override { requested_epoch_ = 0; }
    void resumed() override { c_->n_resumed.fetch_add(1, std::memory_order_relaxed); }
    // The arbiter does not say whether others wait for the link: a new message always takes
    // a turn of its own (the transfer the arbiter's policy orders), at the cost of a round
    // trip to the arbiter when the flow is alone.
    bool othersWaiting(Nanos) override { return true; }
    void requestLocked();

    const std::shared_ptr<ArbiterClient::Impl> c_;
    const uint32_t flow_;
    const std::string link_;
    const arbiter::WireClass cls_;
    // Guarded by mu_.
    uint64_t queued_ = 0;
    uint64_t seq_ = 0;              // the held grant's sequence (for its Release)
    uint64_t grant_epoch_ = 0;      // session the held grant came from
    uint64_t requested_epoch_ = 0;  // session of the pending Request (0: none)
};

}  // namespace atlas::plugin::wan
