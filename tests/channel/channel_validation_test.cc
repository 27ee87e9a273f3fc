// Readers facing segments that are not valid channels: garbage, truncated, foreign,
// wrong-version and too-small segments give a clear Status, never a crash; corrupt rings
// behind a valid header are contained.
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "channel/channel_reader.h"
#include "channel/channel_writer.h"
#include "tests/channel/channel_test_util.h"

namespace atlas::channel {
namespace {

using testing::readShmBytes;
using testing::ShmNameGuard;
using testing::uniqueShmName;
using testing::writeShmBytes;

using Bytes = std::vector<unsigned char>;

// A valid segment image with a few records in both rings.
Bytes validImage() {
    ShmNameGuard guard(uniqueShmName("img"));
    auto w = ChannelWriter::create(guard.name(), {8, 8});
    EXPECT_TRUE(w.isOk()) << w.status().toString();
    std::vector<PredictedWindow> set = {{100, 200, 1000, 1, WindowSource::kPredictor},
                                        {300, 400, 2000, 1, WindowSource::kPredictor}};
    EXPECT_EQ(w.value().publishPredictions(set), 2u);
    IdleInterval observed{10, 20, 1};
    observed.transfer_start_ns = 12;
    observed.transfer_bytes = 4096;
    EXPECT_TRUE(w.value().publishObserved(observed));
    return readShmBytes(guard.name());
}

template <typename T>
void poke(Bytes& image, size_t offset, T value) {
    std::memcpy(image.data() + offset, &value, sizeof(value));
}

// Opens the image and returns the error message ("" if it opened).
std::string openError(const Bytes& image, Code* code = nullptr) {
    auto r = ChannelReader::fromImage(image.data(), image.size());
    if (r.isOk()) {
        return "";
    }
    if (code != nullptr) {
        *code = r.status().code();
    }
    return r.status().message();
}

#define EXPECT_OPEN_FAILS_WITH(image, fragment)                                   \
    do {                                                                          \
        const std::string msg_ = openError(image);                                \
        EXPECT_NE(msg_.find(fragment), std::string::npos) << "message: " << msg_; \
    } while (0)

TEST(ChannelValidation, ValidImageOpensAndReads) {
    const Bytes image = validImage();
    ASSERT_EQ(image.size(), expectedLayout(8, 8).layout_size);
    auto r = ChannelReader::fromImage(image.data(), image.size());
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    auto set = r.value().readPredictions();
    ASSERT_TRUE(set.isOk());
    EXPECT_EQ(set.value().windows.size(), 2u);
    EXPECT_EQ(r.value().refresh().value(), RefreshOutcome::kUnchanged);
    // The image was taken while its writer was live; copying it did not change that.
    EXPECT_EQ(r.value().lifecycle(), Lifecycle::kLive);
}

TEST(ChannelValidation, EmptyAndTooSmall) {
    Code code{};
    EXPECT_NE(openError({}, &code).find("too small"), std::string::npos);
    EXPECT_EQ(code, Code::kRemote);
    Bytes image = validImage();
    image.resize(100);
    EXPECT_OPEN_FAILS_WITH(image, "too small: 100 bytes");
}

TEST(ChannelValidation, ZeroFilledSegmentIsNotInitialisedYet) {
    Code code{};
    const std::string msg = openError(Bytes(4096, 0), &code);
    EXPECT_NE(msg.find("not initialised"), std::string::npos) << msg;
    EXPECT_EQ(code, Code::kUnavailable);
}

TEST(ChannelValidation, ForeignMagicAndOtherByteOrder) {
    Bytes image = validImage();
    std::memcpy(image.data(), "NOTATLAS", 8);
    EXPECT_OPEN_FAILS_WITH(image, "foreign segment: magic");
    poke(image, 0, kMagicByteSwapped);
    EXPECT_OPEN_FAILS_WITH(image, "other byte order");
}

TEST(ChannelValidation, WrongVersion) {
    Bytes image = validImage();
    poke<uint32_t>(image, offsetof(SegmentHeader, abi_version), kAbiVersion + 1);
    EXPECT_OPEN_FAILS_WITH(image, "unsupported ABI version 3 (this reader speaks version 2)");
}

TEST(ChannelValidation, AbiV1SegmentIsRejectedByVersion) {
    // A v1 segment as a v1 writer laid it out: 32-byte idle records, so a shorter segment.
    Bytes image = validImage();
    const size_t v1_layout = (kHeaderSize + 8 * sizeof(WindowRecord) + 8 * 32 + 63) / 64 * 64;
    image.resize(v1_layout);
    poke<uint32_t>(image, offsetof(SegmentHeader, abi_version), 1);
    poke<uint32_t>(image, offsetof(SegmentHeader, idle_record_size), 32);
    poke<uint64_t>(image, offsetof(SegmentHeader, layout_size), v1_layout);
    Code code{};
    const std::string msg = openError(image, &code);
    EXPECT_NE(msg.find("unsupported ABI version 1 (this reader speaks version 2)"),
              std::string::npos)
        << msg;
    EXPECT_EQ(code, Code::kRemote);
}

TEST(ChannelValidation, HeaderFieldsOutOfContract) {
    struct Case {
        size_t offset;
        uint32_t value;
        const char* fragment;
    };
    const Case cases[] = {
        {offsetof(SegmentHeader, header_size), 128, "header_size 128"},
        {offsetof(SegmentHeader, clock_id), 0, "is not CLOCK_MONOTONIC"},
        {offsetof(SegmentHeader, flags), 4, "unknown flags"},
        {offsetof(SegmentHeader, window_record_size), 48, "record sizes"},
        {offsetof(SegmentHeader, idle_record_size), 16, "record sizes"},
        {offsetof(SegmentHeader, window_capacity), 0, "window capacity 0 out of bounds"},
        {offsetof(SegmentHeader, window_capacity), 1u << 31, "window capacity"},
        {offsetof(SegmentHeader, idle_capacity), 3, "idle capacity 3 out of bounds"},
        {offsetof(SegmentHeader, window_capacity), 16, "do not match the capacities"},
        {offsetof(SegmentHeader, writer_pid), 0, "is not a pid"},
        {offsetof(SegmentHeader, lifecycle), 9, "unknown lifecycle"},
    };
    for (const Case& c : cases) {
        Bytes image = validImage();
        poke(image, c.offset, c.value);
        EXPECT_OPEN_FAILS_WITH(image, c.fragment);
    }
    Bytes image = validImage();
    poke<uint64_t>(image, offsetof(SegmentHeader, generation), 0);
    EXPECT_OPEN_FAILS_WITH(image, "generation 0");
    image = validImage();
    poke<uint64_t>(image, offsetof(SegmentHeader, idle_offset), 8);
    EXPECT_OPEN_FAILS_WITH(image, "do not match the capacities");
    image = validImage();
    poke<uint64_t>(image, offsetof(SegmentHeader, layout_size), ~0ull);
    EXPECT_OPEN_FAILS_WITH(image, "do not match the capacities");
}

TEST(ChannelValidation, TruncatedSegment) {
    Bytes image = validImage();
    const size_t full = image.size();
    image.resize(full - 64);
    EXPECT_OPEN_FAILS_WITH(image, "truncated: header says layout_size " + std::to_string(full));
}

TEST(ChannelValidation, RandomGarbageNeverOpensAndNeverCrashes) {
    std::mt19937_64 rng(1234);
    for (int i = 0; i < 2000; ++i) {
        Bytes image(static_cast<size_t>(rng() % 2048));
        for (auto& b : image) {
            b = static_cast<unsigned char>(rng());
        }
        if (i % 3 == 0 && image.size() >= 8) {
            poke(image, 0, kMagic);  // get past the magic check sometimes
        }
        EXPECT_NE(openError(image), "");
    }
}

TEST(ChannelValidation, CorruptRingsBehindAValidHeaderAreContained) {
    const Bytes pristine = validImage();
    const size_t windows = expectedLayout(8, 8).windows_offset;
    const size_t idle = expectedLayout(8, 8).idle_offset;

    // A head far beyond what was written: cells hold older sequence numbers.
    Bytes image = pristine;
    poke<uint64_t>(image, offsetof(SegmentHeader, idle_head), 1000);
    poke<uint64_t>(image, offsetof(SegmentHeader, window_head), 1000);
    auto r = ChannelReader::fromImage(image.data(), image.size());
    ASSERT_TRUE(r.isOk());
    ReadCursor cursor;
    auto obs = r.value().readObservedSince(cursor);
    ASSERT_TRUE(obs.isOk());
    EXPECT_TRUE(obs.value().records.empty());
    EXPECT_EQ(obs.value().invalid, 8u);
    auto pred = r.value().readPredictions();
    ASSERT_FALSE(pred.isOk());
    EXPECT_NE(pred.status().message().find("corrupt prediction ring"), std::string::npos);

    // A set_count that claims more windows than a set may hold.
    image = pristine;
    poke<uint16_t>(image, windows + 64 + offsetof(WindowRecord, set_count), 60000);
    auto r2 = ChannelReader::fromImage(image.data(), image.size());
    ASSERT_TRUE(r2.isOk());
    EXPECT_FALSE(r2.value().readPredictions().isOk());

    // An inverted interval in a complete cell is dropped and counted.
    image = pristine;
    poke<int64_t>(image, idle + offsetof(IdleRecord, end_ns), -5);
    auto r3 = ChannelReader::fromImage(image.data(), image.size());
    ASSERT_TRUE(r3.isOk());
    ReadCursor c3;
    auto o3 = r3.value().readObservedSince(c3);
    ASSERT_TRUE(o3.isOk());
    EXPECT_TRUE(o3.value().records.empty());
    EXPECT_EQ(o3.value().invalid, 1u);

    // Transfer fields that break the IdleRecord invariants are dropped and counted too: a
    // transfer that started after the wait ended, bytes without a start, a start without bytes,
    // a negative start.
    struct TransferCase {
        int64_t transfer_start_ns;
        uint64_t transfer_bytes;
    };
    for (const TransferCase tc : {TransferCase{21, 4096}, TransferCase{0, 4096},
                                  TransferCase{12, 0}, TransferCase{-3, 4096}}) {
        image = pristine;
        poke<int64_t>(image, idle + offsetof(IdleRecord, transfer_start_ns), tc.transfer_start_ns);
        poke<uint64_t>(image, idle + offsetof(IdleRecord, transfer_bytes), tc.transfer_bytes);
        auto rt = ChannelReader::fromImage(image.data(), image.size());
        ASSERT_TRUE(rt.isOk());
        ReadCursor ct;
        auto ot = rt.value().readObservedSince(ct);
        ASSERT_TRUE(ot.isOk());
        EXPECT_TRUE(ot.value().records.empty()) << tc.transfer_start_ns;
        EXPECT_EQ(ot.value().invalid, 1u) << tc.transfer_start_ns;
    }
    // The pristine record itself reads back with its transfer.
    auto r5 = ChannelReader::fromImage(pristine.data(), pristine.size());
    ASSERT_TRUE(r5.isOk());
    ReadCursor c5;
    auto o5 = r5.value().readObservedSince(c5);
    ASSERT_TRUE(o5.isOk());
    ASSERT_EQ(o5.value().records.size(), 1u);
    EXPECT_EQ(o5.value().records[0].transfer_start_ns, 12);
    EXPECT_EQ(o5.value().records[0].transfer_bytes, 4096u);

    // A state block whose seq is stuck odd reads as "writer busy", bounded.
    image = pristine;
    poke<uint64_t>(image, offsetof(SegmentHeader, state_seq), 7);
    auto r4 = ChannelReader::fromImage(image.data(), image.size());
    ASSERT_TRUE(r4.isOk());
    auto st = r4.value().readState();
    ASSERT_FALSE(st.isOk());
    EXPECT_NE(st.status().message().find("writer busy"), std::string::npos);
    EXPECT_EQ(r4.value().counters().busy, 1u);
}

TEST(ChannelValidation, BadShmObjectsByNameGiveClearErrors) {
    ShmNameGuard guard(uniqueShmName("bad"));
    const std::string& name = guard.name();

    auto missing = ChannelReader::open(name);
    ASSERT_FALSE(missing.isOk());
    EXPECT_EQ(missing.status().code(), Code::kUnavailable);

    ASSERT_TRUE(writeShmBytes(name, {}));
    auto empty = ChannelReader::open(name);
    ASSERT_FALSE(empty.isOk());
    EXPECT_NE(empty.status().message().find("too small: 0 bytes"), std::string::npos);
    EXPECT_NE(empty.status().message().find(name), std::string::npos);

    Bytes garbage(8192);
    std::mt19937 rng(7);
    for (auto& b : garbage) {
        b = static_cast<unsigned char>(rng());
    }
    ASSERT_TRUE(writeShmBytes(name, garbage));
    auto foreign = ChannelReader::open(name);
    ASSERT_FALSE(foreign.isOk());
    EXPECT_EQ(foreign.status().code(), Code::kRemote);
    EXPECT_NE(foreign.status().message().find("foreign segment"), std::string::npos);

    Bytes truncated = validImage();
    truncated.resize(truncated.size() / 2);
    ASSERT_TRUE(writeShmBytes(name, truncated));
    auto cut = ChannelReader::open(name);
    ASSERT_FALSE(cut.isOk());
    EXPECT_NE(cut.status().message().find("truncated"), std::string::npos);

    // A writer replaces garbage under its name without complaint.
    ASSERT_TRUE(writeShmBytes(name, garbage));
    auto w = ChannelWriter::create(name, {8, 8});
    ASSERT_TRUE(w.isOk()) << w.status().toString();
    EXPECT_EQ(w.value().generation(), 1u);
    EXPECT_TRUE(ChannelReader::open(name).isOk());
}

}  // namespace
}  // namespace atlas::channel
