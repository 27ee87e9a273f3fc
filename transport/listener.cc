// ListenComm::Impl, the listening half of connection setup (transport/setup.h: the
// contract; setup.cc: the Connector). NCCL's service thread calls accept() repeatedly; each
// call serves every pending connection and session as far as it can without blocking.
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

ListenComm::Impl::Impl(Transport& t, Fd fd, const SocketAddress& addr, uint64_t listen_id,
                       uint16_t rejoin_port)
    : t_(t), fd_(std::move(fd)), addr_(addr), listen_id_(listen_id), rejoin_port_(rejoin_port) {}

void ListenComm::Impl::warnDrop(int fd, const std::string& why) {
    // Strangers must not flood NCCL's log: the first few drops are warnings, then silence.
    if (warnings_ < 8) {
        ++warnings_;
        std::string who = "?";
        if (auto p = peerAddress(fd); p.isOk()) {
            who = p->toString();
        }
        ATLAS_LOG_WARN(t_.config().logger, "listener %s dropped connection from %s: %s%s",
                       addr_.toString().c_str(), who.c_str(), why.c_str(),
                       warnings_ == 8 ? " (further drops not logged)" : "");
    }
}

bool ListenComm::Impl::servePending(Pending& p, Nanos now) {
    const TransportConfig& cfg = t_.config();
    if (!p.has_data_hello) {
        bool eof = false;
        wire::HsHeader h;
        std::vector<uint8_t> body;
        auto got = p.conn.receive(&h, &body, &eof);
        if (!got.isOk()) {
            warnDrop(p.conn.fd(), got.status().message());
            return false;
        }
        if (!got.value()) {
            if (eof) {
                return false;  // closed before saying anything useful
            }
            if (now > p.deadline) {
                warnDrop(p.conn.fd(), "no handshake within ATLAS_TIMEOUT_MS");
                return false;
            }
            return true;
        }
        if (h.type == wire::HsType::kHello) {
            wire::Hello hello;
            Status dst = wire::decode(std::span<const uint8_t>(body), &hello);
            if (!dst.isOk() || hello.listen_id != listen_id_ ||
                sessions_.count(hello.session_id) != 0 || p.conn.hasInput()) {
                warnDrop(p.conn.fd(),
                         dst.isOk() ? "hello for another listen comm or session" : dst.message());
                return false;
            }
            Session s;
            s.auth.listen_id = listen_id_;
            s.auth.session_id = hello.session_id;
            s.auth.client_nonce = hello.client_nonce;
            if (Status rng = randomBytes(s.auth.server_nonce.data(), s.auth.server_nonce.size());
                !rng.isOk()) {
                warnDrop(p.conn.fd(), rng.message());  // no nonce: no handshake, never a weak one
                return false;
            }
            wire::HelloAck ack;
            ack.server_nonce = s.auth.server_nonce;
            ack.rejoin_port = rejoin_port_;
            ack.encrypt = cfg.encrypt ? 1 : 0;
            s.modes = static_cast<uint8_t>(hello.encrypt | (ack.encrypt << 1));
            if (!cfg.auth_key.empty()) {
                ack.auth = 1;
                ack.server_mac = serverMac(cfg.auth_key, s.auth, rejoin_port_, s.modes);
            }
            if (hello.encrypt != ack.encrypt) {
                // The HelloAck still goes out, so the connector fails naming the cause too.
                s.refuse_why = hello.encrypt != 0
                                   ? "connector encrypts (ATLAS_ENCRYPT=1) but this side does "
                                     "not: set the same ATLAS_ENCRYPT on both sides"
                                   : "connector does not encrypt but this side has "
                                     "ATLAS_ENCRYPT=1: set ATLAS_ENCRYPT=1 there too";
            }
            if (auto peer = peerAddress(p.conn.fd()); peer.isOk()) {
                s.peer = peer.value();
            }
            s.ctrl = std::move(p.conn);
            queueMsg(s.ctrl, ack);
            s.deadline = now + static_cast<Nanos>(cfg.timeout_ms) * kNsPerMs;
            sessions_.emplace(hello.session_id, std::move(s));
            return false;  // moved into the session
        }
        if (h.type != wire::HsType::kDataHello) {
            warnDrop(p.conn.fd(), "unexpected first handshake message");
            return false;
        }
        Status dst = wire::decode(std::span<const uint8_t>(body), &p.data_hello);
        if (!dst.isOk() || p.data_hello.listen_id != listen_id_ || p.conn.hasInput()) {
            warnDrop(p.conn.fd(),
                     dst.isOk() ? "data stream for another listen comm" : dst.message());
            return false;
        }
        p.has_data_hello = true;
    }
    // A data stream: join its session once the session's Config (stream count, auth) is known.
    auto it = sessions_.find(p.data_hello.session_id);
    if (it == sessions_.end() || !it->second.configured) {
        if (now > p.deadline) {
            warnDrop(p.conn.fd(), "data stream for an unknown session");
            return false;
        }
        return true;
    }
    Session& s = it->second;
    const uint32_t idx = p.data_hello.index;
    if (idx >= s.plan.nstreams || s.data[idx].valid()) {
        warnDrop(p.conn.fd(), "data stream index out of range or duplicated");
        return false;
    }
    if (!cfg.auth_key.empty() && !macEqual(p.data_hello.mac, dataMac(cfg.auth_key, s.auth, idx))) {
        t_.impl().auth_failures.fetch_add(1, std::memory_order_relaxed);
        warnDrop(p.conn.fd(), "data stream failed authentication");
        return false;
    }
    s.data[idx] = p.conn.takeFd();
    ++s.joined;
    return false;
}

Status ListenComm::Impl::serveSession(Session& s, Nanos now, std::unique_ptr<RecvComm>* out,
                                      bool* drop) {
    const TransportConfig& cfg = t_.config();
    *drop = false;
    Status st = s.ctrl.flush();
    if (!s.refuse_why.empty()) {
        // Wait for the HelloAck to leave (bounded by the session deadline), then drop.
        if (st.isOk() && s.ctrl.hasOutput() && now <= s.deadline) {
            return Status::ok();
        }
        warnDrop(s.ctrl.fd(), s.refuse_why);
        *drop = true;
        return Status::ok();
    }
    bool eof = false;
    if (st.isOk()) {
        st = s.ctrl.fill(&eof);
    }
    if (st.isOk() && !s.configured) {
        wire::HsHeader h;
        std::vector<uint8_t> body;
        auto got = s.ctrl.take(&h, &body);
        if (!got.isOk()) {
            st = got.status();
        } else if (got.value()) {
            st = expectMsg(h, body, wire::HsType::kConfig, &s.plan, "Config");
            if (st.isOk() && !cfg.auth_key.empty() &&
                !macEqual(s.plan.client_mac, clientMac(cfg.auth_key, s.auth, s.plan, s.modes))) {
                t_.impl().auth_failures.fetch_add(1, std::memory_order_relaxed);
                st = {Code::kRemote, "connector failed authentication (ATLAS_AUTH_KEY differs)"};
            }
            if (st.isOk()) {
                s.configured = true;
                s.data.resize(s.plan.nstreams);
            }
        } else if (eof) {
            st = {Code::kRemote, "connector closed during the handshake"};
        } else if (now > s.deadline) {
            st = {Code::kTimeout, "connector did not finish the handshake in time"};
        }
    }
    if (st.isOk() && s.configured && s.ctrl.hasInput()) {
        st = {Code::kRemote, "unexpected bytes after Config"};
    }
    if (st.isOk() && s.configured && !s.ready_queued &&
        s.joined == static_cast<int>(s.plan.nstreams)) {
        queueMsg(s.ctrl, wire::Ready{});
        s.ready_queued = true;
        st = s.ctrl.flush();
    }
    if (st.isOk() && s.configured && !s.ready_queued && now > s.deadline) {
        st = {Code::kTimeout, "not all data streams arrived in time (" + std::to_string(s.joined) +
                                  " of " + std::to_string(s.plan.nstreams) + ")"};
    }
    if (!st.isOk()) {
        warnDrop(s.ctrl.fd(), st.message());
        *drop = true;
        return Status::ok();
    }
    if (!s.ready_queued || s.ctrl.hasOutput()) {
        return Status::ok();
    }
    // Ready is on the wire: the comm is up.
    std::shared_ptr<const seal::SessionSecrets> secrets;
    if (cfg.encrypt) {
        auto derived = seal::SessionSecrets::derive(cfg.auth_key, s.auth);
        if (!derived.isOk()) {
            warnDrop(s.ctrl.fd(), derived.status().message());
            *drop = true;
            return Status::ok();
        }
        secrets = std::make_shared<const seal::SessionSecrets>(std::move(derived.value()));
    }
    std::vector<Fd> fds;
    fds.push_back(s.ctrl.takeFd());
    for (auto& d : s.data) {
        fds.push_back(std::move(d));
    }
    CommParams params;
    params.role = CommParams::Role::kRecv;
    params.chunk_bytes = s.plan.chunk_bytes;
    params.inline_bytes = s.plan.inline_bytes;
    params.info.inline_bytes = s.plan.inline_bytes;
    params.stripe = cfg.stripe;
    params.logger = cfg.logger;
    params.clock = cfg.clock;
    params.info.session_id = s.auth.session_id;
    params.info.nstreams = static_cast<int>(s.plan.nstreams);
    params.info.rtt_ns = static_cast<Nanos>(s.plan.rtt_ns);
    params.info.peer = s.peer;
    params.info.local = addr_;
    params.info.authenticated = !cfg.auth_key.empty();
    params.auth = s.auth;
    params.secrets = secrets;
    params.info.encrypted = secrets != nullptr;
    ATLAS_LOG_INFO(cfg.logger,
                   "recv comm %016" PRIx64
                   " from %s: %u data streams, "
                   "rtt %" PRId64 " us%s",
                   s.auth.session_id, s.peer.toString().c_str(), s.plan.nstreams,
                   static_cast<int64_t>(s.plan.rtt_ns / 1000),
                   params.info.encrypted       ? ", authenticated, encrypted"
                   : params.info.authenticated ? ", authenticated"
                                               : "");
    *out = t_.impl().makeRecvComm(params, std::move(fds));
    *drop = true;
    return Status::ok();
}

Status ListenComm::Impl::accept(std::unique_ptr<RecvComm>* out) {
    const TransportConfig& cfg = t_.config();
    const Nanos now = cfg.clock->nowNs();
    // Take every connection waiting in the backlog.
    for (;;) {
        int fd = ::accept4(fd_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                break;
            }
            return Status::fromErrno("accept on " + addr_.toString(), errno);
        }
        Fd owned(fd);
        Status st = applyStreamOptions(fd, socketOptions(cfg));
        if (!st.isOk()) {
            warnDrop(fd, st.message());
            continue;
        }
        // Bound what strangers can make us hold: drop the oldest pending beyond the cap.
        if (pending_.size() >= 1024) {
            pending_.pop_front();
        }
        Pending p;
        p.conn = HsConn(std::move(owned));
        p.deadline = now + static_cast<Nanos>(cfg.timeout_ms) * kNsPerMs;
        pending_.push_back(std::move(p));
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
        it = servePending(*it, now) ? std::next(it) : pending_.erase(it);
    }
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        bool drop = false;
        if (*out == nullptr) {
            ATLAS_RETURN_IF_ERROR(serveSession(it->second, now, out, &drop));
        }
        it = drop ? sessions_.erase(it) : std::next(it);
    }
    return Status::ok();
}

}  // namespace atlas::transport
