// Failure handling seen from NCCL's side: a peer process SIGKILLed mid-transfer, strangers on
// the listen port, and connection authentication (ATLAS_AUTH_KEY).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>

#include "tests/abi/isolate.h"
#include "tests/abi/suites.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(90 * kNsPerSec);
constexpr int kPeerTimeoutMs = 3000;
// Slack on top of ATLAS_TIMEOUT_MS for detection, scheduling and sanitizer slowdown.
const Nanos kDetectBound = kPeerTimeoutMs * kNsPerMs + scaledBudget(5 * kNsPerSec);
constexpr size_t kHuge = 1024 * kMiB;

EnvVars peerFailureEnv() {
    return loopbackEnv({{"ATLAS_TIMEOUT_MS", std::to_string(kPeerTimeoutMs)}});
}

// ---------------------------------------------------------------------------------------------
// A peer killed mid-transfer

TEST(PeerKilled, ReceiverSeesRemoteErrorWhenSenderDies) {
    runIsolated(peerFailureEnv(), kBudget, [] {
        Deadline deadline(kBudget / 2);
        Result<ChildProcess> sender = ChildProcess::spawn([&](int fd) {
            return runPeer("sender", [&]() -> Status {
                Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
                if (!ep.isOk()) {
                    return ep.status();
                }
                NetApi& net = (*ep)->net();
                void* send_comm = nullptr;
                ATLAS_RETURN_IF_ERROR(
                    readHandleAndConnect(net, (*ep)->ctx(), 0, fd, &send_comm, deadline));
                // Untouched anonymous pages read as zeros and cost no memory.
                Result<MappedBuffer> src = MappedBuffer::create(kHuge);
                if (!src.isOk()) {
                    return src.status();
                }
                Result<Registration> mr = Registration::create(net, send_comm, src->data(), kHuge);
                if (!mr.isOk()) {
                    return mr.status();
                }
                Result<void*> s =
                    postSend(net, send_comm, src->data(), kHuge, mr->mhandle(), deadline);
                if (!s.isOk()) {
                    return s.status();
                }
                ATLAS_RETURN_IF_ERROR(sendByte(fd, 1, deadline));  // "in flight"
                // Keep progressing until the parent kills this process.
                Result<size_t> r = waitDone(net, *s, deadline);
                return Status(
                    Code::kInternal,
                    "the sender was expected to be killed; send ended: " + r.status().toString());
            });
        });
        ATLAS_ASSERT_OK(sender);
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        CommPair pair;
        ATLAS_ASSERT_OK(
            listenAndPublish(net, (*ep)->ctx(), 0, sender->fd(), &pair.listen_comm, deadline));
        ATLAS_ASSERT_OK(acceptLoop(net, pair.listen_comm, &pair.recv_comm, deadline));
        Result<MappedBuffer> dst = MappedBuffer::create(kHuge);
        ATLAS_ASSERT_OK(dst);
        Result<Registration> mr = Registration::create(net, pair.recv_comm, dst->data(), kHuge);
        ATLAS_ASSERT_OK(mr);
        Result<void*> r =
            postRecv(net, pair.recv_comm, dst->data(), kHuge, mr->mhandle(), deadline);
        ATLAS_ASSERT_OK(r);
        ATLAS_ASSERT_OK(recvByte(sender->fd(), deadline));
        sender->kill(SIGKILL);
        const Nanos killed_at = monotonicNowNs();

        Result<size_t> got = waitDone(net, *r, Deadline(kDetectBound));
        const Nanos took_ms = (monotonicNowNs() - killed_at) / kNsPerMs;
        ASSERT_FALSE(got.isOk()) << "a 1 GiB receive completed although the sender was killed";
        EXPECT_NE(got.status().code(), Code::kTimeout)
            << "no error within ATLAS_TIMEOUT_MS + slack: " << got.status().toString();
        EXPECT_EQ(ncclCodeOf(got.status()), ncclRemoteError) << got.status().toString();
        std::printf("receiver saw %s %lld ms after the kill\n", got.status().toString().c_str(),
                    static_cast<long long>(took_ms));
        // Errors are sticky: the comm keeps reporting it.
        void* again = nullptr;
        ncclResult_t rc = net.irecv(pair.recv_comm, dst->data(), 8, 0, mr->mhandle(), &again);
        EXPECT_NE(rc, ncclSuccess) << "irecv on a comm whose peer died succeeded";

        Result<int> st = sender->wait(deadline);
        ATLAS_ASSERT_OK(st);
        EXPECT_TRUE(WIFSIGNALED(*st)) << describeWaitStatus(*st);
        (void)mr->release();
        ATLAS_EXPECT_OK(closePair(net, &pair));
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

TEST(PeerKilled, SenderSeesErrorWhenReceiverDies) {
    runIsolated(peerFailureEnv(), kBudget, [] {
        Deadline deadline(kBudget / 2);
        Result<ChildProcess> receiver = ChildProcess::spawn([&](int fd) {
            return runPeer("receiver", [&]() -> Status {
                Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
                if (!ep.isOk()) {
                    return ep.status();
                }
                NetApi& net = (*ep)->net();
                CommPair pair;
                ATLAS_RETURN_IF_ERROR(
                    listenAndPublish(net, (*ep)->ctx(), 0, fd, &pair.listen_comm, deadline));
                ATLAS_RETURN_IF_ERROR(acceptLoop(net, pair.listen_comm, &pair.recv_comm, deadline));
                Result<MappedBuffer> dst = MappedBuffer::create(kHuge);
                if (!dst.isOk()) {
                    return dst.status();
                }
                Result<Registration> mr =
                    Registration::create(net, pair.recv_comm, dst->data(), kHuge);
                if (!mr.isOk()) {
                    return mr.status();
                }
                Result<void*> r =
                    postRecv(net, pair.recv_comm, dst->data(), kHuge, mr->mhandle(), deadline);
                if (!r.isOk()) {
                    return r.status();
                }
                ATLAS_RETURN_IF_ERROR(sendByte(fd, 1, deadline));
                Result<size_t> got = waitDone(net, *r, deadline);
                return Status(Code::kInternal, "the receiver was expected to be killed; got " +
                                                   got.status().toString());
            });
        });
        ATLAS_ASSERT_OK(receiver);
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        void* send_comm = nullptr;
        ATLAS_ASSERT_OK(
            readHandleAndConnect(net, (*ep)->ctx(), 0, receiver->fd(), &send_comm, deadline));
        Result<MappedBuffer> src = MappedBuffer::create(kHuge);
        ATLAS_ASSERT_OK(src);
        Result<Registration> mr = Registration::create(net, send_comm, src->data(), kHuge);
        ATLAS_ASSERT_OK(mr);
        Result<void*> s = postSend(net, send_comm, src->data(), kHuge, mr->mhandle(), deadline);
        ATLAS_ASSERT_OK(s);
        ATLAS_ASSERT_OK(recvByte(receiver->fd(), deadline));
        receiver->kill(SIGKILL);
        const Nanos killed_at = monotonicNowNs();

        Result<size_t> got = waitDone(net, *s, Deadline(kDetectBound));
        const Nanos took_ms = (monotonicNowNs() - killed_at) / kNsPerMs;
        ASSERT_FALSE(got.isOk()) << "a 1 GiB send completed although the receiver was killed";
        EXPECT_NE(got.status().code(), Code::kTimeout)
            << "no error within ATLAS_TIMEOUT_MS + slack: " << got.status().toString();
        EXPECT_EQ(ncclCodeOf(got.status()), ncclRemoteError) << got.status().toString();
        std::printf("sender saw %s %lld ms after the kill\n", got.status().toString().c_str(),
                    static_cast<long long>(took_ms));
        void* again = nullptr;
        EXPECT_NE(net.isend(send_comm, src->data(), 8, 0, mr->mhandle(), &again), ncclSuccess)
            << "isend on a comm whose peer died succeeded";
        Result<int> st = receiver->wait(deadline);
        ATLAS_ASSERT_OK(st);
        (void)mr->release();
        EXPECT_EQ(net.closeSend(send_comm), ncclSuccess);
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

// ---------------------------------------------------------------------------------------------
// Strangers on the listen port

int tcpConnect(uint16_t port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

void sendRaw(int fd, const void* data, size_t size) {
    (void)writeAll(fd, data, size, Deadline::afterMs(2000));
}

TEST(Strangers, GarbageOnTheListenPortDoesNotDisturbTheRealComm) {
    // A long plugin timeout, so a listener that waits for silent strangers one by one (instead
    // of handling connections concurrently) misses the real connect's deadline below.
    runIsolated(loopbackEnv({{"ATLAS_TIMEOUT_MS", "60000"}}), kBudget, [] {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        const std::vector<uint16_t> before = listeningPortsOfThisProcess();
        CommPair pair;
        Handle handle{};
        ATLAS_ASSERT_NCCL_OK(net.listen((*ep)->ctx(), 0, handle.data(), &pair.listen_comm));
        std::vector<uint16_t> ports;
        for (uint16_t p : listeningPortsOfThisProcess()) {
            if (std::find(before.begin(), before.end(), p) == before.end()) {
                ports.push_back(p);
            }
        }
        ASSERT_FALSE(ports.empty()) << "could not find the listen port in /proc/self/net/tcp*";

        std::vector<int> strangers;
        for (uint16_t port : ports) {
            // Silent.
            strangers.push_back(tcpConnect(port));
            // Random bytes.
            int fd = tcpConnect(port);
            std::vector<uint8_t> junk(4096);
            fillPattern(junk.data(), junk.size(), port);
            sendRaw(fd, junk.data(), junk.size());
            strangers.push_back(fd);
            // A copy of the real handle with the leading (magic) bytes inverted.
            fd = tcpConnect(port);
            Handle wrong = handle;
            for (int i = 0; i < 8; ++i) {
                wrong[i] = static_cast<uint8_t>(~wrong[i]);
            }
            sendRaw(fd, wrong.data(), wrong.size());
            strangers.push_back(fd);
            // A truncated header, left hanging.
            fd = tcpConnect(port);
            sendRaw(fd, handle.data(), 3);
            strangers.push_back(fd);
            // A flood of 0xff (huge length fields in any framing), then close.
            fd = tcpConnect(port);
            std::vector<uint8_t> ff(64 * kKiB, 0xff);
            sendRaw(fd, ff.data(), ff.size());
            close(fd);
            // Connect then reset.
            fd = tcpConnect(port);
            if (fd >= 0) {
                linger lg{1, 0};
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
                close(fd);
            }
        }
        for (int fd : strangers) {
            EXPECT_GE(fd, 0) << "a stranger could not connect to the listen port";
        }
        // Strangers never produce a comm, and never an error.
        for (int i = 0; i < 200; ++i) {
            void* rc = nullptr;
            ATLAS_ASSERT_NCCL_OK(net.accept(pair.listen_comm, &rc));
            ASSERT_EQ(rc, nullptr) << "accept returned a comm for a stranger";
        }
        // The real connector still gets through promptly while the strangers hang around.
        Deadline deadline(scaledBudget(8 * kNsPerSec));
        Backoff backoff;
        while (pair.send_comm == nullptr || pair.recv_comm == nullptr) {
            if (pair.send_comm == nullptr) {
                ATLAS_ASSERT_NCCL_OK(net.connect((*ep)->ctx(), 0, handle.data(), &pair.send_comm));
            }
            if (pair.recv_comm == nullptr) {
                ATLAS_ASSERT_NCCL_OK(net.accept(pair.listen_comm, &pair.recv_comm));
            }
            ASSERT_FALSE(deadline.expired())
                << "the real comm did not connect while strangers held connections";
            backoff.idle();
        }
        Deadline xfer(kBudget / 3);
        for (size_t size : {size_t{0}, size_t{100}, kMiB + 1}) {
            Result<MappedBuffer> src = MappedBuffer::create(size);
            Result<MappedBuffer> dst = MappedBuffer::create(size);
            ATLAS_ASSERT_OK(src);
            ATLAS_ASSERT_OK(dst);
            fillPattern(src->data(), size, size);
            Result<size_t> got =
                transferInProcess(net, pair, src->data(), size, dst->data(), size, xfer);
            ATLAS_ASSERT_OK(got);
            EXPECT_EQ(*got, size);
            EXPECT_EQ(describePatternMismatch(dst->data(), size, size), "");
        }
        for (int fd : strangers) {
            if (fd >= 0) {
                close(fd);
            }
        }
        ATLAS_EXPECT_OK(closePair(net, &pair));
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

// ---------------------------------------------------------------------------------------------
// Authentication

TEST(Auth, MatchingKeysConnectAndTransfer) {
    runIsolated(loopbackEnv({{"ATLAS_AUTH_KEY", "correct horse battery staple"}}), kBudget, [] {
        Deadline deadline(kBudget / 2);
        const std::vector<size_t> sizes = {0, 4097, kMiB};
        Result<ChildProcess> sender = ChildProcess::spawn([&](int fd) {
            return runPeer("sender", [&]() -> Status {
                Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
                if (!ep.isOk()) {
                    return ep.status();
                }
                ATLAS_RETURN_IF_ERROR(sizesSender((*ep)->net(), (*ep)->ctx(), fd, sizes, deadline));
                return (*ep)->finalizeAndClose();
            });
        });
        ATLAS_ASSERT_OK(sender);
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        ATLAS_EXPECT_OK(sizesReceiver((*ep)->net(), (*ep)->ctx(), sender->fd(), sizes, deadline));
        expectPeerSucceeded(*sender, deadline, "sender");
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

// What the connector process saw, reported to the listener over the socketpair.
enum ConnectOutcome : uint8_t { kConnectFailed = 1, kConnected = 2, kConnectHung = 3 };

struct KeyPair {
    const char* listener;  // nullptr: ATLAS_AUTH_KEY unset
    const char* connector;
};

class AuthMismatch : public ::testing::TestWithParam<KeyPair> {};

TEST_P(AuthMismatch, ConnectorFailsWithinTheTimeoutAndListenerSurvives) {
    const KeyPair keys = GetParam();
    EnvVars env = peerFailureEnv();
    if (keys.listener != nullptr) {
        env.push_back({"ATLAS_AUTH_KEY", keys.listener});
    }
    runIsolated(env, kBudget, [keys] {
        Deadline deadline(kBudget / 2);
        Result<ChildProcess> connector = ChildProcess::spawn([&](int fd) {
            if (keys.connector != nullptr) {
                setenv("ATLAS_AUTH_KEY", keys.connector, 1);
            } else {
                unsetenv("ATLAS_AUTH_KEY");
            }
            return runPeer("connector", [&]() -> Status {
                Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
                if (!ep.isOk()) {
                    return ep.status();
                }
                void* send_comm = nullptr;
                Handle handle{};
                ATLAS_RETURN_IF_ERROR(readAll(fd, handle.data(), handle.size(), deadline));
                Status st = connectLoop((*ep)->net(), (*ep)->ctx(), 0, &handle, &send_comm,
                                        Deadline(kDetectBound));
                uint8_t outcome = st.isOk()                     ? kConnected
                                  : st.code() == Code::kTimeout ? kConnectHung
                                                                : kConnectFailed;
                std::printf("connector: %s\n", st.toString().c_str());
                if (send_comm != nullptr) {
                    (void)(*ep)->net().closeSend(send_comm);
                }
                ATLAS_RETURN_IF_ERROR(sendByte(fd, outcome, deadline));
                return (*ep)->finalizeAndClose();
            });
        });
        ATLAS_ASSERT_OK(connector);
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        CommPair pair;
        Handle handle{};
        ATLAS_ASSERT_NCCL_OK(net.listen((*ep)->ctx(), 0, handle.data(), &pair.listen_comm));
        const Handle pristine = handle;
        ATLAS_ASSERT_OK(writeAll(connector->fd(), handle.data(), handle.size(), deadline));

        // Keep accepting (as NCCL would) until the connector reports; no comm may appear.
        bool accept_failed = false;
        Backoff backoff;
        uint8_t outcome = 0;
        while (true) {
            if (!accept_failed) {
                void* rc = nullptr;
                ncclResult_t r = net.accept(pair.listen_comm, &rc);
                ASSERT_EQ(rc, nullptr)
                    << "accept produced a comm for a connector with the wrong key";
                accept_failed = r != ncclSuccess;
            }
            Result<uint8_t> b = recvByte(connector->fd(), Deadline(0));
            if (b.isOk()) {
                outcome = *b;
                break;
            }
            ASSERT_FALSE(deadline.expired()) << "the connector never reported";
            backoff.idle();
        }
        EXPECT_NE(outcome, kConnected) << "a connector with a mismatched key got a sendComm";
        EXPECT_TRUE(outcome == kConnectFailed || accept_failed)
            << "neither connect nor accept reported an error within ATLAS_TIMEOUT_MS + slack";
        expectPeerSucceeded(*connector, deadline, "connector");

        // The listener is unaffected: a connector with the right key (this process) works.
        if (!accept_failed) {
            Handle h = pristine;
            ATLAS_ASSERT_OK(connectAcceptInProcess(net, (*ep)->ctx(), 0, &h, &pair, deadline));
            std::vector<uint8_t> src(5000), dst(5000);
            fillPattern(src.data(), src.size(), 11);
            Result<size_t> got = transferInProcess(net, pair, src.data(), src.size(), dst.data(),
                                                   dst.size(), deadline);
            ATLAS_ASSERT_OK(got);
            EXPECT_EQ(*got, src.size());
            EXPECT_EQ(describePatternMismatch(dst.data(), dst.size(), 11), "");
        }
        ATLAS_EXPECT_OK(closePair(net, &pair));
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

INSTANTIATE_TEST_SUITE_P(Auth, AuthMismatch,
                         ::testing::Values(KeyPair{"alpha-key", "beta-key"},
                                           KeyPair{"alpha-key", nullptr},
                                           KeyPair{nullptr, "beta-key"}),
                         [](const ::testing::TestParamInfo<KeyPair>& param_info) {
                             std::string l =
                                 param_info.param.listener ? "ListenerKey" : "ListenerNoKey";
                             std::string c =
                                 param_info.param.connector ? "ConnectorKey" : "ConnectorNoKey";
                             return l + "_" + c;
                         });

}  // namespace
}  // namespace atlas::abi
