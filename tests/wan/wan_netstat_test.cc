// atlas-netstat across the emulated WAN: while a sender in dc0 streams to a receiver in dc1
// over a 50 ms RTT, 1 Gbit/s link, `atlas-netstat --prometheus` run inside either DC
// namespace (they share /dev/shm with the host) lists the comms' streams with an RTT near
// 0.05 s and a congestion window, as valid Prometheus text.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "tests/abi/isolate.h"
#include "tests/abi/suites.h"
#include "tests/netstat/prom_parser.h"
#include "tests/wan/wan_plugin_testbed.h"

namespace atlas::wanem::test {
namespace {

using abi::expectPeerSucceeded;

const Nanos kBudget = abi::scaledBudget(90 * kNsPerSec);
constexpr size_t kMsg = 8 * abi::kMiB;
constexpr int kCount = 40;  // ~2.7 s at 1 Gbit/s

std::string netstatIn(const std::string& ns, const std::string& dir) {
    std::string out;
    const std::string cmd = "ip netns exec " + ns + " " + ATLAS_NETSTAT_PATH + " --dir " + dir +
                            " --prometheus 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) {
        return out;
    }
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
        out.append(buf, n);
    }
    pclose(p);
    return out;
}

// Whether the child has exited, without reaping it (expectPeerSucceeded still waits for it):
// a sender that failed early shows nothing more, so the poll below stops there instead of at
// the deadline.
bool exitedAlready(const abi::ChildProcess& child) {
    siginfo_t info{};
    return waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == child.pid();
}

Status streamAll(bool send, int fd, const abi::Deadline& deadline) {
    Result<std::unique_ptr<abi::Endpoint>> ep = abi::Endpoint::open(abi::pluginPath());
    if (!ep.isOk()) {
        return ep.status();
    }
    abi::NetApi& net = (*ep)->net();
    abi::CommPair pair;
    if (send) {
        ATLAS_RETURN_IF_ERROR(
            abi::readHandleAndConnect(net, (*ep)->ctx(), 0, fd, &pair.send_comm, deadline));
    } else {
        ATLAS_RETURN_IF_ERROR(
            abi::listenAndPublish(net, (*ep)->ctx(), 0, fd, &pair.listen_comm, deadline));
        ATLAS_RETURN_IF_ERROR(abi::acceptLoop(net, pair.listen_comm, &pair.recv_comm, deadline));
    }
    void* comm = send ? pair.send_comm : pair.recv_comm;
    Result<abi::MappedBuffer> buf = abi::MappedBuffer::create(kMsg);
    if (!buf.isOk()) {
        return buf.status();
    }
    Result<abi::Registration> mr = abi::Registration::create(net, comm, buf->data(), kMsg);
    if (!mr.isOk()) {
        return mr.status();
    }
    for (int i = 0; i < kCount; ++i) {
        Result<void*> req =
            send ? abi::postSend(net, comm, buf->data(), kMsg, mr->mhandle(), deadline)
                 : abi::postRecv(net, comm, buf->data(), kMsg, mr->mhandle(), deadline);
        if (!req.isOk()) {
            return req.status();
        }
        Result<size_t> done = abi::waitDone(net, *req, deadline);
        if (!done.isOk()) {
            return done.status();
        }
    }
    // Keep the comm open until the parent has looked (one byte on fd): how long that takes
    // depends on how fast atlas-netstat runs in each namespace, not on the transfer.
    Result<uint8_t> go = abi::recvByte(fd, deadline);
    (void)mr->release();
    ATLAS_RETURN_IF_ERROR(abi::closePair(net, &pair));
    if (!go.isOk()) {
        return go.status();
    }
    return (*ep)->finalizeAndClose();
}

TEST(WanNetstat, PrometheusShowsStreamsWithTheLinkRtt) {
    if (auto reason = pluginWanSkipReason()) {
        GTEST_SKIP() << *reason;
    }
    Result<std::unique_ptr<PluginTestbed>> tb = PluginTestbed::up("rtt_ms=50 rate_mbit=1000");
    ATLAS_ASSERT_OK(tb);
    char tmpl[] = "/tmp/atlas-wan-netstat.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    const abi::EnvVars env = wanPluginEnv(20000, {{"ATLAS_NETSTAT_DIR", dir},
                                                  {"ATLAS_NETSTAT_INTERVAL_MS", "50"},
                                                  {"ATLAS_LINK_GBPS", "1"}});
    abi::Deadline deadline(kBudget);
    Result<abi::ChildProcess> receiver = spawnPeerIn(
        (*tb)->ns(1), env, "receiver", [&](int fd) { return streamAll(false, fd, deadline); });
    ATLAS_ASSERT_OK(receiver);
    Result<abi::ChildProcess> sender = spawnPeerIn(
        (*tb)->ns(0), env, "sender", [&](int fd) { return streamAll(true, fd, deadline); });
    ATLAS_ASSERT_OK(sender);
    ATLAS_ASSERT_OK(relayHandle(*receiver, *sender, deadline));

    // Poll the CLI in each namespace until the sender's streams show their RTT. The first
    // samples may predate any data (the handshake alone), so wait for bytes too.
    bool seen[2] = {false, false};
    std::string last;
    abi::Backoff backoff;
    // The peers hold their comms open until told, so the bound is on looking, not on the
    // transfer: 20 s (x4 under sanitizers) for both namespaces to show the streams.
    const abi::Deadline look(abi::scaledBudget(20 * kNsPerSec));
    while (!(seen[0] && seen[1]) && !look.expired() && !exitedAlready(*sender)) {
        for (int dc = 0; dc < 2; ++dc) {
            if (seen[dc]) {
                continue;
            }
            last = netstatIn((*tb)->ns(dc), dir);
            netstat::test::PromParse parsed = netstat::test::parsePrometheus(last);
            ASSERT_TRUE(parsed.ok()) << parsed.errors[0] << "\n" << last;
            auto rtts = parsed.find("atlas_stream_rtt_seconds", {{"role", "send"}});
            auto cwnds = parsed.find("atlas_stream_cwnd_segments", {{"role", "send"}});
            auto bytes = parsed.find("atlas_comm_bytes_total", {{"role", "send"}});
            if (rtts.size() < 2 || cwnds.size() != rtts.size() || bytes.empty() ||
                bytes[0].value < 2.0 * kMsg) {
                continue;
            }
            for (const auto& r : rtts) {
                EXPECT_GT(r.value, 0.045) << "stream " << r.labels.at("stream");
                EXPECT_LT(r.value, 0.2) << "stream " << r.labels.at("stream");
            }
            for (const auto& c : cwnds) {
                EXPECT_GT(c.value, 0) << "stream " << c.labels.at("stream");
            }
            EXPECT_EQ(parsed.find("atlas_comm_streams", {{"role", "recv"}}).size(), 1u);
            seen[dc] = true;
            std::printf("dc%d: %zu send streams, rtt %.4f s, cwnd %.0f segments\n", dc, rtts.size(),
                        rtts.back().value, cwnds.back().value);
        }
        backoff.idle();
    }
    EXPECT_TRUE(seen[0] && seen[1]) << "last output:\n" << last;
    for (abi::ChildProcess* peer : {&*sender, &*receiver}) {
        ATLAS_EXPECT_OK(abi::sendByte(peer->fd(), 1, deadline));
    }
    expectPeerSucceeded(*sender, deadline, "sender");
    expectPeerSucceeded(*receiver, deadline, "receiver");
    ATLAS_EXPECT_OK((*tb)->down());
    (void)rmdir(dir.c_str());
}

}  // namespace
}  // namespace atlas::wanem::test
