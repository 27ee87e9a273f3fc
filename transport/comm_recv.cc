// CommCore, receive side (and the read path of both sides): frames into posted buffers,
// duplicate bookkeeping, confirmations to the sender, the peer's goodbye.
#include <sys/socket.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "transport/comm_core.h"
#include "transport/engine.h"

namespace atlas::transport {
namespace {
constexpr size_t kScratchBytes = 64 * 1024;  // drain unit for duplicate payload
}  // namespace

void CommCore::submitRecv(Stream& s) {
    if (faults_ != nullptr && faults_->stalledUntil(s.index, params_.clock->nowNs()) > 0) {
        s.held = true;  // stalled by the test seam: resumed by onTimer()
        return;
    }
    reactor_->submit(&s.recv_op);
}

void CommCore::onRecvComplete(Stream& s, int64_t result) {
    if (closing_ || failed()) {
        return;
    }
    if (result <= 0) {
        if (!isSend()) {
            creditPartial(s);
            if (failed()) {
                return;
            }
        }
        if (peer_closed_) {
            s.phase = RecvPhase::kStopped;  // the end after the peer's goodbye
            checkPeerGone();
            return;
        }
        if (result == 0) {
            // A peer that closes in order says goodbye on each idle stream, but a stream that
            // was busy ends without one: give the goodbye a moment to arrive elsewhere before
            // calling this stream lost (onTimer()).
            s.phase = RecvPhase::kEofWait;
            s.eof_at = params_.clock->nowNs();
            return;
        }
        loseStream(s, Status::fromErrno("recv", static_cast<int>(-result)).message());
        return;
    }
    if (isSend()) {
        if (s.phase == RecvPhase::kHeader) {
            onSenderHeader(s);
        } else {
            onConfirmBody(s);
        }
        return;
    }
    if (s.phase == RecvPhase::kHeader) {
        onHeader(s);
    } else {
        onPayload(s, static_cast<uint64_t>(result));
    }
}

void CommCore::onHeader(Stream& s) {
    if (sealed()) {
        // The header is authenticated before anything in it is believed.
        Status open = s.opener->openPrefix({s.header, kMaxPrefixBytes});
        if (!open.isOk()) {
            failSeal(s, open);
            return;
        }
    }
    Status st = wire::decodeFrame(s.header, wire::kMaxFrameLength, &s.frame);
    if (st.isOk() && s.frame.type == wire::FrameType::kConfirm) {
        st = {Code::kRemote, "the sender sent a confirmation"};
    }
    if (!st.isOk()) {
        // A frame that does not parse is corruption or a foreign peer, not a lost stream.
        fail({st.code(), "stream " + std::to_string(s.index) + " from " +
                             params_.info.peer.toString() + ": " + st.message()});
        return;
    }
    if (sealed()) {
        st = s.opener->beginPayload(s.frame.length);
        if (st.isOk() && s.frame.length == 0 && s.frame.type != wire::FrameType::kData) {
            st = s.opener->finish();  // goodbye, abort: authenticated before acted on
        }
        if (!st.isOk()) {
            failSeal(s, st);
            return;
        }
        s.sealed_runs.clear();
    }
    if (s.frame.type == wire::FrameType::kAbort) {
        peer_closed_ = true;
        fail({Code::kRemote, "sender " + params_.info.peer.toString() +
                                 " failed the connection (its log has the cause)"});
        return;
    }
    if (s.frame.type == wire::FrameType::kGoodbye) {
        peer_closed_ = true;
        for (auto& t : streams_) {
            if (t != nullptr && t->phase == RecvPhase::kEofWait) {
                t->phase = RecvPhase::kStopped;  // ended in order after all
            }
        }
        ++s.frames_in;
        readHeader(s);  // the end of the stream follows
        checkPeerGone();
        return;
    }
    // Rebuild the 64-bit sequence number: a frame is never 2^31 messages ahead of the oldest
    // incomplete receive; one "behind" it is a resend of a message already complete.
    const uint32_t delta = s.frame.seq - static_cast<uint32_t>(oldest_);
    s.duplicate = delta >= (1u << 31);
    if (s.duplicate) {
        s.frame_seq = oldest_ - (uint32_t{0} - delta);
        attach(s);
        return;
    }
    s.frame_seq = oldest_ + delta;
    if (s.frame_seq >= engine_seq_) {
        s.phase = RecvPhase::kParked;  // its receive is not posted yet: stop reading
        checkPeerGone();
        return;
    }
    attach(s);
}

void CommCore::attach(Stream& s) {
    const uint64_t seq = s.frame_seq;
    const bool was_parked = s.phase == RecvPhase::kParked;
    if (was_parked) {
        ++unparks_;
    }
    s.pos = 0;
    s.run_to_buffer = false;
    if (!s.duplicate && state(seq).complete) {
        s.duplicate = true;  // a resend of a message delivered meanwhile
    }
    if (s.duplicate) {
        RecoveryCounters::add(counters_.duplicate_frames, 1);
        s.phase = RecvPhase::kPayload;
        nextRun(s);
        return;
    }
    Request& r = request(seq);
    RequestState& st = state(seq);
    if (!st.total_known) {
        if (s.frame.total > r.size_) {
            fail({Code::kInvalidUsage,
                  "message truncated: peer " + params_.info.peer.toString() + " sent " +
                      std::to_string(s.frame.total) + " bytes but the posted receive holds " +
                      std::to_string(r.size_) +
                      " (mismatch in collective sizes or NCCL_PROTO/NCCL_ALGO?)"});
            return;
        }
        st.total = s.frame.total;
        st.total_known = true;
        openTrain(seq, st.total, was_parked);
        if (observer_ != nullptr) {
            observer_->arrived(seq, st.total, params_.clock->nowNs());
        }
    } else if (s.frame.total != st.total) {
        fail({Code::kRemote, "inconsistent size for message " + std::to_string(seq)});
        return;
    }
    // Another stream in the middle of a frame over these bytes (the original of a resent
    // frame, or the resend of one whose original is still arriving): wait until that frame
    // has ended, then read only what it delivered. Whole frames, not just the read in flight:
    // sealed, a frame's bytes are not delivered until its tag checks out at its end. The
    // wait is bounded: the frame ends when its bytes arrive, its stream fails, or the
    // sender's rejoin of that stream replaces it.
    const uint64_t lo = s.frame.offset, hi = s.frame.offset + s.frame.length;
    for (const auto* list : {&streams_, &graveyard_}) {
        for (const auto& t : *list) {
            if (t == nullptr || t.get() == &s || t->phase != RecvPhase::kPayload || t->duplicate ||
                t->frame_seq != seq || (t->dead && !t->recv_op.in_flight)) {
                continue;
            }
            const uint64_t tlo = t->frame.offset, thi = tlo + t->frame.length;
            if (tlo < hi && lo < thi) {
                s.phase = RecvPhase::kWaitOverlap;
                ++overlap_waits_;
                return;
            }
        }
    }
    if (s.frame.length == 0) {  // a zero-byte message
        if (sealed()) {
            Status fin = s.opener->finish();
            if (!fin.isOk()) {
                failSeal(s, fin);
                return;
            }
        }
        completeRequest(seq, 0);
        frameDone(s);
        return;
    }
    s.phase = RecvPhase::kPayload;
    nextRun(s);
}

void CommCore::nextRun(Stream& s) {
    if (s.pos == s.frame.length) {
        frameDone(s);
        return;
    }
    const uint64_t off = s.frame.offset + s.pos;
    const uint64_t remaining = s.frame.length - s.pos;
    ReceivedRanges::Run run{true, remaining};
    if (!s.duplicate) {
        run = state(s.frame_seq).ranges.runAt(off, off + remaining);
    }
    IoOp& op = s.recv_op;
    op.done = 0;
    if (run.received) {
        // Already in the posted buffer: drained into scratch, never written twice.
        if (s.scratch == nullptr) {
            s.scratch.reset(new uint8_t[kScratchBytes]);
        }
        s.run_to_buffer = false;
        s.run_len = std::min<uint64_t>(run.length, kScratchBytes);
        op.buf = s.scratch.get();
    } else {
        s.run_to_buffer = true;
        s.run_len = run.length;
        op.buf = request(s.frame_seq).data_ + off;  // straight into the posted buffer
    }
    op.want = s.run_len;
    submitRecv(s);
}

void CommCore::onPayload(Stream& s, uint64_t n) {
    if (sealed()) {
        // Decrypted in place where it landed (the posted buffer, or scratch for a duplicate),
        // while the bytes are still in cache. Not delivered before the frame's tag checks out.
        Status st = s.opener->decrypt({s.recv_op.buf, n});
        if (!st.isOk()) {
            failSeal(s, st);
            return;
        }
    }
    if (s.run_to_buffer && sealed()) {
        s.sealed_runs.push_back({s.frame.offset + s.pos, n});
        s.run_to_buffer = false;
    } else if (s.run_to_buffer) {
        RequestState& st = state(s.frame_seq);
        const uint64_t off = s.frame.offset + s.pos;
        st.ranges.insert(off, off + n);
        s.bytes += n;
        RecoveryCounters::add(counters_.payload_bytes, n);
        s.run_to_buffer = false;
        if (st.ranges.covered() == st.total && !st.complete) {
            completeRequest(s.frame_seq, st.total);
        } else {
            cutTrain();
        }
    } else {
        RecoveryCounters::add(counters_.duplicate_bytes, n);
    }
    s.pos += n;
    applyFaults(s, n);
    if (s.dead || failed()) {
        return;
    }
    nextRun(s);
    if (overlap_waits_ > 0) {
        unparkStreams();  // a stream waiting for these bytes may go on
    }
}

void CommCore::creditPartial(Stream& s) {
    // A read cut off by a failure wrote recv_op.done bytes into the buffer: in clear they are
    // delivered (TCP delivered them in order), so the resend fills only the rest. Sealed, a
    // partial frame is never authenticated: nothing counts, the resend overwrites it.
    if (s.phase != RecvPhase::kPayload || !s.run_to_buffer || s.recv_op.done == 0 || sealed()) {
        s.run_to_buffer = false;
        return;
    }
    RequestState& st = state(s.frame_seq);
    const uint64_t off = s.frame.offset + s.pos;
    st.ranges.insert(off, off + s.recv_op.done);
    RecoveryCounters::add(counters_.payload_bytes, s.recv_op.done);
    s.run_to_buffer = false;
    if (st.ranges.covered() == st.total && !st.complete) {
        completeRequest(s.frame_seq, st.total);
    }
}

void CommCore::frameDone(Stream& s) {
    if (sealed() && s.opener->midFrame()) {
        Status st = s.opener->finish();
        if (!st.isOk()) {
            failSeal(s, st);
            return;
        }
        if (!s.sealed_runs.empty()) {
            // Authenticated: now the bytes count as delivered.
            RequestState& req_state = state(s.frame_seq);
            for (const auto& [off, len] : s.sealed_runs) {
                req_state.ranges.insert(off, off + len);
                RecoveryCounters::add(counters_.payload_bytes, len);
                s.bytes += len;
            }
            s.sealed_runs.clear();
            if (req_state.ranges.covered() == req_state.total && !req_state.complete) {
                completeRequest(s.frame_seq, req_state.total);
            } else {
                cutTrain();
            }
        }
    }
    ++s.frames_in;
    s.duplicate = false;
    confirm_bytes_ += s.frame.length;
    const Nanos now = params_.clock->nowNs();
    noteConfirmable(now);
    readHeader(s);
    maybeConfirm(now);
}

void CommCore::noteConfirmable(Nanos now) {
    if (!confirm_pending_) {
        confirm_pending_ = true;
        confirm_first_ = now;
    }
}

void CommCore::maybeConfirm(Nanos now) {
    if (!confirm_pending_ || isSend()) {
        return;
    }
    if (peer_closed_) {
        confirm_pending_ = false;  // nothing to free at a closed sender
        return;
    }
    if (now < params_.cadence.dueAt(true, confirm_bytes_, confirm_first_)) {
        return;
    }
    // One confirmation in flight at a time (its buffer is reused); prefer the control stream.
    for (const auto* list : {&streams_, &graveyard_}) {
        for (const auto& t : *list) {
            if (t != nullptr && t->op_control && t->send_op.in_flight) {
                return;
            }
        }
    }
    Stream* via = nullptr;
    for (auto& t : streams_) {
        if (t != nullptr && !t->send_op.in_flight) {
            via = t.get();
            break;
        }
    }
    if (via == nullptr) {
        return;  // retried at the next event or timer
    }
    wire::ConfirmBody body;
    body.posted = engine_seq_;
    body.train_bytes = train_bytes_;
    body.train_ns = static_cast<uint64_t>(train_ns_);
    confirm_sent_.clear();
    for (const wire::ConfirmEntry& e : final_confirms_) {
        if (body.count < wire::kMaxConfirmEntries) {
            body.entries[body.count++] = e;
        }
    }
    final_confirms_.clear();
    for (auto& t : streams_) {
        if (t != nullptr && t->frames_in > t->frames_confirmed &&
            body.count < wire::kMaxConfirmEntries) {
            wire::ConfirmEntry e{static_cast<uint32_t>(t->index), t->epoch, t->frames_in};
            body.entries[body.count++] = e;
            confirm_sent_.push_back(e);
        }
    }
    confirm_pending_ = false;
    confirm_bytes_ = 0;
    if (body.count == 0 && engine_seq_ == confirmed_posted_ && train_bytes_ == 0) {
        return;
    }
    train_bytes_ = 0;
    train_ns_ = 0;
    confirmed_posted_ = engine_seq_;
    const size_t pre = prefixBytes();
    const size_t len = wire::encodeConfirm(body, confirm_buf_ + pre);
    wire::encodeFrame({wire::FrameType::kConfirm, 0, static_cast<uint32_t>(len), 0, 0},
                      confirm_buf_);
    if (sealed()) {
        uint8_t header[wire::kFrameHeaderBytes];
        std::memcpy(header, confirm_buf_, sizeof(header));
        Status st =
            via->sealer->sealInPlace(header, {confirm_buf_ + pre, len}, {confirm_buf_, pre});
        if (!st.isOk()) {
            fail({st.code(), "sealing a confirmation: " + st.message()});
            return;
        }
    }
    IoOp& op = via->send_op;
    op.iovcnt = 1;
    op.iov_first = 0;
    op.iov[0] = {confirm_buf_, pre + len};
    op.done = 0;
    op.total = pre + len;
    via->op_control = true;
    confirm_stream_ = via;
    RecoveryCounters::add(counters_.confirms, 1);
    reactor_->submit(&op);
}

void CommCore::checkPeerGone() {
    // After the peer's goodbye, pending receives can only be served by streams still
    // reading, or by a parked stream whose frame belongs to a receive posted since it parked
    // (unparkStreams() attaches it next: the sender finished and closed before this receive
    // was posted, which is ordinary). Ended streams hold nothing. If none is left, the
    // receives can never complete: fail instead of hanging. Without a goodbye, a stream that
    // ends is lost, not closed: the sender rejoins it, and only an outage past
    // ATLAS_TIMEOUT_MS fails the comm (checkOutage()).
    if (!peer_closed_ || pendingReceives() == 0) {
        return;
    }
    for (const auto& t : streams_) {
        if (t == nullptr) {
            continue;
        }
        if (t->phase == RecvPhase::kHeader || t->phase == RecvPhase::kPayload ||
            t->phase == RecvPhase::kWaitOverlap ||
            (t->phase == RecvPhase::kParked && t->frame_seq < engine_seq_)) {
            return;
        }
    }
    fail({Code::kRemote, "peer " + params_.info.peer.toString() + " closed the connection with " +
                             std::to_string(pendingReceives()) + " receive(s) pending"});
}

void CommCore::unparkStreams() {
    for (auto& t : streams_) {
        if (t == nullptr) {
            continue;
        }
        if ((t->phase == RecvPhase::kParked && t->frame_seq < engine_seq_) ||
            t->phase == RecvPhase::kWaitOverlap) {
            if (t->phase == RecvPhase::kWaitOverlap) {
                --overlap_waits_;
            }
            attach(*t);
            if (failed()) {
                return;
            }
        }
    }
}

}  // namespace atlas::transport
