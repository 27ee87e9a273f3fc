// atlas-arbiter and the plugin's ArbiterClient over 127.0.0.1: grant order, authentication,
// fail-open, reconnect, lease expiry of a silent or killed holder, 64 flows, /metrics.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <random>

#include "arbiter/protocol.h"
#include "plugin/wan/admission.h"
#include "plugin/wan/arbiter_client.h"
#include "plugin/wan/link_rate.h"
#include "plugin/wan/shm_arbiter.h"
#include "plugin_host/plugin_host.h"
#include "tests/arbiter/test_util.h"
#include "tests/transport/loopback_util.h"

namespace atlas::plugin::wan {
namespace {

using arbiter::testing::CaptureLog;
using arbiter::testing::ServerThread;
using arbiter::testing::waitFor;
using arbiter::testing::Waker;
using std::chrono::milliseconds;

const std::string kLink = "dc0->dc1";

arbiter::ServerConfig serverConfig(sched::PolicyKind kind = sched::PolicyKind::kTemporal,
                                   Nanos slot = 0) {
    arbiter::ServerConfig c;
    c.core.policy = kind;
    c.core.policy_config.max_slot_ns = slot;
    c.lease_ns = 300 * kNsPerMs;
    c.heartbeat_ns = 50 * kNsPerMs;
    return c;
}

ArbiterClientConfig clientConfig(uint16_t port, Logger logger = {}) {
    ArbiterClientConfig c;
    c.host = "127.0.0.1";
    c.port = port;
    c.connect_timeout_ns = 500 * kNsPerMs;
    c.retry_min_ns = 20 * kNsPerMs;
    c.retry_max_ns = 100 * kNsPerMs;
    c.name = "test";
    c.logger = logger;
    return c;
}

std::shared_ptr<ArbiterClient> startClient(const ArbiterClientConfig& c) {
    auto r = ArbiterClient::start(c);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return r.isOk() ? r.value() : nullptr;
}

// Asks until the gate admits the flow; false if the budget passes. `clock`: the gate's time.
bool acquireWithin(FlowGate& g, Waker& w, milliseconds budget, uint64_t bytes = 1 << 20,
                   const Clock& clock = MonotonicClock::instance()) {
    // The waker count is read before each ask, so a grant that lands between the ask and the
    // wait is not missed; a wake-up that brings no grant asks again.
    const auto end = std::chrono::steady_clock::now() + budget;
    for (;;) {
        const int seen = w.calls.load();
        if (g.acquire(bytes, clock.nowNs())) {
            return true;
        }
        const auto left =
            std::chrono::duration_cast<milliseconds>(end - std::chrono::steady_clock::now());
        if (left.count() <= 0 || !waitFor([&] { return w.calls.load() > seen; }, left)) {
            return false;
        }
    }
}

uint16_t closedPort() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    socklen_t len = sizeof(a);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    ::close(fd);  // nobody listens there now: connect is refused
    return ntohs(a.sin_port);
}

TEST(ArbiterLoopback, GrantsFollowRequestOrderOneAtATime) {
    ServerThread srv(serverConfig());
    ASSERT_TRUE(srv.ok()) << srv.error();
    auto client = startClient(clientConfig(srv.port()));
    Waker w[4];
    std::unique_ptr<FlowGate> g[4];
    for (int i = 0; i < 4; ++i) {
        g[i] = client->makeGate(kLink, {i, 0, 0}, w[i].fn());
    }
    ASSERT_TRUE(acquireWithin(*g[0], w[0], milliseconds(3000)));
    EXPECT_EQ(client->mode(), ArbiterClient::Mode::kArbitrated);
    EXPECT_TRUE(g[0]->holds(monotonicNowNs())) << "slot 0: held until released";
    // 3, then 1, then 2 ask while 0 holds: one connection, so the server sees this order.
    for (int i : {3, 1, 2}) {
        EXPECT_FALSE(g[i]->acquire(100, monotonicNowNs()));
    }
    std::vector<int> order;
    int holder = 0;
    for (int round = 0; round < 3; ++round) {
        g[holder]->release(1000, monotonicNowNs());
        int next = -1;
        ASSERT_TRUE(waitFor([&] {
            for (int i = 0; i < 4; ++i) {
                if (i != holder && w[i].calls.load() > 0 && g[i]->acquire(100, monotonicNowNs())) {
                    next = i;
                    return true;
                }
            }
            return false;
        })) << "round "
            << round;
        order.push_back(next);
        for (int i = 0; i < 4; ++i) {
            w[i].calls.store(0);
        }
        holder = next;
    }
    g[holder]->release(1000, monotonicNowNs());
    EXPECT_EQ(order, (std::vector<int>{3, 1, 2}));
    const std::string metrics = srv.server().metricsText();
    EXPECT_NE(metrics.find("atlas_arbiter_grants_total{link=\"dc0->dc1\"} 4"), std::string::npos)
        << metrics;
}

TEST(ArbiterLoopback, SlotEndStopsTheHolderLocallyAndRenewsWhenAlone) {
    ServerThread srv(serverConfig(sched::PolicyKind::kTemporal, 50 * kNsPerMs));
    ASSERT_TRUE(srv.ok()) << srv.error();
    auto client = startClient(clientConfig(srv.port()));
    Waker w;
    auto g = client->makeGate(kLink, {}, w.fn());
    ASSERT_TRUE(acquireWithin(*g, w, milliseconds(3000)));
    const Nanos granted = monotonicNowNs();
    EXPECT_TRUE(g->holds(granted));
    EXPECT_FALSE(g->holds(granted + 60 * kNsPerMs)) << "the 50 ms slot is enforced locally";
    // Renewal: the server re-grants the lone holder at its lease end; the gate takes it.
    ASSERT_TRUE(waitFor([&] { return client->stats().grants >= 2; }));
    EXPECT_TRUE(g->acquire(1, monotonicNowNs()));
    g->release(1, monotonicNowNs());
}

TEST(ArbiterLoopback, DrainedFlowKeepsTheLinkUntilItsBytesCrossedIt) {
    // The client's time is a ManualClock: the drain ends when the test says so. The server's
    // lease is long, since a client whose clock stands still sends no pings.
    auto sc = serverConfig();
    sc.lease_ns = 10 * kNsPerSec;
    ServerThread srv(sc);
    ASSERT_TRUE(srv.ok()) << srv.error();
    ManualClock clock(1000 * kNsPerSec);
    auto cc = clientConfig(srv.port());
    cc.clock = &clock;
    auto client = startClient(cc);
    auto rate = std::make_shared<FixedLinkRate>(8'000'000);  // 1 MB/s: 100 KB take 100 ms
    Waker wa, wb;
    auto a = client->makeGate(kLink, {0, 0, 0}, wa.fn(), rate);
    auto b = client->makeGate(kLink, {1, 0, 0}, wb.fn(), rate);
    ASSERT_TRUE(acquireWithin(*a, wa, milliseconds(3000), 100'000, clock));
    a->release(100'000, clock.nowNs());  // the kernel took it all at once
    EXPECT_FALSE(b->acquire(10, clock.nowNs()));
    // a's next message does not resume the draining grant: the arbiter does not say whether
    // others wait, so every transfer takes a turn of its own (GrantHold), after a's bytes.
    const int a_wakes = wa.calls.load();
    EXPECT_FALSE(a->acquire(10, clock.nowNs()));
    EXPECT_EQ(client->stats().resumed, 0u);
    clock.advance(99 * kNsPerMs);
    EXPECT_FALSE(waitFor([&] { return wb.calls.load() > 0; }, milliseconds(300)))
        << "b got the link before a's bytes crossed it";
    clock.advance(kNsPerMs);
    ASSERT_TRUE(acquireWithin(*b, wb, milliseconds(3000), 10, clock));
    EXPECT_EQ(wa.calls.load(), a_wakes) << "b asked first: a's second message waits behind it";
    b->release(10, clock.nowNs());
    clock.advance(kNsPerMs);  // b's 10 bytes are through
    ASSERT_TRUE(acquireWithin(*a, wa, milliseconds(3000), 10, clock));
    a->release(10, clock.nowNs());
    const std::string m = srv.server().metricsText();
    // a's release reached the arbiter before b's grant; b's own release may still be in
    // flight, so only a's per-flow figure is exact here.
    EXPECT_NE(
        m.find("flow=\"1\",pipeline=\"0\",stage=\"0\",direction=\"fwd\",priority=\"1\"} 100000\n"),
        std::string::npos)
        << "one release reports the grant's bytes once: " << m;
}

TEST(MeasuredLinkRate, LearnsFromTrainsCappedByTheTypedRate) {
    constexpr uint64_t kTrain = 4ull << 20;
    const Nanos at1gbps = static_cast<Nanos>(kTrain * 8);  // ns for 4 MiB at 1 Gbit/s
    auto feed = [&](MeasuredLinkRate& r) {
        for (int i = 1; i <= 3; ++i) {
            r.addSample(kTrain, at1gbps, i * 100 * kNsPerMs, 0);
        }
    };
    MeasuredLinkRate bare(0);  // no ATLAS_LINK_GBPS
    EXPECT_EQ(bare.bitsPerSec(0), 0u) << "unknown until trains arrive: no hold on a guess";
    feed(bare);
    EXPECT_NEAR(static_cast<double>(bare.bitsPerSec(300 * kNsPerMs)), 1e9, 1e6);
    MeasuredLinkRate typed(2'000'000'000);  // ATLAS_LINK_GBPS=2 stands in, then caps
    EXPECT_EQ(typed.bitsPerSec(0), 2'000'000'000u);
    feed(typed);
    EXPECT_NEAR(static_cast<double>(typed.bitsPerSec(300 * kNsPerMs)), 1e9, 1e6);
    MeasuredLinkRate capped(500'000'000);
    feed(capped);
    EXPECT_EQ(capped.bitsPerSec(300 * kNsPerMs), 500'000'000u);
    EXPECT_NEAR(static_cast<double>(capped.measuredBps()), 1e9, 1e6);
}

// A train during which its sender's gate held the flow back (transport/train.h GateStalls)
// measured the wait: sched::gateLimitedSample. Without the rule three such trains shift the
// level down (the collapse measured on a shallow buffer: 4 Mbit/s on a 1 Gbit/s link, every
// transfer held 5 s); dropped instead, a low estimate would never see a train to raise it.
TEST(MeasuredLinkRate, ATrainTheGateStalledCountsOnlyByItsSendingTimeAndOnlyUpwards) {
    constexpr uint64_t kTrain = 4ull << 20;
    const Nanos at1gbps = static_cast<Nanos>(kTrain * 8);  // 33.6 ms
    constexpr Nanos k8s = 8 * kNsPerSec;
    MeasuredLinkRate none(0);
    for (int i = 1; i <= 3; ++i) {
        none.addSample(kTrain, k8s, i * 100 * kNsPerMs, k8s - at1gbps);
    }
    EXPECT_EQ(none.measuredBps(), 0u) << "limited trains alone make no estimate";
    auto known = [&](MeasuredLinkRate& r) {
        for (int i = 1; i <= 3; ++i) {
            r.addSample(kTrain, at1gbps, i * 100 * kNsPerMs, 0);
        }
    };
    MeasuredLinkRate limited(0), plain(0);
    known(limited);
    known(plain);
    for (int i = 4; i <= 6; ++i) {  // 4 MiB over 8 s, 1 s of it stalled: 4.8 Mbit/s
        limited.addSample(kTrain, k8s, i * 100 * kNsPerMs, kNsPerSec);
        plain.addSample(kTrain, k8s, i * 100 * kNsPerMs, 0);
    }
    EXPECT_NEAR(static_cast<double>(limited.measuredBps()), 1e9, 1e6);
    EXPECT_LT(plain.measuredBps(), 100'000'000u) << "the rule's reason: plain ones do shift it";
    // From the low estimate, stalled trains count by their sending time, at most a tenth of
    // their dispersion: 4 MiB sent in 33.6 ms of an 8 s train lift it tenfold (4 MiB over
    // 0.8 s); in 33.6 ms of a 336 ms train, back to the rate.
    for (int i = 7; i <= 9; ++i) {
        plain.addSample(kTrain, k8s, i * 100 * kNsPerMs, k8s - at1gbps);
    }
    EXPECT_NEAR(static_cast<double>(plain.measuredBps()), kTrain * 8 / 0.8, 1e5);
    for (int i = 10; i <= 12; ++i) {
        plain.addSample(kTrain, 10 * at1gbps, i * 100 * kNsPerMs, 9 * at1gbps);
    }
    EXPECT_NEAR(static_cast<double>(plain.measuredBps()), 1e9, 1e6);
    // A stall of less than a tenth counts as it is, even below the estimate (three of them
    // at 0.5 Gbit/s shift the level).
    for (int i = 13; i <= 15; ++i) {
        limited.addSample(kTrain, 2 * at1gbps, i * 100 * kNsPerMs, at1gbps / 10);
    }
    EXPECT_NEAR(static_cast<double>(limited.measuredBps()), 0.5e9, 1e6);
}

// Protocol 3 (the DC-wide rate pool): process A's receivers measured three exclusive
// transfers; process B, which measured nothing, holds its grant by A's rate as soon as its
// first grant arrives, and its byte budget is that rate's share of the slot.
TEST(ArbiterLoopback, TrainsOfOneProcessSetTheHoldRateOfAnother) {
    constexpr Nanos kSlotNs = 250 * kNsPerMs;
    ServerThread srv(serverConfig(sched::PolicyKind::kTemporal, kSlotNs));
    ASSERT_TRUE(srv.ok()) << srv.error();
    auto a = startClient(clientConfig(srv.port()));
    auto b = startClient(clientConfig(srv.port()));
    ASSERT_TRUE(a && b);
    auto rate_a = std::make_shared<MeasuredLinkRate>(0, kLink, Logger{}, a->ratePool(kLink));
    auto rate_b = std::make_shared<MeasuredLinkRate>(0, kLink, Logger{}, b->ratePool(kLink));
    Waker wa, wb;
    auto ga = a->makeGate(kLink, {0, 0, 0}, wa.fn(), rate_a);
    auto gb = b->makeGate(kLink, {1, 0, 0}, wb.fn(), rate_b);
    ASSERT_TRUE(acquireWithin(*ga, wa, milliseconds(3000)));
    constexpr uint64_t kTrain = 4ull << 20;
    const Nanos at1gbps = static_cast<Nanos>(kTrain * 8);  // ns for 4 MiB at 1 Gbit/s
    for (int i = 0; i < 3; ++i) {
        ga->onPathSample(kTrain, at1gbps, monotonicNowNs(), 0);
    }
    ga->onPathSample(1000, at1gbps, monotonicNowNs(), 0);  // not a sample: not sent
    EXPECT_EQ(a->stats().trains, 3u);
    ASSERT_TRUE(waitFor([&] {
        return srv.server().metricsText().find(
                   "atlas_arbiter_link_trains_total{link=\"dc0->dc1\"} 3\n") != std::string::npos;
    })) << srv.server().metricsText();
    ga->release(kTrain, monotonicNowNs());
    EXPECT_EQ(rate_b->bitsPerSec(0), 0u) << "B measured nothing and had no grant yet";
    ASSERT_TRUE(acquireWithin(*gb, wb, milliseconds(3000), 1ull << 30));
    EXPECT_NEAR(static_cast<double>(rate_b->bitsPerSec(0)), 1e9, 2e6)
        << "the grant brought the DC's estimate";
    EXPECT_EQ(b->stats().trains, 0u);
    // The budget of B's grant (1 GiB queued): its slot (at most 250 ms from receipt) at 1
    // Gbit/s.
    EXPECT_LE(gb->budgetBytes(), static_cast<uint64_t>(1e9 / 8 * 0.250 * 1.01));
    EXPECT_GE(gb->budgetBytes(), static_cast<uint64_t>(1e9 / 8 * 0.200));
    gb->release(0, monotonicNowNs());
}

TEST(ArbiterLoopback, SharedKeyAuthenticatesAndAWrongKeyFailsOpen) {
    auto cfg = serverConfig();
    cfg.auth_key = "secret-1";
    ServerThread srv(cfg);
    ASSERT_TRUE(srv.ok()) << srv.error();
    {
        auto cc = clientConfig(srv.port());
        cc.auth_key = "secret-1";
        auto good = startClient(cc);
        Waker w;
        auto g = good->makeGate(kLink, {}, w.fn());
        ASSERT_TRUE(acquireWithin(*g, w, milliseconds(3000)));
        EXPECT_EQ(good->mode(), ArbiterClient::Mode::kArbitrated);
        g->release(1, monotonicNowNs());
    }
    for (const char* key : {"secret-2", ""}) {
        CaptureLog log;
        auto cc = clientConfig(srv.port(), log.logger());
        cc.auth_key = key;
        auto bad = startClient(cc);
        Waker w;
        auto g = bad->makeGate(kLink, {}, w.fn());
        ASSERT_TRUE(acquireWithin(*g, w, milliseconds(3000))) << "fails open, never stalls";
        EXPECT_EQ(bad->mode(), ArbiterClient::Mode::kFailOpen) << key;
        EXPECT_TRUE(g->holds(monotonicNowNs() + 3600 * kNsPerSec)) << "unarbitrated: no slot";
        EXPECT_EQ(log.count(LogLevel::kWarn, "unreachable"), 1) << log.all();
    }
    // The keyless client is rejected by the server (counted); the wrong-key client rejects
    // the server's proof itself. Both keep retrying in the background, so: at least one.
    const std::string m = srv.server().metricsText();
    const std::string key = "\natlas_arbiter_auth_failures_total ";
    const size_t at = m.find(key);
    ASSERT_NE(at, std::string::npos) << m;
    EXPECT_GE(std::stod(m.substr(at + key.size())), 1.0) << m;
}

TEST(ArbiterLoopback, UnreachableArbiterFailsOpenWithOneWarning) {
    CaptureLog log;
    auto client = startClient(clientConfig(closedPort(), log.logger()));
    Waker w;
    auto g = client->makeGate(kLink, {}, w.fn());
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(acquireWithin(*g, w, milliseconds(3000)));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(2000))
        << "bounded by the connect timeout";
    EXPECT_EQ(client->mode(), ArbiterClient::Mode::kFailOpen);
    // Several background retries later: still exactly one warning.
    ASSERT_TRUE(waitFor([&] {
        return log.all().find("still unreachable") != std::string::npos ||
               client->stats().outages >= 1;
    }));
    std::this_thread::sleep_for(milliseconds(300));
    EXPECT_EQ(log.count(LogLevel::kWarn, "unreachable"), 1) << log.all();
    EXPECT_EQ(client->stats().outages, 1u);
}

bool failingRandom(uint8_t*, size_t) {
    return false;  // an RNG out of entropy (RAND_bytes returning 0)
}

// A failed RNG must fail the handshake, not send a zero nonce (arbiter/protocol.h): on the
// server the session is refused with an error that names the cause, on the client no Hello
// goes out; either way the client fails open with one warning that says why.
TEST(ArbiterLoopback, FailedRngFailsTheHandshakeOnEitherSide) {
    {
        CaptureLog server_log;
        auto cfg = serverConfig();
        cfg.random = &failingRandom;
        cfg.logger = server_log.logger();
        ServerThread srv(cfg);
        ASSERT_TRUE(srv.ok()) << srv.error();
        CaptureLog log;
        auto client = startClient(clientConfig(srv.port(), log.logger()));
        Waker w;
        auto g = client->makeGate(kLink, {}, w.fn());
        ASSERT_TRUE(acquireWithin(*g, w, milliseconds(3000))) << "fails open, never stalls";
        EXPECT_EQ(client->mode(), ArbiterClient::Mode::kFailOpen);
        EXPECT_EQ(client->stats().sessions, 0u);
        EXPECT_EQ(log.count(LogLevel::kWarn, "random number generator failed"), 1) << log.all();
        EXPECT_GE(server_log.count(LogLevel::kWarn, "refused: the random number generator"), 1)
            << server_log.all();
    }
    {
        ServerThread srv(serverConfig());
        ASSERT_TRUE(srv.ok()) << srv.error();
        CaptureLog log;
        auto cc = clientConfig(srv.port(), log.logger());
        cc.random = &failingRandom;
        auto client = startClient(cc);
        Waker w;
        auto g = client->makeGate(kLink, {}, w.fn());
        ASSERT_TRUE(acquireWithin(*g, w, milliseconds(3000))) << "fails open, never stalls";
        EXPECT_EQ(client->mode(), ArbiterClient::Mode::kFailOpen);
        EXPECT_EQ(client->stats().sessions, 0u);
        EXPECT_EQ(log.count(LogLevel::kWarn, "no handshake nonce: the random number generator"), 1)
            << log.all();
        EXPECT_NE(srv.server().metricsText().find("\natlas_arbiter_sessions_total 0\n"),
                  std::string::npos)
            << srv.server().metricsText();
    }
}

TEST(ArbiterLoopback, ArbiterStoppedMidRunFailsOpenThenResumes) {
    CaptureLog log;
    auto srv = std::make_unique<ServerThread>(serverConfig());
    ASSERT_TRUE(srv->ok()) << srv->error();
    const uint16_t port = srv->port();
    auto client = startClient(clientConfig(port, log.logger()));
    Waker wa, wb;
    auto a = client->makeGate(kLink, {0, 0, 0}, wa.fn());
    auto b = client->makeGate(kLink, {1, 0, 0}, wb.fn());
    ASSERT_TRUE(acquireWithin(*a, wa, milliseconds(3000)));
    EXPECT_FALSE(b->acquire(10, monotonicNowNs())) << "b waits behind a";
    srv->stop();  // the arbiter dies mid-run
    ASSERT_TRUE(waitFor([&] { return wb.calls.load() > 0; })) << "the waiter is let go";
    EXPECT_TRUE(b->acquire(10, monotonicNowNs()));
    EXPECT_TRUE(a->holds(monotonicNowNs()));
    EXPECT_EQ(client->mode(), ArbiterClient::Mode::kFailOpen);
    EXPECT_EQ(log.count(LogLevel::kWarn, "unreachable"), 1) << log.all();
    // A new arbiter on the same port: the client reconnects and arbitration resumes.
    auto cfg = serverConfig();
    cfg.port = port;
    srv = std::make_unique<ServerThread>(cfg);
    ASSERT_TRUE(srv->ok()) << srv->error();
    ASSERT_TRUE(waitFor([&] { return client->mode() == ArbiterClient::Mode::kArbitrated; }))
        << log.all();
    EXPECT_FALSE(a->holds(monotonicNowNs())) << "unarbitrated holders stop at the next piece";
    a->release(10, monotonicNowNs());
    b->release(10, monotonicNowNs());
    ASSERT_TRUE(acquireWithin(*a, wa, milliseconds(3000)));
    EXPECT_FALSE(b->acquire(10, monotonicNowNs())) << "arbitrated again";
    a->release(10, monotonicNowNs());
    EXPECT_EQ(log.count(LogLevel::kWarn, "unreachable"), 1);
    EXPECT_GE(log.count(LogLevel::kInfo, "reachable again"), 1);
}

// A raw protocol client that takes the link and then goes silent (a partitioned holder).
int rawHolder(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        return -1;
    }
    arbiter::Decoder d;
    auto sendMsg = [&](const arbiter::Message& m) {
        auto b = arbiter::encode(m);
        return ::send(fd, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
    };
    auto recvMsg = [&]() -> std::optional<arbiter::Message> {
        uint8_t buf[512];
        for (;;) {
            auto n = d.next();
            if (!n) {
                return std::nullopt;
            }
            if (n.value()) {
                return *n.value();
            }
            const ssize_t r = ::recv(fd, buf, sizeof(buf), 0);
            if (r <= 0) {
                return std::nullopt;
            }
            d.feed(buf, static_cast<size_t>(r));
        }
    };
    sendMsg(arbiter::Hello{arbiter::randomNonce().value(), 1, "raw"});
    if (!recvMsg()) {
        return -1;
    }
    sendMsg(arbiter::Auth{});
    auto w = recvMsg();
    if (!w || !std::holds_alternative<arbiter::Welcome>(*w)) {
        return -1;
    }
    sendMsg(arbiter::Open{1, {}, kLink});
    sendMsg(arbiter::Request{1, 100});
    auto g = recvMsg();
    if (!g || !std::holds_alternative<arbiter::Grant>(*g)) {
        return -1;
    }
    return fd;  // holds the link; never pings
}

TEST(ArbiterLoopback, SilentHolderLosesTheLinkAfterTheLease) {
    ServerThread srv(serverConfig());
    ASSERT_TRUE(srv.ok()) << srv.error();
    const int holder = rawHolder(srv.port());
    ASSERT_GE(holder, 0);
    auto client = startClient(clientConfig(srv.port()));
    Waker w;
    auto g = client->makeGate(kLink, {}, w.fn());
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(g->acquire(10, monotonicNowNs()));
    ASSERT_TRUE(acquireWithin(*g, w, milliseconds(3000)));
    const auto waited = std::chrono::steady_clock::now() - t0;
    // Lease 300 ms, swept every lease/4: revoked after 300..375 ms of silence (+ scheduling).
    EXPECT_GE(waited, milliseconds(200));
    EXPECT_LE(waited, milliseconds(1500));
    EXPECT_NE(srv.server().metricsText().find("atlas_arbiter_liveness_drops_total 1"),
              std::string::npos);
    g->release(10, monotonicNowNs());
    ::close(holder);
}

TEST(ArbiterLoopback, SigkilledHolderProcessLosesTheLinkAtOnce) {
    auto cfg = serverConfig();
    cfg.lease_ns = 5 * kNsPerSec;  // the raw holder never pings: only the kill may free the link
    ServerThread srv(cfg);
    ASSERT_TRUE(srv.ok()) << srv.error();
    const uint16_t port = srv.port();
    // The child holds the link through a raw session: it is forked from this multi-threaded
    // process (the server thread), so it must not start threads of its own (TSan forbids it).
    auto child = abi::ChildProcess::spawn([port](int fd) {
        if (rawHolder(port) < 0) {
            return 3;
        }
        const uint8_t one = 1;
        if (::write(fd, &one, 1) != 1) {
            return 4;
        }
        for (;;) {
            ::pause();  // holds the link until killed
        }
    });
    ASSERT_TRUE(child.isOk()) << child.status().toString();
    auto byte = abi::recvByte(child.value().fd(), abi::Deadline::afterMs(10000));
    ASSERT_TRUE(byte.isOk()) << "child did not get the link";
    auto client = startClient(clientConfig(port));
    Waker w;
    auto g = client->makeGate(kLink, {6, 0, 0}, w.fn());
    EXPECT_FALSE(acquireWithin(*g, w, milliseconds(200))) << "the child holds the link";
    const auto t0 = std::chrono::steady_clock::now();
    child.value().kill(SIGKILL);
    ASSERT_TRUE(acquireWithin(*g, w, milliseconds(3000)));
    // The kernel closes the dead process's socket: no need to wait for the 5 s lease (the
    // bound leaves room for a loaded CI machine, far below the lease).
    EXPECT_LT(std::chrono::steady_clock::now() - t0, milliseconds(1500));
    g->release(10, monotonicNowNs());
}

TEST(ArbiterLoopback, SixtyFourFlowsFourClientsNoDeadlockNoOverlap) {
    ServerThread srv(serverConfig());
    ASSERT_TRUE(srv.ok()) << srv.error();
    constexpr int kClients = 4;
    constexpr int kPerClient = 16;
    constexpr int kRounds = 3;
    std::atomic<int> holders{0};
    std::atomic<int> max_holders{0};
    std::atomic<int> done{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < kClients; ++c) {
        threads.emplace_back([&, c] {
            auto client = ArbiterClient::start(clientConfig(srv.port()));
            if (!client) {
                return;
            }
            std::vector<Waker> wakers(kPerClient);
            std::vector<std::unique_ptr<FlowGate>> gates;
            for (int i = 0; i < kPerClient; ++i) {
                gates.push_back(
                    client.value()->makeGate(kLink, {c * kPerClient + i, 0, 0}, wakers[i].fn()));
            }
            std::vector<int> rounds(kPerClient, 0);
            int finished = 0;
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while (finished < kPerClient && std::chrono::steady_clock::now() < deadline) {
                bool progressed = false;
                for (int i = 0; i < kPerClient; ++i) {
                    if (rounds[i] >= kRounds) {
                        continue;
                    }
                    if (gates[i]->acquire(4096, monotonicNowNs())) {
                        const int h = holders.fetch_add(1) + 1;
                        int m = max_holders.load();
                        while (h > m && !max_holders.compare_exchange_weak(m, h)) {
                        }
                        holders.fetch_sub(1);
                        gates[i]->release(4096, monotonicNowNs());
                        if (++rounds[i] == kRounds) {
                            ++finished;
                        }
                        progressed = true;
                    }
                }
                if (!progressed) {
                    std::this_thread::sleep_for(std::chrono::microseconds(200));
                }
            }
            done.fetch_add(finished);
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    EXPECT_EQ(done.load(), kClients * kPerClient) << "every flow finished every round";
    EXPECT_EQ(max_holders.load(), 1) << "slot 0: the next grant follows the release";
    const std::string m = srv.server().metricsText();
    EXPECT_NE(m.find("atlas_arbiter_grants_total{link=\"dc0->dc1\"} " +
                     std::to_string(kClients * kPerClient * kRounds) + "\n"),
              std::string::npos)
        << m;
}

TEST(ArbiterLoopback, FairArbiterTurnsGatingOff) {
    ServerThread srv(serverConfig(sched::PolicyKind::kFair));
    ASSERT_TRUE(srv.ok()) << srv.error();
    auto client = startClient(clientConfig(srv.port()));
    ASSERT_TRUE(waitFor([&] { return client->mode() == ArbiterClient::Mode::kFair; }));
    Waker w1, w2;
    auto a = client->makeGate(kLink, {}, w1.fn());
    auto b = client->makeGate(kLink, {}, w2.fn());
    EXPECT_TRUE(a->acquire(1, monotonicNowNs()));
    EXPECT_TRUE(b->acquire(1, monotonicNowNs())) << "fair: everyone sends at once";
    EXPECT_EQ(client->stats().requests, 0u) << "no control traffic in the baseline";
}

TEST(ArbiterLoopback, MetricsAndProtocolShareOnePort) {
    ServerThread srv(serverConfig());
    ASSERT_TRUE(srv.ok()) << srv.error();
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(srv.port());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
    std::string resp;
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
        resp.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    EXPECT_EQ(resp.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << resp;
    EXPECT_NE(resp.find("text/plain; version=0.0.4"), std::string::npos);
    EXPECT_NE(resp.find("atlas_arbiter_sessions 0"), std::string::npos);
}

// WanAdmission::isWanRecv on a real accepted comm: the receive side sees the connector's
// handshake RTT and both addresses, so the send-side rule applies unchanged.
TEST(WanRecvClassifier, AcceptedCommFollowsTheSendSideRule) {
    auto t = transport::Transport::create(transport::testing::loopbackConfig());
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    transport::testing::Pair p;
    ASSERT_TRUE(transport::testing::connectPair(**t, **t, &p).isOk());
    const transport::CommInfo& info = p.recv->info();
    EXPECT_EQ(info.peer.toString().rfind("127.0.0.1", 0), 0u) << info.peer.toString();
    auto admission = [](const std::string& map, Nanos rtt) {
        WanConfig c;
        c.dc_map = DcMap::parse(map).value();
        c.wan_rtt_ns = rtt;
        return std::make_unique<WanAdmission>(std::move(c), Logger{});
    };
    EXPECT_TRUE(admission("", 0)->isWanRecv(*p.recv)) << "threshold 0: every comm is WAN";
    EXPECT_FALSE(admission("", 10 * kNsPerSec)->isWanRecv(*p.recv))
        << "loopback RTT " << info.rtt_ns << " ns is below 10 s";
    EXPECT_FALSE(admission("127.0.0.0/8=here", 0)->isWanRecv(*p.recv)) << "same DC";
    EXPECT_FALSE(admission("10.0.0.0/8=far", 0)->isWanRecv(*p.recv)) << "not in the map";
    // The verdict a DC map gives for the same comm seen from another DC.
    transport::CommInfo moved = info;
    moved.peer = transport::SocketAddress::parse("10.2.0.1", 1).value();
    auto two = admission("127.0.0.0/8=east,10.2.0.0/16=west", 10 * kNsPerSec);
    const WanVerdict v = two->classifyRecv(moved);
    EXPECT_TRUE(v.wan);
    EXPECT_EQ(v.link, "east->west");
    ASSERT_TRUE(p.send->close().isOk());
    ASSERT_TRUE(p.recv->close().isOk());
}

// Issue 17: a comm on a WAN link whose rate the node already measured is planned from that
// estimate, not from the device speed; a typed-in ATLAS_LINK_GBPS (an override) or
// ATLAS_LINK_RATE=fixed keeps the configured rate.
TEST(WanStreamPlan, ALaterCommIsPlannedFromTheLinksMeasuredRate) {
    WanConfig wc;
    wc.wan_rtt_ns = 0;                // every comm is WAN: the loopback handshake measures about 0
    wc.sharing = Sharing::kTemporal;  // node-local arbitration
    wc.shm_prefix = "atlas-test-plan-" + std::to_string(::getpid());
    WanConfig typed = wc;
    typed.link_bps = 1'000'000'000;  // ATLAS_LINK_GBPS=1
    WanConfig fixed = wc;
    fixed.measure_rate = false;  // ATLAS_LINK_RATE=fixed
    WanAdmission adm(wc, Logger{});
    WanAdmission adm_typed(typed, Logger{});
    WanAdmission adm_fixed(fixed, Logger{});
    transport::TransportConfig tc = transport::testing::loopbackConfig();
    tc.link_bps = 100'000'000'000ull;  // a 100 Gbit/s device: 4 streams (the CPU floor)
    tc.measured_path_bps = [&](const transport::CommInfo& i) { return adm.measuredPathBps(i); };
    auto t = transport::Transport::create(tc);
    ASSERT_TRUE(t.isOk()) << t.status().toString();

    transport::testing::Pair first;
    ASSERT_TRUE(transport::testing::connectPair(**t, **t, &first).isOk());
    EXPECT_EQ(first.send->info().nstreams, 4) << "no comm on the link yet: the device speed";
    const AttachResult r = adm.attach(*first.send, 1, 0);
    ASSERT_TRUE(r.gated) << r.mode;
    EXPECT_EQ(adm.measuredPathBps(first.send->info()), 0u) << "gated, but no train yet";

    // Another process of the node measured the link: 3 trains at 1 Gbit/s in its segment.
    ShmConfig sc;
    sc.name = shmNameForLink(wc.shm_prefix, r.verdict.link);
    auto other = ShmArbiter::open(sc);
    ASSERT_TRUE(other.isOk()) << other.status().toString();
    MeasuredLinkRate theirs(0, r.verdict.link, {}, other.value()->ratePool());
    for (int i = 0; i < 3; ++i) {  // 10 MiB in 84 ms: 0.998 Gbit/s
        theirs.addSample(10 << 20, 84 * kNsPerMs, monotonicNowNs(), 0);
    }
    EXPECT_NEAR(static_cast<double>(adm.measuredPathBps(first.send->info())) / 1e9, 0.998, 0.01);
    transport::testing::Pair second;
    ASSERT_TRUE(transport::testing::connectPair(**t, **t, &second).isOk());
    EXPECT_EQ(second.send->info().nstreams, 1) << "1 Gbit/s at a loopback RTT: one stream";

    // The override and the fixed rate: their gates exist on the same link, yet no estimate
    // reaches the plan.
    transport::testing::Pair third;
    ASSERT_TRUE(transport::testing::connectPair(**t, **t, &third).isOk());
    ASSERT_TRUE(adm_typed.attach(*third.send, 3, 0).gated);
    transport::testing::Pair fourth;
    ASSERT_TRUE(transport::testing::connectPair(**t, **t, &fourth).isOk());
    ASSERT_TRUE(adm_fixed.attach(*fourth.send, 4, 0).gated);
    EXPECT_EQ(adm_typed.measuredPathBps(third.send->info()), 0u);
    EXPECT_EQ(adm_fixed.measuredPathBps(fourth.send->info()), 0u);
    WanConfig lan = wc;
    lan.wan_rtt_ns = 10 * kNsPerSec;  // nothing is WAN
    EXPECT_EQ(WanAdmission(lan, Logger{}).measuredPathBps(first.send->info()), 0u);

    for (auto* p : {&first, &second, &third, &fourth}) {
        ASSERT_TRUE(p->send->close().isOk());
        ASSERT_TRUE(p->recv->close().isOk());
    }
    other.value()->shutdown();
    ::unlink(("/dev/shm/" + sc.name).c_str());
}

}  // namespace
}  // namespace atlas::plugin::wan
