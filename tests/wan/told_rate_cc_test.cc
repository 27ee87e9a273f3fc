// atlas_rate, the told-rate TCP congestion control (tcpcc/atlas_rate.bpf.c), registered in
// the running kernel and run on real sockets across an emulated 50 ms link (atlas-wanem in
// two network namespaces). Skips without root, BTF, BPF congestion controls or the WAN
// fixture's needs; registers atlas_rate when it is not, and unregisters it afterwards.
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tcpcc/loader.h"
#include "tests/wan/netns_fixture.h"

namespace atlas::wanem::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class ToldRateCc : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        if (auto reason = wanSkipReason()) {
            skip_ = *reason;
            return;
        }
        bool already = false;
        if (Status st = tcpcc::registerToldRateCc(&already); !st.isOk()) {
            skip_ = st.message();
            return;
        }
        registered_here_ = !already;
    }
    static void TearDownTestSuite() {
        if (registered_here_) {
            EXPECT_TRUE(tcpcc::unregisterToldRateCc().isOk());
            EXPECT_FALSE(tcpcc::isRegistered());
        }
    }
    void SetUp() override {
        if (!skip_.empty()) {
            GTEST_SKIP() << skip_;
        }
        ASSERT_TRUE(tcpcc::isRegistered());
        ASSERT_TRUE(
            link_.start({"--delay-ms", "25", "--rate-mbit", "100", "--buf-ms", "100"}).isOk());
        const uint16_t port = static_cast<uint16_t>(20000 + getpid() % 20000);
        const int lfd = listenIn(link_, port);
        ASSERT_GE(lfd, 0);
        fd_ = connectFrom(link_, port);
        ASSERT_GE(fd_, 0);
        peer_ = ::accept(lfd, nullptr, nullptr);
        ::close(lfd);
        ASSERT_GE(peer_, 0);
        drain_ = std::thread([this] {
            std::vector<char> buf(1 << 20);
            while (::read(peer_, buf.data(), buf.size()) > 0) {
            }
        });
        ASSERT_EQ(
            ::setsockopt(fd_, IPPROTO_TCP, TCP_CONGESTION, tcpcc::kName, std::strlen(tcpcc::kName)),
            0)
            << std::strerror(errno);
    }
    void TearDown() override {
        if (fd_ >= 0) {
            ::shutdown(fd_, SHUT_RDWR);
            ::close(fd_);
        }
        if (drain_.joinable()) {
            drain_.join();
        }
        if (peer_ >= 0) {
            ::close(peer_);
        }
    }

    // Tells the stream its rate in bytes/s (0: untold).
    void tell(uint64_t bytes_per_sec) {
        const unsigned long v = bytes_per_sec == 0 ? ~0UL : bytes_per_sec;
        ASSERT_EQ(::setsockopt(fd_, SOL_SOCKET, SO_MAX_PACING_RATE, &v, sizeof(v)), 0);
    }
    // Writes n bytes and waits (10 s at most) until the peer acknowledged all of them.
    void sendAcked(size_t n) {
        std::vector<char> buf(n, 'x');
        size_t off = 0;
        while (off < n) {
            const ssize_t w = ::write(fd_, buf.data() + off, n - off);
            ASSERT_GT(w, 0) << std::strerror(errno);
            off += static_cast<size_t>(w);
        }
        const auto until = Clock::now() + 10s;
        int outq = 1;
        while (Clock::now() < until && ::ioctl(fd_, SIOCOUTQ, &outq) == 0 && outq > 0) {
            std::this_thread::sleep_for(1ms);
        }
        ASSERT_EQ(outq, 0) << "not acknowledged within 10 s";
    }
    tcp_info info() const {
        tcp_info i{};
        socklen_t len = sizeof(i);
        EXPECT_EQ(::getsockopt(fd_, IPPROTO_TCP, TCP_INFO, &i, &len), 0);
        return i;
    }
    // The window atlas_rate keeps when told `rate` bytes/s: two round trips at it, in
    // segments.
    double targetWindow(uint64_t rate) const {
        const tcp_info i = info();
        return 2.0 * static_cast<double>(rate) * i.tcpi_rtt / 1e6 / i.tcpi_snd_mss;
    }

    static inline std::string skip_;
    static inline bool registered_here_ = false;
    EmulatedLink link_{uniquePrefix()};
    int fd_ = -1, peer_ = -1;
    std::thread drain_;
};

TEST_F(ToldRateCc, AToldStreamKeepsTwoRoundTripsAtItsRateAndResumesWithThemAfterIdle) {
    // Told 5 MB/s on a 50 ms path: a window of about 345 segments, from the first ACKs.
    constexpr uint64_t kRate = 5'000'000;
    tell(kRate);
    ASSERT_NO_FATAL_FAILURE(sendAcked(2 << 20));
    const double target = targetWindow(kRate);
    const uint32_t busy = info().tcpi_snd_cwnd;
    EXPECT_GE(busy, 0.5 * target) << "window while sending, target " << target;
    EXPECT_LE(busy, 2.0 * target) << "window while sending, target " << target;
    // Idle for several RTOs: standard TCP restarts from a small window (RFC 5681 4.1); a
    // told stream's grant leaves at the told rate from its first bytes (the TX_START event).
    std::this_thread::sleep_for(1500ms);
    const char byte = 'y';
    ASSERT_EQ(::write(fd_, &byte, 1), 1);
    const uint32_t resumed = info().tcpi_snd_cwnd;
    EXPECT_GE(resumed, 0.5 * target) << "window on the first send after idle, target " << target;
}

TEST_F(ToldRateCc, AnUntoldStreamIsCubicAndRestartsSmallAfterIdle) {
    // The control for the test above, on the same congestion control: no rate told.
    tell(0);
    ASSERT_NO_FATAL_FAILURE(sendAcked(2 << 20));
    const uint32_t grown = info().tcpi_snd_cwnd;
    EXPECT_GT(grown, 10u) << "CUBIC's slow start grows the window";
    std::this_thread::sleep_for(1500ms);
    const char byte = 'y';
    ASSERT_EQ(::write(fd_, &byte, 1), 1);
    const uint32_t resumed = info().tcpi_snd_cwnd;
    EXPECT_LE(resumed, std::max(10u, grown / 8))
        << "restart window after idle (grown " << grown << ")";
}

TEST_F(ToldRateCc, AToldStreamSendsNoFasterThanItsRate) {
    // 2.5 MB at 2.5 MB/s on a 12.5 MB/s link: at least about a second. A lower bound only:
    // a slow machine makes it later, never sooner.
    constexpr uint64_t kRate = 2'500'000;
    tell(kRate);
    ASSERT_NO_FATAL_FAILURE(sendAcked(64 << 10));  // RTT and window known
    const auto start = Clock::now();
    ASSERT_NO_FATAL_FAILURE(sendAcked(2'500'000));
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_GE(s, 0.85) << "2.5 MB told 2.5 MB/s took " << s << " s";
}

}  // namespace
}  // namespace atlas::wanem::test
