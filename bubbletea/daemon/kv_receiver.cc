#include "bubbletea/daemon/kv_receiver.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

namespace atlas::bubbletea {
namespace {

// True when the control socket has something to read: the daemon never writes after its
// Hello, so readability means it closed (or sent garbage): the session is over.
bool controlClosed(const kv::Socket& control) {
    pollfd p{control.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
}

}  // namespace

KvReceiver::KvReceiver(const KvReceiverConfig& config, Callback cb)
    : config_(config), callback_(std::move(cb)) {}

Result<std::unique_ptr<KvReceiver>> KvReceiver::start(const KvReceiverConfig& config,
                                                      Callback on_transfer) {
    std::unique_ptr<KvReceiver> r(new KvReceiver(config, std::move(on_transfer)));
    transport::TransportConfig tc;
    tc.engine_threads = std::max(1, config.engine_threads);
    tc.timeout_ms = std::max(100, config.timeout_ms);
    tc.auth_key = config.auth_key;
    tc.logger = config.logger;
    auto t = transport::Transport::create(tc);
    if (!t.isOk()) {
        return t.status();
    }
    r->transport_ = std::move(t.value());
    auto l = kv::listenTcp(config.bind_host, config.port);
    if (!l.isOk()) {
        return l.status();
    }
    r->listener_ = std::move(l.value());
    r->port_ = kv::localPort(r->listener_);
    r->accept_thread_ = std::thread([raw = r.get()] { raw->acceptLoop(); });
    return r;
}

KvReceiver::~KvReceiver() {
    stop();
}

void KvReceiver::stop() {
    stopping_.store(true, std::memory_order_release);
    if (accept_thread_.joinable()) {
        accept_thread_.join();
    }
    std::list<std::unique_ptr<Conn>> conns;
    {
        std::lock_guard<std::mutex> lock(conns_mu_);
        conns.swap(conns_);
    }
    for (auto& c : conns) {
        if (c->thread.joinable()) {
            c->thread.join();
        }
    }
    listener_.reset();
}

void KvReceiver::reapFinished() {
    std::lock_guard<std::mutex> lock(conns_mu_);
    for (auto it = conns_.begin(); it != conns_.end();) {
        if ((*it)->done.load(std::memory_order_acquire)) {
            (*it)->thread.join();
            it = conns_.erase(it);
        } else {
            ++it;
        }
    }
}

void KvReceiver::acceptLoop() {
    while (!stopping_.load(std::memory_order_acquire)) {
        reapFinished();
        pollfd p{listener_.get(), POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) {
            continue;
        }
        const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0) {
            continue;
        }
        auto conn = std::make_unique<Conn>();
        Conn* raw = conn.get();
        std::lock_guard<std::mutex> lock(conns_mu_);
        conns_.push_back(std::move(conn));
        raw->thread = std::thread([this, fd, raw] { serve(kv::Socket(fd), &raw->done); });
    }
}

void KvReceiver::serve(kv::Socket control, std::atomic<bool>* done) {
    const std::string peer = kv::peerName(control);
    const Nanos deadline = monotonicNowNs() + config_.timeout_ms * kNsPerMs;
    std::unique_ptr<transport::RecvComm> comm;
    [&] {
        std::array<uint8_t, kv::kHelloBytes> hello{};
        if (!kv::recvAll(control, hello.data(), hello.size(), deadline).isOk() ||
            !kv::decodeHello(hello).isOk()) {
            ATLAS_LOG_WARN(config_.logger, "kv-sink: dropped %s: no valid hello", peer.c_str());
            return;
        }
        kv::HelloReply reply;
        auto local = kv::localAddress(control);
        uint8_t handle[transport::kHandleSize] = {};
        std::unique_ptr<transport::ListenComm> listen;
        if (local.isOk()) {
            auto l = transport_->listen(local.value(), handle);
            if (l.isOk()) {
                listen = std::move(l.value());
            }
        }
        if (listen == nullptr) {
            reply.status = kv::ReplyStatus::kError;
            const auto bytes = kv::encodeReply(reply);
            (void)kv::sendAll(control, bytes.data(), bytes.size(), deadline);
            return;
        }
        std::memcpy(reply.handle.data(), handle, sizeof(handle));
        const auto bytes = kv::encodeReply(reply);
        if (!kv::sendAll(control, bytes.data(), bytes.size(), deadline).isOk()) {
            return;
        }
        kv::PollBackoff backoff;
        while (comm == nullptr) {
            if (!listen->accept(&comm).isOk() || monotonicNowNs() > deadline ||
                stopping_.load(std::memory_order_acquire)) {
                ATLAS_LOG_WARN(config_.logger, "kv-sink: %s never connected its data comm",
                               peer.c_str());
                comm.reset();
                return;
            }
            if (comm == nullptr) {
                backoff.pause();
            }
        }
        while (!stopping_.load(std::memory_order_acquire) && serveOne(control, *comm, peer)) {
        }
    }();
    if (comm) {
        (void)comm->close();
    }
    done->store(true, std::memory_order_release);
}

Status KvReceiver::receive(transport::RecvComm& comm, void* data, size_t capacity, size_t* size,
                           const kv::Socket& control, bool first_message) {
    transport::Request* req = nullptr;
    kv::PollBackoff post_backoff;
    const Nanos deadline = monotonicNowNs() + config_.timeout_ms * kNsPerMs;
    while (req == nullptr) {
        ATLAS_RETURN_IF_ERROR(comm.irecv(data, capacity, &req));
        if (req == nullptr) {
            if (monotonicNowNs() > deadline) {
                return {Code::kTimeout, "timed out waiting for a free receive request"};
            }
            post_backoff.pause();
        }
    }
    kv::PollBackoff backoff;
    uint64_t polls = 0;
    for (;;) {
        bool done = false;
        ATLAS_RETURN_IF_ERROR(transport::test(req, &done, size));
        if (done) {
            return Status::ok();
        }
        if (stopping_.load(std::memory_order_acquire)) {
            return {Code::kUnavailable, "stopping"};
        }
        if (first_message) {
            // Between transfers the daemon may stay quiet for as long as it likes; only
            // its closing the control connection ends the session.
            if ((++polls & 63) == 0 && controlClosed(control)) {
                return {Code::kRemote, "peer closed the control connection"};
            }
        } else if (monotonicNowNs() > deadline) {
            return {Code::kTimeout, "payload did not arrive in time"};
        }
        backoff.pause();
    }
}

bool KvReceiver::serveOne(kv::Socket& control, transport::RecvComm& comm, const std::string& peer) {
    std::vector<uint8_t> header_bytes(kv::kMaxHeaderBytes);
    size_t n = 0;
    if (!receive(comm, header_bytes.data(), header_bytes.size(), &n, control, true).isOk()) {
        return false;  // session over (peer gone, stopping, or a broken comm)
    }
    header_bytes.resize(n);
    const Nanos t0 = monotonicNowNs();
    const Nanos ack_deadline = t0 + config_.timeout_ms * kNsPerMs;
    KvTransfer xfer;
    xfer.peer = peer;
    auto nack = [&](kv::AckStatus status, const std::string& why, bool keep) {
        xfer.status = status;
        xfer.error = why;
        failed_.fetch_add(1, std::memory_order_relaxed);
        ATLAS_LOG_WARN(config_.logger, "kv-sink: transfer from %s rejected: %s", peer.c_str(),
                       why.c_str());
        if (callback_) {
            callback_(xfer);
        }
        kv::Ack ack;
        ack.status = status;
        ack.transfer_id = xfer.header.transfer_id;
        ack.message = why;
        const auto bytes = kv::encodeAck(ack);
        const bool sent = kv::sendAll(control, bytes.data(), bytes.size(), ack_deadline).isOk();
        return keep && sent;
    };
    auto header = kv::decodeHeader(header_bytes, config_.max_payload_bytes);
    if (!header.isOk()) {
        const bool too_large = header.status().code() == Code::kInvalidArgument;
        // Without a trusted size the payload cannot be received: end the session.
        return nack(too_large ? kv::AckStatus::kTooLarge : kv::AckStatus::kBadHeader,
                    header.status().message(), false);
    }
    xfer.header = header.value();
    if (!config_.expected_model.empty() && xfer.header.model_id != config_.expected_model) {
        return nack(
            kv::AckStatus::kModelMismatch,
            "model '" + xfer.header.model_id + "', expected '" + config_.expected_model + "'",
            false);
    }
    std::vector<std::byte> payload(xfer.header.payload_bytes);
    Status st = receive(comm, payload.data(), payload.size(), &n, control, false);
    if (!st.isOk()) {
        return nack(kv::AckStatus::kReceiveFailed, st.message(), false);
    }
    if (n != payload.size()) {
        return nack(kv::AckStatus::kReceiveFailed,
                    "payload has " + std::to_string(n) + " bytes, header says " +
                        std::to_string(payload.size()),
                    false);
    }
    const Nanos t1 = monotonicNowNs();
    const auto sum = kv::computeChecksum(xfer.header.checksum_kind, payload);
    xfer.receive_ns = t1 - t0;
    xfer.verify_ns = monotonicNowNs() - t1;
    if (sum != xfer.header.checksum) {
        // The stream is still in sync (the payload was consumed whole): keep the session.
        return nack(kv::AckStatus::kChecksumMismatch,
                    "payload checksum " + kv::checksumText(xfer.header.checksum_kind, sum) +
                        " != header " +
                        kv::checksumText(xfer.header.checksum_kind, xfer.header.checksum),
                    true);
    }
    if (config_.keep_payload) {
        xfer.payload = std::move(payload);
    }
    ok_.fetch_add(1, std::memory_order_relaxed);
    // The callback runs before the ack, so whoever waits for the daemon's reply sees the
    // transfer already recorded by the callback.
    if (callback_) {
        callback_(xfer);
    }
    kv::Ack ack;
    ack.transfer_id = xfer.header.transfer_id;
    ack.bytes = xfer.header.payload_bytes;
    const auto bytes = kv::encodeAck(ack);
    return kv::sendAll(control, bytes.data(), bytes.size(), ack_deadline).isOk();
}

}  // namespace atlas::bubbletea
