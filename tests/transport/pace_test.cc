// transport/pace.h: how a grant's pace is split over the streams that carry its bytes.
#include "transport/pace.h"

#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

namespace atlas::transport {
namespace {

constexpr uint64_t kGbit = 1'000'000'000;

TEST(PaceSplit, SharesFollowTheStreamsUnsentBytesSoTheyFinishTogether) {
    // 1.25 Gbit/s over streams holding 1, 1, 0.5 MiB and 2 MiB: each gets the pace times its
    // share, so each needs the same time to send what it holds.
    const uint64_t pace = 1'250'000'000;
    const std::vector<uint64_t> held = {1 << 20, 1 << 20, 1 << 19, 2 << 20};
    uint64_t total = 0;
    for (uint64_t h : held) {
        total += h;
    }
    uint64_t sum = 0;
    for (uint64_t h : held) {
        const uint64_t r = streamPaceBytes(pace, h, total);
        sum += r;
        // finish time = held / rate: the same for every stream (to rounding).
        EXPECT_NEAR(static_cast<double>(h) / static_cast<double>(r),
                    static_cast<double>(total) / (static_cast<double>(pace) / 8), 1e-6);
    }
    EXPECT_LE(sum, pace / 8);
    EXPECT_GE(sum, pace / 8 - held.size()) << "the shares add up to the pace (to rounding)";
}

TEST(PaceSplit, NoPaceOrNothingHeldMeansNoCapAndSliversGetTheFloor) {
    EXPECT_EQ(streamPaceBytes(0, 1 << 20, 1 << 20), 0u) << "no pace: no cap";
    EXPECT_EQ(streamPaceBytes(kGbit, 0, 1 << 20), 0u) << "holds nothing: left as it is";
    EXPECT_EQ(streamPaceBytes(kGbit, 1, 1 << 30), kMinStreamPaceBytes) << "a sliver: the floor";
    EXPECT_EQ(streamPaceBytes(kGbit, 1 << 20, 1 << 20), kGbit / 8) << "the one stream: all";
    EXPECT_EQ(streamPaceBytes(kGbit, 2 << 20, 1 << 20), kGbit / 8) << "more than the total";
    EXPECT_EQ(streamPaceBytes(UINT64_MAX, UINT64_MAX / 2, UINT64_MAX), UINT64_MAX / 8 / 2)
        << "no overflow";
}

TEST(PaceSplit, ChangesWithinAnEighthAreNotWorthASyscall) {
    EXPECT_FALSE(paceChanged(8000, 8000));
    EXPECT_FALSE(paceChanged(8000, 8999)) << "within an eighth up";
    EXPECT_FALSE(paceChanged(8000, 7112)) << "within an eighth down";
    EXPECT_TRUE(paceChanged(8000, 9001));
    EXPECT_TRUE(paceChanged(8000, 7000));
    EXPECT_TRUE(paceChanged(0, 8000)) << "first cap";
    EXPECT_TRUE(paceChanged(8000, 0)) << "cap lifted";
}

}  // namespace
}  // namespace atlas::transport
