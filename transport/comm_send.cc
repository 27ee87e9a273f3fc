// CommCore, send side: striping, the ledger of unconfirmed frames, resends, confirmations
// from the receiver, stalls and rejoin dials.
#include <sys/socket.h>

#include <algorithm>
#include <cinttypes>
#include <limits>

#include "transport/comm_core.h"
#include "transport/engine.h"
#include "transport/pace.h"
#include "transport/tcp_info.h"

namespace atlas::transport {
namespace {
// kEven ignores loads; a stream's unsent queue still holds at most this many pieces.
constexpr size_t kEvenQueueFrames = 64;
}  // namespace

void CommCore::enqueueInline(uint64_t seq) {
    Request& r = request(seq);
    const SendLedger::Id id = ledger_->add(static_cast<uint32_t>(seq % kMaxRequests), seq, r.size_,
                                           0, static_cast<uint32_t>(r.size_), r.data_);
    // On the control stream when it is up; otherwise it waits with the resends and goes on
    // the first stream that can take it (placeUnplaced()).
    if (live(0) != nullptr && safeFor(0, seq) && !ledger_->hasResend()) {
        ledger_->assign(id, 0);
    } else {
        ledger_->unplace(id);
    }
}

bool CommCore::safeFor(int index, uint64_t seq) const {
    const int64_t top = ledger_->topSeq(index);
    return top < 0 || seq >= static_cast<uint64_t>(top) ||
           static_cast<uint64_t>(top) < peer_posted_;
}

bool CommCore::admitted() {
    if (gate_ == nullptr) {
        return true;
    }
    const Nanos now = params_.clock->nowNs();
    if (granted_ && gate_->holds(now) && granted_bytes_ < gate_->budgetBytes()) {
        return true;  // the data-path case: two atomic loads and a vDSO clock read
    }
    if (granted_) {
        // Slot over, or its budget committed, with pieces still waiting: hand the link back
        // (a spent budget keeps it until those bytes crossed) and queue up again.
        gate_->release(granted_bytes_, now);
        granted_ = false;
    }
    uint64_t waiting = 0;
    for (uint32_t i = 0; i < assign_size_; ++i) {
        waiting += state(assign_q_[(assign_head_ + i) % kMaxRequests]).unassigned;
    }
    granted_ = gate_->acquire(waiting, now);
    granted_bytes_ = 0;
    refused_mid_message_ = false;
    if (granted_) {
        gate_stalls_.end(now);
        stop_probe_at_ = -1;
    } else if (assign_size_ > 0) {
        // Stopped with a message partly striped: once the pieces already striped are
        // through the kernel (pump(), probeGateStop()), the link starves and the receiver's
        // train spans the wait.
        const uint64_t head = assign_q_[assign_head_];
        refused_mid_message_ = state(head).unassigned < request(head).size_;
    }
    ++(granted_ ? engine_counters_.gate_grants : engine_counters_.gate_waits);
    return granted_;
}

bool CommCore::placeUnplaced() {
    // Resends (and frames that found no live stream) go first, oldest message first, each on
    // the least-loaded live stream that is safe for it: one whose unconfirmed frames are all
    // of messages the receiver has posted (so it never parks in front of this frame, which
    // could wait forever for a receive that waits for this frame), or an empty one (a fresh
    // rejoin).
    while (ledger_->hasResend()) {
        const SendLedger::Id id = ledger_->resendFront();
        Stream* best = nullptr;
        const uint64_t seq = ledger_->frame(id).seq;
        for (auto& s : streams_) {
            if (s == nullptr || !safeFor(s->index, seq) ||
                ledger_->queuedBytes(s->index) >= 2 * params_.chunk_bytes) {
                continue;
            }
            if (best == nullptr ||
                ledger_->queuedBytes(s->index) < ledger_->queuedBytes(best->index)) {
                best = s.get();
            }
        }
        if (best == nullptr) {
            return false;
        }
        SendLedger::Frame& f = ledger_->frame(id);
        ledger_->popResend();
        ledger_->assign(id, best->index);
        if (f.resent) {
            RecoveryCounters::add(counters_.resent_frames, 1);
            RecoveryCounters::add(counters_.resent_bytes, f.length);
        }
    }
    return true;
}

void CommCore::pump() {
    if (closing_ || failed()) {
        return;
    }
    (void)placeUnplaced();
    const size_t ndata = streams_.size() - 1;
    while (assign_size_ > 0 && admitted()) {
        const uint64_t seq = assign_q_[assign_head_];
        Request& r = request(seq);
        RequestState& st = state(seq);
        for (size_t i = 0; i < ndata; ++i) {
            const int index = static_cast<int>(i) + 1;
            const bool usable = live(index) != nullptr && safeFor(index, seq);
            loads_[i] = usable ? ledger_->queuedBytes(index) : std::numeric_limits<uint64_t>::max();
        }
        std::optional<StripeAssignment> a;
        for (size_t tries = 0; tries < ndata; ++tries) {
            a = striper_->next(r.size_, st.unassigned, loads_);
            // kEven ignores loads: skip lost or unsafe streams (the cursor moves on).
            if (!a ||
                loads_[static_cast<size_t>(a->stream)] != std::numeric_limits<uint64_t>::max()) {
                break;
            }
            a.reset();
        }
        if (!a) {
            break;  // every stream is full or lost; resumes when a send completes or a rejoin
        }
        const int index = a->stream + 1;
        if (params_.stripe == StripeMode::kEven && ledger_->unsent(index) >= kEvenQueueFrames) {
            break;  // kEven picked a full stream: wait for it
        }
        const uint64_t offset = r.size_ - st.unassigned;
        const SendLedger::Id id =
            ledger_->add(static_cast<uint32_t>(seq % kMaxRequests), seq, r.size_, offset,
                         static_cast<uint32_t>(a->length), r.data_ + offset);
        ledger_->assign(id, index);
        granted_bytes_ += a->length;
        st.unassigned -= a->length;
        if (st.unassigned == 0) {
            assign_head_ = (assign_head_ + 1) % kMaxRequests;
            --assign_size_;
        }
    }
    bool written = true;  // every striped piece is in the kernel
    bool paced = false;
    const Nanos now = params_.clock->nowNs();
    for (auto& s : streams_) {
        if (s == nullptr) {
            continue;
        }
        if (!s->send_op.in_flight && ledger_->unsent(s->index) > 0 &&
            (faults_ == nullptr || faults_->stalledUntil(s->index, now) == 0)) {
            if (!paced && s->index > 0) {
                paceStreams();  // once per pump, with every piece of this pass assigned
                paced = true;
            }
            startSend(*s);
        }
        written = written && (s->index == 0 || ledger_->unsent(s->index) == 0);
    }
    const bool idle = written && assign_size_ == 0;
    if (refused_mid_message_ && written && !granted_ && !gate_stalls_.open() &&
        stop_probe_at_ < 0) {
        // The gate holds the rest of a message back and the engine has nothing left to
        // write. Until then the pieces queued on the streams kept the link busy (a spent
        // budget stops the engine with tens of MiB still queued), which is no wait of the
        // train's; from when the kernel has delivered them, the sender paces the train.
        probeGateStop(now);
    }
    if (granted_ && idle) {
        // Every piece is in the kernel: the flow's queue drained, give the link back.
        gate_->release(granted_bytes_, now);
        granted_ = false;
    }
}

void CommCore::paceStreams() {
    // Only streams whose congestion control sends at the rate it is told (atlas_rate,
    // tcpcc/atlas_rate.bpf.c) are paced: under BBR a cap that binds once ends its STARTUP
    // for good and the stream crosses at half the link from then on (docs/tcp-cc.md).
    if (gate_ == nullptr || !told_rate_cc_) {
        return;
    }
    const uint64_t pace_bps = gate_->paceBps();
    if (pace_bps == 0 && gate_->budgetBytes() != UINT64_MAX) {
        // Arbitrated but not granted (the budget was spent or the slot ended with pieces
        // still queued, or the rate is unknown): those pieces were assigned under the last
        // pace, so the caps stay until the gate opens (unarbitrated: no budget bound).
        return;
    }
    // The grant's bytes are paced as a whole: each stream gets the share of the pace that
    // its unsent bytes (queued in the ledger, or taken by the kernel and not yet sent) are of
    // the flow's, so the streams finish together at the pace however the striper loaded them.
    // (An even split over unevenly loaded streams sends below the pace as the lighter ones
    // run dry: measured, the backward link carried 0.57-0.81 of its rate.) A stream with
    // nothing unsent keeps the cap it had until it gets bytes again.
    uint64_t total = 0;
    for (size_t i = 1; i < streams_.size(); ++i) {
        Stream* s = live(static_cast<int>(i));
        unsent_[i] =
            s != nullptr ? ledger_->queuedBytes(s->index) + kernelUnsentBytes(s->fd.get()) : 0;
        total += unsent_[i];
    }
    constexpr uint64_t kPacingUnavailable = UINT64_MAX;
    for (size_t i = 1; i < streams_.size(); ++i) {
        Stream* s = live(static_cast<int>(i));
        const uint64_t queued = unsent_[i];
        if (s == nullptr || queued == 0) {
            continue;  // paced when it next gets bytes
        }
        const uint64_t each = streamPaceBytes(pace_bps, queued, total);
        if (s->pace_bytes == kPacingUnavailable || !paceChanged(s->pace_bytes, each)) {
            continue;
        }
        const Status st = setMaxPacingRate(s->fd.get(), each);
        if (st.isOk()) {
            s->pace_bytes = each;
        } else {
            // Pacing is an optimization: warn once per stream and leave it as it is.
            ATLAS_LOG_WARN(params_.logger, "stream %d: %s; its pace stays as it was", s->index,
                           st.toString().c_str());
            s->pace_bytes = kPacingUnavailable;  // tried: not again
        }
    }
}

void CommCore::startSend(Stream& s) {
    IoOp& op = s.send_op;
    op.iovcnt = 0;
    op.iov_first = 0;
    op.done = 0;
    op.total = 0;
    const size_t avail = ledger_->unsent(s.index);
    size_t n = 0;
    if (sealed()) {
        // Every frame sealed, in wire order, into the stream's staging buffer as
        // [prefix][ciphertext]; one iovec per frame. A resend is sealed afresh for this
        // stream and epoch from the plaintext (the caller's buffer or the store's copy).
        size_t bytes = 0;
        for (; n < avail && op.iovcnt < IoOp::kMaxIov; ++n) {
            const size_t len = ledger_->frame(ledger_->unsentAt(s.index, n)).length;
            if (n > 0 && bytes + kMaxPrefixBytes + len > 4 * params_.chunk_bytes) {
                break;  // bounded staging; the rest goes in the next send
            }
            bytes += kMaxPrefixBytes + len;
            ++op.iovcnt;
        }
        if (s.staging.size() < bytes) {
            s.staging.resize(bytes);
        }
        uint8_t* out = s.staging.data();
        for (size_t i = 0; i < n; ++i) {
            SendLedger::Frame& f = ledger_->frame(ledger_->unsentAt(s.index, i));
            Status st = s.sealer->seal(f.header, {f.src, f.length},
                                       {out + kMaxPrefixBytes, f.length}, {out, kMaxPrefixBytes});
            if (!st.isOk()) {
                RecoveryCounters::add(counters_.seal_failures, 1);
                fail({st.code(),
                      "sealing on stream " + std::to_string(s.index) + ": " + st.message()});
                return;
            }
            bool flip_payload = false;
            if (faults_ != nullptr && faults_->takeFlip(s.index, &flip_payload)) {
                // The test seam's corruption, after sealing: the receiver must refuse it.
                out[flip_payload && f.length > 0 ? kMaxPrefixBytes : 0] ^= 0x5A;
            }
            op.iov[i] = {out, kMaxPrefixBytes + f.length};
            op.total += kMaxPrefixBytes + f.length;
            out += kMaxPrefixBytes + f.length;
        }
    }
    // Several frames per sendmsg: fewer syscalls for small inline messages.
    while (!sealed() && n < avail && op.iovcnt + 3 <= IoOp::kMaxIov) {
        SendLedger::Frame& f = ledger_->frame(ledger_->unsentAt(s.index, n));
        const uint8_t* header = f.header;
        bool flip_payload = false;
        bool flipped = faults_ != nullptr && faults_->takeFlip(s.index, &flip_payload);
        if (flipped && !flip_payload) {
            std::copy(f.header, f.header + wire::kFrameHeaderBytes, s.flip_header);
            s.flip_header[0] ^= 0xFF;  // the magic: the receiver must refuse the frame
            header = s.flip_header;
        }
        op.iov[op.iovcnt++] = {const_cast<uint8_t*>(header), wire::kFrameHeaderBytes};
        op.total += wire::kFrameHeaderBytes;
        if (f.length > 0) {
            const uint8_t* p = f.src;
            uint32_t len = f.length;
            if (flipped && flip_payload) {
                // In clear nothing protects the payload: the receiver gets the wrong byte
                // (TCP's checksum catches real corruption; ATLAS_ENCRYPT catches this too).
                s.flip_byte = static_cast<uint8_t>(p[0] ^ 0x5A);  // the caller's buffer is const
                op.iov[op.iovcnt++] = {&s.flip_byte, 1};
                ++p;
                --len;
            }
            if (len > 0) {
                op.iov[op.iovcnt++] = {const_cast<uint8_t*>(p), len};
            }
            op.total += f.length;
        }
        ++n;
    }
    if (ledger_->handedUnconfirmed(s.index) == 0) {
        s.progress_at = params_.clock->nowNs();  // the stall clock starts with its first frame
    }
    if (stall_check_at_ < 0) {
        stall_check_at_ = params_.clock->nowNs() + policy_.stallAfter() / 4;
    }
    ledger_->startOp(s.index, n);
    s.op_frames = static_cast<uint32_t>(n);
    reactor_->submit(&op);
}

void CommCore::onSendComplete(Stream& s, int64_t result) {
    if (closing_ || failed()) {
        return;
    }
    if (result < 0) {
        loseStream(s, Status::fromErrno("send", static_cast<int>(-result)).message());
        return;
    }
    const uint64_t payload = static_cast<uint64_t>(result) - s.op_frames * prefixBytes();
    const Nanos now = params_.clock->nowNs();
    ledger_->finishOp(s.index, now);
    s.op_frames = 0;
    s.bytes += payload;
    RecoveryCounters::add(counters_.payload_bytes, payload);
    RecoveryCounters::set(counters_.store_bytes, ledger_->storeBytes());
    tryCompletions();
    applyFaults(s, payload);
    pump();
}

void CommCore::tryCompletions() {
    if (graveyard_sends_ > 0) {
        return;  // a dead stream's send may still read a caller's buffer
    }
    for (uint64_t seq = oldest_; seq < engine_seq_; ++seq) {
        RequestState& st = state(seq);
        const auto request_index = static_cast<uint32_t>(seq % kMaxRequests);
        if (st.complete || st.unassigned > 0 || !ledger_->allAccepted(request_index)) {
            continue;
        }
        bool full = false;
        if (ledger_->secure(request_index, &full)) {
            completeRequest(seq, request(seq).size_);
        } else if (full && !st.store_wait) {
            st.store_wait = true;
            RecoveryCounters::add(counters_.store_full_waits, 1);
        }
    }
    RecoveryCounters::set(counters_.store_bytes, ledger_->storeBytes());
    RecoveryCounters::raise(counters_.store_peak_bytes, ledger_->storeBytes());
}

void CommCore::onSenderHeader(Stream& s) {
    if (sealed()) {
        Status open = s.opener->openPrefix({s.header, kMaxPrefixBytes});
        if (!open.isOk()) {
            failSeal(s, open);
            return;
        }
    }
    wire::FrameHeader h;
    Status st = wire::decodeFrame(s.header, 0, &h);
    if (st.isOk() && sealed()) {
        st = s.opener->beginPayload(h.length);
        if (st.isOk() && h.length == 0) {
            st = s.opener->finish();
        }
        if (!st.isOk()) {
            failSeal(s, st);
            return;
        }
    }
    if (st.isOk() && h.type == wire::FrameType::kData) {
        st = {Code::kRemote, "the receiver sent a data frame"};
    }
    if (!st.isOk()) {
        fail({st.code(), "stream " + std::to_string(s.index) + " from receiver " +
                             params_.info.peer.toString() + ": " + st.message()});
        return;
    }
    if (h.type == wire::FrameType::kGoodbye || h.type == wire::FrameType::kAbort) {
        peer_closed_ = true;
        fail({Code::kRemote, "receiver " + params_.info.peer.toString() +
                                 (h.type == wire::FrameType::kGoodbye
                                      ? " closed the connection"
                                      : " failed the connection (its log has the cause)")});
        return;
    }
    s.frame = h;
    if (s.scratch == nullptr) {
        s.scratch.reset(new uint8_t[wire::kMaxConfirmBody]);
    }
    s.phase = RecvPhase::kBody;
    IoOp& op = s.recv_op;
    op.buf = s.scratch.get();
    op.want = h.length;
    op.done = 0;
    reactor_->submit(&op);
}

void CommCore::onConfirmBody(Stream& s) {
    if (sealed()) {
        Status open = s.opener->decrypt({s.scratch.get(), s.frame.length});
        if (open.isOk()) {
            open = s.opener->finish();
        }
        if (!open.isOk()) {
            failSeal(s, open);
            return;
        }
    }
    wire::ConfirmBody body;
    Status st =
        wire::decodeConfirm(std::span<const uint8_t>(s.scratch.get(), s.frame.length), &body);
    const Nanos now = params_.clock->nowNs();
    if (st.isOk() && body.train_bytes > 0 && gate_ != nullptr) {
        const auto dispersion = static_cast<Nanos>(body.train_ns);
        gate_->onPathSample(body.train_bytes, dispersion, now,
                            gate_stalls_.stalledNs(now, dispersion, params_.info.rtt_ns));
    }
    for (uint32_t i = 0; st.isOk() && i < body.count; ++i) {
        const wire::ConfirmEntry& e = body.entries[i];
        Stream* t = e.index < streams_.size() ? live(static_cast<int>(e.index)) : nullptr;
        if (t == nullptr || t->epoch != e.epoch) {
            continue;  // an incarnation already given up: its frames were resent
        }
        SendLedger::ConfirmResult r;
        st = ledger_->confirm(t->index, e.frames, now, &r);
        if (r.frames > 0) {
            t->progress_at = now;
            RecoveryCounters::set(counters_.confirm_lag_last_ns,
                                  static_cast<uint64_t>(r.max_lag_ns));
            RecoveryCounters::raise(counters_.confirm_lag_max_ns,
                                    static_cast<uint64_t>(r.max_lag_ns));
        }
    }
    if (!st.isOk()) {
        fail({Code::kRemote,
              "confirmation from " + params_.info.peer.toString() + ": " + st.message()});
        return;
    }
    RecoveryCounters::add(counters_.confirms, 1);
    if (body.posted > peer_posted_) {
        peer_posted_ = body.posted;
        for (auto& t : streams_) {
            if (t != nullptr) {
                t->progress_at = std::max(t->progress_at, now);  // newly posted: not stalled
            }
        }
    }
    readHeader(s);
    tryCompletions();
    pump();
}

void CommCore::scheduleDial(int index, Nanos now) {
    Lane& lane = lanes_[static_cast<size_t>(index)];
    lane.next_dial = now + RecoveryPolicy::retryDelay(lane.failed_dials);
}

void CommCore::dialDue(Nanos now) {
    for (size_t i = 0; i < lanes_.size(); ++i) {
        Lane& lane = lanes_[i];
        if (streams_[i] != nullptr || lane.dialing || lane.next_dial < 0 || now < lane.next_dial) {
            continue;
        }
        lane.next_dial = -1;
        if (faults_ != nullptr && faults_->dialBlocked(now)) {
            // The test seam's outage: the attempt fails as an unreachable path would.
            StreamArrival a;
            a.index = static_cast<int>(i);
            a.epoch = lane.epoch;
            a.status = Status(Code::kRemote, "network unreachable (fault injection outage)");
            lane.dialing = true;
            onArrival(std::move(a));
            if (failed()) {
                return;
            }
            continue;
        }
        if (params_.rejoiner == nullptr) {
            continue;
        }
        lane.dialing = true;
        ++lane.epoch;
        Rejoiner::Dial d;
        d.token = rejoin_token_;
        d.peer = params_.rejoin_peer;
        d.session_id = params_.info.session_id;
        d.auth = params_.auth;
        d.index = static_cast<int>(i);
        d.epoch = lane.epoch;
        d.deadline = now + policy_.attemptTimeout();
        params_.rejoiner->dial(d);
    }
}

void CommCore::probeGateStop(Nanos now) {
    stop_probe_at_ = -1;
    if (granted_ || !refused_mid_message_ || gate_stalls_.open()) {
        return;  // granted again meanwhile, or already counting
    }
    // "Written" is in the kernel, not through it: each stream may still hold up to
    // TCP_NOTSENT_LOWAT unsent plus a window in flight, which keeps the link fed for as long
    // as they take (22 x 512 KiB unsent: 185 ms at 0.5 Gbit/s, more than GateStalls' margin;
    // counted from the write, such stops can take a corrected train to ten times the rate,
    // docs/arbitration.md "Trains that span a wait"). So the stop starts when the engine has
    // nothing queued (no resend either: a stream lost meanwhile put its frames back) and
    // every data stream has sent and had acknowledged all it holds.
    bool through = !ledger_->hasResend();
    for (size_t i = 1; through && i < streams_.size(); ++i) {
        const Stream* s = streams_[i].get();
        if (s == nullptr || s->dead) {
            continue;  // a lost stream feeds nothing
        }
        TcpInfoSample info;
        through = !s->send_op.in_flight && ledger_->unsent(s->index) == 0 &&
                  !(readTcpInfo(s->fd.get(), now, &info).isOk() &&
                    (info.notsent_bytes > 0 || info.unacked > 0));
    }
    if (!through) {
        stop_probe_at_ = now + kStopProbeNs;
        return;
    }
    // Dated half an RTT back, when the receiver had the last byte: GateStalls counts a stop
    // from half an RTT after its begin (for a stop begun at a write, the bytes still on the
    // wire), so this one counts from now, the last acknowledgement: it errs short by the
    // ACK's half RTT (and by a delayed ACK of the last segment, up to 40 ms).
    gate_stalls_.begin(now - params_.info.rtt_ns / 2);
}

void CommCore::checkStalls(Nanos now) {
    const Nanos limit = policy_.stallAfter();
    if (stall_check_at_ < 0 || now < stall_check_at_) {
        return;
    }
    stall_check_at_ = ledger_->unconfirmedBytes() > 0 ? now + limit / 4 : -1;
    for (auto& s : streams_) {
        if (s == nullptr) {
            continue;
        }
        const int64_t oldest = ledger_->oldestHandedUnconfirmedSeq(s->index);
        if (oldest < 0 || static_cast<uint64_t>(oldest) >= peer_posted_ ||
            now - s->progress_at < limit) {
            continue;
        }
        // No confirmation yet, but a large frame on a slow stream (a fair share of a busy
        // WAN, ATLAS_STRIPE=even's big pieces) may take longer than the limit to arrive
        // whole. The peer's TCP acknowledging bytes means the path moves: not a stall.
        TcpInfoSample info;
        if (readTcpInfo(s->fd.get(), now, &info).isOk() && info.bytes_acked > s->stall_acked) {
            s->stall_acked = info.bytes_acked;
            s->progress_at = now;
            continue;
        }
        loseStream(*s, "stalled: no confirmation for " +
                           std::to_string((now - s->progress_at) / kNsPerMs) +
                           " ms although the receiver has posted its receive");
        if (failed()) {
            return;
        }
    }
}

}  // namespace atlas::transport
