// Core data-path cases through the v11 table over loopback, once per io backend
// (ATLAS_IO=uring and ATLAS_IO=epoll), in one process and across two processes.
#include <gtest/gtest.h>

#include "tests/abi/isolate.h"
#include "tests/abi/suites.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(90 * kNsPerSec);

class CoreTransfer : public ::testing::TestWithParam<std::string> {
  protected:
    EnvVars env() const { return loopbackEnv({{"ATLAS_IO", GetParam()}}); }

    // Loads the plugin in the isolated child. Skips when the requested backend is not
    // available on this kernel (probed directly, or reported by a failing init).
    Result<std::unique_ptr<Endpoint>> open() const {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        return ep;
    }

    // The plugin logs its backend at init ("io=io_uring" / "io=epoll"); when it does, it must
    // be the one requested, or the parameterization would test the same backend twice.
    void expectBackendInUse() const {
        const std::string want = GetParam() == "uring" ? "io=io_uring" : "io=epoll";
        for (const std::string& line : LogCapture::lines()) {
            size_t at = line.find("io=");
            if (at != std::string::npos) {
                EXPECT_EQ(line.compare(at, want.size(), want), 0)
                    << "ATLAS_IO=" << GetParam() << " but the plugin reports: " << line;
                return;
            }
        }
    }

    bool backendMissing(const Result<std::unique_ptr<Endpoint>>& ep) const {
        return !ep.isOk() && GetParam() == "uring" &&
               (LogCapture::contains("uring") || !kernelHasIoUring());
    }

    // Runs `scenario` on a freshly opened endpoint inside an isolated child process.
    void runScenario(const std::function<Status(NetApi&, void*, const Deadline&)>& scenario) {
        if (skipIfBackendUnavailable(GetParam())) {
            GTEST_SKIP() << "io_uring_setup is refused on this kernel";
        }
        runIsolated(env(), kBudget, [&] {
            Result<std::unique_ptr<Endpoint>> ep = open();
            if (backendMissing(ep)) {
                GTEST_SKIP() << "plugin reports io_uring unavailable: " << ep.status().toString();
            }
            ATLAS_ASSERT_OK(ep);
            expectBackendInUse();
            Endpoint& e = **ep;
            Deadline deadline(kBudget / 2);
            ATLAS_EXPECT_OK(scenario(e.net(), e.ctx(), deadline));
            ATLAS_EXPECT_OK(e.finalizeAndClose());
            // finalize joins every plugin thread (NCCL may dlclose right after it).
            expectOnlyTestThread("after finalize");
        });
    }
};

TEST_P(CoreTransfer, SizesInOneProcess) {
    runScenario([](NetApi& net, void* ctx, const Deadline& d) {
        return sizesInProcess(net, ctx, coreSizes(), d);
    });
}

TEST_P(CoreTransfer, SizesAcrossTwoProcesses) {
    if (skipIfBackendUnavailable(GetParam())) {
        GTEST_SKIP() << "io_uring_setup is refused on this kernel";
    }
    runIsolated(env(), kBudget, [&] {
        Deadline deadline(kBudget / 2);
        // Fork the sender before this process loads the plugin (no threads yet).
        Result<ChildProcess> sender = ChildProcess::spawn([&](int fd) {
            return runPeer("sender", [&]() -> Status {
                Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
                if (!ep.isOk()) {
                    return ep.status();
                }
                ATLAS_RETURN_IF_ERROR(
                    sizesSender((*ep)->net(), (*ep)->ctx(), fd, coreSizes(), deadline));
                return (*ep)->finalizeAndClose();
            });
        });
        ATLAS_ASSERT_OK(sender);
        Result<std::unique_ptr<Endpoint>> ep = open();
        if (backendMissing(ep)) {
            GTEST_SKIP() << "plugin reports io_uring unavailable: " << ep.status().toString();
        }
        ATLAS_ASSERT_OK(ep);
        ATLAS_EXPECT_OK(
            sizesReceiver((*ep)->net(), (*ep)->ctx(), sender->fd(), coreSizes(), deadline));
        expectPeerSucceeded(*sender, deadline, "sender");
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

TEST_P(CoreTransfer, ReceiveLargerThanSendReportsRealSize) {
    runScenario(recvLargerThanSend);
}

TEST_P(CoreTransfer, TruncationIsInvalidUsage) {
    runScenario([](NetApi& net, void* ctx, const Deadline& d) {
        // Inline-sized message, receive posted first.
        ATLAS_RETURN_IF_ERROR(truncation(net, ctx, 2000, 1000, /*send_first=*/false, d));
        // Striped message, send posted first (the plugin may know the size at irecv).
        return truncation(net, ctx, 4 * kMiB, kMiB, /*send_first=*/true, d);
    });
}

TEST_P(CoreTransfer, ThirtyTwoOutstandingThenBackPressure) {
    runScenario(outstandingRequests);
}

TEST_P(CoreTransfer, OptionalRecvCompletionSentinel) {
    runScenario(optionalRecvSentinel);
}

TEST_P(CoreTransfer, TestWithNullSizes) {
    runScenario(nullSizes);
}

TEST_P(CoreTransfer, CloseWithRequestsInFlightThenFinalize) {
    runScenario(closeWithRequestsInFlight);
}

TEST_P(CoreTransfer, SenderClosesWithSendInFlightAcrossProcesses) {
    if (skipIfBackendUnavailable(GetParam())) {
        GTEST_SKIP() << "io_uring_setup is refused on this kernel";
    }
    runIsolated(env(), kBudget, [&] {
        Deadline deadline(kBudget / 2);
        constexpr size_t kSize = 64 * kMiB;
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
                Result<MappedBuffer> src = MappedBuffer::create(kSize);
                if (!src.isOk()) {
                    return src.status();
                }
                fillPattern(src->data(), kSize, 7);
                Result<Registration> mr = Registration::create(net, send_comm, src->data(), kSize);
                if (!mr.isOk()) {
                    return mr.status();
                }
                Result<void*> s =
                    postSend(net, send_comm, src->data(), kSize, mr->mhandle(), deadline);
                if (!s.isOk()) {
                    return s.status();
                }
                ATLAS_RETURN_IF_ERROR(mr->release());
                // Close at once with the send in flight, then leave.
                ATLAS_RETURN_IF_ERROR(ncclStatus(net.closeSend(send_comm), "closeSend"));
                return (*ep)->finalizeAndClose();
            });
        });
        ATLAS_ASSERT_OK(sender);
        Result<std::unique_ptr<Endpoint>> ep = open();
        if (backendMissing(ep)) {
            GTEST_SKIP() << "plugin reports io_uring unavailable";
        }
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
        // Either the plugin flushed the message before closing (complete, exact data) or the
        // receive fails; it must not hang.
        Result<size_t> got = waitDone(net, *r, deadline);
        EXPECT_NE(got.status().code(), Code::kTimeout) << got.status().toString();
        if (got.isOk()) {
            EXPECT_EQ(*got, kSize);
            EXPECT_EQ(describePatternMismatch(dst->data(), kSize, 7), "");
        }
        expectPeerSucceeded(*sender, deadline, "sender");
        (void)mr->release();
        ATLAS_EXPECT_OK(closePair(net, &pair));
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

INSTANTIATE_TEST_SUITE_P(Io, CoreTransfer, ::testing::Values("uring", "epoll"),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                             return param_info.param;
                         });

}  // namespace
}  // namespace atlas::abi
