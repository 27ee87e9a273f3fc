// ATLAS_TCP_CC (TransportConfig::congestion_control): every stream of a comm, on both sides,
// runs the configured TCP congestion control, and a name the kernel refuses costs a warning,
// not a connection. Real loopback sockets; the check reads TCP_CONGESTION of every TCP socket
// of this process.
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "atlas/admission.h"
#include "tests/transport/loopback_util.h"
#include "transport/pace.h"
#include "transport/socket_util.h"
#if ATLAS_HAVE_TCPCC
#include "tcpcc/loader.h"
#endif

namespace atlas::transport {
namespace {

using testing::connectPair;
using testing::loopbackConfig;
using testing::Pair;

// Every connected TCP socket this process holds.
std::vector<int> connectedSockets() {
    std::vector<int> out;
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr) {
        return out;
    }
    while (dirent* e = ::readdir(d)) {
        const int fd = std::atoi(e->d_name);
        struct stat st {};
        if (fd <= 2 || fd == ::dirfd(d) || ::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
            continue;
        }
        int type = 0;
        socklen_t len = sizeof(type);
        sockaddr_storage peer{};
        socklen_t plen = sizeof(peer);
        if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
            ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0) {
            continue;  // not a connected stream socket (a listener, a UDP or unix socket)
        }
        out.push_back(fd);
    }
    ::closedir(d);
    return out;
}

// The congestion control of every connected TCP socket this process holds.
std::vector<std::string> connectedSocketsCc() {
    std::vector<std::string> out;
    for (int fd : connectedSockets()) {
        const std::string cc = congestionControl(fd);
        if (!cc.empty()) {
            out.push_back(cc);
        }
    }
    return out;
}

// The SO_MAX_PACING_RATE of every connected TCP socket that has one (~0: none).
std::vector<uint64_t> connectedSocketsCaps() {
    std::vector<uint64_t> out;
    for (int fd : connectedSockets()) {
        unsigned long v = 0;
        socklen_t len = sizeof(v);
        if (::getsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v, &len) == 0 && v != ~0UL) {
            out.push_back(v);
        }
    }
    return out;
}

std::string kernelDefaultCc() {
    auto fd = makeTcpSocket(AF_INET);
    return fd.isOk() ? congestionControl(fd->get()) : std::string();
}

// A congestion control other than the kernel's default that this process may set: reno is
// built in and always allowed.
std::string otherThanDefault() {
    const std::string def = kernelDefaultCc();
    for (const char* cc : {"reno", "cubic", "bbr"}) {
        auto fd = makeTcpSocket(AF_INET);
        if (fd.isOk() && cc != def && setCongestionControl(fd->get(), cc) == 0) {
            return cc;
        }
    }
    return {};
}

TEST(LoopbackCongestionControl, EveryStreamOfBothSidesRunsTheConfiguredOne) {
    const std::string want = otherThanDefault();
    if (want.empty()) {
        GTEST_SKIP() << "no congestion control other than the default '" << kernelDefaultCc()
                     << "' can be set here";
    }
    TransportConfig cfg = loopbackConfig();
    cfg.nstreams = 3;
    cfg.congestion_control = want;
    auto t = Transport::create(cfg);
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    Pair p;
    ASSERT_TRUE(connectPair(**t, **t, &p).isOk());
    size_t with = 0;
    for (const std::string& cc : connectedSocketsCc()) {
        with += cc == want ? 1 : 0;
    }
    // Control stream and three data streams, on the sending and on the receiving side.
    EXPECT_GE(with, 2u * (1 + 3)) << "sockets running " << want;
}

struct Captured {
    std::mutex mu;
    std::vector<std::pair<LogLevel, std::string>> lines;  // those that name ATLAS_TCP_CC

    size_t count(LogLevel level) {
        std::lock_guard<std::mutex> lock(mu);
        size_t n = 0;
        for (const auto& [l, msg] : lines) {
            n += l == level ? 1 : 0;
        }
        return n;
    }
};

void capture(void* ctx, LogLevel level, const char*, int, const char* msg) {
    auto* c = static_cast<Captured*>(ctx);
    if (std::string(msg).find("ATLAS_TCP_CC") != std::string::npos) {
        std::lock_guard<std::mutex> lock(c->mu);
        c->lines.emplace_back(level, msg);
    }
}

TEST(LoopbackCongestionControl, ARefusedNameWarnsOnceAndTheStreamsKeepTheDefault) {
    Captured captured;
    TransportConfig cfg = loopbackConfig();
    cfg.nstreams = 2;
    cfg.congestion_control = "atlas_nosuch";
    cfg.logger = Logger(&capture, &captured);
    auto t = Transport::create(cfg);
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    Pair p;
    ASSERT_TRUE(connectPair(**t, **t, &p).isOk());
    // The comm works: one message crosses.
    std::vector<uint8_t> out(1 << 20, 7), in(1 << 20, 0);
    Request* rr = nullptr;
    Request* sr = nullptr;
    ASSERT_TRUE(p.recv->irecv(in.data(), in.size(), &rr).isOk());
    ASSERT_TRUE(p.send->isend(out.data(), out.size(), &sr).isOk());
    size_t got = 0;
    ASSERT_TRUE(testing::waitFor(sr, &got).isOk());
    ASSERT_TRUE(testing::waitFor(rr, &got).isOk());
    EXPECT_EQ(got, out.size());
    EXPECT_EQ(in, out);
    ASSERT_EQ(captured.count(LogLevel::kWarn), 1u);
    {
        std::lock_guard<std::mutex> lock(captured.mu);
        EXPECT_NE(captured.lines[0].second.find("'atlas_nosuch' (ATLAS_TCP_CC) refused"),
                  std::string::npos)
            << captured.lines[0].second;
    }
    const std::string def = kernelDefaultCc();
    for (const std::string& cc : connectedSocketsCc()) {
        EXPECT_EQ(cc, def);
    }
    // Once per process: a second transport with the same name says nothing again (NCCL inits
    // the plugin once per communicator).
    auto t2 = Transport::create(cfg);
    ASSERT_TRUE(t2.isOk());
    EXPECT_EQ(captured.count(LogLevel::kWarn), 1u);
}

TEST(LoopbackCongestionControl, TheDefaultsRefusalIsInfoNotAWarning) {
    // bbr is the default: a host without it is ordinary, and NCCL users read WARN as trouble.
    Captured captured;
    TransportConfig cfg = loopbackConfig();
    cfg.congestion_control = "atlas_nosuch_d";
    cfg.congestion_control_is_default = true;
    cfg.logger = Logger(&capture, &captured);
    auto t = Transport::create(cfg);
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    EXPECT_EQ(captured.count(LogLevel::kWarn), 0u);
    EXPECT_EQ(captured.count(LogLevel::kInfo), 1u);
}

// A gate that grants everything, with a pace set by the test (FlowGate::paceBps).
class PacedGate final : public FlowGate {
  public:
    explicit PacedGate(uint64_t pace_bps) : pace_bps_(pace_bps) {}
    bool acquire(uint64_t, Nanos) override { return true; }
    bool holds(Nanos) const override { return true; }
    uint64_t budgetBytes() const override { return 1ull << 40; }  // arbitrated, unbounded
    uint64_t paceBps() const override { return pace_bps_; }
    void release(uint64_t, Nanos) override {}

  private:
    const uint64_t pace_bps_;
};

// Sends 4 MiB through a comm of `cc` whose sender's gate paces at `pace_bps`; returns the
// caps (SO_MAX_PACING_RATE) on the process's sockets afterwards.
std::vector<uint64_t> capsAfterAPacedSend(const std::string& cc, uint64_t pace_bps) {
    TransportConfig cfg = loopbackConfig();
    cfg.nstreams = 4;
    cfg.chunk_bytes = 256 * 1024;
    cfg.congestion_control = cc;
    auto t = Transport::create(cfg);
    EXPECT_TRUE(t.isOk()) << t.status().toString();
    Pair p;
    EXPECT_TRUE(connectPair(**t, **t, &p).isOk());
    p.send->setGate(std::make_unique<PacedGate>(pace_bps));
    std::vector<uint8_t> out(4 << 20, 5), in(4 << 20, 0);
    Request *rr = nullptr, *sr = nullptr;
    EXPECT_TRUE(p.recv->irecv(in.data(), in.size(), &rr).isOk());
    EXPECT_TRUE(p.send->isend(out.data(), out.size(), &sr).isOk());
    size_t got = 0;
    EXPECT_TRUE(testing::waitFor(sr, &got).isOk());
    EXPECT_TRUE(testing::waitFor(rr, &got).isOk());
    EXPECT_EQ(in, out);
    return connectedSocketsCaps();
}

// Whether a fresh socket of this process may run `cc` (what Transport::create asks).
bool settable(const std::string& cc) {
    auto fd = makeTcpSocket(AF_INET);
    return fd.isOk() && setCongestionControl(fd->get(), cc) == 0;
}

TEST(LoopbackCongestionControl, AGrantsPaceCapsOnlyStreamsThatSendAtTheRateTheyAreTold) {
    // Under a congestion control that learns its own bandwidth (bbr, cubic), a cap that binds
    // ends BBR's STARTUP for good (docs/tcp-cc.md): the pace is not applied at all.
    const uint64_t pace = 80'000'000;  // bits/s: 10 MB/s, 4 MiB in about 0.4 s
    EXPECT_TRUE(capsAfterAPacedSend("", pace).empty()) << kernelDefaultCc() << " was paced";
#if ATLAS_HAVE_TCPCC
    // Registered for this test when it is not (and unregistered after): needs root.
    bool already = false;
    if (Status st = tcpcc::registerToldRateCc(&already); !st.isOk()) {
        GTEST_SKIP() << st.message();
    }
    struct Unregister {
        bool ours;
        ~Unregister() {
            if (ours) {
                (void)tcpcc::unregisterToldRateCc();
            }
        }
    } unregister{!already};
#endif
    if (!settable(kToldRateCongestionControl)) {
        GTEST_SKIP() << kToldRateCongestionControl
                     << " is not registered here (atlas-tcp-cc register, as root)";
    }
    // atlas_rate: the sender's data streams that carried bytes are capped, each at most the
    // whole pace (the share of the stream that held everything at the last split).
    const std::vector<uint64_t> caps = capsAfterAPacedSend(kToldRateCongestionControl, pace);
    ASSERT_FALSE(caps.empty()) << "no stream was paced";
    EXPECT_LE(caps.size(), 4u) << "only the sender's data streams";
    for (uint64_t c : caps) {
        EXPECT_GE(c, kMinStreamPaceBytes);
        EXPECT_LE(c, pace / 8);
    }
}

}  // namespace
}  // namespace atlas::transport
