// The capture test: a packet capture (AF_PACKET on the loopback device of a private network
// namespace, what tcpdump records) of an encrypted transfer must not contain the payload in
// clear. The payload is a known pattern; the same transfer in clear must show it (which also
// proves the capture works). Needs root (CLONE_NEWNET, CAP_NET_RAW); skips otherwise. Each
// case runs in a forked child that enters its own namespace, so nothing else sees it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/loopback_util.h"

namespace atlas::transport {
namespace {

constexpr char kPattern[] = "ATLAS-CAPTURE-KNOWN-PATTERN-0123";  // 32 bytes, repeated

// In the child: a new network namespace with lo up.
bool privateLoopback(std::string* why) {
    if (::unshare(CLONE_NEWNET) != 0) {
        *why = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
        return false;
    }
    const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    bool ok = fd >= 0 && ::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
    ifr.ifr_flags |= IFF_UP;
    ok = ok && ::ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
    if (fd >= 0) {
        ::close(fd);
    }
    if (!ok) {
        *why = std::string("bringing lo up: ") + std::strerror(errno);
    }
    return ok;
}

// Child body: capture lo while moving `messages` of the pattern; returns 0 when the pattern
// was found in the capture, 1 when not, 2 on a setup error, 3 when the transfer failed.
int captureTransfer(bool encrypt) {
    std::string why;
    if (!privateLoopback(&why)) {
        std::fprintf(stderr, "%s\n", why.c_str());
        return 2;
    }
    const int cap = ::socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (cap < 0) {
        std::perror("socket(AF_PACKET)");
        return 2;
    }
    sockaddr_ll sll{};
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = static_cast<int>(if_nametoindex("lo"));
    if (::bind(cap, reinterpret_cast<sockaddr*>(&sll), sizeof(sll)) != 0) {
        std::perror("bind(AF_PACKET)");
        return 2;
    }
    std::atomic<bool> stop{false};
    std::atomic<uint64_t> hits{0}, packets{0}, bytes{0};
    std::thread capture([&] {
        std::vector<uint8_t> pkt(256 * 1024);
        while (!stop.load()) {
            pollfd p{cap, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) {
                continue;
            }
            const ssize_t n = ::recv(cap, pkt.data(), pkt.size(), 0);
            if (n <= 0) {
                continue;
            }
            ++packets;
            bytes += static_cast<uint64_t>(n);
            if (std::search(pkt.begin(), pkt.begin() + n, kPattern, kPattern + 32) !=
                pkt.begin() + n) {
                ++hits;
            }
        }
    });
    int rc = 3;
    {
        auto c = testing::loopbackConfig(IoBackend::kAuto);
        c.nstreams = 2;
        c.chunk_bytes = 64 * 1024;
        c.auth_key = "capture-key";
        c.encrypt = encrypt;
        auto t = Transport::create(c);
        testing::Pair p;
        if (t.isOk() && testing::connectPair(**t, **t, &p).isOk()) {
            // Striped and inline messages, so data streams and the control stream both count.
            rc = 0;
            for (size_t size : {size_t{1} << 20, size_t{3000}, size_t{200}}) {
                std::vector<uint8_t> src(size), dst(size);
                for (size_t i = 0; i < size; ++i) {
                    src[i] = static_cast<uint8_t>(kPattern[i % 32]);
                }
                Request *rr = nullptr, *sr = nullptr;
                size_t n = 0;
                if (!p.recv->irecv(dst.data(), size, &rr).isOk() || rr == nullptr ||
                    !p.send->isend(src.data(), size, &sr).isOk() || sr == nullptr ||
                    !testing::waitFor(sr, &n).isOk() || !testing::waitFor(rr, &n).isOk() ||
                    dst != src) {
                    rc = 3;
                    break;
                }
            }
            (void)p.send->close();
            (void)p.recv->close();
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the last packets
    stop = true;
    capture.join();
    ::close(cap);
    std::fprintf(stderr, "encrypt=%d: captured %llu packets, %llu bytes, %llu with the pattern\n",
                 encrypt ? 1 : 0, static_cast<unsigned long long>(packets.load()),
                 static_cast<unsigned long long>(bytes.load()),
                 static_cast<unsigned long long>(hits.load()));
    if (rc != 0) {
        return rc;
    }
    if (packets.load() == 0) {
        return 2;
    }
    return hits.load() > 0 ? 0 : 1;
}

int inChild(bool encrypt) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::_exit(captureTransfer(encrypt));
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 4;
}

TEST(Capture, EncryptedTransferShowsNoPayloadInClear) {
    if (::geteuid() != 0) {
        GTEST_SKIP() << "needs root (a private network namespace and a packet socket)";
    }
    const int clear = inChild(false);
    if (clear == 2) {
        GTEST_SKIP() << "no private network namespace or packet capture here (see stderr)";
    }
    ASSERT_EQ(clear, 0) << "the capture did not see the pattern of a transfer in clear, so it "
                           "proves nothing (3: the transfer failed)";
    EXPECT_EQ(inChild(true), 1) << "the pattern was on the wire in clear with ATLAS_ENCRYPT "
                                   "(0: found; 3: the transfer failed)";
}

}  // namespace
}  // namespace atlas::transport
