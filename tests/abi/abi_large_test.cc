// One 1 GiB message across two processes, byte-exact, plain and with two of its data streams
// reset in the middle of it (label `slow`: each moves and checks 1 GiB, which takes seconds,
// more under sanitizers).
#include <gtest/gtest.h>

#include "tests/abi/isolate.h"
#include "tests/abi/suites.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(300 * kNsPerSec);
constexpr size_t kGiB = 1024 * kMiB;

TEST(Large, OneGibibyteAcrossTwoProcesses) {
    runIsolated(loopbackEnv(), kBudget, [] {
        Deadline deadline(kBudget * 9 / 10);
        const std::vector<size_t> sizes = {kGiB};
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
        const Nanos t0 = monotonicNowNs();
        ATLAS_EXPECT_OK(sizesReceiver((*ep)->net(), (*ep)->ctx(), sender->fd(), sizes, deadline));
        std::printf("1 GiB received and verified in %.2f s\n",
                    static_cast<double>(monotonicNowNs() - t0) / 1e9);
        expectPeerSucceeded(*sender, deadline, "sender");
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

TEST(Recovery, StreamsResetInTheMiddleOfAOneGibibyteMessage) {
    // Send-side faults: only the child's send comm acts on them.
    runIsolated(
        loopbackEnv({{"ATLAS_NSTREAMS", "4"},
                     {"ATLAS_TEST_MODE", "1"},
                     {"ATLAS_FAULTS", "reset:stream=2,after=96M;reset:stream=4,after=192M"}}),
        kBudget, [] {
            Deadline deadline(kBudget * 9 / 10);
            transferWithSenderFaults(
                {kGiB}, deadline,
                {"stream 2 (epoch 0) lost: reset by fault injection",
                 "stream 4 (epoch 0) lost: reset by fault injection", "stream 2 rejoined (epoch 1)",
                 "stream 4 rejoined (epoch 1)"});
        });
}

}  // namespace
}  // namespace atlas::abi
