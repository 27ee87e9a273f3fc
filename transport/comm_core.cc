// CommCore: lifecycle, posting, stream incarnations, outages and faults. The send path is in
// comm_send.cc, the receive path in comm_recv.cc.
#include "transport/comm_core.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "transport/engine.h"

namespace atlas::transport {

CommCore::CommCore(const CommParams& params, std::vector<Fd> fds, Engine* engine)
    : params_(params), engine_(engine) {
    policy_.rtt_ns = params_.info.rtt_ns;
    policy_.timeout_ns = params_.timeout_ns;
    lanes_.resize(fds.size());
    streams_.resize(fds.size());
    for (size_t i = 0; i < fds.size(); ++i) {
        streams_[i] = makeStream(static_cast<int>(i), 0, std::move(fds[i]));
    }
    const int ndata = static_cast<int>(streams_.size()) - 1;
    if (isSend()) {
        // Two pieces per stream: one being accepted by the kernel, one ready behind it.
        // Sealed pieces pass through a per-stream staging buffer: keep them bounded.
        striper_ = std::make_unique<Striper>(params_.stripe, ndata, params_.chunk_bytes,
                                             2 * params_.chunk_bytes, 64 * 1024,
                                             sealed() ? kMaxSealedPiece : wire::kMaxFrameLength);
        loads_.resize(static_cast<size_t>(ndata));
        ledger_ = std::make_unique<SendLedger>(static_cast<int>(streams_.size()),
                                               params_.resend_bytes, params_.chunk_bytes);
    }
    if (!params_.faults.empty()) {
        faults_ = std::make_unique<FaultInjector>(params_.faults, isSend());
        if (faults_->empty()) {
            faults_.reset();
        }
    }
    for (auto& r : reqs_) {
        r.comm_ = this;
    }
}

CommCore::~CommCore() = default;

std::unique_ptr<CommCore::Stream> CommCore::makeStream(int index, uint32_t epoch, Fd fd) {
    auto s = std::make_unique<Stream>();
    s->comm = this;
    s->index = index;
    s->epoch = epoch;
    s->fd = std::move(fd);
    s->send_op.kind = IoOp::Kind::kSend;
    s->send_op.fd = s->fd.get();
    s->send_op.handler = s.get();
    s->send_op.tag = index;
    s->recv_op.kind = IoOp::Kind::kRecv;
    s->recv_op.fd = s->fd.get();
    s->recv_op.handler = s.get();
    s->recv_op.tag = index;
    s->progress_at = params_.clock->nowNs();
    if (sealed()) {
        // Data frames go connector -> listener, confirmations the other way.
        const auto out = isSend() ? seal::Direction::kConnectorToListener
                                  : seal::Direction::kListenerToConnector;
        const auto in = isSend() ? seal::Direction::kListenerToConnector
                                 : seal::Direction::kConnectorToListener;
        const auto stream = static_cast<uint16_t>(index);
        auto sealer =
            seal::StreamSealer::create(*params_.secrets, out, stream, wire::kFrameHeaderBytes);
        auto opener =
            seal::StreamOpener::create(*params_.secrets, in, stream, wire::kFrameHeaderBytes);
        Status st = !sealer.isOk() ? sealer.status() : opener.status();
        if (st.isOk() && epoch > 0) {
            st = sealer->restart(epoch);
            if (st.isOk()) {
                st = opener->restart(epoch);
            }
        }
        if (!st.isOk()) {
            fail({st.code(), "stream " + std::to_string(index) + ": " + st.message()});
            return s;
        }
        s->sealer.emplace(std::move(sealer.value()));
        s->opener.emplace(std::move(opener.value()));
    }
    return s;
}

void CommCore::failSeal(const Stream& s, const Status& st) {
    RecoveryCounters::add(counters_.seal_failures, 1);
    fail({Code::kRemote, "stream " + std::to_string(s.index) + " from " +
                             params_.info.peer.toString() + ": " + st.message() +
                             " (the frame was altered, replayed, reordered or truncated on the "
                             "way; nothing of it was delivered)"});
}

size_t CommCore::sealControl(Stream& s, wire::FrameType type, uint8_t* out) {
    uint8_t header[wire::kFrameHeaderBytes];
    wire::encodeFrame({type, 0, 0, 0, 0}, header);
    if (!sealed()) {
        std::memcpy(out, header, sizeof(header));
        return sizeof(header);
    }
    if (!s.sealer || !s.sealer->seal(header, {}, {}, {out, kMaxPrefixBytes}).isOk()) {
        return 0;
    }
    return kMaxPrefixBytes;
}

int CommCore::liveCount() const {
    int n = 0;
    for (const auto& s : streams_) {
        n += s != nullptr ? 1 : 0;
    }
    return n;
}

// ---------------------------------------------------------------- poster side

Status CommCore::post(uint8_t* data, uint64_t size, Request** out) {
    *out = nullptr;
    if (failed()) {
        return error_;
    }
    Request& r = slot(post_seq_);
    // The slot is free once test() reported its previous request done (same thread).
    if (r.state_.load(std::memory_order_acquire) != Request::kFree) {
        return Status::ok();  // back-pressure: NCCL retries
    }
    r.data_ = data;
    r.size_ = size;
    r.seq_ = post_seq_;
    r.result_ = 0;
    r.state_.store(Request::kPosted, std::memory_order_relaxed);
    if (observer_ != nullptr) {
        observer_->posted(post_seq_, params_.clock->nowNs());
    }
    ++post_seq_;
    // Publishes the slot contents to the engine (pairs with the acquire in takePosted()).
    posted_seq_.store(post_seq_, std::memory_order_release);
    engine_->ring(this);
    *out = &r;
    return Status::ok();
}

Status test(Request* req, bool* done, size_t* size) {
    *done = false;
    // Pairs with the release store in completeRequest()/fail().
    const uint32_t st = req->state_.load(std::memory_order_acquire);
    if (st == Request::kDone) {
        *done = true;
        if (size != nullptr) {
            *size = req->result_;
        }
        req->state_.store(Request::kFree, std::memory_order_relaxed);
        return Status::ok();
    }
    if (st == Request::kFree) {
        return {Code::kInternal, "test() on a request that is not outstanding"};
    }
    if (st == Request::kFailed || req->comm_->failed()) {
        return req->comm_->error();
    }
    return Status::ok();
}

// ---------------------------------------------------------------- engine side: lifecycle

void CommCore::onAdopt(Reactor& reactor) {
    reactor_ = &reactor;
    for (auto& s : streams_) {
        Status st = reactor.registerFd(s->fd.get());
        if (!st.isOk()) {
            fail(std::move(st));
            return;
        }
    }
    // Both ends read every stream: the receiver reads frames, the sender confirmations (and
    // notices a peer going away).
    for (auto& s : streams_) {
        readHeader(*s);
    }
    onDoorbell();
}

void CommCore::onDoorbell() {
    if (closing_ || failed()) {
        return;
    }
    takePosted();
    if (failed()) {
        return;
    }
    if (isSend()) {
        pump();
    } else {
        unparkStreams();
        maybeConfirm(params_.clock->nowNs());
    }
}

bool CommCore::sendGoodbye(wire::FrameType type) {
    // Best effort, written directly: on every stream with no send in flight (the bytes of
    // one frame must never interleave with another's), so that each such stream shows the
    // goodbye before its end and the peer never mistakes the end for a lost stream. Most
    // comms close idle.
    uint8_t frame[wire::kFrameHeaderBytes];
    wire::encodeFrame({type, 0, 0, 0, 0}, frame);
    bool any = false;
    for (auto& s : streams_) {
        if (s != nullptr && !s->send_op.in_flight) {
            const ssize_t n =
                ::send(s->fd.get(), frame, sizeof(frame), MSG_NOSIGNAL | MSG_DONTWAIT);
            any = any || n == static_cast<ssize_t>(sizeof(frame));
        }
    }
    return any;
}

void CommCore::beginClose() {
    closing_ = true;
    if (CommStatsSink* sink = stats_.load(std::memory_order_acquire)) {
        sampleStats(*sink, params_.clock->nowNs());  // the final counters
    }
    if (granted_) {
        gate_->release(granted_bytes_, params_.clock->nowNs());
        granted_ = false;
    }
    // Destroyed here, on the engine thread: once the gate's destructor returns it no longer
    // rings this comm, so the comm cannot sit in the doorbell stack when it is freed.
    gate_.reset();
    if (observer_ != nullptr) {
        observer_->closed(params_.clock->nowNs());
        observer_.reset();
    }
    if (!failed() && !peer_closed_) {
        // The peer fails or finishes at once instead of waiting for a rejoin.
        (void)sendGoodbye(wire::FrameType::kGoodbye);
    }
    for (auto* list : {&streams_, &graveyard_}) {
        for (auto& s : *list) {
            if (s != nullptr && s->fd.valid()) {
                // Wakes every in-flight op on the socket (they complete with EOF/errors); data
                // already accepted by the kernel is still delivered before the FIN.
                ::shutdown(s->fd.get(), SHUT_RDWR);
                if (reactor_ != nullptr) {
                    reactor_->cancelFd(s->fd.get());
                }
            }
        }
    }
}

bool CommCore::quiescent() const {
    for (const auto* list : {&streams_, &graveyard_}) {
        for (const auto& s : *list) {
            if (s != nullptr && (s->send_op.in_flight || s->recv_op.in_flight)) {
                return false;
            }
        }
    }
    return true;
}

void CommCore::finishClose() {
    for (auto* list : {&streams_, &graveyard_}) {
        for (auto& s : *list) {
            if (s == nullptr) {
                continue;
            }
            if (s->fd.valid() && reactor_ != nullptr) {
                reactor_->unregisterFd(s->fd.get());
            }
            // Unread confirmations would turn the close into a reset, which discards what the
            // kernel still holds for the peer: read them out first.
            uint8_t sink[4096];
            while (s->fd.valid() && ::recv(s->fd.get(), sink, sizeof(sink), MSG_DONTWAIT) > 0) {
            }
            s->fd.reset();
        }
    }
    graveyard_.clear();
}

void CommCore::takePosted() {
    // Pairs with the release store in post(): the slots below are fully written.
    const uint64_t upto = posted_seq_.load(std::memory_order_acquire);
    const bool any = engine_seq_ < upto;
    for (; engine_seq_ < upto; ++engine_seq_) {
        const uint64_t seq = engine_seq_;
        Request& r = slot(seq);
        SlotState& st = state(seq);
        st.unassigned = 0;
        st.total = 0;
        st.total_known = false;
        st.complete = false;
        st.store_wait = false;
        st.ranges.clear();
        if (!isSend()) {
            continue;
        }
        if (r.size_ == 0 || r.size_ <= params_.inline_bytes) {
            enqueueInline(seq);
        } else {
            st.unassigned = r.size_;
            assign_q_[(assign_head_ + assign_size_) % kMaxRequests] = seq;
            ++assign_size_;
        }
    }
    if (!isSend()) {
        if (any) {
            noteConfirmable(params_.clock->nowNs());  // the posted watermark moved
        }
        checkPeerGone();
    }
}

void CommCore::fail(Status st) {
    if (failed()) {
        return;
    }
    error_ = std::move(st);
    // Publishes error_ (pairs with the acquire in failed()).
    failed_.store(true, std::memory_order_release);
    const uint64_t pending = engine_seq_ - oldest_;
    // A peer closing an idle comm is ordinary teardown: stay quiet unless work was pending.
    if (pending > 0 || error_.code() != Code::kRemote) {
        ATLAS_LOG_WARN(params_.logger, "%s comm %016" PRIx64 " with %s failed: %s",
                       isSend() ? "send" : "recv", params_.info.session_id,
                       params_.info.peer.toString().c_str(), error_.toString().c_str());
    }
    for (uint64_t seq = oldest_; seq < engine_seq_; ++seq) {
        if (!state(seq).complete) {
            slot(seq).state_.store(Request::kFailed, std::memory_order_release);
        }
    }
    // The peer must not keep rejoining a comm that failed: tell it, and refuse its rejoins.
    if (!peer_closed_ && reactor_ != nullptr) {
        (void)sendGoodbye(wire::FrameType::kAbort);
    }
    if (params_.rejoiner != nullptr && rejoin_token_ != 0) {
        params_.rejoiner->unregister(rejoin_token_);
    }
    for (auto& s : streams_) {
        if (s != nullptr && s->fd.valid()) {
            ::shutdown(s->fd.get(), SHUT_RDWR);  // stop both ends; in-flight ops complete
        }
    }
}

void CommCore::completeRequest(uint64_t seq, uint64_t result) {
    Request& r = slot(seq);
    state(seq).complete = true;
    r.result_ = result;
    if (observer_ != nullptr) {
        observer_->completed(seq, params_.clock->nowNs());
    }
    // Publishes result_ to test() (pairs with its acquire load).
    r.state_.store(Request::kDone, std::memory_order_release);
    while (oldest_ < engine_seq_ && state(oldest_).complete) {
        ++oldest_;
    }
}

void CommCore::onStreamIo(Stream& s, IoOp* op, int64_t result) {
    if (s.dead) {
        // A lost incarnation's last operations: a read that was writing into the posted
        // buffer credits what it wrote; nothing else matters any more.
        if (op == &s.recv_op && !isSend() && !closing_ && !failed()) {
            creditPartial(s);
        }
        if (op == &s.send_op && isSend()) {
            if (--graveyard_sends_ == 0) {
                ledger_->unhold();
                if (!closing_ && !failed()) {
                    tryCompletions();
                }
            }
        }
        reapGraveyard();
        if (!closing_ && !failed() && !isSend()) {
            unparkStreams();  // a stream waiting for this read's bytes may go on
        }
        return;
    }
    if (op == &s.send_op) {
        if (isSend()) {
            onSendComplete(s, result);
        } else if (!closing_ && !failed()) {
            confirm_stream_ = nullptr;
            s.op_control = false;
            if (result < 0) {
                loseStream(s, Status::fromErrno("send", static_cast<int>(-result)).message());
            } else {
                for (const wire::ConfirmEntry& e : confirm_sent_) {
                    for (auto& t : streams_) {
                        if (t != nullptr && t->index == static_cast<int>(e.index) &&
                            t->epoch == e.epoch) {
                            t->frames_confirmed = std::max(t->frames_confirmed, e.frames);
                        }
                    }
                }
                maybeConfirm(params_.clock->nowNs());
            }
        }
        return;
    }
    onRecvComplete(s, result);
}

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
    } else if (confirm_pending_) {
        consider(params_.cadence.dueAt(true, confirm_bytes_, confirm_first_));
    }
    if (faults_ != nullptr) {
        for (const auto& s : streams_) {
            // Send side: a stalled stream's queue; receive side: a held read.
            const Nanos until =
                s != nullptr ? faults_->stalledUntil(s->index, params_.clock->nowNs()) : 0;
            if (until > 0) {
                consider(until);
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
