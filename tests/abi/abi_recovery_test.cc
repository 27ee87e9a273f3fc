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
