// Recovery seen from NCCL's side, through the dlopen'ed .so and its test-only fault seam
// (ATLAS_FAULTS, allowed by ATLAS_TEST_MODE=1): a link flap (every stream dropped, dials
// failing for a while) across two processes; no call fails, every byte arrives, and each
// reset and rejoin is logged with its cause. The fault plan is refused without
// ATLAS_TEST_MODE. (Streams reset in the middle of a 1 GiB message: abi_large_test, label
// `slow`.)
#include <gtest/gtest.h>

#include "tests/abi/isolate.h"
#include "tests/abi/suites.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(120 * kNsPerSec);

TEST(Recovery, LinkFlapDelaysButDoesNotFailTheTransfer) {
    runIsolated(loopbackEnv({{"ATLAS_NSTREAMS", "3"},
                             {"ATLAS_TEST_MODE", "1"},
                             {"ATLAS_FAULTS", "drop:after=24M,ms=1500"}}),
                kBudget, [] {
                    Deadline deadline(kBudget * 9 / 10);
                    const Nanos t0 = monotonicNowNs();
                    transferWithSenderFaults({16 * kMiB, 16 * kMiB, 16 * kMiB, 1000, 16 * kMiB},
                                             deadline,
                                             {"every stream lost", "network unreachable",
                                              "stream 0 rejoined", "stream 3 rejoined"});
                    EXPECT_GE(monotonicNowNs() - t0, 1500 * kNsPerMs) << "the outage left no mark";
                });
}

TEST(Recovery, FaultPlanIsRefusedWithoutTestMode) {
    runIsolated(loopbackEnv({{"ATLAS_FAULTS", "reset:stream=1"}}), kBudget, [] {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ASSERT_FALSE(ep.isOk()) << "init accepted a fault plan outside a test";
        EXPECT_EQ(ncclCodeOf(ep.status()), ncclInvalidUsage) << ep.status().toString();
        EXPECT_TRUE(
            LogCapture::contains("refused unless the process declares itself a test "
                                 "with ATLAS_TEST_MODE=1"));
    });
}

}  // namespace
}  // namespace atlas::abi

namespace atlas::abi {
namespace {

// ---------------------------------------------------------------------------------------------
// Encryption (ATLAS_ENCRYPT) through the .so

EnvVars sealedEnv(const EnvVars& extra = {}) {
    EnvVars env = loopbackEnv({{"ATLAS_AUTH_KEY", "sealed-abi-key"}, {"ATLAS_ENCRYPT", "1"}});
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
}

TEST(Encryption, SealedTransfersAcrossProcessesAreByteExact) {
    runIsolated(sealedEnv(), kBudget, [] {
        Deadline deadline(kBudget * 9 / 10);
        transferWithSenderFaults({0, 1, 4097, kMiB + 3, 16 * kMiB}, deadline,
                                 {"authenticated, encrypted"});
    });
}

TEST(Encryption, AlteredFrameFailsTheReceiveAndIsNeverDelivered) {
    // One payload byte of a sealed frame flipped on the wire by the sender's fault seam.
    runIsolated(
        sealedEnv({{"ATLAS_TEST_MODE", "1"},
                   {"ATLAS_FAULTS", "flip:stream=1,after=2M,part=payload"},
                   {"ATLAS_NSTREAMS", "2"}}),
        kBudget, [] {
            Deadline deadline(kBudget * 9 / 10);
            constexpr size_t kSize = 16 * kMiB;
            Result<ChildProcess> sender = ChildProcess::spawn([&](int fd) {
                return runPeer("sender", [&]() -> Status {
                    Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
                    if (!ep.isOk()) {
                        return ep.status();
                    }
                    NetApi& net = (*ep)->net();
                    CommPair pair;
                    ATLAS_RETURN_IF_ERROR(
                        readHandleAndConnect(net, (*ep)->ctx(), 0, fd, &pair.send_comm, deadline));
                    Result<MappedBuffer> src = MappedBuffer::create(kSize);
                    ATLAS_RETURN_IF_ERROR(src.status());
                    fillPattern(src->data(), kSize, 77);
                    Result<Registration> mr =
                        Registration::create(net, pair.send_comm, src->data(), kSize);
                    ATLAS_RETURN_IF_ERROR(mr.status());
                    Result<void*> s =
                        postSend(net, pair.send_comm, src->data(), kSize, mr->mhandle(), deadline);
                    ATLAS_RETURN_IF_ERROR(s.status());
                    // Completes locally or fails with the receiver's abort: either is fine;
                    // the verdict is the receiver's.
                    (void)waitDone(net, *s, deadline);
                    ATLAS_RETURN_IF_ERROR(recvByte(fd, deadline).status());
                    (void)mr->release();
                    (void)closePair(net, &pair);
                    return (*ep)->finalizeAndClose();
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
            Result<MappedBuffer> dst = MappedBuffer::create(kSize);
            ATLAS_ASSERT_OK(dst);
            Result<Registration> mr = Registration::create(net, pair.recv_comm, dst->data(), kSize);
            ATLAS_ASSERT_OK(mr);
            Result<void*> r =
                postRecv(net, pair.recv_comm, dst->data(), kSize, mr->mhandle(), deadline);
            ATLAS_ASSERT_OK(r);
            Result<size_t> got = waitDone(net, *r, deadline);
            ASSERT_FALSE(got.isOk()) << "a receive with an altered frame completed";
            EXPECT_EQ(ncclCodeOf(got.status()), ncclRemoteError) << got.status().toString();
            EXPECT_TRUE(LogCapture::contains("sealed frame payload failed authentication"));
            EXPECT_TRUE(LogCapture::contains("nothing of it was delivered"));
            ATLAS_EXPECT_OK(sendByte(sender->fd(), 1, deadline));
            expectPeerSucceeded(*sender, deadline, "sender");
            (void)mr->release();
            ATLAS_EXPECT_OK(closePair(net, &pair));
            ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
        });
}

class EncryptMismatch : public ::testing::TestWithParam<bool> {};

// One side ATLAS_ENCRYPT=1, the other not (both with the key): no comm, and the connector's
// error and both logs name the cause.
TEST_P(EncryptMismatch, ConnectionIsRefusedNamingTheCause) {
    const bool listener_encrypts = GetParam();
    EnvVars env = loopbackEnv({{"ATLAS_AUTH_KEY", "k"}, {"ATLAS_TIMEOUT_MS", "3000"}});
    if (listener_encrypts) {
        env.push_back({"ATLAS_ENCRYPT", "1"});
    }
    runIsolated(env, kBudget, [listener_encrypts] {
        Deadline deadline(kBudget / 2);
        Result<ChildProcess> connector = ChildProcess::spawn([&](int fd) {
            setenv("ATLAS_ENCRYPT", listener_encrypts ? "0" : "1", 1);
            return runPeer("connector", [&]() -> Status {
                Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
                if (!ep.isOk()) {
                    return ep.status();
                }
                void* send_comm = nullptr;
                Status st =
                    readHandleAndConnect((*ep)->net(), (*ep)->ctx(), 0, fd, &send_comm, deadline);
                if (st.isOk()) {
                    return Status(Code::kInternal, "connected despite mismatched ATLAS_ENCRYPT");
                }
                if (ncclCodeOf(st) != ncclInvalidUsage || !LogCapture::contains("ATLAS_ENCRYPT")) {
                    return Status(Code::kInternal,
                                  "connect failed without naming ATLAS_ENCRYPT "
                                  "as the cause: " +
                                      st.toString());
                }
                ATLAS_RETURN_IF_ERROR(sendByte(fd, 1, deadline));
                return (*ep)->finalizeAndClose();
            });
        });
        ATLAS_ASSERT_OK(connector);
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        CommPair pair;
        ATLAS_ASSERT_OK(
            listenAndPublish(net, (*ep)->ctx(), 0, connector->fd(), &pair.listen_comm, deadline));
        Backoff backoff;
        while (!recvByte(connector->fd(), Deadline(0)).isOk()) {
            void* rc = nullptr;
            (void)net.accept(pair.listen_comm, &rc);
            ASSERT_EQ(rc, nullptr) << "accept produced a comm despite mismatched ATLAS_ENCRYPT";
            ASSERT_FALSE(deadline.expired()) << "the connector never reported";
            backoff.idle();
        }
        // The listener's own refusal, not just its settings echoed in the log.
        EXPECT_TRUE(LogCapture::contains(listener_encrypts
                                             ? "connector does not encrypt"
                                             : "connector encrypts (ATLAS_ENCRYPT=1)"))
            << "the listener's log lacks the cause";
        expectPeerSucceeded(*connector, deadline, "connector");
        ATLAS_EXPECT_OK(closePair(net, &pair));
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

INSTANTIATE_TEST_SUITE_P(Encryption, EncryptMismatch, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) {
                             return std::string(p.param ? "OnlyListenerEncrypts"
                                                        : "OnlyConnectorEncrypts");
                         });

}  // namespace
}  // namespace atlas::abi
