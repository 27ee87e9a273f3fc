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

#include "tests/transport/loopback_util.h"
#include "transport/socket_util.h"

namespace atlas::transport {
namespace {

using testing::connectPair;
using testing::loopbackConfig;
using testing::Pair;

// The congestion control of every connected TCP socket this process holds.
std::vector<std::string> connectedSocketsCc() {
    std::vector<std::string> out;
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
        const std::string cc = congestionControl(fd);
        if (!cc.empty()) {
            out.push_back(cc);
        }
    }
    ::closedir(d);
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

}  // namespace
}  // namespace atlas::transport
