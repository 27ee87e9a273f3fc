#include "plugin/wan/arbiter_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "plugin/wan/arbiter_session.h"
#include "plugin/wan/client_gate.h"

namespace atlas::plugin::wan {

using arbiter::Message;

namespace {

Nanos minNs(Nanos a, Nanos b) {
    return a < b ? a : b;
}

}  // namespace

void ArbiterClient::Impl::failOpenAll() {
    std::lock_guard<std::mutex> reg(reg_mu);
    for (auto& [id, g] : gates) {
        g->failOpen();
    }
}

void ArbiterClient::Impl::dropConnection() {
    if (fd >= 0) {
        ::close(fd);
        fd = -1;
    }
    conn = Conn::kDown;
    decoder = arbiter::Decoder();
    wbuf.clear();
}

void ArbiterClient::Impl::fail(const std::string& why, Nanos now) {
    dropConnection();
    offer = arbiter::kProtocolVersion;
    const Mode m = mode.load(std::memory_order_acquire);
    if (m != Mode::kStopped) {
        mode.store(Mode::kFailOpen, std::memory_order_release);
    }
    if (!in_outage) {
        in_outage = true;
        n_outages.fetch_add(1, std::memory_order_relaxed);
        ATLAS_LOG_WARN(cfg.logger,
                       "arbiter %s:%u unreachable (%s): WAN flows send unarbitrated; "
                       "reconnecting in the background",
                       cfg.host.c_str(), cfg.port, why.c_str());
    } else {
        ATLAS_LOG_TRACE(cfg.logger, "arbiter %s:%u still unreachable: %s", cfg.host.c_str(),
                        cfg.port, why.c_str());
    }
    failOpenAll();
    backoff_ns = backoff_ns == 0 ? cfg.retry_min_ns : std::min(backoff_ns * 2, cfg.retry_max_ns);
    next_attempt_ns = now + backoff_ns;
}

bool ArbiterClient::Impl::fallBack(const arbiter::Error& e, Nanos now) {
    // An arbiter of an older build refuses a Hello of a version it does not speak with a
    // protocol error ("... protocol version N ...") before its Challenge, and closes.
    if (conn != Conn::kChallenge || offer <= arbiter::kMinProtocolVersion ||
        e.code != static_cast<uint16_t>(arbiter::ErrorCode::kProtocol) ||
        e.text.find("protocol version") == std::string::npos) {
        return false;
    }
    // One version lower per refusal: a version-2 arbiter is met at 2, a version-1 one at 1.
    const uint8_t lower = offer - 1;
    if (lower < fallback_noted_at) {
        fallback_noted_at = lower;
        ATLAS_LOG_INFO(cfg.logger,
                       "arbiter %s:%u speaks an older protocol (%s): reconnecting with version "
                       "%u; %s",
                       cfg.host.c_str(), cfg.port, e.text.c_str(), static_cast<unsigned>(lower),
                       lower < 2 ? "traffic priorities are not sent, every flow has the default"
                                 : "link-rate trains are not pooled across the DC");
    }
    dropConnection();
    offer = lower;
    next_attempt_ns = now;  // at once: this is the same attempt, not an outage
    return true;
}

void ArbiterClient::Impl::beginAttempt(Nanos now) {
    attempt_deadline_ns = now + cfg.connect_timeout_ns;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const std::string port = std::to_string(cfg.port);
    const int rc = ::getaddrinfo(cfg.host.c_str(), port.c_str(), &hints, &res);
    if (rc != 0 || res == nullptr) {
        fail(std::string("cannot resolve host: ") + gai_strerror(rc), now);
        return;
    }
    fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        const int err = errno;
        ::freeaddrinfo(res);
        fail(std::string("socket: ") + std::strerror(err), now);
        return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    const int r = ::connect(fd, res->ai_addr, res->ai_addrlen);
    const int err = errno;
    ::freeaddrinfo(res);
    if (r != 0 && err != EINPROGRESS) {
        fail(std::string("connect: ") + std::strerror(err), now);
        return;
    }
    conn = Conn::kConnecting;
}

void ArbiterClient::Impl::sessionUp(Nanos now) {
    conn = Conn::kUp;
    backoff_ns = 0;
    n_sessions.fetch_add(1, std::memory_order_relaxed);
    if (in_outage) {
        ATLAS_LOG_INFO(cfg.logger,
                       "arbiter %s:%u reachable again (session %llu): arbitration "
                       "resumed",
                       cfg.host.c_str(), cfg.port, static_cast<unsigned long long>(session_id));
    } else {
        ATLAS_LOG_INFO(cfg.logger, "arbiter %s:%u: session %llu, policy %s", cfg.host.c_str(),
                       cfg.port, static_cast<unsigned long long>(session_id),
                       policy == arbiter::WirePolicy::kFair       ? "fair (no gating)"
                       : policy == arbiter::WirePolicy::kTemporal ? "temporal"
                                                                  : "workload");
    }
    in_outage = false;
    last_rx_ns = now;
    next_ping_ns = now + heartbeat_ns;
    const bool fair = policy == arbiter::WirePolicy::kFair;
    std::lock_guard<std::mutex> reg(reg_mu);
    {
        std::lock_guard<std::mutex> lock(out_mu);
        out.clear();  // leftovers of a dead session
        if (!fair) {
            for (auto& [id, g] : gates) {
                arbiter::encode(arbiter::Open{g->flow(), g->cls(), g->link()}, &out,
                                version.load(std::memory_order_relaxed));
            }
        }
    }
    epoch.fetch_add(1, std::memory_order_acq_rel);
    mode.store(fair ? Mode::kFair : Mode::kArbitrated, std::memory_order_release);
    for (auto& [id, g] : gates) {
        g->sessionUp(fair);
    }
}

void ArbiterClient::Impl::onMessage(const Message& m, Nanos now) {
    if (const auto* e = std::get_if<arbiter::Error>(&m)) {
        if (conn == Conn::kUp && e->code == static_cast<uint16_t>(arbiter::ErrorCode::kBadFlow)) {
            ATLAS_LOG_WARN(cfg.logger, "arbiter rejected a flow message: %s", e->text.c_str());
            return;
        }
        if (fallBack(*e, now)) {
            return;
        }
        fail("arbiter said: " + e->text, now);
        return;
    }
    switch (conn) {
        case Conn::kChallenge: {
            const auto* c = std::get_if<arbiter::Challenge>(&m);
            if (c == nullptr) {
                fail("protocol: expected a challenge", now);
                return;
            }
            if (!cfg.auth_key.empty()) {
                if (!c->auth_required) {
                    fail("the arbiter does not authenticate but ATLAS_AUTH_KEY is set", now);
                    return;
                }
                if (!arbiter::macEqual(c->server_mac,
                                       arbiter::serverProof(cfg.auth_key, client_nonce,
                                                            c->server_nonce, c->session_id))) {
                    fail("the arbiter failed to prove the shared key (ATLAS_AUTH_KEY differs)",
                         now);
                    return;
                }
            }
            arbiter::Auth a;
            if (!cfg.auth_key.empty()) {
                a.client_mac = arbiter::clientProof(cfg.auth_key, client_nonce, c->server_nonce,
                                                    c->session_id);
            }
            // The arbiter answers at our offer when it speaks it: the session's version.
            version.store(decoder.lastVersion(), std::memory_order_relaxed);
            policy = c->policy;
            lease_ns = c->lease_ns;
            heartbeat_ns = c->heartbeat_ns;
            session_id = c->session_id;
            arbiter::encode(a, &wbuf, version.load(std::memory_order_relaxed));
            conn = Conn::kWelcome;
            return;
        }
        case Conn::kWelcome:
            if (std::get_if<arbiter::Welcome>(&m) == nullptr) {
                fail("protocol: expected welcome", now);
                return;
            }
            sessionUp(now);
            return;
        case Conn::kUp:
            if (const auto* g = std::get_if<arbiter::Grant>(&m)) {
                n_grants.fetch_add(1, std::memory_order_relaxed);
                std::lock_guard<std::mutex> reg(reg_mu);
                auto it = gates.find(g->flow);
                if (it != gates.end()) {
                    if (version.load(std::memory_order_relaxed) >= 3) {
                        // Before the grant: its budget is computed at the rate it brings.
                        std::lock_guard<std::mutex> pl(pool_mu);
                        auto p = pools.find(it->second->link());
                        if (p != pools.end()) {
                            p->second->setDcRate(g->rate_bps);
                        }
                    }
                    it->second->onGrant(g->seq, g->slot_ns, cfg.clock->nowNs());
                } else {
                    post(arbiter::Release{g->flow, g->seq, 0});  // closed meanwhile
                }
                return;
            }
            if (std::holds_alternative<arbiter::Pong>(m)) {
                return;
            }
            fail(std::string("protocol: unexpected ") + arbiter::msgTypeName(arbiter::typeOf(m)),
                 now);
            return;
        default:
            fail("protocol: message before the handshake", now);
    }
}

Nanos ArbiterClient::Impl::runDrains(Nanos now) {
    Nanos next = sched::kNever;
    std::lock_guard<std::mutex> reg(reg_mu);
    for (auto& [id, g] : gates) {
        next = std::min(next, g->finishDrain(now));
    }
    return next;
}

bool ArbiterClient::Impl::flushWrites() {
    if (conn == Conn::kUp) {
        std::lock_guard<std::mutex> lock(out_mu);
        if (!out.empty()) {
            wbuf.insert(wbuf.end(), out.begin(), out.end());
            out.clear();
        }
    }
    while (!wbuf.empty()) {
        const ssize_t n = ::send(fd, wbuf.data(), wbuf.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return true;
            }
            if (errno == EINTR) {
                continue;
            }
            return false;
        }
        wbuf.erase(wbuf.begin(), wbuf.begin() + n);
    }
    return true;
}

void ArbiterClient::Impl::run() {
    std::vector<uint8_t> rbuf(4096);
    while (!stop.load(std::memory_order_acquire)) {
        Nanos now = cfg.clock->nowNs();
        if (conn == Conn::kDown && now >= next_attempt_ns) {
            beginAttempt(now);
            continue;
        }
        // Timers.
        if (conn == Conn::kConnecting || conn == Conn::kChallenge || conn == Conn::kWelcome) {
            if (now >= attempt_deadline_ns) {
                fail("no session within " + std::to_string(cfg.connect_timeout_ns / kNsPerMs) +
                         " ms",
                     now);
                continue;
            }
        } else if (conn == Conn::kUp) {
            if (now - last_rx_ns > lease_ns) {
                fail("silent for " + std::to_string((now - last_rx_ns) / kNsPerMs) + " ms", now);
                continue;
            }
            if (now >= next_ping_ns) {
                post(arbiter::Ping{++ping_token});
                next_ping_ns = now + heartbeat_ns;
            }
        }
        Nanos deadline = runDrains(now);
        if (conn == Conn::kDown) {
            deadline = minNs(deadline, next_attempt_ns);
        } else if (conn == Conn::kUp) {
            deadline = minNs(deadline, minNs(next_ping_ns, last_rx_ns + lease_ns + 1));
        } else {
            deadline = minNs(deadline, attempt_deadline_ns);
        }
        pollfd fds[2] = {};
        fds[0].fd = event_fd;
        fds[0].events = POLLIN;
        int nfds = 1;
        if (fd >= 0) {
            fds[1].fd = fd;
            fds[1].events = POLLIN;
            bool want_out = conn == Conn::kConnecting || !wbuf.empty();
            if (conn == Conn::kUp && !want_out) {
                std::lock_guard<std::mutex> lock(out_mu);
                want_out = !out.empty();
            }
            if (want_out) {
                fds[1].events |= POLLOUT;
            }
            nfds = 2;
        }
        // ppoll: drain releases are due with sub-millisecond precision.
        const Nanos wait = std::clamp<Nanos>(deadline - now, 0, kNsPerSec);
        timespec ts{};
        ts.tv_sec = wait / kNsPerSec;
        ts.tv_nsec = wait % kNsPerSec;
        const int rc = ::ppoll(fds, static_cast<nfds_t>(nfds), &ts, nullptr);
        if (rc < 0 && errno != EINTR) {
            break;  // cannot happen with valid fds; the loop ends and gates fail open
        }
        now = cfg.clock->nowNs();
        if (fds[0].revents & POLLIN) {
            uint64_t v = 0;
            ssize_t n = ::read(event_fd, &v, sizeof(v));
            (void)n;
        }
        if (stop.load(std::memory_order_acquire)) {
            break;
        }
        if (fd < 0 || nfds < 2) {
            continue;
        }
        if (conn == Conn::kConnecting && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            int err = 0;
            socklen_t len = sizeof(err);
            ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err != 0) {
                fail(std::string("connect: ") + std::strerror(err), now);
                continue;
            }
            auto nonce = arbiter::randomNonce(cfg.random);
            if (!nonce) {
                fail("no handshake nonce: " + nonce.status().message(), now);
                continue;
            }
            client_nonce = nonce.value();
            arbiter::Hello h;
            h.client_nonce = client_nonce;
            h.pid = static_cast<uint32_t>(::getpid());
            h.name = cfg.name;
            arbiter::encode(h, &wbuf, offer);
            conn = Conn::kChallenge;
        }
        if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            const ssize_t n = ::recv(fd, rbuf.data(), rbuf.size(), MSG_DONTWAIT);
            if (n == 0) {
                fail("connection closed by the arbiter", now);
                continue;
            }
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                fail(std::string("recv: ") + std::strerror(errno), now);
                continue;
            }
            if (n > 0) {
                last_rx_ns = now;
                decoder.feed(rbuf.data(), static_cast<size_t>(n));
                for (;;) {
                    auto next = decoder.next();
                    if (!next) {
                        fail(next.status().message(), now);
                        break;
                    }
                    if (!next.value().has_value()) {
                        break;
                    }
                    onMessage(*next.value(), now);
                    if (conn == Conn::kDown) {
                        break;
                    }
                }
                if (conn == Conn::kDown) {
                    continue;
                }
            }
        }
        if (fd >= 0 && conn != Conn::kConnecting && !flushWrites()) {
            fail(std::string("send: ") + std::strerror(errno), now);
        }
    }
    if (fd >= 0) {
        ::close(fd);  // the arbiter drops the session and cancels our flows at once
        fd = -1;
    }
    conn = Conn::kDown;
}

Result<std::shared_ptr<ArbiterClient>> ArbiterClient::start(const ArbiterClientConfig& config) {
    if (config.host.empty() || config.port == 0) {
        return Status(Code::kInvalidUsage,
                      "ATLAS_ARBITER_CONNECT needs HOST:PORT with a non-zero port");
    }
    auto impl = std::make_shared<Impl>(config);
    impl->event_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (impl->event_fd < 0) {
        return Status::fromErrno("eventfd for the arbiter client", errno);
    }
    impl->thread = std::thread([raw = impl.get()] { raw->run(); });
    return std::shared_ptr<ArbiterClient>(new ArbiterClient(std::move(impl)));
}

ArbiterClient::ArbiterClient(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

ArbiterClient::~ArbiterClient() {
    shutdown();
}

void ArbiterClient::shutdown() {
    std::lock_guard<std::mutex> lock(impl_->join_mu);
    if (!impl_->thread.joinable()) {
        return;
    }
    impl_->stop.store(true, std::memory_order_release);
    impl_->wake();
    impl_->thread.join();
    impl_->mode.store(Mode::kStopped, std::memory_order_release);
    impl_->failOpenAll();
}

std::unique_ptr<FlowGate> ArbiterClient::makeGate(const std::string& link,
                                                  const arbiter::WireClass& cls,
                                                  std::function<void()> waker,
                                                  std::shared_ptr<LinkRate> rate) {
    std::lock_guard<std::mutex> reg(impl_->reg_mu);
    const uint32_t flow = impl_->next_flow++;
    auto gate =
        std::make_unique<ClientGate>(impl_, flow, link, cls, std::move(waker), std::move(rate));
    impl_->gates[flow] = gate.get();
    if (impl_->mode.load(std::memory_order_acquire) == Mode::kArbitrated) {
        impl_->post(arbiter::Open{flow, cls, link});
    }
    return gate;
}

std::shared_ptr<RatePool> ArbiterClient::ratePool(const std::string& link) {
    std::lock_guard<std::mutex> lock(impl_->pool_mu);
    auto& p = impl_->pools[link];
    if (!p) {
        p = std::make_shared<ArbiterRatePool>(impl_, link);
    }
    return p;
}

ArbiterClient::Mode ArbiterClient::mode() const {
    return impl_->mode.load(std::memory_order_acquire);
}

ArbiterClient::Stats ArbiterClient::stats() const {
    Stats s;
    s.sessions = impl_->n_sessions.load(std::memory_order_relaxed);
    s.outages = impl_->n_outages.load(std::memory_order_relaxed);
    s.requests = impl_->n_requests.load(std::memory_order_relaxed);
    s.grants = impl_->n_grants.load(std::memory_order_relaxed);
    s.releases = impl_->n_releases.load(std::memory_order_relaxed);
    s.unwanted_grants = impl_->n_unwanted.load(std::memory_order_relaxed);
    s.resumed = impl_->n_resumed.load(std::memory_order_relaxed);
    s.trains = impl_->n_trains.load(std::memory_order_relaxed);
    return s;
}

std::string ArbiterClient::target() const {
    return impl_->cfg.host + ":" + std::to_string(impl_->cfg.port);
}

const char* clientModeName(ArbiterClient::Mode m) {
    switch (m) {
        case ArbiterClient::Mode::kConnecting:
            return "connecting";
        case ArbiterClient::Mode::kArbitrated:
            return "arbitrated";
        case ArbiterClient::Mode::kFair:
            return "fair";
        case ArbiterClient::Mode::kFailOpen:
            return "fail-open";
        case ArbiterClient::Mode::kStopped:
            return "stopped";
    }
    return "unknown";
}

}  // namespace atlas::plugin::wan
