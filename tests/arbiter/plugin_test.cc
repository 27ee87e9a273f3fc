// End to end through libnccl-net-atlas.so (dlopen, v11 table, like NCCL): WAN flows are
// arbitrated node-locally and by atlas-arbiter, and every byte still arrives exactly; the
// arbiter killed mid-run costs one WARN and no transfer.
//
// Loopback has no WAN, so ATLAS_WAN_RTT_US=0 classifies every comm as WAN (the loopback
// handshake measures an RTT of 0): link "wan->127.0.0.0/16".
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "plugin/wan/shm_layout.h"
#include "tests/abi/isolate.h"
#include "tests/arbiter/test_util.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(120 * kNsPerSec);
constexpr int kPairs = 3;
constexpr size_t kSize = 6 << 20;  // 12 chunks of 512 KiB per message

// kPairs comm pairs in this process; every round sends one message on each pair at once
// (all posted before any is awaited, so the flows contend) and checks every byte.
struct Pairs {
    std::vector<CommPair> pairs;
    std::vector<MappedBuffer> src, dst;
    std::vector<Registration> send_mr, recv_mr;
};

Status setUp(NetApi& net, void* ctx, Pairs* p, const Deadline& d) {
    for (int i = 0; i < kPairs; ++i) {
        CommPair pair;
        ATLAS_RETURN_IF_ERROR(connectInProcess(net, ctx, 0, &pair, d));
        p->pairs.push_back(pair);
        auto s = MappedBuffer::create(kSize);
        auto r = MappedBuffer::create(kSize);
        if (!s || !r) {
            return Status(Code::kSystem, "buffers");
        }
        p->src.push_back(std::move(s.value()));
        p->dst.push_back(std::move(r.value()));
        auto sm = Registration::create(net, pair.send_comm, p->src.back().data(), kSize);
        auto rm = Registration::create(net, pair.recv_comm, p->dst.back().data(), kSize);
        if (!sm || !rm) {
            return Status(Code::kInternal, "regMr");
        }
        p->send_mr.push_back(std::move(sm.value()));
        p->recv_mr.push_back(std::move(rm.value()));
    }
    return Status::ok();
}

Status round(NetApi& net, Pairs& p, uint64_t seed, const Deadline& d) {
    std::vector<void*> sends, recvs;
    for (int i = 0; i < kPairs; ++i) {
        fillPattern(p.src[i].data(), kSize, seed + i);
        std::memset(p.dst[i].data(), 0, kSize);
        auto r =
            postRecv(net, p.pairs[i].recv_comm, p.dst[i].data(), kSize, p.recv_mr[i].mhandle(), d);
        ATLAS_RETURN_IF_ERROR(r.status());
        recvs.push_back(r.value());
    }
    for (int i = 0; i < kPairs; ++i) {
        auto s =
            postSend(net, p.pairs[i].send_comm, p.src[i].data(), kSize, p.send_mr[i].mhandle(), d);
        ATLAS_RETURN_IF_ERROR(s.status());
        sends.push_back(s.value());
    }
    for (int i = 0; i < kPairs; ++i) {
        auto n = waitDone(net, recvs[i], d);
        ATLAS_RETURN_IF_ERROR(n.status());
        if (n.value() != kSize) {
            return Status(Code::kInternal, "short receive");
        }
        auto m = waitDone(net, sends[i], d);
        ATLAS_RETURN_IF_ERROR(m.status());
        const std::string bad = describePatternMismatch(p.dst[i].data(), kSize, seed + i);
        if (!bad.empty()) {
            return Status(Code::kInternal, "pair " + std::to_string(i) + ": " + bad);
        }
    }
    return Status::ok();
}

Status tearDown(NetApi& net, Pairs& p) {
    p.send_mr.clear();
    p.recv_mr.clear();
    for (auto& pair : p.pairs) {
        ATLAS_RETURN_IF_ERROR(closePair(net, &pair));
    }
    return Status::ok();
}

std::string httpGet(uint16_t port, const std::string& path) {
    const int fd = arbiter::testing::connectLoopback(port);
    if (fd < 0) {
        return {};
    }
    const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n";
    (void)!::send(fd, req.data(), req.size(), 0);
    std::string resp;
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) {
        resp.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return resp;
}

// Reads a counter from the node-local segment (a snapshot; good enough after the traffic).
uint64_t segmentGrants(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) {
        return 0;
    }
    void* m = ::mmap(nullptr, sizeof(plugin::wan::ShmSegment), PROT_READ, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) {
        return 0;
    }
    const uint64_t g = static_cast<const plugin::wan::ShmSegment*>(m)->fifo.grants;
    ::munmap(m, sizeof(plugin::wan::ShmSegment));
    return g;
}

TEST(ArbiterPlugin, NodeLocalTemporalMovesEveryByte) {
    const std::string prefix = "atlas-ptest-" + std::to_string(::getpid());
    const std::string seg = "/dev/shm/" + prefix + ".wan-_127.0.0.0_16";
    runIsolated(loopbackEnv({{"ATLAS_SHARING", "temporal"},
                             {"ATLAS_WAN_RTT_US", "0"},
                             {"ATLAS_NODE_SHM", prefix},
                             {"ATLAS_SLOT_MS", "5"}}),
                kBudget, [&] {
                    auto ep = Endpoint::open(pluginPath());
                    ATLAS_ASSERT_OK(ep);
                    Endpoint& e = **ep;
                    Deadline d(kBudget / 2);
                    Pairs p;
                    ATLAS_ASSERT_OK(setUp(e.net(), e.ctx(), &p, d));
                    for (uint64_t r = 0; r < 4; ++r) {
                        ATLAS_ASSERT_OK(round(e.net(), p, 100 * r, d));
                    }
                    // 3 flows x 4 messages, 6 MiB each in 5 ms slots: at least 12 grants.
                    EXPECT_GE(segmentGrants(seg), 12u);
                    EXPECT_TRUE(LogCapture::contains("node-local"));
                    ATLAS_ASSERT_OK(tearDown(e.net(), p));
                    ATLAS_EXPECT_OK(e.finalizeAndClose());
                    EXPECT_EQ(sampleResources().threads, 1) << "finalize joins the shm watcher too";
                });
    ::unlink(seg.c_str());
}

TEST(ArbiterPlugin, DcWideArbiterMovesEveryByteAndCountsIt) {
    runIsolated(loopbackEnv({{"ATLAS_WAN_RTT_US", "0"}}), kBudget, [&] {
        arbiter::testing::DaemonProcess daemon;
        std::string why;
        ASSERT_TRUE(daemon.start(
            ATLAS_ARBITER_PATH,
            {"--listen", "127.0.0.1:0", "--sharing", "temporal", "--slot-ms", "5"}, &why))
            << why;
        ScopedEnv env({{"ATLAS_ARBITER_CONNECT", "127.0.0.1:" + std::to_string(daemon.port())}});
        auto ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        Endpoint& e = **ep;
        Deadline d(kBudget / 2);
        Pairs p;
        ATLAS_ASSERT_OK(setUp(e.net(), e.ctx(), &p, d));
        for (uint64_t r = 0; r < 4; ++r) {
            ATLAS_ASSERT_OK(round(e.net(), p, 7 + 100 * r, d));
        }
        // Releases travel asynchronously: poll until the last one has been counted.
        const std::string want = "atlas_arbiter_link_bytes_total{link=\"wan->127.0.0.0/16\"} " +
                                 std::to_string(4 * kPairs * kSize) + "\n";
        std::string m;
        EXPECT_TRUE(arbiter::testing::waitFor([&] {
            m = httpGet(daemon.port(), "/metrics");
            return m.find(want) != std::string::npos;
        })) << "every byte is sent under a grant and reported: "
            << m;
        EXPECT_NE(m.find("atlas_arbiter_flows 3"), std::string::npos) << m;
        EXPECT_TRUE(LogCapture::contains("arbiter 127.0.0.1"));
        ATLAS_ASSERT_OK(tearDown(e.net(), p));
        ATLAS_EXPECT_OK(e.finalizeAndClose());
        EXPECT_EQ(sampleResources().threads, 1) << "finalize joins the arbiter client";
    });
}

TEST(ArbiterPlugin, ArbiterKilledMidRunFailsOpenWithOneWarning) {
    runIsolated(loopbackEnv({{"ATLAS_WAN_RTT_US", "0"}}), kBudget, [&] {
        arbiter::testing::DaemonProcess daemon;
        std::string why;
        ASSERT_TRUE(
            daemon.start(ATLAS_ARBITER_PATH, {"--listen", "127.0.0.1:0", "--slot-ms", "5"}, &why))
            << why;
        ScopedEnv env({{"ATLAS_ARBITER_CONNECT", "127.0.0.1:" + std::to_string(daemon.port())}});
        auto ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        Endpoint& e = **ep;
        Deadline d(kBudget / 2);
        Pairs p;
        ATLAS_ASSERT_OK(setUp(e.net(), e.ctx(), &p, d));
        for (uint64_t r = 0; r < 2; ++r) {
            ATLAS_ASSERT_OK(round(e.net(), p, 11 + r, d));
        }
        EXPECT_FALSE(LogCapture::contains("unreachable"));
        daemon.kill(SIGKILL);  // the control plane dies mid-run
        for (uint64_t r = 2; r < 6; ++r) {
            ATLAS_ASSERT_OK(round(e.net(), p, 11 + r, d));  // training never stalls
        }
        int warns = 0;
        for (const std::string& line : LogCapture::lines()) {
            warns += line.find("unreachable") != std::string::npos ? 1 : 0;
        }
        EXPECT_EQ(warns, 1) << "one WARN per outage";
        ATLAS_ASSERT_OK(tearDown(e.net(), p));
        ATLAS_EXPECT_OK(e.finalizeAndClose());
    });
}

}  // namespace
}  // namespace atlas::abi
