// GrantHold: one flow's side of a temporal grant, and the rule that holds a grant until the
// bytes sent under it have crossed the link (the hold/drain rule, docs/arbitration.md).
//
// Why the rule exists: a flow's queue "drains" when every piece is in the kernel, not on the
// wire. Each data stream accepts TCP_NOTSENT_LOWAT of unsent bytes, so a transfer of a few
// MiB leaves user space in milliseconds; giving the link away then lets the next flow's bytes
// queue behind ours and TCP shares the link again. So a released grant is kept until
//     drain end = grant start + bytes sent under the grant / link rate   (at most the slot end)
// and a new message of the same flow before then resumes the grant without asking (no round
// trip, no new FIFO turn) while no other flow waits for the link. Without a rate (0: unknown)
// the grant goes back at once.
//
// A turn per transfer: a grant carries the bytes the flow had queued when it asked for it
// (its allowance), not the messages that came after. Those ride the grant only when nobody
// else waits; otherwise they take a turn of their own once the flow's bytes are through
// (kAfterDrain). Why: four pipelines whose forward activations F0 were queued at 20 ms and
// F1 at 40 ms must cross in the order F0 F0 F0 F0 F1 F1 F1 F1 (the order the simulator's FIFO
// of transfers assumes, and the one that starts every next stage earliest); when a grant
// carried the flow's whole queue they crossed F0 F1 F0 F1 ..., the fourth pipeline's next
// stage started 88 ms later than in the simulator, and every iteration took 70 ms longer
// (640 ms measured against 570.7 simulated, traced on the default bench-sharing workload).
//
// The grant's byte budget: a slot is link time, so at the link's rate it carries
//     budget = min((slot end - grant start) x rate / 8, allowance)   bytes
// (the allowance alone without a rate or a slot end)
// and the engine commits no more than that under one grant (budgetBytes()). Without it a
// saturated flow fills its streams' kernel buffers (22 streams x 512 KiB unsent, plus the
// pieces queued for them) right up to its slot end; that tail then crosses the link during
// the next holder's turn, the two transfers share the link and both read a share of the rate
// as their trains (measured on link-bound GPipe: iterations 727-770 ms against 528-552 ms
// with a quarter of the tail). A flow that spent its budget waits for its own drain: the
// grant goes back at dueNs() and the link is asked for again (kAfterDrain), so its next
// bytes start when its last ones are through, not on top of them.
//
// The grant's pace: while granted, the flow's streams together send at most
//     pace = rate x kPaceGainPct / 100   (bits/s; none unless granted with a rate)
// (paceBps(); the transport splits it over the streams in proportion to their unsent bytes,
// and applies it only to streams that run atlas_rate, the congestion control that sends at
// the rate it is told: docs/tcp-cc.md). Why, measured (docs/arbitration.md "The told-rate
// sender"):
//  - A cap: a grant is exclusive, so nothing is gained by sending faster than the link, and
//    what is sent above it queues at the bottleneck.
//  - Twice the rate: a transfer sent at g times the link leaves (g - 1) / g of its bytes
//    queued when its last byte leaves the sender, and that queue keeps the link busy across
//    the hand-off to the next holder. At 1.25x the default workload's backward link carried
//    only 0.50-0.62 of its rate while flows were queued, with the estimate right.
//  - And a train reads at most the pace, so a low first estimate (the first trains cross
//    before anything is told) climbs by the gain at each level shift: a gain that fell to
//    1.1 for large grants left it low and iterations took 1.7-3.1 s.
//  - The price: a grant leaves half its bytes queued, which overflows a buffer smaller than
//    that (4 MiB transfers on 0.5 BDP, chain3's multi-transfer grants on its slow link).
// The rate is an argument of release(), not configuration: it moves (the plugin measures it,
// plugin/wan/link_rate.h). The hand-off lead is configuration (the constructor's).
//
// Used by every gate of the plugin (plugin/wan/holding_gate.h: the DC-wide arbiter's and the
// node-local one), so both run this one state machine with one encoding:
//
//   kIdle --acquire--> kWaiting --onGrant--> kGranted --release(rate)--> kDraining
//     ^                   ^                     |  ^                         |  |
//     +------------- release (no rate) ---------+  +--acquire within slot, --+  |
//                         |                             nobody else waiting     |
//     +-------------- finishDrain at dueNs() ---------------------------------+  |
//                         +-- finishDrain, after an acquire of a full slot -----+
//                                              or of a contended flow
//   any --open()--> kOpen (unarbitrated: fail-open, fair, stopped); reset() -> kIdle
//
// Pure: no clock, no lock, no I/O. One owner at a time (the gate's mutex); times are the
// caller's monotonic ns; until_ns kNever = no slot end.
#pragma once

#include <cstdint>

#include "scheduler/types.h"

namespace atlas::sched {

// The plugin's default hand-off lead (ATLAS_HANDOFF_LEAD_US; GrantHold's own default is 0).
inline constexpr Nanos kDefaultHandoffLeadNs = 2 * kNsPerMs;

// When `bytes` sent from grant_start_ns have crossed a link of link_bps bits per second
// (saturating); grant_start_ns when link_bps is 0 (unknown rate: no hold).
Nanos drainEndNs(Nanos grant_start_ns, uint64_t bytes, uint64_t link_bps);

class GrantHold {
  public:
    // `lead_ns`: the hand-off lead. A drained grant goes back this long before its bytes are
    // through (dueNs() = drain end - lead, at most the slot end), so that the next holder's
    // first bytes, after the hand-off's own latency (a futex or an arbiter round trip, a
    // wake-up, the engine's first write), reach the bottleneck as ours leave it. The two
    // transfers overlap by at most the lead, queued one behind the other in the bottleneck's
    // buffer: a few milliseconds, far below any buffer worth the name.
    explicit GrantHold(Nanos lead_ns = 0) : lead_ns_(lead_ns) {}
    enum class Phase : uint8_t {
        kIdle,      // no grant, nothing asked
        kWaiting,   // asked for the link
        kGranted,   // holds the link; the engine sends
        kDraining,  // the engine's queue drained; the link is kept until dueNs()
        kOpen,      // unarbitrated: sends freely, holds() always true
    };

    enum class Acquire : uint8_t {
        kHolds,       // granted (the grant came before the engine asked again): send
        kResumed,     // a draining grant resumed within its slot: send, no new turn
        kAsk,         // now waiting: ask for the link
        kGiveBack,    // a drain outlived its slot: give that grant back, then ask (waiting)
        kAfterDrain,  // the draining grant's slot is full (its budget spent): wait; at dueNs()
                      // finishDrain() gives it back and leaves the flow waiting (ask then)
    };
    // The engine has `queued_bytes` queued (what a new turn is asked for). `others_waiting`:
    // another flow waits for the link (read only when a draining grant could resume: a
    // contended flow's new bytes take a turn of their own).
    Acquire acquire(Nanos now_ns, uint64_t queued_bytes, bool others_waiting);

    enum class Granted : uint8_t {
        kWake,      // the waited-for grant: the engine must be woken (byte count restarts)
        kRenewed,   // a new slot for a grant already held or draining (the count goes on)
        kUnwanted,  // nothing was asked (idle, open): give it back at once
    };
    // The link was granted until until_ns.
    Granted onGrant(Nanos now_ns, Nanos until_ns);

    enum class Release : uint8_t {
        kNone,      // no grant was held (open or idle): nothing to give back
        kHold,      // keep the grant until dueNs(); the owner's timer calls finishDrain()
        kGiveBack,  // give the grant back now (no rate, or its bytes are through)
    };
    // The engine's queue drained or its slot ended; `bytes` were sent since its acquire.
    Release release(uint64_t bytes, Nanos now_ns, uint64_t link_bps);

    // Timer: true when the drain's time came: give the grant back. The phase is then kIdle,
    // or kWaiting when an acquire came during a full slot's drain (ask for the link).
    bool finishDrain(Nanos now_ns);
    // Bytes the engine may still commit under the current grant at link_bps, before its
    // next release: min((slot end - grant start) x rate, the allowance), less what earlier
    // releases of the grant reported, and at least 1. The allowance alone without a rate or
    // a slot end; UINT64_MAX when open; 0 unless granted.
    uint64_t budgetBytes(uint64_t link_bps) const;
    // How fast the flow may send while granted, at link_bps (see the header): link_bps x
    // kPaceGainPct / 100; 0 (no pace) unless granted with a rate.
    static constexpr uint64_t kPaceGainPct = 200;
    uint64_t paceBps(uint64_t link_bps) const;
    // The grant was lost (revoked, its session ended): kIdle, nothing to give back.
    void reset();
    void open();

    Phase phase() const { return phase_; }
    bool waiting() const { return phase_ == Phase::kWaiting; }
    // What holds() compares with: the slot end while granted or draining, kNever when open,
    // 0 otherwise.
    Nanos untilNs() const;
    // When a drain ends; kNever unless draining.
    Nanos dueNs() const { return phase_ == Phase::kDraining ? due_ns_ : kNever; }
    // Bytes sent under the current (or last) grant: what a give-back reports.
    uint64_t grantBytes() const { return grant_bytes_; }
    // While waiting: the bytes the turn is asked for (what was queued at the ask).
    uint64_t askedBytes() const { return allowance_; }

  private:
    Nanos lead_ns_ = 0;  // the hand-off lead
    Phase phase_ = Phase::kIdle;
    Nanos until_ns_ = 0;
    Nanos grant_start_ns_ = 0;
    uint64_t grant_bytes_ = 0;
    Nanos due_ns_ = 0;
    Nanos end_ns_ = 0;                // the last release's drain end, before the slot's clamp
    bool after_drain_ = false;        // kDraining: an acquire waits for this drain to end
    uint64_t after_drain_bytes_ = 0;  // ... with this many bytes queued (its next allowance)
    // Bytes (counted from the grant's start) the grant may carry: what was queued when the
    // turn was asked for, plus what resumed it.
    uint64_t allowance_ = UINT64_MAX;
};

const char* grantPhaseName(GrantHold::Phase phase);

}  // namespace atlas::sched
