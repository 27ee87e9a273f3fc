// Every table (v8 ... v12) passes the basic transfer suite: NCCL 2.30+ uses v12, 2.28-2.29 v11,
// older NCCL releases (and NCCL's own shims) drive v8-v10.
#include <gtest/gtest.h>

#include "tests/abi/isolate.h"
#include "tests/abi/suites.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(90 * kNsPerSec);

class OlderTable : public ::testing::TestWithParam<int> {};

TEST_P(OlderTable, BasicSuiteInOneProcess) {
    const int version = GetParam();
    runIsolated(loopbackEnv(), kBudget, [version] {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath(), version);
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        Deadline deadline(kBudget / 2);
        ATLAS_EXPECT_OK(sizesInProcess(net, (*ep)->ctx(), coreSizes(), deadline));
        ATLAS_EXPECT_OK(recvLargerThanSend(net, (*ep)->ctx(), deadline));
        ATLAS_EXPECT_OK(outstandingRequests(net, (*ep)->ctx(), deadline));
        ATLAS_EXPECT_OK(nullSizes(net, (*ep)->ctx(), deadline));
        ATLAS_EXPECT_OK(truncation(net, (*ep)->ctx(), 2000, 1000, false, deadline));
        // v9 and later may receive *request == 0x1 (NCCL's v8 shim clears it, so v8 never sees
        // the sentinel).
        if (version >= 9) {
            ATLAS_EXPECT_OK(optionalRecvSentinel(net, (*ep)->ctx(), deadline));
        }
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
        // Only v11+ have finalize; older tables may keep their threads until unload/exit.
        if (version >= 11) {
            expectOnlyTestThread("after finalize");
        }
    });
}

TEST_P(OlderTable, SizesAcrossTwoProcesses) {
    const int version = GetParam();
    runIsolated(loopbackEnv(), kBudget, [version] {
        Deadline deadline(kBudget / 2);
        Result<ChildProcess> sender = ChildProcess::spawn([&](int fd) {
            return runPeer("sender", [&]() -> Status {
                Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath(), version);
                if (!ep.isOk()) {
                    return ep.status();
                }
                ATLAS_RETURN_IF_ERROR(
                    sizesSender((*ep)->net(), (*ep)->ctx(), fd, coreSizes(), deadline));
                return (*ep)->finalizeAndClose();
            });
        });
        ATLAS_ASSERT_OK(sender);
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath(), version);
        ATLAS_ASSERT_OK(ep);
        ATLAS_EXPECT_OK(
            sizesReceiver((*ep)->net(), (*ep)->ctx(), sender->fd(), coreSizes(), deadline));
        expectPeerSucceeded(*sender, deadline, "sender");
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

INSTANTIATE_TEST_SUITE_P(Versions, OlderTable, ::testing::Values(8, 9, 10, 11, 12),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                             return "v" + std::to_string(param_info.param);
                         });

}  // namespace
}  // namespace atlas::abi
