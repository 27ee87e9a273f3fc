// CommCore: lifecycle and posting. Stream incarnations, outages and faults are in
// comm_streams.cc, the send path in comm_send.cc, the receive path in comm_recv.cc.
#include "transport/comm_core.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cinttypes>
#include <cstring>

#include "transport/engine.h"
#include "transport/socket_util.h"
#include "transport/tcp_info.h"

namespace atlas::transport {

CommCore::CommCore(const CommParams& params, std::vector<Fd> fds, Engine* engine)
    : params_(params), engine_(engine), train_(TrainRules{params.cadence.train_span_ns}) {
    policy_.rtt_ns = params_.info.rtt_ns;
    policy_.timeout_ns = params_.timeout_ns;
    lanes_.resize(fds.size());
    streams_.resize(fds.size());
    for (size_t i = 0; i < fds.size(); ++i) {
        streams_[i] = makeStream(static_cast<int>(i), 0, std::move(fds[i]));
    }
    const int ndata = static_cast<int>(streams_.size()) - 1;
    if (isSend()) {
        told_rate_cc_ = ndata > 0 && streams_[1] != nullptr &&
                        congestionControl(streams_[1]->fd.get()) == kToldRateCongestionControl;
        unsent_.resize(streams_.size());
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
    Request& r = request(post_seq_);
    // The request is free once test() reported its previous request done (same thread).
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
    // Publishes the request contents to the engine (pairs with the acquire in takePosted()).
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
    // Sealed (ATLAS_ENCRYPT) like every frame: a goodbye in clear fails the peer's tag check,
    // and the peer then learns of the close only from the outage bound.
    uint8_t frame[kMaxPrefixBytes];
    bool any = false;
    for (auto& s : streams_) {
        if (s != nullptr && !s->send_op.in_flight) {
            const size_t len = sealControl(*s, type, frame);
            if (len == 0) {
                continue;  // the stream's sealer failed: its end will read as a loss
            }
            const ssize_t n = ::send(s->fd.get(), frame, len, MSG_NOSIGNAL | MSG_DONTWAIT);
            any = any || n == static_cast<ssize_t>(len);
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
    // Pairs with the release store in post(): the requests below are fully written.
    const uint64_t upto = posted_seq_.load(std::memory_order_acquire);
    const bool any = engine_seq_ < upto;
    for (; engine_seq_ < upto; ++engine_seq_) {
        const uint64_t seq = engine_seq_;
        Request& r = request(seq);
        RequestState& st = state(seq);
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
            request(seq).state_.store(Request::kFailed, std::memory_order_release);
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
    Request& r = request(seq);
    RequestState& st = state(seq);
    st.complete = true;
    if (!isSend()) {
        closeTrain(seq, result);
    }
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

std::optional<KernelCount> CommCore::kernelNow() const {
    KernelCount out;
    for (size_t i = 1; i < streams_.size(); ++i) {
        const Stream* s = streams_[i].get();
        TcpInfoSample info;
        if (s == nullptr || s->dead || !readTcpInfo(s->fd.get(), 0, &info).isOk()) {
            return std::nullopt;
        }
        out.bytes += info.bytes_received;
        out.out_of_order += info.rcv_ooopack;
    }
    return out;
}

void CommCore::openTrain(uint64_t seq, uint64_t total, bool was_parked) {
    const Nanos now = params_.clock->nowNs();
    if (!train_.canOpen(total, was_parked, now)) {
        return;
    }
    if (const std::optional<KernelCount> kernel = kernelNow()) {
        train_.open(seq, now, *kernel, payloadBytes(), trainSpoilers());
    }
}

void CommCore::cutTrain() {
    if (!train_.isOpen()) {
        return;  // the common case: no clock read
    }
    const Nanos now = params_.clock->nowNs();
    if (!train_.cutDue(now, payloadBytes())) {
        return;
    }
    reportTrain(train_.cut(now, kernelNow(), payloadBytes(), trainSpoilers()));
}

void CommCore::closeTrain(uint64_t seq, uint64_t result) {
    if (!train_.isOpen() || train_.seq() != seq) {
        return;
    }
    reportTrain(train_.close(params_.clock->nowNs(), result, kernelNow(), trainSpoilers()));
}

TrainSpoilers CommCore::trainSpoilers() const {
    return {counters_.stream_resets.load(std::memory_order_relaxed),
            counters_.duplicate_bytes.load(std::memory_order_relaxed), unparks_};
}

uint64_t CommCore::payloadBytes() const {
    return counters_.payload_bytes.load(std::memory_order_relaxed);
}

void CommCore::reportTrain(const std::optional<TrainSample>& sample) {
    if (sample) {
        train_bytes_ = sample->bytes;  // carried by the next confirmation
        train_ns_ = sample->dispersion_ns;
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

}  // namespace atlas::transport
