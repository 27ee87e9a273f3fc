// Connector, the connecting half of connection setup (transport/setup.h: the contract;
// listener.cc: the listening half).
#include "transport/setup.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "transport/engine.h"
#include "transport/transport_impl.h"

namespace atlas::transport {

// ---------------------------------------------------------------- HsConn

Status HsConn::flush() {
    while (out_off_ < out_.size()) {
        ssize_t n = ::send(fd_.get(), out_.data() + out_off_, out_.size() - out_off_,
                           MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            out_off_ += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            return Status::ok();
        }
        return Status::fromErrno("send (handshake)", errno, Code::kRemote);
    }
    out_.clear();
    out_off_ = 0;
    return Status::ok();
}

Status HsConn::fill(bool* eof, size_t limit) {
    *eof = false;
    uint8_t buf[1024];
    // Handshake messages are tiny; cap what a peer can make us buffer.
    while (in_.size() < limit) {
        ssize_t n = ::recv(fd_.get(), buf, std::min(sizeof(buf), limit - in_.size()), MSG_DONTWAIT);
        if (n > 0) {
            in_.insert(in_.end(), buf, buf + n);
            continue;
        }
        if (n == 0) {
            *eof = true;
            return Status::ok();
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            return Status::ok();
        }
        return Status::fromErrno("recv (handshake)", errno, Code::kRemote);
    }
    return Status::ok();
}

Result<bool> HsConn::take(wire::HsHeader* header, std::vector<uint8_t>* body) {
    if (in_.size() < wire::kHsHeaderBytes) {
        return false;
    }
    ATLAS_RETURN_IF_ERROR(wire::decodeHsHeader(in_, header));
    const size_t total = wire::kHsHeaderBytes + header->body_len;
    if (in_.size() < total) {
        return false;
    }
    body->assign(in_.begin() + wire::kHsHeaderBytes, in_.begin() + static_cast<long>(total));
    in_.erase(in_.begin(), in_.begin() + static_cast<long>(total));
    return true;
}

namespace {

SocketAddress handlePeer(const wire::HandleInfo& info) {
    SocketAddress a;
    if (info.family == AF_INET) {
        auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
        v4->sin_family = AF_INET;
        v4->sin_port = htons(info.port);
        std::memcpy(&v4->sin_addr, info.addr.data(), 4);
        a.len = sizeof(sockaddr_in);
    } else {
        auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(info.port);
        std::memcpy(&v6->sin6_addr, info.addr.data(), 16);
        a.len = sizeof(sockaddr_in6);
    }
    return a;
}

bool retriableConnectError(int err) {
    return err == ECONNREFUSED || err == ETIMEDOUT || err == ENETUNREACH || err == EHOSTUNREACH ||
           err == ECONNRESET || err == EAGAIN;
}

}  // namespace

// ---------------------------------------------------------------- Connector

Connector::Connector(Transport& transport, const wire::HandleInfo& info, Nanos now)
    : t_(transport), cfg_(transport.config()), info_(info), peer_(handlePeer(info)) {
    deadline_ = now + static_cast<Nanos>(cfg_.timeout_ms) * kNsPerMs;
}

Status Connector::timeoutError() const {
    return {Code::kTimeout, "connect to " + peer_.toString() + " did not complete within " +
                                std::to_string(cfg_.timeout_ms) +
                                " ms (listener unreachable, not responding, or rejecting us)"};
}

Status Connector::connectCtrl(Nanos now) {
    if (!ctrl_connecting_) {
        if (now < retry_at_) {
            return Status::ok();
        }
        auto fd = startConnect(peer_, socketOptions(cfg_));
        if (!fd.isOk()) {
            return fd.status();
        }
        ctrl_ = HsConn(std::move(fd.value()));
        ctrl_connecting_ = true;
        connect_started_ = now;
        ++attempts_;
    }
    const int rc = pollConnected(ctrl_.fd());
    if (rc == 0) {
        return Status::ok();
    }
    if (rc < 0) {
        if (!retriableConnectError(-rc)) {
            return Status::fromErrno("connect to " + peer_.toString(), -rc, Code::kRemote);
        }
        // Like NCCL's socket transport: retry refused connects with a growing backoff.
        ctrl_ = HsConn();
        ctrl_connecting_ = false;
        retry_at_ = now + std::min<Nanos>(attempts_ * 100 * kNsPerMs, kNsPerSec);
        return Status::ok();
    }
    // The TCP handshake took about one RTT: a first RTT sample.
    rtt_ns_ = now - connect_started_;
    ATLAS_RETURN_IF_ERROR(randomBytes(auth_.client_nonce.data(), auth_.client_nonce.size()));
    auto sid = randomU64();
    if (!sid.isOk()) {
        return sid.status();
    }
    auth_.listen_id = info_.listen_id;
    auth_.session_id = sid.value();
    wire::Hello hello;
    hello.listen_id = info_.listen_id;
    hello.session_id = auth_.session_id;
    hello.client_nonce = auth_.client_nonce;
    hello.wants_auth = cfg_.auth_key.empty() ? 0 : 1;
    hello.encrypt = cfg_.encrypt ? 1 : 0;
    queueMsg(ctrl_, hello);
    ATLAS_RETURN_IF_ERROR(ctrl_.flush());
    hello_sent_ = now;
    phase_ = Phase::kHello;
    return Status::ok();
}

Status Connector::onHelloAck(const wire::HelloAck& ack, Nanos now) {
    rtt_ns_ = std::min(rtt_ns_, now - hello_sent_);
    const Nanos kernel_rtt = tcpInfoRttNs(ctrl_.fd());
    if (kernel_rtt > 0) {
        rtt_ns_ = std::min(rtt_ns_, kernel_rtt);
    }
    auth_.server_nonce = ack.server_nonce;
    rejoin_port_ = ack.rejoin_port;
    modes_ = static_cast<uint8_t>((cfg_.encrypt ? 1 : 0) | (ack.encrypt << 1));
    if (!cfg_.auth_key.empty()) {
        if (ack.auth == 0) {
            return {Code::kRemote, "listener " + peer_.toString() +
                                       " has no ATLAS_AUTH_KEY but this side requires one"};
        }
        if (!macEqual(ack.server_mac, serverMac(cfg_.auth_key, auth_, ack.rejoin_port, modes_))) {
            return {Code::kRemote, "listener " + peer_.toString() +
                                       " failed authentication (ATLAS_AUTH_KEY differs)"};
        }
    } else if (ack.auth != 0) {
        return {Code::kRemote, "listener " + peer_.toString() +
                                   " requires authentication; set ATLAS_AUTH_KEY on this side too"};
    }
    if (cfg_.encrypt && ack.encrypt == 0) {
        return {Code::kInvalidUsage,
                "listener " + peer_.toString() +
                    " does not encrypt (ATLAS_ENCRYPT is off there) but this side has "
                    "ATLAS_ENCRYPT=1: set the same ATLAS_ENCRYPT on both sides"};
    }
    if (!cfg_.encrypt && ack.encrypt != 0) {
        return {Code::kInvalidUsage, "listener " + peer_.toString() +
                                         " requires encryption (ATLAS_ENCRYPT=1 there): set "
                                         "ATLAS_ENCRYPT=1 on this side too"};
    }
    StreamPlanInput in;
    in.rtt_ns = rtt_ns_;
    in.link_bps = cfg_.link_bps;
    if (cfg_.measured_path_bps && cfg_.nstreams == 0) {
        CommInfo path;
        path.rtt_ns = rtt_ns_;
        path.peer = peer_;
        if (auto local = localAddress(ctrl_.fd()); local.isOk()) {
            path.local = local.value();
        }
        in.measured_bps = cfg_.measured_path_bps(path);
    }
    in.requested = cfg_.nstreams;
    in.max_streams = cfg_.max_streams;
    in.sockbuf_bytes = cfg_.sockbuf_bytes;
    in.limits = readKernelTcpLimits();
    const StreamPlan sp = planStreams(in);
    plan_reason_ = sp.reason;
    plan_.nstreams = static_cast<uint32_t>(sp.nstreams);
    plan_.chunk_bytes = static_cast<uint32_t>(cfg_.chunk_bytes);
    plan_.inline_bytes = static_cast<uint32_t>(cfg_.inline_bytes);
    plan_.rtt_ns = static_cast<uint64_t>(rtt_ns_);
    if (!cfg_.auth_key.empty()) {
        plan_.client_mac = clientMac(cfg_.auth_key, auth_, plan_, modes_);
    }
    queueMsg(ctrl_, plan_);
    ATLAS_RETURN_IF_ERROR(ctrl_.flush());
    for (uint32_t i = 0; i < plan_.nstreams; ++i) {
        auto fd = startConnect(peer_, socketOptions(cfg_));
        if (!fd.isOk()) {
            return fd.status();
        }
        data_.emplace_back(std::move(fd.value()));
    }
    data_connected_.assign(plan_.nstreams, false);
    phase_ = Phase::kStreams;
    return Status::ok();
}

Status Connector::stepStreams() {
    bool all = true;
    for (size_t i = 0; i < data_.size(); ++i) {
        if (!data_connected_[i]) {
            const int rc = pollConnected(data_[i].fd());
            if (rc < 0) {
                return Status::fromErrno(
                    "connect data stream " + std::to_string(i) + " to " + peer_.toString(), -rc,
                    Code::kRemote);
            }
            if (rc == 0) {
                all = false;
                continue;
            }
            data_connected_[i] = true;
            wire::DataHello dh;
            dh.listen_id = info_.listen_id;
            dh.session_id = auth_.session_id;
            dh.index = static_cast<uint32_t>(i);
            if (!cfg_.auth_key.empty()) {
                dh.mac = dataMac(cfg_.auth_key, auth_, dh.index);
            }
            queueMsg(data_[i], dh);
        }
        ATLAS_RETURN_IF_ERROR(data_[i].flush());
        all = all && !data_[i].hasOutput();
    }
    if (all) {
        phase_ = Phase::kReady;
    }
    return Status::ok();
}

Status Connector::finish(std::unique_ptr<SendComm>* out) {
    std::vector<Fd> fds;
    fds.push_back(ctrl_.takeFd());
    for (auto& d : data_) {
        // Data streams: keep queues in user space, where the striper sees them.
        ATLAS_RETURN_IF_ERROR(setNotsentLowat(
            d.fd(), static_cast<uint32_t>(std::max<size_t>(cfg_.chunk_bytes, 128 * 1024))));
        fds.push_back(d.takeFd());
    }
    CommParams params;
    params.role = CommParams::Role::kSend;
    params.chunk_bytes = plan_.chunk_bytes;
    params.inline_bytes = plan_.inline_bytes;
    params.info.inline_bytes = plan_.inline_bytes;
    params.stripe = cfg_.stripe;
    params.logger = cfg_.logger;
    params.clock = cfg_.clock;
    params.info.session_id = auth_.session_id;
    params.info.nstreams = static_cast<int>(plan_.nstreams);
    params.info.rtt_ns = rtt_ns_;
    params.info.peer = peer_;
    params.info.authenticated = !cfg_.auth_key.empty();
    if (cfg_.encrypt) {
        auto secrets = seal::SessionSecrets::derive(cfg_.auth_key, auth_);
        if (!secrets.isOk()) {
            return secrets.status();
        }
        params.secrets = std::make_shared<const seal::SessionSecrets>(std::move(secrets.value()));
        params.info.encrypted = true;
    }
    if (auto local = localAddress(fds[0].get()); local.isOk()) {
        params.info.local = local.value();
    }
    params.auth = auth_;
    params.rejoin_peer = peer_;
    if (peer_.family() == AF_INET) {
        reinterpret_cast<sockaddr_in*>(&params.rejoin_peer.storage)->sin_port = htons(rejoin_port_);
    } else {
        reinterpret_cast<sockaddr_in6*>(&params.rejoin_peer.storage)->sin6_port =
            htons(rejoin_port_);
    }
    ATLAS_LOG_INFO(cfg_.logger,
                   "send comm %016" PRIx64
                   " to %s: %d data streams (%s), chunk %u B, "
                   "inline %u B, stripe %s%s",
                   auth_.session_id, peer_.toString().c_str(), params.info.nstreams,
                   plan_reason_.c_str(), plan_.chunk_bytes, plan_.inline_bytes,
                   stripeModeName(cfg_.stripe),
                   params.info.encrypted       ? ", authenticated, encrypted"
                   : params.info.authenticated ? ", authenticated"
                                               : "");
    *out = t_.impl().makeSendComm(params, std::move(fds));
    return Status::ok();
}

Status Connector::step(std::unique_ptr<SendComm>* out) {
    const Nanos now = cfg_.clock->nowNs();
    if (now > deadline_) {
        return timeoutError();
    }
    if (phase_ == Phase::kConnectCtrl) {
        return connectCtrl(now);
    }
    ATLAS_RETURN_IF_ERROR(ctrl_.flush());
    bool eof = false;
    // Once Ready is sent the listener's comm may write frames (confirmations) right behind
    // it: read exactly up to the end of Ready, never into the comm's bytes.
    ATLAS_RETURN_IF_ERROR(
        ctrl_.fill(&eof, phase_ == Phase::kHello ? 4 * wire::kHsMaxMessage : wire::kReadyBytes));
    wire::HsHeader h;
    std::vector<uint8_t> body;
    auto got = ctrl_.take(&h, &body);
    if (!got.isOk()) {
        return got.status();
    }
    if (phase_ == Phase::kHello) {
        if (got.value()) {
            wire::HelloAck ack;
            ATLAS_RETURN_IF_ERROR(expectMsg(h, body, wire::HsType::kHelloAck, &ack, "HelloAck"));
            ATLAS_RETURN_IF_ERROR(onHelloAck(ack, now));
        }
    } else if (phase_ == Phase::kStreams) {
        if (got.value()) {
            return {Code::kRemote, "listener sent a message before all streams joined"};
        }
        ATLAS_RETURN_IF_ERROR(stepStreams());
    } else if (phase_ == Phase::kReady) {
        if (got.value()) {
            wire::Ready ready;
            ATLAS_RETURN_IF_ERROR(expectMsg(h, body, wire::HsType::kReady, &ready, "Ready"));
            if (ready.status != 0 || ctrl_.hasInput()) {
                return {Code::kRemote, "listener rejected the connection"};
            }
            return finish(out);
        }
    }
    if (eof) {
        return {Code::kRemote, "listener " + peer_.toString() +
                                   " closed the connection during the handshake (rejected: "
                                   "authentication or protocol mismatch?)"};
    }
    return Status::ok();
}

}  // namespace atlas::transport
