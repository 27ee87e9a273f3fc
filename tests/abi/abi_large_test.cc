// One 1 GiB message across two processes, byte-exact (label `slow`: it moves and checks
// 1 GiB, which takes seconds, more under sanitizers).
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

}  // namespace
}  // namespace atlas::abi
