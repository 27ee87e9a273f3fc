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

namespace atlas::plugin::wan {

using arbiter::Message;

namespace {
class ClientGate;
}  // namespace

struct ArbiterClient::Impl : std::enable_shared_from_this<ArbiterClient::Impl> {
    explicit Impl(const ArbiterClientConfig& c) : cfg(c) {}
    ~Impl() {
        if (event_fd >= 0) {
            ::close(event_fd);
        }
    }

    // Any thread: queue a message for the current session and wake the I/O thread.
    void post(const Message& m) {
        {
            std::lock_guard<std::mutex> lock(out_mu);
            arbiter::encode(m, &out);
        }
        wake();
    }
    void wake() {
        const uint64_t one = 1;
        ssize_t n = ::write(event_fd, &one, sizeof(one));
        (void)n;  // EAGAIN means a wakeup is already pending
    }

    void run();
    // I/O thread helpers.
    void beginAttempt(Nanos now);
    void fail(const std::string& why, Nanos now);
    void onMessage(const Message& m, Nanos now);
    void sessionUp(Nanos now);
    void failOpenAll();
    bool flushWrites();
    // Releases grants whose drain time has come; returns the next drain due (or max).
    Nanos runDrains(Nanos now);

    ArbiterClientConfig cfg;
    std::atomic<Mode> mode{Mode::kConnecting};
    std::atomic<uint64_t> epoch{0};  // session number, bumped at every Welcome
    std::atomic<bool> stop{false};
    int event_fd = -1;
    std::thread thread;
    std::mutex join_mu;

    std::mutex reg_mu;  // order: reg_mu, then a gate's mutex, then out_mu
    std::map<uint32_t, ClientGate*> gates;
    uint32_t next_flow = 1;

    std::mutex out_mu;
    std::vector<uint8_t> out;  // messages for the established session

    std::atomic<uint64_t> n_sessions{0}, n_outages{0}, n_requests{0}, n_grants{0}, n_releases{0},
        n_unwanted{0}, n_resumed{0};

    // ---- I/O thread only
    enum class Conn { kDown, kConnecting, kChallenge, kWelcome, kUp };
    Conn conn = Conn::kDown;
    int fd = -1;
    arbiter::Decoder decoder;
    std::vector<uint8_t> wbuf;  // bytes being written
    Nanos next_attempt_ns = 0;
    Nanos attempt_deadline_ns = 0;
    Nanos backoff_ns = 0;
    Nanos last_rx_ns = 0;
    Nanos next_ping_ns = 0;
    Nanos lease_ns = 0;
    Nanos heartbeat_ns = 0;
    arbiter::WirePolicy policy = arbiter::WirePolicy::kTemporal;
    arbiter::Nonce client_nonce{};
    uint64_t session_id = 0;
    uint64_t ping_token = 0;
    bool in_outage = false;  // a WARN was logged for the current outage
};

namespace {

class ClientGate final : public FlowGate {
  public:
    ClientGate(std::shared_ptr<ArbiterClient::Impl> c, uint32_t flow, std::string link,
               const arbiter::WireClass& cls, std::function<void()> waker)
        : c_(std::move(c)),
          flow_(flow),
          link_(std::move(link)),
          cls_(cls),
          waker_(std::move(waker)) {}

    ~ClientGate() override {
        // After this block the I/O thread cannot reach the gate, so the waker is never
        // called again (FlowGate contract).
        std::lock_guard<std::mutex> reg(c_->reg_mu);
        c_->gates.erase(flow_);
        if (c_->mode.load(std::memory_order_acquire) == ArbiterClient::Mode::kArbitrated) {
            c_->post(arbiter::Close{flow_});
        }
    }

    bool acquire(uint64_t queued_bytes, Nanos now_ns) override {
        std::lock_guard<std::mutex> lock(mu_);
        const ArbiterClient::Mode m = c_->mode.load(std::memory_order_acquire);
        if (m == ArbiterClient::Mode::kFair || m == ArbiterClient::Mode::kFailOpen ||
            m == ArbiterClient::Mode::kStopped) {
            openLocked();
            return true;
        }
        if ((state_ == State::kGranted || state_ == State::kDraining) &&
            until_.load(std::memory_order_relaxed) > now_ns) {
            // A grant or renewal arrived before the engine asked again, or the next message
            // comes while the last one's bytes are still crossing the link: keep the grant.
            if (state_ == State::kDraining) {
                c_->n_resumed.fetch_add(1, std::memory_order_relaxed);
            }
            state_ = State::kGranted;
            return true;
        }
        if (state_ == State::kDraining) {
            releaseNowLocked();  // the slot ended while draining
        }
        state_ = State::kWaiting;
        queued_ = queued_bytes;
        if (m == ArbiterClient::Mode::kArbitrated) {
            requestLocked();
        }
        return false;
    }

    bool holds(Nanos now_ns) const override {
        // Pairs with the release stores below: a grant's state is visible with its slot end.
        return now_ns < until_.load(std::memory_order_acquire);
    }

    void release(uint64_t bytes, Nanos now_ns) override {
        std::lock_guard<std::mutex> lock(mu_);
        if (state_ != State::kGranted) {
            state_ = State::kIdle;
            requested_epoch_ = 0;
            until_.store(0, std::memory_order_release);
            return;
        }
        grant_bytes_ += bytes;
        unreported_ += bytes;
        const Nanos until = until_.load(std::memory_order_relaxed);
        const Nanos due = std::min(drainDueLocked(), until);
        if (due > now_ns) {
            state_ = State::kDraining;  // the I/O thread releases at `due`
            drain_due_ = due;
            c_->wake();
            return;
        }
        releaseNowLocked();
    }

    // I/O thread (reg_mu held): release if the drain time has come; the next due or max.
    Nanos drainIfDue(Nanos now_ns) {
        std::lock_guard<std::mutex> lock(mu_);
        if (state_ != State::kDraining) {
            return std::numeric_limits<Nanos>::max();
        }
        if (drain_due_ > now_ns) {
            return drain_due_;
        }
        releaseNowLocked();
        return std::numeric_limits<Nanos>::max();
    }

    // ---- I/O thread, with reg_mu held (so the gate is alive).

    void onGrant(uint64_t seq, Nanos slot_ns, Nanos now_ns) {
        bool wake = false;
        {
            std::lock_guard<std::mutex> lock(mu_);
            const uint64_t e = c_->epoch.load(std::memory_order_acquire);
            if (state_ == State::kWaiting || state_ == State::kGranted ||
                state_ == State::kDraining) {
                wake = state_ == State::kWaiting;
                if (wake) {
                    grant_start_ = now_ns;  // a fresh grant (a renewal keeps counting)
                    grant_bytes_ = 0;
                }
                // A renewal during a drain keeps draining under the new slot.
                if (state_ != State::kDraining) {
                    state_ = State::kGranted;
                }
                seq_ = seq;
                grant_epoch_ = e;
                until_.store(slot_ns == 0 ? std::numeric_limits<Nanos>::max() : now_ns + slot_ns,
                             std::memory_order_release);
            } else {
                // The flow drained (or fell back to fail-open) meanwhile: give it back now, so
                // the link is not held by an idle flow until the slot ends.
                c_->post(arbiter::Release{flow_, seq, 0});
                c_->n_unwanted.fetch_add(1, std::memory_order_relaxed);
            }
        }
        if (wake) {
            waker_();
        }
    }

    void failOpen() {
        bool wake = false;
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (state_ == State::kWaiting || state_ == State::kGranted ||
                state_ == State::kDraining) {
                wake = state_ == State::kWaiting;
                openLocked();
            }
        }
        if (wake) {
            waker_();
        }
    }

    // A session is up (epoch already bumped, Open already queued).
    void sessionUp(bool fair) {
        bool wake = false;
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (fair) {
                if (state_ == State::kWaiting) {
                    openLocked();
                    wake = true;
                }
            } else if (state_ == State::kWaiting) {
                requestLocked();
            } else if (state_ == State::kOpen) {
                // Unarbitrated since the outage: stop at the next piece; the engine releases
                // and asks again, now through the arbiter.
                until_.store(0, std::memory_order_release);
            }
        }
        if (wake) {
            waker_();
        }
    }

    uint32_t flow() const { return flow_; }
    const std::string& link() const { return link_; }
    const arbiter::WireClass& cls() const { return cls_; }

  private:
    enum class State {
        kIdle,
        kWaiting,
        kGranted,
        kDraining,  // released by the engine; held until its bytes crossed the link
        kOpen,
    };

    // When the bytes sent under this grant could have crossed the link at link_bps.
    Nanos drainDueLocked() const {
        const uint64_t bps = c_->cfg.link_bps;
        if (bps == 0) {
            return 0;
        }
        const long double ns =
            static_cast<long double>(grant_bytes_) * 8.0L * 1e9L / static_cast<long double>(bps);
        return grant_start_ + static_cast<Nanos>(ns);
    }

    void releaseNowLocked() {
        if (c_->mode.load(std::memory_order_acquire) == ArbiterClient::Mode::kArbitrated &&
            grant_epoch_ == c_->epoch.load(std::memory_order_acquire)) {
            c_->post(arbiter::Release{flow_, seq_, unreported_});
            c_->n_releases.fetch_add(1, std::memory_order_relaxed);
        }
        unreported_ = 0;
        state_ = State::kIdle;
        requested_epoch_ = 0;
        until_.store(0, std::memory_order_release);
    }

    void openLocked() {
        state_ = State::kOpen;
        until_.store(std::numeric_limits<Nanos>::max(), std::memory_order_release);
    }

    void requestLocked() {
        const uint64_t e = c_->epoch.load(std::memory_order_acquire);
        if (requested_epoch_ == e) {
            return;  // already asked in this session
        }
        requested_epoch_ = e;
        c_->post(arbiter::Request{flow_, std::max<uint64_t>(queued_, 1)});
        c_->n_requests.fetch_add(1, std::memory_order_relaxed);
    }

    std::shared_ptr<ArbiterClient::Impl> c_;
    const uint32_t flow_;
    const std::string link_;
    const arbiter::WireClass cls_;
    const std::function<void()> waker_;
    std::mutex mu_;
    State state_ = State::kIdle;
    uint64_t seq_ = 0;
    uint64_t grant_epoch_ = 0;
    uint64_t requested_epoch_ = 0;
    uint64_t queued_ = 0;
    Nanos grant_start_ = 0;
    uint64_t grant_bytes_ = 0;  // sent under the current grant (renewals included)
    uint64_t unreported_ = 0;   // sent since the last Release message
    Nanos drain_due_ = 0;
    std::atomic<Nanos> until_{0};
};

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

void ArbiterClient::Impl::fail(const std::string& why, Nanos now) {
    if (fd >= 0) {
        ::close(fd);
        fd = -1;
    }
    conn = Conn::kDown;
    decoder = arbiter::Decoder();
    wbuf.clear();
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
                arbiter::encode(arbiter::Open{g->flow(), g->cls(), g->link()}, &out);
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
            policy = c->policy;
            lease_ns = c->lease_ns;
            heartbeat_ns = c->heartbeat_ns;
            session_id = c->session_id;
            arbiter::encode(a, &wbuf);
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
    Nanos next = std::numeric_limits<Nanos>::max();
    std::lock_guard<std::mutex> reg(reg_mu);
    for (auto& [id, g] : gates) {
        next = std::min(next, g->drainIfDue(now));
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
            client_nonce = arbiter::randomNonce();
            arbiter::Hello h;
            h.client_nonce = client_nonce;
            h.pid = static_cast<uint32_t>(::getpid());
            h.name = cfg.name;
            arbiter::encode(h, &wbuf);
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
        return Status(Code::kInvalidUsage, "ATLAS_ARBITER needs HOST:PORT with a non-zero port");
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
                                                  std::function<void()> waker) {
    std::lock_guard<std::mutex> reg(impl_->reg_mu);
    const uint32_t flow = impl_->next_flow++;
    auto gate = std::make_unique<ClientGate>(impl_, flow, link, cls, std::move(waker));
    impl_->gates[flow] = gate.get();
    if (impl_->mode.load(std::memory_order_acquire) == Mode::kArbitrated) {
        impl_->post(arbiter::Open{flow, cls, link});
    }
    return gate;
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
