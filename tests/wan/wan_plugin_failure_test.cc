// Failures across the emulated WAN, seen from NCCL's side of the plugin, for a transfer in
// flight over 100 ms RTT and 1 % loss:
//   - streams reset mid-transfer (`ss -K` in the sender's namespace destroys the socket: the
//     sender's kernel fails it with ECONNABORTED and sends the receiver a RST, as a middlebox
//     or a NAT dropping the flow would; deterministic and per stream) are survived: the
//     transfer completes byte-exact on both ranks;
//   - a link flap (every stream of the comm reset, then the path held down for a few seconds
//     by stopping the emulator) is ridden through: the transfer completes once the path is
//     back;
//   - a path that goes dark for good (the emulator is SIGKILLed: its TUN devices vanish with
//     it, no RST or FIN is ever delivered, only the TCP timeouts can tell) ends in an error on
//     both ranks within the bound (ATLAS_TIMEOUT_MS plus detection), never in a hang;
// and scripts/wan-down, run while ranks are still moving data, stops them and leaves no
// namespace, emulator or state behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "tests/abi/suites.h"
#include "tests/wan/wan_plugin_testbed.h"

namespace atlas::wanem::test {
namespace {

using abi::ChildProcess;
using abi::Deadline;
using abi::EnvVars;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

// Far more than moves before the failure is injected (~4 s of link time).
constexpr size_t kHuge = 512 * abi::kMiB;
// Transfers that must survive: a few seconds of link time around the injected failures.
constexpr size_t kSurvived = 160 * abi::kMiB;
constexpr int kTimeoutMs = 4000;
// Detection bound: ATLAS_TIMEOUT_MS plus keepalive probing, scheduling on a loaded 2-core
// machine and sanitizer slowdown.
const Nanos kDetectBound = kTimeoutMs * kNsPerMs + abi::scaledBudget(12 * kNsPerSec);
const Nanos kFailureBudget = abi::scaledBudget(60 * kNsPerSec);
// Bytes forwarded dc0 -> dc1 before a failure is injected, so it hits a transfer in progress.
constexpr uint64_t kMidTransferBytes = 8 * abi::kMiB;
constexpr uint64_t kPatternSeed = 0x5eed;

enum class Expect { kSuccess, kFailure, kKilled };

// One rank: posts one huge send (dc0) or receive (dc1), tells the parent it is in flight, and
// waits for it. With Expect::kSuccess the receiver checks every byte (the sender sends a
// pattern); with Expect::kFailure it succeeds only if the request fails with a plugin error
// (not a harness timeout, which would mean the plugin hung); with Expect::kKilled it only
// waits to be killed.
Status rank(bool sender, int fd, Expect expect, const Deadline& deadline) {
    // A completed transfer needs only to outlast the failures injected into it; the others
    // must still be running when the failure strikes.
    const size_t size = expect == Expect::kSuccess ? kSurvived : kHuge;
    Result<std::unique_ptr<abi::Endpoint>> ep = abi::Endpoint::open(abi::pluginPath());
    if (!ep.isOk()) {
        return ep.status();
    }
    abi::NetApi& net = (*ep)->net();
    abi::CommPair pair;
    void* comm = nullptr;
    if (sender) {
        ATLAS_RETURN_IF_ERROR(
            abi::readHandleAndConnect(net, (*ep)->ctx(), 0, fd, &pair.send_comm, deadline));
        comm = pair.send_comm;
    } else {
        ATLAS_RETURN_IF_ERROR(
            abi::listenAndPublish(net, (*ep)->ctx(), 0, fd, &pair.listen_comm, deadline));
        ATLAS_RETURN_IF_ERROR(abi::acceptLoop(net, pair.listen_comm, &pair.recv_comm, deadline));
        comm = pair.recv_comm;
    }
    // Untouched anonymous pages: the sender reads zeros, the receiver only pays for what lands.
    Result<abi::MappedBuffer> buf = abi::MappedBuffer::create(size);
    if (!buf.isOk()) {
        return buf.status();
    }
    Result<abi::Registration> mr = abi::Registration::create(net, comm, buf->data(), size);
    if (!mr.isOk()) {
        return mr.status();
    }
    if (expect == Expect::kSuccess && sender) {
        abi::fillPattern(buf->data(), size, kPatternSeed);
    }
    Result<void*> req = sender
                            ? abi::postSend(net, comm, buf->data(), size, mr->mhandle(), deadline)
                            : abi::postRecv(net, comm, buf->data(), size, mr->mhandle(), deadline);
    if (!req.isOk()) {
        return req.status();
    }
    ATLAS_RETURN_IF_ERROR(abi::sendByte(fd, 1, deadline));  // "in flight"
    Result<size_t> done = abi::waitDone(net, *req, deadline);
    if (expect == Expect::kKilled) {
        return Status(Code::kInternal, "expected to be killed by wan-down; the request ended: " +
                                           done.status().toString());
    }
    if (expect == Expect::kSuccess) {
        ATLAS_RETURN_IF_ERROR(done.status());
        if (!sender) {
            ATLAS_RETURN_IF_ERROR(abi::checkReceived(buf->data(), size, kPatternSeed, 0, 0));
        }
        // The sender closes only once the receiver has everything.
        if (sender) {
            ATLAS_RETURN_IF_ERROR(abi::recvByte(fd, deadline).status());
        } else {
            ATLAS_RETURN_IF_ERROR(abi::sendByte(fd, 2, deadline));
        }
        (void)mr->release();
        ATLAS_RETURN_IF_ERROR(abi::closePair(net, &pair));
        return (*ep)->finalizeAndClose();
    }
    if (done.isOk()) {
        return Status(Code::kInternal, "the request completed although the transfer was broken");
    }
    if (abi::ncclCodeOf(done.status()) < 0) {
        return Status(Code::kInternal, "no error from the plugin before the deadline (a hang): " +
                                           done.status().toString());
    }
    std::fprintf(stderr, "[%s] failed as expected: %s\n", sender ? "sender" : "receiver",
                 done.status().toString().c_str());
    // Closing after an error must work too (NCCL aborts communicators this way).
    (void)mr->release();
    (void)abi::closePair(net, &pair);
    return (*ep)->finalizeAndClose();
}

// A receiver in dc1 and a sender in dc0 with one transfer in flight across the link.
struct Ranks {
    Result<ChildProcess> receiver = Status(Code::kInternal, "not started");
    Result<ChildProcess> sender = Status(Code::kInternal, "not started");
};

Status startRanks(PluginTestbed& tb, const EnvVars& env, Expect expect, const Deadline& deadline,
                  Ranks* ranks) {
    ranks->receiver = spawnPeerIn(tb.ns(1), env, "receiver (dc1)",
                                  [=](int fd) { return rank(false, fd, expect, deadline); });
    ATLAS_RETURN_IF_ERROR(ranks->receiver.status());
    ranks->sender = spawnPeerIn(tb.ns(0), env, "sender (dc0)",
                                [=](int fd) { return rank(true, fd, expect, deadline); });
    ATLAS_RETURN_IF_ERROR(ranks->sender.status());
    ATLAS_RETURN_IF_ERROR(relayHandle(*ranks->receiver, *ranks->sender, deadline));
    for (ChildProcess* c : {&*ranks->receiver, &*ranks->sender}) {
        Result<uint8_t> b = abi::recvByte(c->fd(), deadline);
        if (!b.isOk()) {
            return Status(b.status().code(),
                          "waiting for a rank to post: " + b.status().toString());
        }
    }
    // Wait until data is really moving across the link.
    while (true) {
        Result<nlohmann::json> s = tb.stats();
        ATLAS_RETURN_IF_ERROR(s.status());
        if ((*s)["directions"]["a2b"]["tx"]["bytes"].get<uint64_t>() >= kMidTransferBytes) {
            return Status::ok();
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout, "the transfer did not start moving data");
        }
        std::this_thread::sleep_for(50ms);
    }
}

double secondsSince(SteadyClock::time_point t0) {
    return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// Relays the receiver's "all checked" byte to the sender, so the sender closes last.
Status relayDone(Ranks& ranks, const Deadline& deadline) {
    Result<uint8_t> b = abi::recvByte(ranks.receiver->fd(), deadline);
    ATLAS_RETURN_IF_ERROR(b.status());
    return abi::sendByte(ranks.sender->fd(), *b, deadline);
}

TEST(WanPluginFailure, StreamResetsMidTransferAreSurvived) {
    if (auto reason = pluginWanSkipReason()) {
        GTEST_SKIP() << *reason;
    }
    Result<std::unique_ptr<PluginTestbed>> tb = PluginTestbed::up(kLossyLongHaul);
    ATLAS_ASSERT_OK(tb);
    const Deadline deadline(kFailureBudget);
    Ranks ranks;
    ATLAS_ASSERT_OK(startRanks(**tb, wanPluginEnv(kTimeoutMs, {{"ATLAS_NSTREAMS", "4"}}),
                               Expect::kSuccess, deadline, &ranks));

    // The sender's connections to dc1: one control stream (idle) and 4 data streams. Reset the
    // two with the most unacknowledged bytes: data streams in the middle of the transfer.
    Result<std::vector<TcpConn>> conns = establishedTo((*tb)->ns(0), PluginTestbed::kDc1LinkAddr);
    ATLAS_ASSERT_OK(conns);
    ASSERT_EQ(conns->size(), 5u) << "expected 1 control + 4 data streams";
    std::sort(conns->begin(), conns->end(),
              [](const TcpConn& a, const TcpConn& b) { return a.send_q > b.send_q; });
    ASSERT_GT((*conns)[1].send_q, 0u) << "fewer than two data streams had data in flight";
    ATLAS_ASSERT_OK(killConnection((*tb)->ns(0), (*conns)[0]));
    std::this_thread::sleep_for(1s);
    ATLAS_ASSERT_OK(killConnection((*tb)->ns(0), (*conns)[1]));

    ATLAS_EXPECT_OK(relayDone(ranks, deadline));
    abi::expectPeerSucceeded(*ranks.sender, deadline, "sender");
    abi::expectPeerSucceeded(*ranks.receiver, deadline, "receiver");
    ATLAS_EXPECT_OK((*tb)->down());
    EXPECT_TRUE((*tb)->leftovers().empty()) << ::testing::PrintToString((*tb)->leftovers());
}

TEST(WanPluginFailure, ASlowStreamCarryingOneLargeFrameIsNotDeclaredStalled) {
    // ATLAS_STRIPE=even over one data stream sends the 160 MiB message as one frame: on a
    // 200 Mbit/s path it takes ~7 s to arrive, and no confirmation can come before it has.
    // The stall rule (2 s without a confirmation) must see that the peer's TCP acknowledges
    // bytes all along. Were it to declare the stream lost, the resend on the rejoined stream
    // would meet the same rule again and the transfer would never end.
    if (auto reason = pluginWanSkipReason()) {
        GTEST_SKIP() << *reason;
    }
    Result<std::unique_ptr<PluginTestbed>> tb =
        PluginTestbed::up("rtt_ms=20 rate_mbit=200 buf_ms=20");
    ATLAS_ASSERT_OK(tb);
    const Deadline deadline(kFailureBudget);
    Ranks ranks;
    ATLAS_ASSERT_OK(startRanks(
        **tb, wanPluginEnv(kTimeoutMs, {{"ATLAS_NSTREAMS", "1"}, {"ATLAS_STRIPE", "even"}}),
        Expect::kSuccess, deadline, &ranks));
    ATLAS_EXPECT_OK(relayDone(ranks, deadline));
    abi::expectPeerSucceeded(*ranks.sender, deadline, "sender");
    abi::expectPeerSucceeded(*ranks.receiver, deadline, "receiver");
    // The emulator carried the message once: a stall declared and resent would show as a
    // second copy of (part of) it on the link.
    Result<nlohmann::json> st = (*tb)->stats();
    ATLAS_ASSERT_OK(st);
    const uint64_t carried = (*st)["directions"]["a2b"]["tx"]["bytes"].get<uint64_t>();
    EXPECT_LT(carried, kSurvived + kSurvived / 10) << "bytes forwarded dc0 -> dc1";
    ATLAS_EXPECT_OK((*tb)->down());
    EXPECT_TRUE((*tb)->leftovers().empty()) << ::testing::PrintToString((*tb)->leftovers());
}

TEST(WanPluginFailure, LinkFlapIsRiddenThrough) {
    if (auto reason = pluginWanSkipReason()) {
        GTEST_SKIP() << *reason;
    }
    Result<std::unique_ptr<PluginTestbed>> tb = PluginTestbed::up(kLossyLongHaul);
    ATLAS_ASSERT_OK(tb);
    const Deadline deadline(kFailureBudget);
    Ranks ranks;
    // The outage (3 s) is shorter than the bound (8 s): requests wait, then resume.
    ATLAS_ASSERT_OK(startRanks(**tb, wanPluginEnv(8000, {{"ATLAS_NSTREAMS", "3"}}),
                               Expect::kSuccess, deadline, &ranks));
    Result<std::vector<TcpConn>> conns = establishedTo((*tb)->ns(0), PluginTestbed::kDc1LinkAddr);
    ATLAS_ASSERT_OK(conns);
    ASSERT_EQ(conns->size(), 4u) << "expected 1 control + 3 data streams";
    // Path down first (the emulator stops forwarding), then every stream of the comm reset:
    // the RSTs are lost too, as in a real flap, and every rejoin dial meets the dead path.
    ASSERT_EQ(kill((*tb)->emulatorPid(), SIGSTOP), 0);
    for (const TcpConn& c : *conns) {
        ATLAS_ASSERT_OK(killConnection((*tb)->ns(0), c));
    }
    std::this_thread::sleep_for(3s);
    ASSERT_EQ(kill((*tb)->emulatorPid(), SIGCONT), 0);

    ATLAS_EXPECT_OK(relayDone(ranks, deadline));
    abi::expectPeerSucceeded(*ranks.sender, deadline, "sender");
    abi::expectPeerSucceeded(*ranks.receiver, deadline, "receiver");
    ATLAS_EXPECT_OK((*tb)->down());
    EXPECT_TRUE((*tb)->leftovers().empty()) << ::testing::PrintToString((*tb)->leftovers());
}

TEST(WanPluginFailure, DarkLinkMidTransferFailsWithinTheTimeout) {
    if (auto reason = pluginWanSkipReason()) {
        GTEST_SKIP() << *reason;
    }
    Result<std::unique_ptr<PluginTestbed>> tb = PluginTestbed::up(kLossyLongHaul);
    ATLAS_ASSERT_OK(tb);
    const Deadline deadline(kFailureBudget);
    Ranks ranks;
    ATLAS_ASSERT_OK(startRanks(**tb, wanPluginEnv(kTimeoutMs, {{"ATLAS_LINK_GBPS", "1"}}),
                               Expect::kFailure, deadline, &ranks));

    // A crashed emulator: no final counters, the devices and routes vanish at once.
    ASSERT_EQ(kill((*tb)->emulatorPid(), SIGKILL), 0);
    const auto t_kill = SteadyClock::now();

    const Deadline detect(kDetectBound);
    abi::expectPeerSucceeded(*ranks.sender, detect, "sender");
    abi::expectPeerSucceeded(*ranks.receiver, detect, "receiver");
    const double secs = secondsSince(t_kill);
    RecordProperty("seconds_to_error", std::to_string(secs));
    EXPECT_LT(secs, static_cast<double>(kDetectBound) / kNsPerSec);
    // Not before the peer-death bound started to matter: nothing told the ranks earlier.
    EXPECT_GT(secs, 0.5) << "an error this early did not come from the dark link";

    ATLAS_EXPECT_OK((*tb)->down());
    EXPECT_TRUE((*tb)->leftovers().empty()) << ::testing::PrintToString((*tb)->leftovers());
}

TEST(WanPluginFailure, WanDownStopsLiveRanksAndLeavesNothingBehind) {
    if (auto reason = pluginWanSkipReason()) {
        GTEST_SKIP() << *reason;
    }
    Result<std::unique_ptr<PluginTestbed>> tb = PluginTestbed::up(kLossyLongHaul);
    ATLAS_ASSERT_OK(tb);
    const Deadline deadline(kFailureBudget);
    Ranks ranks;
    // A long dead-peer bound: the ranks would keep waiting; wan-down has to stop them.
    ATLAS_ASSERT_OK(startRanks(**tb, wanPluginEnv(60000, {{"ATLAS_LINK_GBPS", "1"}}),
                               Expect::kKilled, deadline, &ranks));

    const auto t0 = SteadyClock::now();
    std::string out;
    ATLAS_ASSERT_OK((*tb)->down(&out));
    EXPECT_LT(secondsSince(t0), 20.0) << out;

    // Both ranks were inside the testbed's namespaces: wan-down terminated them.
    for (auto [child, role] :
         {std::pair{&*ranks.sender, "sender"}, std::pair{&*ranks.receiver, "receiver"}}) {
        Result<int> st = child->wait(Deadline::afterMs(5000));
        ATLAS_ASSERT_OK(st);
        EXPECT_TRUE(WIFSIGNALED(*st)) << role << " " << abi::describeWaitStatus(*st);
    }
    // leftovers() covers the namespaces (and the TUN devices inside them), the emulator
    // process and the state directory.
    const std::vector<std::string> left = (*tb)->leftovers();
    EXPECT_TRUE(left.empty()) << ::testing::PrintToString(left) << "\n" << out;
}

}  // namespace
}  // namespace atlas::wanem::test
