// The wire format's fixed facts (sizes, layout rule, naming) and the small value helpers.
#include <unistd.h>

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "atlas/bubble_channel.h"
#include "channel/channel_name.h"
#include "channel/channel_types.h"

namespace atlas::channel {
namespace {

TEST(BubbleChannelFormat, MagicSpellsAtlsbublInMemory) {
    const uint64_t magic = kMagic;
    char bytes[8];
    std::memcpy(bytes, &magic, sizeof(bytes));
    EXPECT_EQ(std::string(bytes, 8), "ATLSBUBL");
    EXPECT_EQ(__builtin_bswap64(kMagic), kMagicByteSwapped);
}

TEST(BubbleChannelFormat, LayoutIsHeaderThenWindowsThenIdleRoundedTo64) {
    const SegmentLayout l = expectedLayout(256, 4096);
    EXPECT_EQ(l.windows_offset, kHeaderSize);
    EXPECT_EQ(l.idle_offset, kHeaderSize + 256 * sizeof(WindowRecord));
    EXPECT_EQ(l.layout_size, l.idle_offset + 4096 * sizeof(IdleRecord));
    // ABI v2: every record is one 64-byte line, so any capacities end on a line boundary.
    static_assert(kAbiVersion == 2);
    EXPECT_EQ(sizeof(IdleRecord), 64u);
    EXPECT_EQ(alignof(IdleRecord), 64u);
    const SegmentLayout odd = expectedLayout(4, 5);
    EXPECT_EQ(odd.layout_size % 64, 0u);
    EXPECT_EQ(odd.layout_size, kHeaderSize + 4 * 64 + 5 * 64);
}

TEST(BubbleChannelTypes, IdleIntervalValidityRules) {
    // Aggregate init of the first three members still works; the transfer defaults to unknown.
    const IdleInterval plain{100, 200, 1};
    EXPECT_EQ(plain.transfer_start_ns, 0);
    EXPECT_EQ(plain.transfer_bytes, 0u);
    EXPECT_TRUE(validIdleInterval(plain));
    EXPECT_FALSE(validIdleInterval({200, 100, 1}));
    auto with = [](Nanos transfer_start, uint64_t bytes) {
        IdleInterval i{100, 200, 1};
        i.transfer_start_ns = transfer_start;
        i.transfer_bytes = bytes;
        return validIdleInterval(i);
    };
    EXPECT_TRUE(with(150, 8));   // inside the wait
    EXPECT_TRUE(with(100, 8));   // buffered before the receive: reported as start_ns
    EXPECT_TRUE(with(40, 8));    // before the wait opened
    EXPECT_TRUE(with(200, 8));   // at the end
    EXPECT_FALSE(with(201, 8));  // after the wait ended
    EXPECT_FALSE(with(150, 0));  // start without bytes
    EXPECT_FALSE(with(0, 8));    // bytes without start
    EXPECT_FALSE(with(-1, 8));   // not a CLOCK_MONOTONIC time
}

TEST(BubbleChannelFormat, MaxPredictionSetIsHalfTheRingCappedBySetCountField) {
    EXPECT_EQ(maxPredictionSet(4), 2u);
    EXPECT_EQ(maxPredictionSet(256), 128u);
    EXPECT_EQ(maxPredictionSet(kMaxWindowCapacity), 32768u);
}

TEST(BubbleChannelNaming, DefaultNameCarriesUidAndLocalRank) {
    const std::string name = defaultChannelName(3);
    EXPECT_EQ(name, "/atlas-bubbles-" + std::to_string(::getuid()) + "-3");
    // A buffer too small for the name: -1, never a truncated name. (The size goes through
    // a volatile so the compiler cannot prove the truncation at build time.)
    char small[8];
    volatile size_t small_size = sizeof(small);
    EXPECT_EQ(formatDefaultChannelName(small, small_size, 3), -1);
}

TEST(BubbleChannelNaming, ResolveUsesDefaultWhenUnset) {
    auto a = resolveChannelName(nullptr, 2);
    ASSERT_TRUE(a.isOk()) << a.status().toString();
    EXPECT_EQ(a.value(), defaultChannelName(2));
    auto b = resolveChannelName("", 5);
    ASSERT_TRUE(b.isOk());
    EXPECT_EQ(b.value(), defaultChannelName(5));
}

TEST(BubbleChannelNaming, ResolveSubstitutesEveryPlaceholder) {
    auto r = resolveChannelName("/job7-{local_rank}-gpu{local_rank}", 12);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r.value(), "/job7-12-gpu12");
    auto verbatim = resolveChannelName("/fixed", 1);
    ASSERT_TRUE(verbatim.isOk());
    EXPECT_EQ(verbatim.value(), "/fixed");
}

TEST(BubbleChannelNaming, ResolveRejectsBadNamesAndRanks) {
    auto no_slash = resolveChannelName("job", 0);
    ASSERT_FALSE(no_slash.isOk());
    EXPECT_NE(no_slash.status().message().find("must start with '/'"), std::string::npos);
    auto inner_slash = resolveChannelName("/a/b", 0);
    ASSERT_FALSE(inner_slash.isOk());
    EXPECT_NE(inner_slash.status().message().find("'/'"), std::string::npos);
    EXPECT_FALSE(resolveChannelName("/x", -1).isOk());
    EXPECT_FALSE(validateChannelName("/" + std::string(300, 'a')).isOk());
    EXPECT_FALSE(validateChannelName("/").isOk());
    EXPECT_FALSE(validateChannelName(std::string("/a\nb")).isOk());
    EXPECT_TRUE(validateChannelName("/atlas-bubbles-0-0").isOk());
}

TEST(BubbleChannelTypes, PpmConversionsClampAndRoundTrip) {
    EXPECT_EQ(toPpm(0.25), 250000u);
    EXPECT_EQ(toPpm(-1.0), 0u);
    EXPECT_EQ(toPpm(7.0), kPpmOne);
    EXPECT_EQ(toPpm(std::nan("")), 0u);
    EXPECT_DOUBLE_EQ(fromPpm(500000), 0.5);
    EXPECT_TRUE(std::isnan(fromPpm(kUnknownPpm)));
}

TEST(BubbleChannelTypes, NamesForEveryEnumValueAndUnknown) {
    EXPECT_STREQ(stateName(PredictorState::kPredicting), "predicting");
    EXPECT_STREQ(stateName(static_cast<PredictorState>(99)), "unknown");
    EXPECT_STREQ(reasonName(StatusReason::kPeriodChanged), "period-changed");
    EXPECT_STREQ(reasonName(static_cast<StatusReason>(99)), "unknown");
    EXPECT_STREQ(sourceName(WindowSource::kArbiterPlan), "arbiter-plan");
    EXPECT_STREQ(lifecycleName(Lifecycle::kRetired), "retired");
}

}  // namespace
}  // namespace atlas::channel
