#include "arbiter/server.h"

#include <array>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <string_view>

#include <boost/asio.hpp>

namespace atlas::arbiter {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

constexpr size_t kMaxHttpRequest = 8192;
constexpr std::string_view kGet = "GET ";

Nanos nowNs() {
    return monotonicNowNs();
}

std::chrono::nanoseconds after(Nanos deadline, Nanos now) {
    return std::chrono::nanoseconds(deadline > now ? deadline - now : 0);
}

WirePolicy wirePolicy(sched::PolicyKind k) {
    switch (k) {
        case sched::PolicyKind::kFair:
            return WirePolicy::kFair;
        case sched::PolicyKind::kTemporal:
            return WirePolicy::kTemporal;
        case sched::PolicyKind::kWorkload:
            return WirePolicy::kWorkload;
    }
    return WirePolicy::kTemporal;
}

}  // namespace

class Session;

struct ArbiterServer::Impl {
    explicit Impl(const ServerConfig& c)
        : cfg(c), acceptor(io), decision_timer(io), sweep_timer(io) {}

    void accept();
    void schedule();
    void armSweep();
    void sessionClosed(SessionId id, bool protocol);
    void sendGrant(const GrantOut& g);

    ServerConfig cfg;
    asio::io_context io;
    tcp::acceptor acceptor;
    asio::steady_timer decision_timer;
    asio::steady_timer sweep_timer;
    std::optional<asio::signal_set> signals;
    std::unique_ptr<ArbiterCore> core;
    ServerCounters counters;
    std::map<SessionId, std::shared_ptr<Session>> sessions;  // protocol sessions only
    std::map<SessionId, std::weak_ptr<Session>> all;         // every open connection
    SessionId next_session = 1;
    uint16_t port = 0;
    std::atomic<bool> running{false};
};

// One connection: sniffed as HTTP (one GET, then close) or an arbitration session.
class Session : public std::enable_shared_from_this<Session> {
  public:
    Session(ArbiterServer::Impl& s, tcp::socket sock, SessionId id)
        : s_(s), sock_(std::move(sock)), id_(id) {
        created_ns_ = nowNs();
        last_rx_ns_ = created_ns_;
        boost::system::error_code ec;
        auto ep = sock_.remote_endpoint(ec);
        peer_ = ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
    }

    void start() { read(); }
    SessionId id() const { return id_; }
    bool ready() const { return state_ == State::kReady; }
    bool handshaking() const {
        return state_ == State::kSniff || state_ == State::kHello || state_ == State::kAuth;
    }
    Nanos lastRxNs() const { return last_rx_ns_; }
    Nanos createdNs() const { return created_ns_; }
    const std::string& peer() const { return peer_; }

    void send(const Message& m) {
        if (closed_) {
            return;
        }
        wq_.push_back(encode(m, version_));
        ++s_.counters.messages_out;
        if (!writing_) {
            write();
        }
    }

    void sendError(ErrorCode code, const std::string& text, bool close_after) {
        Error e;
        e.code = static_cast<uint16_t>(code);
        e.text = text.substr(0, kMaxErrorText);
        send(e);
        if (close_after) {
            closeAfterWrite();
        }
    }

    void closeAfterWrite() {
        close_after_write_ = true;
        if (!writing_) {
            close();
        }
    }

    void close() {
        if (closed_) {
            return;
        }
        closed_ = true;
        boost::system::error_code ec;
        sock_.shutdown(tcp::socket::shutdown_both, ec);
        sock_.close(ec);
        s_.sessionClosed(id_, state_ != State::kHttp && state_ != State::kSniff);
    }

  private:
    enum class State { kSniff, kHttp, kHello, kAuth, kReady };

    void read() {
        auto self = shared_from_this();
        sock_.async_read_some(asio::buffer(rbuf_), [self](boost::system::error_code ec, size_t n) {
            self->onRead(ec, n);
        });
    }

    void write() {
        writing_ = true;
        auto self = shared_from_this();
        asio::async_write(sock_, asio::buffer(wq_.front()),
                          [self](boost::system::error_code ec, size_t) {
                              self->wq_.pop_front();
                              if (ec) {
                                  self->writing_ = false;
                                  self->close();
                                  return;
                              }
                              if (!self->wq_.empty() && !self->closed_) {
                                  self->write();
                                  return;
                              }
                              self->writing_ = false;
                              if (self->close_after_write_) {
                                  self->close();
                              }
                          });
    }

    void onRead(boost::system::error_code ec, size_t n) {
        if (closed_) {
            return;
        }
        if (ec) {
            if (state_ == State::kReady && ec != asio::error::eof) {
                ATLAS_LOG_INFO(s_.cfg.logger, "session %" PRIu64 " (%s): %s", id_, name_.c_str(),
                               ec.message().c_str());
            }
            close();
            return;
        }
        last_rx_ns_ = nowNs();
        const uint8_t* data = rbuf_.data();
        if (state_ == State::kSniff) {
            sniff_.append(reinterpret_cast<const char*>(data), n);
            if (sniff_.size() < kGet.size()) {
                const bool http_prefix = kGet.substr(0, sniff_.size()) == sniff_;
                const bool proto_prefix = std::string_view(reinterpret_cast<const char*>(kMagic),
                                                           sniff_.size()) == sniff_;
                if (!http_prefix && !proto_prefix) {
                    protocolError("neither the arbiter protocol nor HTTP GET");
                    return;
                }
                read();
                return;
            }
            if (sniff_.compare(0, kGet.size(), kGet) == 0) {
                state_ = State::kHttp;
                http_ = std::move(sniff_);
                onHttp();
                return;
            }
            state_ = State::kHello;
            dec_.feed(reinterpret_cast<const uint8_t*>(sniff_.data()), sniff_.size());
            sniff_.clear();
        } else if (state_ == State::kHttp) {
            http_.append(reinterpret_cast<const char*>(data), n);
            onHttp();
            return;
        } else {
            dec_.feed(data, n);
        }
        if (!drain()) {
            return;
        }
        s_.schedule();
        if (!closed_) {
            read();
        }
    }

    // Processes every complete message; false when the session ended.
    bool drain() {
        for (;;) {
            auto next = dec_.next();
            if (!next) {
                protocolError(next.status().message());
                return false;
            }
            if (!next.value().has_value()) {
                return true;
            }
            ++s_.counters.messages_in;
            if (!handle(*next.value())) {
                return false;
            }
        }
    }

    bool handle(const Message& m) {
        const Nanos now = nowNs();
        switch (state_) {
            case State::kHello: {
                const auto* h = std::get_if<Hello>(&m);
                if (h == nullptr) {
                    return protocolError(std::string("expected hello, got ") +
                                         msgTypeName(typeOf(m)));
                }
                if (s_.sessions.size() >= s_.cfg.max_sessions) {
                    sendError(ErrorCode::kOverloaded, "too many sessions", true);
                    return false;
                }
                // The session speaks the version the client offered (the decoder accepted
                // it, so this build speaks it too).
                version_ = dec_.lastVersion();
                client_nonce_ = h->client_nonce;
                name_ = h->name + "/" + std::to_string(h->pid);
                auto nonce = randomNonce(s_.cfg.random);
                if (!nonce) {
                    ATLAS_LOG_WARN(s_.cfg.logger, "session from %s (%s) refused: %s", peer_.c_str(),
                                   name_.c_str(), nonce.status().message().c_str());
                    sendError(ErrorCode::kServerFailure,
                              "the arbiter's random number generator failed: no nonce for the "
                              "handshake",
                              true);
                    return false;
                }
                server_nonce_ = nonce.value();
                Challenge c;
                c.server_nonce = server_nonce_;
                c.auth_required = !s_.cfg.auth_key.empty();
                if (c.auth_required) {
                    c.server_mac = serverProof(s_.cfg.auth_key, client_nonce_, server_nonce_, id_);
                }
                c.policy = wirePolicy(s_.cfg.core.policy);
                c.lease_ns = s_.cfg.lease_ns;
                c.heartbeat_ns = s_.cfg.heartbeat_ns;
                c.session_id = id_;
                state_ = State::kAuth;
                send(c);
                return true;
            }
            case State::kAuth: {
                const auto* a = std::get_if<Auth>(&m);
                if (a == nullptr) {
                    return protocolError(std::string("expected auth, got ") +
                                         msgTypeName(typeOf(m)));
                }
                if (!s_.cfg.auth_key.empty() &&
                    !macEqual(a->client_mac,
                              clientProof(s_.cfg.auth_key, client_nonce_, server_nonce_, id_))) {
                    ++s_.counters.auth_failures;
                    ATLAS_LOG_WARN(s_.cfg.logger,
                                   "session from %s (%s) failed authentication: wrong or missing "
                                   "ATLAS_AUTH_KEY",
                                   peer_.c_str(), name_.c_str());
                    sendError(ErrorCode::kAuthFailed,
                              "authentication failed: wrong or missing ATLAS_AUTH_KEY", true);
                    return false;
                }
                state_ = State::kReady;
                s_.sessions[id_] = shared_from_this();
                ++s_.counters.sessions_total;
                s_.counters.sessions_current = s_.sessions.size();
                ATLAS_LOG_INFO(s_.cfg.logger, "session %" PRIu64 " from %s (%s), protocol %u%s%s",
                               id_, peer_.c_str(), name_.c_str(), static_cast<unsigned>(version_),
                               version_ < 2   ? " (no priorities: every flow has the default)"
                               : version_ < 3 ? " (no trains: it learns link rates on its own)"
                                              : "",
                               s_.cfg.auth_key.empty() ? "" : ", authenticated");
                send(Welcome{id_});
                return true;
            }
            case State::kReady:
                break;
            default:
                return protocolError("message in an unexpected state");
        }
        Status st = Status::ok();
        if (const auto* o = std::get_if<Open>(&m)) {
            st = s_.core->open(id_, o->flow, o->cls, o->link, now);
        } else if (const auto* q = std::get_if<Request>(&m)) {
            st = s_.core->request(id_, q->flow, q->bytes, now);
        } else if (const auto* r = std::get_if<Release>(&m)) {
            st = s_.core->release(id_, r->flow, r->seq, r->bytes, now);
        } else if (const auto* c = std::get_if<Close>(&m)) {
            st = s_.core->close(id_, c->flow, now);
        } else if (const auto* t = std::get_if<Train>(&m)) {
            s_.core->train(t->link, t->bytes, t->dispersion_ns, now);  // ignored: not an error
        } else if (const auto* p = std::get_if<Ping>(&m)) {
            send(Pong{p->token});
        } else {
            return protocolError(std::string("unexpected ") + msgTypeName(typeOf(m)) +
                                 " from a client");
        }
        if (!st.isOk()) {
            // A flow-level mistake: tell the client, keep the session.
            sendError(ErrorCode::kBadFlow, st.message(), false);
        }
        return true;
    }

    bool protocolError(const std::string& why) {
        ++s_.counters.protocol_errors;
        ATLAS_LOG_WARN(s_.cfg.logger, "closing connection from %s: %s", peer_.c_str(), why.c_str());
        sendError(ErrorCode::kProtocol, why, true);
        return false;
    }

    void onHttp() {
        const size_t end = http_.find("\r\n\r\n");
        if (end == std::string::npos) {
            if (http_.size() > kMaxHttpRequest) {
                respond("431 Request Header Fields Too Large", "request too large\n");
                return;
            }
            read();
            return;
        }
        const size_t eol = http_.find("\r\n");
        const std::string line = http_.substr(0, eol);
        // "GET <path> HTTP/1.x"
        const size_t sp = line.find(' ', kGet.size());
        const std::string path = line.substr(
            kGet.size(), sp == std::string::npos ? std::string::npos : sp - kGet.size());
        if (path == "/metrics") {
            respond("200 OK", renderMetrics(*s_.core, s_.counters, nowNs()),
                    "text/plain; version=0.0.4; charset=utf-8");
        } else {
            respond("404 Not Found", "only /metrics is served here\n");
        }
    }

    void respond(const std::string& status, const std::string& body,
                 const std::string& type = "text/plain; charset=utf-8") {
        std::string r = "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
                        "\r\nContent-Length: " + std::to_string(body.size()) +
                        "\r\nConnection: close\r\n\r\n" + body;
        wq_.emplace_back(r.begin(), r.end());
        if (!writing_) {
            write();
        }
        closeAfterWrite();
    }

    ArbiterServer::Impl& s_;
    tcp::socket sock_;
    SessionId id_;
    State state_ = State::kSniff;
    std::array<uint8_t, 4096> rbuf_{};
    std::string sniff_;
    std::string http_;
    Decoder dec_;
    // Protocol version of this session: the Hello's; until then the lowest, which every
    // client decodes (an Error to a client that offered a version we do not speak).
    uint8_t version_ = kMinProtocolVersion;
    std::deque<std::vector<uint8_t>> wq_;
    bool writing_ = false;
    bool closed_ = false;
    bool close_after_write_ = false;
    Nonce client_nonce_{};
    Nonce server_nonce_{};
    std::string name_;
    std::string peer_;
    Nanos created_ns_ = 0;
    Nanos last_rx_ns_ = 0;
};

void ArbiterServer::Impl::accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket sock) {
        if (ec) {
            if (ec != asio::error::operation_aborted) {
                ATLAS_LOG_WARN(cfg.logger, "accept failed: %s", ec.message().c_str());
                accept();
            }
            return;
        }
        boost::system::error_code ignored;
        sock.set_option(tcp::no_delay(true), ignored);
        const SessionId id = next_session++;
        auto s = std::make_shared<Session>(*this, std::move(sock), id);
        all[id] = s;
        s->start();
        accept();
    });
}

void ArbiterServer::Impl::sendGrant(const GrantOut& g) {
    auto it = sessions.find(g.session);
    if (it == sessions.end()) {
        return;
    }
    Grant m;
    m.flow = g.flow;
    m.seq = g.seq;
    m.slot_ns = g.slot_ns;
    m.rate_bps = g.rate_bps;
    it->second->send(m);
}

void ArbiterServer::Impl::schedule() {
    const Nanos now = nowNs();
    std::vector<GrantOut> out;
    core->decide(now, &out);
    for (const GrantOut& g : out) {
        sendGrant(g);
    }
    const Nanos next = core->nextDecisionNs(now);
    if (next == sched::kNever) {
        decision_timer.cancel();
        return;
    }
    decision_timer.expires_after(after(next, now));
    decision_timer.async_wait([this](boost::system::error_code ec) {
        if (!ec) {
            schedule();
        }
    });
}

void ArbiterServer::Impl::armSweep() {
    // A quarter lease: a silent session is dropped within 1.25 leases.
    sweep_timer.expires_after(
        std::chrono::nanoseconds(std::max<Nanos>(cfg.lease_ns / 4, kNsPerMs)));
    sweep_timer.async_wait([this](boost::system::error_code ec) {
        if (ec) {
            return;
        }
        const Nanos now = nowNs();
        std::vector<std::shared_ptr<Session>> expired;
        for (auto& [id, w] : all) {
            auto s = w.lock();
            if (!s) {
                continue;
            }
            if (s->ready() && now - s->lastRxNs() > cfg.lease_ns) {
                ++counters.liveness_drops;
                ATLAS_LOG_WARN(cfg.logger,
                               "session %" PRIu64
                               " (%s) silent for %.0f ms: dropped, its grants "
                               "revoked",
                               id, s->peer().c_str(),
                               static_cast<double>(now - s->lastRxNs()) / 1e6);
                expired.push_back(s);
            } else if (!s->ready() && now - s->createdNs() > cfg.handshake_timeout_ns) {
                expired.push_back(s);
            }
        }
        for (auto& s : expired) {
            s->close();
        }
        armSweep();
    });
}

void ArbiterServer::Impl::sessionClosed(SessionId id, bool protocol) {
    all.erase(id);
    if (sessions.erase(id) > 0) {
        core->dropSession(id, nowNs());
        counters.sessions_current = sessions.size();
        schedule();
    }
    (void)protocol;
}

Status validate(const ServerConfig& c) {
    if (c.lease_ns <= 0 || c.heartbeat_ns <= 0 || c.heartbeat_ns > c.lease_ns) {
        return {Code::kInvalidArgument, "lease and heartbeat must satisfy 0 < heartbeat <= lease"};
    }
    if (c.max_sessions == 0) {
        return {Code::kInvalidArgument, "max_sessions must be positive"};
    }
    return sched::validate(c.core.policy_config);
}

Result<std::unique_ptr<ArbiterServer>> ArbiterServer::create(const ServerConfig& config) {
    ATLAS_RETURN_IF_ERROR(validate(config));
    auto impl = std::make_unique<Impl>(config);
    auto core = ArbiterCore::create(config.core);
    if (!core) {
        return core.status();
    }
    impl->core = std::move(core.value());
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(config.host, ec);
    if (ec) {
        return Status(Code::kInvalidArgument,
                      "listen address '" + config.host + "' is not an IP literal: " + ec.message());
    }
    tcp::endpoint ep(addr, config.port);
    impl->acceptor.open(ep.protocol(), ec);
    if (!ec) {
        impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    }
    if (!ec) {
        impl->acceptor.bind(ep, ec);
    }
    if (!ec) {
        impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
        return Status(Code::kSystem, "cannot listen on " + config.host + ":" +
                                         std::to_string(config.port) + ": " + ec.message());
    }
    impl->port = impl->acceptor.local_endpoint().port();
    if (config.handle_signals) {
        impl->signals.emplace(impl->io, SIGINT, SIGTERM);
    }
    return std::unique_ptr<ArbiterServer>(new ArbiterServer(std::move(impl)));
}

ArbiterServer::ArbiterServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ArbiterServer::~ArbiterServer() {
    stop();
    // Closing sessions from here: their handlers no longer run (run() has returned), so the
    // sockets are simply closed with the io_context.
}

uint16_t ArbiterServer::port() const {
    return impl_->port;
}

Status ArbiterServer::run() {
    Impl& s = *impl_;
    s.io.restart();
    s.accept();
    s.armSweep();
    if (s.signals) {
        s.signals->async_wait([&s](boost::system::error_code ec, int sig) {
            if (!ec) {
                ATLAS_LOG_INFO(s.cfg.logger, "signal %d: stopping", sig);
                s.io.stop();
            }
        });
    }
    ATLAS_LOG_INFO(s.cfg.logger, "atlas-arbiter listening on %s:%u, policy %s, lease %.0f ms%s",
                   s.cfg.host.c_str(), s.port, sched::policyKindName(s.cfg.core.policy),
                   static_cast<double>(s.cfg.lease_ns) / 1e6,
                   s.cfg.auth_key.empty() ? "" : ", authenticated");
    s.running.store(true, std::memory_order_release);
    try {
        s.io.run();
    } catch (const std::exception& e) {
        s.running.store(false, std::memory_order_release);
        return {Code::kInternal, std::string("arbiter event loop failed: ") + e.what()};
    }
    s.running.store(false, std::memory_order_release);
    return Status::ok();
}

void ArbiterServer::stop() {
    impl_->io.stop();
}

std::string ArbiterServer::metricsText() {
    Impl& s = *impl_;
    if (!s.running.load(std::memory_order_acquire)) {
        return {};
    }
    auto promise = std::make_shared<std::promise<std::string>>();
    auto future = promise->get_future();
    asio::post(s.io,
               [&s, promise] { promise->set_value(renderMetrics(*s.core, s.counters, nowNs())); });
    if (future.wait_for(std::chrono::seconds(2)) != std::future_status::ready) {
        return {};
    }
    return future.get();
}

}  // namespace atlas::arbiter
