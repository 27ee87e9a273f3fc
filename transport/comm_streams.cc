// CommCore's stream incarnations (loss, resend, rejoin, adoption of a redialled stream),
// its timers and outage bound, and the fault seam; docs/protocol.md "Recovery". Lifecycle and
// posting are in comm_core.cc.
#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "transport/comm_core.h"
#include "transport/engine.h"

namespace atlas::transport {

// ---------------------------------------------------------------- stream incarnations

void CommCore::readHeader(Stream& s) {
    s.phase = RecvPhase::kHeader;
    IoOp& op = s.recv_op;
    op.buf = s.header;
    op.want = prefixBytes();
    op.done = 0;
    submitRecv(s);
}

void CommCore::loseStream(Stream& s, const std::string& cause) {
    const int index = s.index;
    Lane& lane = lanes_[static_cast<size_t>(index)];
    // An end of stream that waited for a goodbye counts from when it was read: the outage
    // bound starts when the loss was first seen.
    const Nanos now = s.phase == RecvPhase::kEofWait ? s.eof_at : params_.clock->nowNs();
    if (peer_closed_ || closing_) {
        // After the peer's goodbye a stream ending is ordinary; nothing will come back.
        s.phase = RecvPhase::kStopped;
        return;
    }
    RecoveryCounters::add(counters_.stream_resets, 1);
    // A stream that dies again soon after rejoining keeps its backoff: no rejoin storm
    // against a peer that accepts and drops.
    if (lane.up_since >= 0 && now - lane.up_since >= 2 * kNsPerSec) {
        lane.failed_dials = 0;
    } else if (lane.up_since >= 0 && isSend()) {
        ++lane.failed_dials;
    }
    lane.up_since = -1;
    lane.dials = 0;
    lane.lost_at = now;
    lane.cause = cause;
    std::unique_ptr<Stream> dead = std::move(streams_[static_cast<size_t>(index)]);
    dead->dead = true;
    lane.bytes_before += dead->bytes;
    if (dead->phase == RecvPhase::kWaitOverlap) {
        --overlap_waits_;
        dead->phase = RecvPhase::kStopped;
    }
    size_t resent = 0;
    if (isSend()) {
        resent = ledger_->lose(index);
        if (dead->send_op.in_flight) {
            // Its send may still read frame memory: keep frames and copies until it ends.
            ledger_->hold();
            ++graveyard_sends_;
        }
    } else {
        final_confirms_.push_back({static_cast<uint32_t>(index), dead->epoch, dead->frames_in});
        if (confirm_stream_ == dead.get()) {
            confirm_stream_ = nullptr;
        }
        noteConfirmable(now);
    }
    stream_events_.push({index, StreamEvent::kLost, dead->epoch, static_cast<uint64_t>(resent)});
    ATLAS_LOG_WARN(params_.logger,
                   "%s comm %016" PRIx64 " with %s: stream %d (epoch %u) lost: %s; %s",
                   isSend() ? "send" : "recv", params_.info.session_id,
                   params_.info.peer.toString().c_str(), index, dead->epoch, cause.c_str(),
                   isSend() ? ("resending its " + std::to_string(resent) +
                               " unconfirmed frame(s) on the other streams, rejoining")
                                  .c_str()
                            : "waiting for the sender to rejoin it");
    if (dead->fd.valid()) {
        // Cancel rather than shut down: once its operations are done the socket is closed
        // with a reset, so the peer learns at once that this incarnation is gone.
        reactor_->cancelFd(dead->fd.get());
    }
    graveyard_.push_back(std::move(dead));
    // Not reaped here: the caller may be the stream's own completion handler (reaping would
    // free it under its feet). onTimer() reaps at the engine's next pass.
    reap_pending_ = true;
    if (liveCount() == 0 && all_lost_since_ < 0) {
        all_lost_since_ = now;
        RecoveryCounters::add(counters_.outages, 1);
        ATLAS_LOG_WARN(params_.logger,
                       "%s comm %016" PRIx64
                       " with %s: every stream lost; pending requests wait "
                       "up to %" PRId64 " ms (ATLAS_TIMEOUT_MS) for the path to return",
                       isSend() ? "send" : "recv", params_.info.session_id,
                       params_.info.peer.toString().c_str(), params_.timeout_ns / kNsPerMs);
    }
    if (isSend()) {
        scheduleDial(index, now);
        pump();
    } else {
        checkPeerGone();
    }
}

void CommCore::reapGraveyard() {
    reap_pending_ = false;
    for (auto it = graveyard_.begin(); it != graveyard_.end();) {
        Stream& s = **it;
        if (s.send_op.in_flight || s.recv_op.in_flight) {
            ++it;
            continue;
        }
        if (s.fd.valid()) {
            if (reactor_ != nullptr) {
                reactor_->unregisterFd(s.fd.get());
            }
            const linger lg{1, 0};  // close with a reset: the peer drops this incarnation now
            ::setsockopt(s.fd.get(), SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
            s.fd.reset();
        }
        it = graveyard_.erase(it);
    }
}

void CommCore::installStream(int index, uint32_t epoch, Fd fd) {
    Lane& lane = lanes_[static_cast<size_t>(index)];
    const Nanos now = params_.clock->nowNs();
    if (isSend() && index > 0) {
        Status st = setNotsentLowat(fd.get(), params_.notsent_lowat);
        if (!st.isOk()) {
            ATLAS_LOG_WARN(params_.logger, "rejoined stream %d: %s", index, st.toString().c_str());
        }
    }
    Status st = reactor_->registerFd(fd.get());
    if (!st.isOk()) {
        ATLAS_LOG_WARN(params_.logger, "rejoined stream %d: %s", index, st.toString().c_str());
        return;
    }
    const Nanos down_ms = lane.lost_at >= 0 ? (now - lane.lost_at) / kNsPerMs : 0;
    if (faults_ != nullptr) {
        faults_->clearStall(index);
    }
    streams_[static_cast<size_t>(index)] = makeStream(index, epoch, std::move(fd));
    lane.epoch = epoch;
    RecoveryCounters::add(counters_.rejoins, 1);
    stream_events_.push({index, StreamEvent::kRejoined, epoch, 0});
    ATLAS_LOG_WARN(
        params_.logger,
        "%s comm %016" PRIx64 " with %s: stream %d rejoined (epoch %u) %" PRId64
        " ms after it was lost (%s)%s",
        isSend() ? "send" : "recv", params_.info.session_id, params_.info.peer.toString().c_str(),
        index, epoch, static_cast<int64_t>(down_ms),
        lane.cause.empty() ? "replaced by the sender" : lane.cause.c_str(),
        lane.dials > 0 ? (", after " + std::to_string(lane.dials) + " failed dial(s)").c_str()
                       : "");
    lane.lost_at = -1;
    lane.up_since = now;
    lane.next_dial = -1;
    lane.cause.clear();
    all_lost_since_ = -1;
    readHeader(*streams_[static_cast<size_t>(index)]);
}

void CommCore::onArrival(StreamArrival a) {
    if (closing_ || failed()) {
        return;  // the fd closes here
    }
    if (a.index < 0 || a.index >= static_cast<int>(streams_.size())) {
        return;
    }
    Lane& lane = lanes_[static_cast<size_t>(a.index)];
    const Nanos now = params_.clock->nowNs();
    if (isSend()) {
        lane.dialing = false;
        if (!a.status.isOk()) {
            RecoveryCounters::add(counters_.rejoin_failures, 1);
            if (a.fatal) {
                fail({Code::kRemote,
                      "stream " + std::to_string(a.index) +
                          " cannot rejoin, the receiver is gone: " + a.status.message()});
                return;
            }
            ++lane.failed_dials;
            if (lane.dials++ == 0) {
                ATLAS_LOG_INFO(params_.logger,
                               "send comm %016" PRIx64
                               ": rejoin of stream %d failed (%s); "
                               "retrying with backoff",
                               params_.info.session_id, a.index, a.status.message().c_str());
            }
            lane.next_dial = now + RecoveryPolicy::retryDelay(lane.failed_dials);
            return;
        }
        if (streams_[static_cast<size_t>(a.index)] != nullptr || a.epoch != lane.epoch) {
            return;  // superseded
        }
        installStream(a.index, a.epoch, std::move(a.fd));
        pump();
        return;
    }
    // Receiver: the sender reopened stream `index`; an older incarnation still here is dead
    // to the sender (it resent that incarnation's unconfirmed frames) and goes.
    if (a.epoch <= lane.epoch && streams_[static_cast<size_t>(a.index)] != nullptr) {
        return;
    }
    if (Stream* old = live(a.index); old != nullptr) {
        loseStream(*old, "replaced by the sender's rejoin");
        if (failed()) {
            return;
        }
    }
    installStream(a.index, a.epoch, std::move(a.fd));
    unparkStreams();
}

// ---------------------------------------------------------------- timers and outages

Nanos CommCore::timerAt() const {
    if (closing_ || failed()) {
        return -1;
    }
    Nanos t = -1;
    auto consider = [&t](Nanos at) {
        if (at >= 0 && (t < 0 || at < t)) {
            t = at;
        }
    };
    if (reap_pending_) {
        consider(params_.clock->nowNs());
    }
    for (const auto& s : streams_) {
        if (s != nullptr && s->phase == RecvPhase::kEofWait) {
            consider(s->eof_at + kEofGraceNs);
        }
    }
    if (all_lost_since_ >= 0) {
        consider(policy_.giveUpAt(all_lost_since_));
    }
    if (isSend()) {
        for (const Lane& l : lanes_) {
            if (!l.dialing) {
                consider(l.next_dial);
            }
        }
        consider(stall_check_at_);
        consider(stop_probe_at_);
    } else if (confirm_pending_) {
        consider(params_.cadence.dueAt(true, confirm_bytes_, confirm_first_));
    }
    if (faults_ != nullptr) {
        const Nanos now = params_.clock->nowNs();
        for (const auto& s : streams_) {
            // Send side: a stalled stream's queue; receive side: a held read.
            const Nanos until = s != nullptr ? faults_->stalledUntil(s->index, now) : 0;
            if (until > 0) {
                consider(until);
            } else if (s != nullptr && s->held) {
                consider(now);  // the stall is over: onTimer() resumes the held read now
            }
        }
    }
    return t;
}

void CommCore::onTimer(Nanos now) {
    if (closing_ || failed()) {
        return;
    }
    if (reap_pending_) {
        reapGraveyard();
    }
    for (auto& s : streams_) {
        if (s == nullptr || s->phase != RecvPhase::kEofWait) {
            continue;
        }
        if (peer_closed_) {
            s->phase = RecvPhase::kStopped;
            checkPeerGone();
        } else if (now >= s->eof_at + kEofGraceNs) {
            loseStream(*s,
                       "end of stream without the peer's goodbye (peer gone, or the "
                       "connection was closed on the way)");
        }
        if (failed()) {
            return;
        }
    }
    checkOutage(now);
    if (failed()) {
        return;
    }
    if (faults_ != nullptr) {
        for (auto& s : streams_) {
            if (s != nullptr && s->held && faults_->stalledUntil(s->index, now) == 0) {
                s->held = false;
                reactor_->submit(&s->recv_op);
            }
        }
    }
    if (isSend()) {
        dialDue(now);
        checkStalls(now);
        if (!failed()) {
            pump();  // a stalled stream (fault seam) may move again
        }
        // After pump(): a grant that came meanwhile ends the probe instead of a stop.
        if (!failed() && stop_probe_at_ >= 0 && now >= stop_probe_at_) {
            probeGateStop(now);
        }
    } else {
        maybeConfirm(now);
        unparkStreams();
    }
}

void CommCore::checkOutage(Nanos now) {
    if (all_lost_since_ < 0 || now < policy_.giveUpAt(all_lost_since_)) {
        return;
    }
    std::string last;
    for (const Lane& l : lanes_) {
        if (!l.cause.empty()) {
            last = l.cause;
        }
    }
    fail({Code::kRemote, "no stream to " + params_.info.peer.toString() + " has been alive for " +
                             std::to_string((now - all_lost_since_) / kNsPerMs) +
                             " ms (ATLAS_TIMEOUT_MS): the peer is gone or the path is down (" +
                             (isSend() ? "rejoin kept failing; " : "the sender did not rejoin; ") +
                             "last loss: " + last + ")"});
}

// ---------------------------------------------------------------- faults (test seam)

void CommCore::applyFaults(Stream& s, uint64_t bytes) {
    if (faults_ == nullptr) {
        return;
    }
    const FaultInjector::Fired f = faults_->onBytes(s.index, bytes, params_.clock->nowNs());
    if (f.drop) {
        ATLAS_LOG_WARN(params_.logger, "fault injection: dropping every stream of comm %016" PRIx64,
                       params_.info.session_id);
        for (size_t i = 0; i < streams_.size(); ++i) {
            resetForFault(static_cast<int>(i));
        }
        return;
    }
    for (size_t i = 0; i < streams_.size(); ++i) {
        if (f.reset.test(i)) {
            resetForFault(static_cast<int>(i));
        }
    }
}

void CommCore::resetForFault(int index) {
    Stream* s = live(index);
    if (s == nullptr || failed()) {
        return;
    }
    loseStream(*s, "reset by fault injection (test)");
}

}  // namespace atlas::transport
