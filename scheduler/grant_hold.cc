#include "scheduler/grant_hold.h"

#include <algorithm>
#include <cstdint>

namespace atlas::sched {

Nanos drainEndNs(Nanos grant_start_ns, uint64_t bytes, uint64_t link_bps) {
    if (link_bps == 0) {
        return grant_start_ns;
    }
    const long double ns =
        static_cast<long double>(bytes) * 8.0L * 1e9L / static_cast<long double>(link_bps);
    const long double end = static_cast<long double>(grant_start_ns) + ns;
    return end >= static_cast<long double>(kNever) ? kNever : static_cast<Nanos>(end);
}

GrantHold::Acquire GrantHold::acquire(Nanos now_ns, uint64_t queued_bytes, bool others_waiting) {
    switch (phase_) {
        case Phase::kGranted:
            if (now_ns < until_ns_) {
                return Acquire::kHolds;
            }
            break;  // the slot is over: the arbiter preempts or renews; ask again
        case Phase::kDraining:
            if (now_ns < until_ns_ && end_ns_ < until_ns_ && !others_waiting) {
                phase_ = Phase::kGranted;
                allowance_ = grant_bytes_ + queued_bytes;  // the new bytes ride this grant
                return Acquire::kResumed;
            }
            if (now_ns < due_ns_) {
                // The slot is full of bytes still crossing, or others wait for their turn:
                // these bytes take a turn of their own once ours are through.
                after_drain_ = true;
                after_drain_bytes_ = queued_bytes;
                return Acquire::kAfterDrain;
            }
            phase_ = Phase::kWaiting;
            allowance_ = queued_bytes;
            return Acquire::kGiveBack;
        case Phase::kWaiting:
            return Acquire::kAsk;  // a repeated ask keeps its turn and what it asked for
        case Phase::kIdle:
        case Phase::kOpen:
            break;
    }
    phase_ = Phase::kWaiting;
    allowance_ = queued_bytes;
    return Acquire::kAsk;
}

GrantHold::Granted GrantHold::onGrant(Nanos now_ns, Nanos until_ns) {
    switch (phase_) {
        case Phase::kWaiting:
            phase_ = Phase::kGranted;
            grant_start_ns_ = now_ns;
            grant_bytes_ = 0;
            after_drain_ = false;
            until_ns_ = until_ns;
            return Granted::kWake;
        case Phase::kGranted:
        case Phase::kDraining:
            // A renewal: the bytes under the grant keep counting, a drain keeps its due. A
            // flow waiting for its full slot's drain has room again: it resumes (woken).
            until_ns_ = until_ns;
            if (phase_ == Phase::kDraining && after_drain_ && end_ns_ < until_ns_) {
                after_drain_ = false;
                phase_ = Phase::kGranted;
                allowance_ = grant_bytes_ + after_drain_bytes_;
                return Granted::kWake;
            }
            return Granted::kRenewed;
        case Phase::kIdle:
        case Phase::kOpen:
            break;
    }
    return Granted::kUnwanted;
}

GrantHold::Release GrantHold::release(uint64_t bytes, Nanos now_ns, uint64_t link_bps) {
    if (phase_ == Phase::kDraining) {
        phase_ = Phase::kIdle;  // not the engine's protocol; never keep a grant nobody times
        after_drain_ = false;   // nobody waits behind this drain any more
        return Release::kGiveBack;
    }
    if (phase_ != Phase::kGranted) {
        phase_ = Phase::kIdle;
        return Release::kNone;
    }
    grant_bytes_ += bytes;
    end_ns_ = drainEndNs(grant_start_ns_, grant_bytes_, link_bps);
    const Nanos due = std::min(end_ns_ == kNever ? kNever : end_ns_ - lead_ns_, until_ns_);
    if (due > now_ns) {
        phase_ = Phase::kDraining;
        due_ns_ = due;
        return Release::kHold;
    }
    phase_ = Phase::kIdle;
    return Release::kGiveBack;
}

bool GrantHold::finishDrain(Nanos now_ns) {
    if (phase_ != Phase::kDraining || now_ns < due_ns_) {
        return false;
    }
    phase_ = after_drain_ ? Phase::kWaiting : Phase::kIdle;
    if (after_drain_) {
        allowance_ = after_drain_bytes_;
    }
    after_drain_ = false;
    return true;
}

uint64_t GrantHold::paceBps(uint64_t link_bps) const {
    if (phase_ != Phase::kGranted || link_bps == 0) {
        return 0;
    }
    // In 128 bits: rates near UINT64_MAX must not wrap.
    const unsigned __int128 pace = static_cast<unsigned __int128>(link_bps) * kPaceGainPct / 100;
    return pace > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(pace);
}

uint64_t GrantHold::budgetBytes(uint64_t link_bps) const {
    if (phase_ == Phase::kOpen) {
        return UINT64_MAX;
    }
    if (phase_ != Phase::kGranted) {
        return 0;
    }
    if (link_bps == 0 || until_ns_ == kNever) {
        // No slot budget; the allowance still holds (a later message takes a turn of its own
        // once the flow is contended).
        return allowance_ > grant_bytes_ ? allowance_ - grant_bytes_ : 1;
    }
    const long double slot =
        static_cast<long double>(std::max<Nanos>(until_ns_ - grant_start_ns_, 0));
    const long double total = slot * static_cast<long double>(link_bps) / 8e9L;
    const uint64_t bytes = total >= static_cast<long double>(UINT64_MAX)
                               ? UINT64_MAX
                               : std::min(static_cast<uint64_t>(total), allowance_);
    // At least one byte: a grant that was resumed (its release found room in the slot at the
    // rate of then) always commits one more piece, so a rate that moved in between cannot
    // make release and resume alternate without progress; that piece fills the slot.
    return bytes > grant_bytes_ ? bytes - grant_bytes_ : 1;
}

void GrantHold::reset() {
    phase_ = Phase::kIdle;
    after_drain_ = false;
}

void GrantHold::open() {
    phase_ = Phase::kOpen;
    after_drain_ = false;
}

Nanos GrantHold::untilNs() const {
    switch (phase_) {
        case Phase::kGranted:
        case Phase::kDraining:
            return until_ns_;
        case Phase::kOpen:
            return kNever;
        case Phase::kIdle:
        case Phase::kWaiting:
            break;
    }
    return 0;
}

const char* grantPhaseName(GrantHold::Phase phase) {
    switch (phase) {
        case GrantHold::Phase::kIdle:
            return "idle";
        case GrantHold::Phase::kWaiting:
            return "waiting";
        case GrantHold::Phase::kGranted:
            return "granted";
        case GrantHold::Phase::kDraining:
            return "draining";
        case GrantHold::Phase::kOpen:
            return "open";
    }
    return "unknown";
}

}  // namespace atlas::sched
