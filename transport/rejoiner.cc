#include "transport/rejoiner.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstring>

#include "transport/engine.h"

namespace atlas::transport {
namespace {

// A connection to the rejoin listener that says nothing is dropped after this long.
constexpr Nanos kInboundDeadline = 10 * kNsPerSec;
constexpr size_t kMaxInbound = 1024;

std::string statusName(wire::RejoinStatus s) {
    switch (s) {
        case wire::RejoinStatus::kOk:
            return "ok";
        case wire::RejoinStatus::kUnknownSession:
            return "the receiving comm is closed";
        case wire::RejoinStatus::kStale:
            return "a newer incarnation of the stream already joined";
        case wire::RejoinStatus::kBadIndex:
            return "stream index out of range";
    }
    return "?";
}

}  // namespace

Rejoiner::Rejoiner(const TransportConfig& config) : config_(config) {}

Result<std::unique_ptr<Rejoiner>> Rejoiner::start(const TransportConfig& config) {
    std::unique_ptr<Rejoiner> r(new Rejoiner(config));
    const int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (fd < 0) {
        return Status::fromErrno("eventfd() for the rejoiner", errno);
    }
    r->wake_fd_ = Fd(fd);
    Rejoiner* raw = r.get();
    r->thread_ = std::thread([raw] { raw->run(); });
    return r;
}

Rejoiner::~Rejoiner() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    wake();
    if (thread_.joinable()) {
        thread_.join();
    }
}

void Rejoiner::wake() {
    const uint64_t one = 1;
    ssize_t n = ::write(wake_fd_.get(), &one, sizeof(one));
    (void)n;
}

Result<uint16_t> Rejoiner::listenerPort(const SocketAddress& local_with_port) {
    // One listener per address: the key is the address with port 0.
    SocketAddress local = local_with_port;
    if (local.family() == AF_INET) {
        reinterpret_cast<sockaddr_in*>(&local.storage)->sin_port = 0;
    } else {
        reinterpret_cast<sockaddr_in6*>(&local.storage)->sin6_port = 0;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Listener& l : listeners_) {
        if (l.addr.len == local.len &&
            std::memcmp(&l.addr.storage, &local.storage, local.len) == 0) {
            return l.port;
        }
    }
    auto fd = makeTcpSocket(local.family());
    if (!fd.isOk()) {
        return fd.status();
    }
    const int one = 1;
    ::setsockopt(fd->get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    // As for the listen comm: buffer sizes before listen() shape the accepted windows.
    ATLAS_RETURN_IF_ERROR(applyStreamOptions(fd->get(), socketOptions(config_)));
    const SocketAddress& bind_addr = local;
    if (::bind(fd->get(), reinterpret_cast<const sockaddr*>(&bind_addr.storage), bind_addr.len) !=
        0) {
        return Status::fromErrno("bind the rejoin listener to " + bind_addr.toString(), errno);
    }
    if (::listen(fd->get(), SOMAXCONN) != 0) {
        return Status::fromErrno("listen (rejoin) on " + bind_addr.toString(), errno);
    }
    auto bound = localAddress(fd->get());
    if (!bound.isOk()) {
        return bound.status();
    }
    Listener l;
    l.addr = local;
    l.port = bound->port();
    l.fd = std::move(fd.value());
    const uint16_t port = l.port;
    listeners_.push_back(std::move(l));
    listeners_changed_ = true;
    wake();
    ATLAS_LOG_INFO(config_.logger, "rejoin listener on %s", bound->toString().c_str());
    return port;
}

uint64_t Rejoiner::registerComm(CommCore* comm, Engine* engine) {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t token = next_token_++;
    comms_[token] = Registered{comm, engine};
    return token;
}

void Rejoiner::addSession(uint64_t token, uint64_t session_id, const AuthContext& auth,
                          int nstreams) {
    std::lock_guard<std::mutex> lock(mutex_);
    Session s;
    s.token = token;
    s.auth = auth;
    s.nstreams = nstreams;
    s.max_epoch.assign(static_cast<size_t>(nstreams) + 1, 0);
    sessions_[session_id] = std::move(s);
}

void Rejoiner::unregister(uint64_t token) {
    std::lock_guard<std::mutex> lock(mutex_);
    comms_.erase(token);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
        it = it->second.token == token ? sessions_.erase(it) : std::next(it);
    }
    dial_queue_.erase(std::remove_if(dial_queue_.begin(), dial_queue_.end(),
                                     [token](const Dial& d) { return d.token == token; }),
                      dial_queue_.end());
    // Dials already in progress find the token gone when they finish (deliver()).
}

void Rejoiner::dial(const Dial& d) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        dial_queue_.push_back(d);
    }
    wake();
}

void Rejoiner::deliver(uint64_t token, StreamArrival a) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = comms_.find(token);
    if (it == comms_.end()) {
        return;  // the comm closed meanwhile; the fd closes here
    }
    it->second.engine->deliver(it->second.comm, std::move(a));
}

void Rejoiner::warnStranger(int fd, const std::string& why) {
    if (warnings_ < 8) {
        ++warnings_;
        std::string who = "?";
        if (auto p = peerAddress(fd); p.isOk()) {
            who = p->toString();
        }
        ATLAS_LOG_WARN(config_.logger, "rejoin listener dropped connection from %s: %s%s",
                       who.c_str(), why.c_str(),
                       warnings_ == 8 ? " (further drops not logged)" : "");
    }
}

void Rejoiner::run() {
    std::vector<pollfd> pfds;
    while (true) {
        std::vector<Dial> dials;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (stop_) {
                break;
            }
            dials.swap(dial_queue_);
            if (listeners_changed_) {
                listen_fds_.clear();
                for (const Listener& l : listeners_) {
                    listen_fds_.push_back(l.fd.get());
                }
                listeners_changed_ = false;
            }
        }
        const Nanos now = config_.clock->nowNs();
        for (Dial& d : dials) {
            Outbound out;
            out.d = d;
            auto fd = startConnect(d.peer, socketOptions(config_));
            if (!fd.isOk()) {
                fail(out, fd.status(), false);
                continue;
            }
            out.conn = HsConn(std::move(fd.value()));
            outbound_.push_back(std::move(out));
        }
        for (auto it = inbound_.begin(); it != inbound_.end();) {
            it = serveInbound(*it, now) ? std::next(it) : inbound_.erase(it);
        }
        for (auto it = outbound_.begin(); it != outbound_.end();) {
            it = serveOutbound(*it, now) ? std::next(it) : outbound_.erase(it);
        }
        // Sleep until a socket is ready, a deadline passes, or wake().
        pfds.clear();
        pfds.push_back({wake_fd_.get(), POLLIN, 0});
        for (int fd : listen_fds_) {
            pfds.push_back({fd, POLLIN, 0});
        }
        Nanos next = now + kNsPerSec;
        for (const Inbound& in : inbound_) {
            pfds.push_back(
                {in.conn.fd(), static_cast<short>(in.conn.hasOutput() ? POLLOUT : POLLIN), 0});
            next = std::min(next, in.deadline);
        }
        for (const Outbound& out : outbound_) {
            const bool wants_out = !out.connected || out.conn.hasOutput();
            pfds.push_back({out.conn.fd(), static_cast<short>(wants_out ? POLLOUT : POLLIN), 0});
            next = std::min(next, out.d.deadline);
        }
        const Nanos wait_ns = std::max<Nanos>(0, next - now);
        const int timeout_ms = static_cast<int>((wait_ns + kNsPerMs - 1) / kNsPerMs);
        const int n = ::poll(pfds.data(), pfds.size(), timeout_ms);
        if (n < 0 && errno != EINTR) {
            ATLAS_LOG_WARN(config_.logger, "rejoiner: poll failed: %s", std::strerror(errno));
        }
        if (pfds[0].revents & POLLIN) {
            uint64_t v;
            while (::read(wake_fd_.get(), &v, sizeof(v)) > 0) {
            }
        }
        for (size_t i = 0; i < listen_fds_.size(); ++i) {
            if (pfds[1 + i].revents != 0) {
                acceptAll(listen_fds_[i], config_.clock->nowNs());
            }
        }
    }
    // Stopping: whatever is still in handshake is dropped (its fds close).
    inbound_.clear();
    outbound_.clear();
}

void Rejoiner::acceptAll(int listen_fd, Nanos now) {
    for (;;) {
        const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) {
                continue;
            }
            return;  // EAGAIN, or a transient error (EMFILE...): poll tells us again
        }
        Fd owned(fd);
        if (!applyStreamOptions(fd, socketOptions(config_)).isOk()) {
            continue;
        }
        if (inbound_.size() >= kMaxInbound) {
            inbound_.pop_front();  // bound what strangers can make us hold
        }
        Inbound in;
        in.conn = HsConn(std::move(owned));
        in.deadline = now + kInboundDeadline;
        inbound_.push_back(std::move(in));
    }
}

bool Rejoiner::serveInbound(Inbound& in, Nanos now) {
    Status st = in.conn.flush();
    if (in.refusing) {
        return st.isOk() && in.conn.hasOutput() && now < in.deadline;
    }
    bool eof = false;
    // Never read past the proof: stream bytes follow it.
    const size_t want = in.have_hello ? wire::kRejoinProofBytes : wire::kRejoinHelloBytes;
    wire::HsHeader h;
    std::vector<uint8_t> body;
    auto got = st.isOk() ? in.conn.receive(&h, &body, &eof, want) : Result<bool>(st);
    if (!got.isOk()) {
        warnStranger(in.conn.fd(), got.status().message());
        return false;
    }
    if (!got.value()) {
        if (eof) {
            return false;  // closed (a dial abandoned by its connector, or a probe)
        }
        if (now > in.deadline) {
            warnStranger(in.conn.fd(), "no rejoin handshake in time");
            return false;
        }
        return true;
    }
    const std::string& key = config_.auth_key;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!in.have_hello) {
        Status dst = expectMsg(h, body, wire::HsType::kRejoinHello, &in.hello, "RejoinHello");
        if (!dst.isOk()) {
            warnStranger(in.conn.fd(), dst.message());
            return false;
        }
        in.have_hello = true;
        wire::RejoinAck ack;
        auto it = sessions_.find(in.hello.session_id);
        if (it == sessions_.end()) {
            ack.status = static_cast<uint32_t>(wire::RejoinStatus::kUnknownSession);
        } else if (in.hello.index > static_cast<uint32_t>(it->second.nstreams)) {
            ack.status = static_cast<uint32_t>(wire::RejoinStatus::kBadIndex);
        } else if (in.hello.epoch <= it->second.max_epoch[in.hello.index]) {
            ack.status = static_cast<uint32_t>(wire::RejoinStatus::kStale);
        } else {
            in.nonces.client = in.hello.client_nonce;
            if (!randomBytes(in.nonces.server.data(), in.nonces.server.size()).isOk()) {
                return false;
            }
            ack.server_nonce = in.nonces.server;
            if (!key.empty()) {
                ack.server_mac = rejoinServerMac(key, it->second.auth, in.hello.index,
                                                 in.hello.epoch, in.nonces);
            }
        }
        queueMsg(in.conn, ack);
        in.refusing = ack.status != static_cast<uint32_t>(wire::RejoinStatus::kOk);
        (void)in.conn.flush();
        return in.conn.hasOutput() || !in.refusing;
    }
    wire::RejoinProof proof;
    Status dst = expectMsg(h, body, wire::HsType::kRejoinProof, &proof, "RejoinProof");
    if (!dst.isOk()) {
        warnStranger(in.conn.fd(), dst.message());
        return false;
    }
    auto it = sessions_.find(in.hello.session_id);
    if (it == sessions_.end() || in.hello.epoch <= it->second.max_epoch[in.hello.index]) {
        return false;  // closed or superseded while we waited for the proof
    }
    Session& s = it->second;
    if (!key.empty() && !macEqual(proof.client_mac, rejoinClientMac(key, s.auth, in.hello.index,
                                                                    in.hello.epoch, in.nonces))) {
        warnStranger(in.conn.fd(), "rejoin failed authentication (ATLAS_AUTH_KEY differs)");
        return false;
    }
    s.max_epoch[in.hello.index] = in.hello.epoch;
    auto reg = comms_.find(s.token);
    if (reg == comms_.end()) {
        return false;
    }
    StreamArrival a;
    a.index = static_cast<int>(in.hello.index);
    a.epoch = in.hello.epoch;
    a.fd = in.conn.takeFd();
    reg->second.engine->deliver(reg->second.comm, std::move(a));
    return false;
}

void Rejoiner::fail(Outbound& out, Status st, bool fatal) {
    StreamArrival a;
    a.index = out.d.index;
    a.epoch = out.d.epoch;
    a.status = std::move(st);
    a.fatal = fatal;
    deliver(out.d.token, std::move(a));
}

bool Rejoiner::serveOutbound(Outbound& out, Nanos now) {
    const std::string& key = config_.auth_key;
    if (now > out.d.deadline) {
        fail(out,
             {Code::kTimeout, "rejoin dial to " + out.d.peer.toString() + " got no answer in time"},
             false);
        return false;
    }
    if (!out.connected) {
        const int rc = pollConnected(out.conn.fd());
        if (rc == 0) {
            return true;
        }
        if (rc < 0) {
            // Refused: the host answers but nothing listens on the rejoin port any more, so
            // the receiving process (or its transport) is gone. Anything else (unreachable,
            // timed out) may be an outage that ends.
            fail(out,
                 Status::fromErrno("rejoin dial to " + out.d.peer.toString(), -rc, Code::kRemote),
                 -rc == ECONNREFUSED);
            return false;
        }
        out.connected = true;
        if (!randomBytes(out.nonces.client.data(), out.nonces.client.size()).isOk()) {
            fail(out, {Code::kSystem, "RAND_bytes failed"}, false);
            return false;
        }
        wire::RejoinHello hello;
        hello.session_id = out.d.session_id;
        hello.index = static_cast<uint32_t>(out.d.index);
        hello.epoch = out.d.epoch;
        hello.client_nonce = out.nonces.client;
        queueMsg(out.conn, hello);
    }
    Status st = out.conn.flush();
    if (st.isOk() && !out.proof_queued) {
        bool eof = false;
        wire::HsHeader h;
        std::vector<uint8_t> body;
        auto got = out.conn.receive(&h, &body, &eof, wire::kRejoinAckBytes);
        if (!got.isOk()) {
            st = got.status();
        } else if (got.value()) {
            wire::RejoinAck ack;
            st = expectMsg(h, body, wire::HsType::kRejoinAck, &ack, "RejoinAck");
            if (st.isOk() && ack.status != 0) {
                const auto why = static_cast<wire::RejoinStatus>(ack.status);
                fail(out,
                     {Code::kRemote,
                      "rejoin refused by " + out.d.peer.toString() + ": " + statusName(why)},
                     why == wire::RejoinStatus::kUnknownSession ||
                         why == wire::RejoinStatus::kBadIndex);
                return false;
            }
            if (st.isOk()) {
                out.nonces.server = ack.server_nonce;
                if (!key.empty() &&
                    !macEqual(ack.server_mac,
                              rejoinServerMac(key, out.d.auth, static_cast<uint32_t>(out.d.index),
                                              out.d.epoch, out.nonces))) {
                    fail(out,
                         {Code::kRemote, "rejoin listener " + out.d.peer.toString() +
                                             " failed authentication (ATLAS_AUTH_KEY differs)"},
                         true);
                    return false;
                }
                wire::RejoinProof proof;
                if (!key.empty()) {
                    proof.client_mac =
                        rejoinClientMac(key, out.d.auth, static_cast<uint32_t>(out.d.index),
                                        out.d.epoch, out.nonces);
                }
                queueMsg(out.conn, proof);
                out.proof_queued = true;
                st = out.conn.flush();
            }
        } else if (eof) {
            st = {Code::kRemote, "rejoin listener closed the connection"};
        }
    }
    if (!st.isOk()) {
        fail(out, st, false);
        return false;
    }
    if (out.proof_queued && !out.conn.hasOutput()) {
        StreamArrival a;
        a.index = out.d.index;
        a.epoch = out.d.epoch;
        a.fd = out.conn.takeFd();
        deliver(out.d.token, std::move(a));
        return false;
    }
    return true;
}

}  // namespace atlas::transport
