// Protocol versions across builds (arbiter/protocol.h, "Versions") over 127.0.0.1: a
// version-1 client (an older plugin) is served by this arbiter with every flow at the
// default priority, and this plugin's client steps down one version at a time when an older
// arbiter refuses its Hello.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "arbiter/protocol.h"
#include "plugin/wan/arbiter_client.h"
#include "tests/arbiter/test_util.h"

namespace atlas::plugin::wan {
namespace {

using arbiter::testing::CaptureLog;
using arbiter::testing::connectLoopback;
using arbiter::testing::ServerThread;
using arbiter::testing::waitFor;

constexpr int kIoMs = 5000;  // bound on every blocking step

bool sendAll(int fd, const std::vector<uint8_t>& b) {
    return ::send(fd, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
}

// The next message on fd, with the header version it came at; an error status on a protocol
// error, a close or kIoMs without one.
Result<arbiter::Message> readMessage(int fd, arbiter::Decoder& d, uint8_t* version) {
    for (;;) {
        auto next = d.next();
        if (!next.isOk()) {
            return next.status();
        }
        if (next.value()) {
            *version = d.lastVersion();
            return *next.value();
        }
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, kIoMs) != 1) {
            return Status(Code::kTimeout, "no message");
        }
        uint8_t buf[512];
        const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) {
            return Status(Code::kRemote, "closed");
        }
        d.feed(buf, static_cast<size_t>(n));
    }
}

TEST(ArbiterVersions, VersionOneClientIsServedAtVersionOneWithTheDefaultPriority) {
    arbiter::ServerConfig cfg;
    cfg.core.policy = sched::PolicyKind::kTemporal;
    ServerThread srv(cfg);
    ASSERT_TRUE(srv.ok()) << srv.error();
    const int fd = connectLoopback(srv.port());
    ASSERT_GE(fd, 0);
    arbiter::Decoder d;
    uint8_t version = 0;
    arbiter::Hello h;
    auto nonce = arbiter::randomNonce();
    ASSERT_TRUE(nonce.isOk()) << nonce.status().toString();
    h.client_nonce = *nonce;
    h.pid = 1;
    h.name = "old-plugin";
    ASSERT_TRUE(sendAll(fd, arbiter::encode(h, 1)));
    auto challenge = readMessage(fd, d, &version);
    ASSERT_TRUE(challenge.isOk()) << challenge.status().toString();
    ASSERT_TRUE(std::holds_alternative<arbiter::Challenge>(*challenge));
    EXPECT_EQ(version, 1) << "the server answers at the client's version";
    ASSERT_TRUE(sendAll(fd, arbiter::encode(arbiter::Auth{}, 1)));
    auto welcome = readMessage(fd, d, &version);
    ASSERT_TRUE(welcome.isOk()) << welcome.status().toString();
    ASSERT_TRUE(std::holds_alternative<arbiter::Welcome>(*welcome));
    EXPECT_EQ(version, 1);
    arbiter::Open o;
    o.flow = 1;
    o.cls.priority = 0;  // not representable at version 1: dropped by the encoder
    o.link = "a->b";
    std::vector<uint8_t> out;
    arbiter::encode(o, &out, 1);
    arbiter::encode(arbiter::Request{1, 100}, &out, 1);
    ASSERT_TRUE(sendAll(fd, out));
    auto grant = readMessage(fd, d, &version);
    ASSERT_TRUE(grant.isOk()) << grant.status().toString();
    EXPECT_TRUE(std::holds_alternative<arbiter::Grant>(*grant));
    EXPECT_EQ(version, 1);
    const std::string m = srv.server().metricsText();
    EXPECT_NE(m.find("flow=\"1\",pipeline=\"0\",stage=\"0\",direction=\"fwd\",priority=\"1\""),
              std::string::npos)
        << "a version-1 flow has the default priority: " << m;
    ::close(fd);
}

// An arbiter of an older build that speaks versions 1..`speaks`: it refuses a Hello of a
// higher version with the protocol error its decoder produced, and closes; a Hello it speaks
// ends the run (recorded, then closed). Returns the Hello versions, one per connection, and
// the client's log.
std::vector<int> offersAgainstAnOlderArbiter(int speaks, std::string* log_text) {
    const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(::listen(lfd, 4), 0);
    socklen_t len = sizeof(a);
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
    std::vector<int> offered;
    std::thread old_arbiter([&] {
        for (int conn = 0; conn < arbiter::kProtocolVersion; ++conn) {
            pollfd p{lfd, POLLIN, 0};
            if (::poll(&p, 1, kIoMs) != 1) {
                return;
            }
            const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
            uint8_t header[arbiter::kHeaderBytes];
            size_t got = 0;
            pollfd q{fd, POLLIN, 0};
            while (got < sizeof(header) && ::poll(&q, 1, kIoMs) == 1) {
                const ssize_t n = ::recv(fd, header + got, sizeof(header) - got, 0);
                if (n <= 0) {
                    break;
                }
                got += static_cast<size_t>(n);
            }
            const bool spoken = got == sizeof(header) && header[4] <= speaks;
            if (got == sizeof(header)) {
                offered.push_back(header[4]);
            }
            if (got == sizeof(header) && !spoken) {
                arbiter::Error e;
                e.code = static_cast<uint16_t>(arbiter::ErrorCode::kProtocol);
                e.text = "malformed arbiter message: protocol version " +
                         std::to_string(header[4]) + " (this side speaks 1.." +
                         std::to_string(speaks) + ")";
                (void)sendAll(fd, arbiter::encode(e, 1));
            }
            ::close(fd);
            if (spoken || got != sizeof(header)) {
                return;
            }
        }
    });
    CaptureLog log;
    ArbiterClientConfig c;
    c.host = "127.0.0.1";
    c.port = ntohs(a.sin_port);
    c.connect_timeout_ns = 500 * kNsPerMs;
    c.retry_min_ns = 20 * kNsPerMs;
    c.retry_max_ns = 100 * kNsPerMs;
    c.name = "test";
    c.logger = log.logger();
    auto client = ArbiterClient::start(c);
    EXPECT_TRUE(client.isOk()) << client.status().toString();
    old_arbiter.join();
    ::close(lfd);
    EXPECT_TRUE(waitFor([&] {
        return log.all().find("speaks an older protocol") != std::string::npos;
    })) << "one INFO names the fallback: "
        << log.all();
    *log_text = log.all();
    return offered;
}

// One version lower per refusal: a version-1 arbiter is reached at 1 (no priorities), a
// version-2 one at 2 (priorities, but no pooled trains).
TEST(ArbiterVersions, ClientStepsDownOneVersionPerRefusalOfAnOlderArbiter) {
    std::string log;
    EXPECT_EQ(offersAgainstAnOlderArbiter(1, &log), (std::vector<int>{3, 2, 1}));
    EXPECT_NE(log.find("traffic priorities are not sent"), std::string::npos) << log;
    EXPECT_EQ(offersAgainstAnOlderArbiter(2, &log), (std::vector<int>{3, 2}));
    EXPECT_NE(log.find("link-rate trains are not pooled"), std::string::npos) << log;
    EXPECT_EQ(log.find("traffic priorities are not sent"), std::string::npos) << log;
}

}  // namespace
}  // namespace atlas::plugin::wan
