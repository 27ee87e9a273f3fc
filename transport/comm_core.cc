#include "transport/comm_core.h"

#include <sys/socket.h>

#include <cinttypes>
#include <limits>

#include "transport/engine.h"

namespace atlas::transport {

CommCore::CommCore(const CommParams& params, std::vector<Fd> fds, Engine* engine)
    : params_(params), engine_(engine) {
    for (size_t i = 0; i < fds.size(); ++i) {
        auto s = std::make_unique<Stream>();
        s->index = static_cast<int>(i);
        s->ctrl = (i == 0);
        s->fd = std::move(fds[i]);
        s->send_op.kind = IoOp::Kind::kSend;
        s->send_op.fd = s->fd.get();
        s->send_op.handler = this;
        s->send_op.tag = static_cast<int>(i);
        s->recv_op.kind = IoOp::Kind::kRecv;
        s->recv_op.fd = s->fd.get();
        s->recv_op.handler = this;
        s->recv_op.tag = static_cast<int>(i);
        streams_.push_back(std::move(s));
    }
    const int ndata = static_cast<int>(streams_.size()) - 1;
    if (isSend()) {
        // Two pieces per stream: one being accepted by the kernel, one ready behind it.
        striper_ = std::make_unique<Striper>(params_.stripe, ndata, params_.chunk_bytes,
                                             2 * params_.chunk_bytes);
        loads_.resize(static_cast<size_t>(ndata));
    }
    for (auto& r : reqs_) {
        r.comm_ = this;
    }
}

CommCore::~CommCore() = default;

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
    // Receivers read every stream; a sender reads its control stream only to notice the
    // peer going away (nothing is ever sent back after the handshake).
    for (auto& s : streams_) {
        if (!isSend() || s->ctrl) {
            readHeader(*s);
        }
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
    }
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
    for (auto& s : streams_) {
        if (s->fd.valid()) {
            // Wakes every in-flight op on the socket (they complete with EOF/errors); data
            // already accepted by the kernel is still delivered before the FIN.
            ::shutdown(s->fd.get(), SHUT_RDWR);
            if (reactor_ != nullptr) {
                reactor_->cancelFd(s->fd.get());
            }
        }
    }
}

bool CommCore::quiescent() const {
    for (const auto& s : streams_) {
        if (s->send_op.in_flight || s->recv_op.in_flight) {
            return false;
        }
    }
    return true;
}

void CommCore::finishClose() {
    for (auto& s : streams_) {
        if (s->fd.valid() && reactor_ != nullptr) {
            reactor_->unregisterFd(s->fd.get());
        }
        s->fd.reset();
    }
}

void CommCore::takePosted() {
    // Pairs with the release store in post(): the slots below are fully written.
    const uint64_t upto = posted_seq_.load(std::memory_order_acquire);
    for (; engine_seq_ < upto; ++engine_seq_) {
        const uint64_t seq = engine_seq_;
        Request& r = slot(seq);
        SlotState& st = state(seq);
        st = SlotState{};
        st.complete = false;
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
    for (auto& s : streams_) {
        if (s->fd.valid()) {
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

void CommCore::onIoComplete(IoOp* op, int64_t result) {
    Stream& s = *streams_[static_cast<size_t>(op->tag)];
    if (op == &s.send_op) {
        onSendComplete(s, result);
    } else {
        onRecvComplete(s, result);
    }
}

// ---------------------------------------------------------------- send path

void CommCore::enqueueInline(uint64_t seq) {
    Request& r = slot(seq);
    Stream& c = *streams_[0];
    // At most kMaxRequests inline messages can be queued, and the ring holds more.
    static_assert(SegmentRing::kCapacity >= kMaxRequests);
    Segment& g = c.queue.pushBack();
    g.slot = static_cast<uint32_t>(seq % kMaxRequests);
    g.length = static_cast<uint32_t>(r.size_);
    g.offset = 0;
    wire::encodeFrame({wire::FrameType::kData, static_cast<uint32_t>(seq),
                       static_cast<uint32_t>(r.size_), r.size_, 0},
                      g.header);
    c.queued_bytes += r.size_;
}

bool CommCore::admitted() {
    if (gate_ == nullptr) {
        return true;
    }
    const Nanos now = params_.clock->nowNs();
    if (granted_ && gate_->holds(now)) {
        return true;  // the data-path case: one atomic load and a vDSO clock read
    }
    if (granted_) {
        // Slot over with pieces still waiting: hand the link back and queue up again.
        gate_->release(granted_bytes_, now);
        granted_ = false;
    }
    uint64_t waiting = 0;
    for (uint32_t i = 0; i < assign_size_; ++i) {
        waiting += state(assign_q_[(assign_head_ + i) % kMaxRequests]).unassigned;
    }
    granted_ = gate_->acquire(waiting, now);
    granted_bytes_ = 0;
    ++(granted_ ? engine_counters_.gate_grants : engine_counters_.gate_waits);
    return granted_;
}

void CommCore::pump() {
    const size_t ndata = streams_.size() - 1;
    while (assign_size_ > 0 && admitted()) {
        const uint64_t seq = assign_q_[assign_head_];
        Request& r = slot(seq);
        SlotState& st = state(seq);
        for (size_t i = 0; i < ndata; ++i) {
            const Stream& s = *streams_[i + 1];
            loads_[i] = s.queue.full() ? std::numeric_limits<uint64_t>::max() : s.queued_bytes;
        }
        auto a = striper_->next(r.size_, st.unassigned, loads_);
        if (!a) {
            break;  // every stream is full; resumes when a send completes
        }
        Stream& s = *streams_[static_cast<size_t>(a->stream) + 1];
        if (s.queue.full()) {
            break;  // kEven picked a full stream: wait for it
        }
        const uint64_t offset = r.size_ - st.unassigned;
        Segment& g = s.queue.pushBack();
        g.slot = static_cast<uint32_t>(seq % kMaxRequests);
        g.length = static_cast<uint32_t>(a->length);
        g.offset = offset;
        wire::encodeFrame({wire::FrameType::kData, static_cast<uint32_t>(seq),
                           static_cast<uint32_t>(a->length), r.size_, offset},
                          g.header);
        s.queued_bytes += a->length;
        granted_bytes_ += a->length;
        st.unassigned -= a->length;
        if (st.unassigned == 0) {
            assign_head_ = (assign_head_ + 1) % kMaxRequests;
            --assign_size_;
        }
    }
    bool idle = assign_size_ == 0;
    for (auto& s : streams_) {
        if (!s->send_op.in_flight && s->queue.size > 0) {
            startSend(*s);
        }
        idle = idle && (s->ctrl || s->queue.size == 0);
    }
    if (granted_ && idle) {
        // Every piece is in the kernel: the flow's queue drained, give the link back.
        gate_->release(granted_bytes_, params_.clock->nowNs());
        granted_ = false;
    }
}

void CommCore::startSend(Stream& s) {
    IoOp& op = s.send_op;
    op.iovcnt = 0;
    op.iov_first = 0;
    op.done = 0;
    op.total = 0;
    uint32_t n = 0;
    // Several frames per sendmsg: fewer syscalls for small inline messages.
    while (n < s.queue.size && op.iovcnt + 2 <= IoOp::kMaxIov) {
        Segment& g = s.queue.at(n);
        op.iov[op.iovcnt++] = {g.header, wire::kFrameHeaderBytes};
        op.total += wire::kFrameHeaderBytes;
        if (g.length > 0) {
            op.iov[op.iovcnt++] = {reqs_[g.slot].data_ + g.offset, g.length};
            op.total += g.length;
        }
        ++n;
    }
    s.in_flight_segs = n;
    reactor_->submit(&op);
}

void CommCore::onSendComplete(Stream& s, int64_t result) {
    if (closing_ || failed()) {
        return;
    }
    if (result < 0) {
        fail(Status::fromErrno(
            "send to " + params_.info.peer.toString() + " on stream " + std::to_string(s.index),
            static_cast<int>(-result), Code::kRemote));
        return;
    }
    for (uint32_t k = 0; k < s.in_flight_segs; ++k) {
        Segment& g = s.queue.at(0);
        Request& r = reqs_[g.slot];
        const uint64_t seq = r.seq_;
        SlotState& st = state(seq);
        st.done += g.length;
        s.queued_bytes -= g.length;
        s.bytes += g.length;
        if (st.unassigned == 0 && st.done == r.size_) {
            completeRequest(seq, r.size_);
        }
        s.queue.popFront();
    }
    s.in_flight_segs = 0;
    pump();
}

// ---------------------------------------------------------------- receive path

void CommCore::readHeader(Stream& s) {
    s.phase = RecvPhase::kHeader;
    IoOp& op = s.recv_op;
    op.buf = s.header;
    op.want = wire::kFrameHeaderBytes;
    op.done = 0;
    reactor_->submit(&op);
}

void CommCore::onRecvComplete(Stream& s, int64_t result) {
    if (closing_ || failed()) {
        return;
    }
    if (result < 0) {
        fail(Status::fromErrno(
            "recv from " + params_.info.peer.toString() + " on stream " + std::to_string(s.index),
            static_cast<int>(-result), Code::kRemote));
        return;
    }
    if (result == 0) {
        onEof(s);
        return;
    }
    if (isSend()) {
        fail({Code::kRemote, "receiver " + params_.info.peer.toString() +
                                 " sent unexpected bytes on the control stream"});
        return;
    }
    if (s.phase == RecvPhase::kHeader) {
        onHeader(s);
    } else {
        onPayload(s);
    }
}

void CommCore::onHeader(Stream& s) {
    const uint64_t max_len = s.ctrl ? params_.inline_bytes : wire::kMaxFrameLength;
    Status st = wire::decodeFrame(s.header, max_len, &s.frame);
    if (st.isOk()) {
        // Control frames carry whole inline messages; data frames carry non-empty pieces.
        if (s.ctrl && (s.frame.offset != 0 || s.frame.length != s.frame.total)) {
            st = {Code::kRemote, "control-stream frame is not a whole inline message"};
        } else if (!s.ctrl && s.frame.length == 0) {
            st = {Code::kRemote, "empty data-stream frame"};
        }
    }
    if (!st.isOk()) {
        fail({st.code(), "stream " + std::to_string(s.index) + " from " +
                             params_.info.peer.toString() + ": " + st.message()});
        return;
    }
    // Rebuild the 64-bit sequence number: frames are never older than the oldest incomplete
    // receive, and never 2^31 messages ahead of it.
    const uint32_t delta = s.frame.seq - static_cast<uint32_t>(oldest_);
    if (delta >= (1u << 31)) {
        fail({Code::kRemote, "frame for message " + std::to_string(s.frame.seq) +
                                 ", which already completed (duplicate data)"});
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
    Request& r = slot(seq);
    SlotState& st = state(seq);
    if (st.complete) {
        fail({Code::kRemote, "frame for message " + std::to_string(seq) + " after it completed"});
        return;
    }
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
        if (observer_ != nullptr) {
            observer_->arrived(seq, st.total, params_.clock->nowNs());
        }
    } else if (s.frame.total != st.total) {
        fail({Code::kRemote, "inconsistent size for message " + std::to_string(seq)});
        return;
    }
    if (st.done + s.frame.length > st.total) {
        fail(
            {Code::kRemote, "more bytes than the message size for message " + std::to_string(seq)});
        return;
    }
    if (s.frame.length == 0) {  // a zero-byte message
        completeRequest(seq, 0);
        readHeader(s);
        return;
    }
    s.phase = RecvPhase::kPayload;
    IoOp& op = s.recv_op;
    op.buf = r.data_ + s.frame.offset;  // straight into the posted buffer
    op.want = s.frame.length;
    op.done = 0;
    reactor_->submit(&op);
}

void CommCore::onPayload(Stream& s) {
    const uint64_t seq = s.frame_seq;
    SlotState& st = state(seq);
    st.done += s.frame.length;
    s.bytes += s.frame.length;
    if (st.done == st.total) {
        completeRequest(seq, st.total);
    }
    readHeader(s);
}

void CommCore::onEof(Stream& s) {
    if (isSend()) {
        fail(
            {Code::kRemote, "receiver " + params_.info.peer.toString() + " closed the connection"});
        return;
    }
    if (s.phase == RecvPhase::kPayload) {
        fail({Code::kRemote, "peer " + params_.info.peer.toString() + " closed stream " +
                                 std::to_string(s.index) + " in the middle of a message"});
        return;
    }
    s.phase = RecvPhase::kStopped;
    s.eof = true;
    ++eof_streams_;
    checkPeerGone();
}

void CommCore::checkPeerGone() {
    // Once the peer has closed any stream, pending receives can only be served by streams
    // still reading, or by a parked stream whose frame belongs to a receive posted since it
    // parked (unparkStreams() attaches it next: the sender finished and closed before this
    // receive was posted, which is ordinary). Closed streams hold nothing. If none is left,
    // the receives can never complete: fail instead of hanging.
    if (eof_streams_ == 0 || pendingReceives() == 0) {
        return;
    }
    for (const auto& t : streams_) {
        if (t->phase == RecvPhase::kHeader || t->phase == RecvPhase::kPayload ||
            (t->phase == RecvPhase::kParked && t->frame_seq < engine_seq_)) {
            return;
        }
    }
    fail({Code::kRemote, "peer " + params_.info.peer.toString() + " closed the connection with " +
                             std::to_string(pendingReceives()) + " receive(s) pending"});
}

void CommCore::unparkStreams() {
    for (auto& s : streams_) {
        if (s->phase == RecvPhase::kParked && s->frame_seq < engine_seq_) {
            attach(*s);
            if (failed()) {
                return;
            }
        }
    }
}

}  // namespace atlas::transport
