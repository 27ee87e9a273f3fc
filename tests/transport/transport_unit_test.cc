// Pure units of the transport: wire formats, the striper policy, the stream-count rule.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <numeric>
#include <vector>

#include "transport/stream_plan.h"
#include "transport/striper.h"
#include "transport/wire.h"

namespace atlas::transport {
namespace {

// ---------------------------------------------------------------- wire

TEST(Wire, HandleRoundTripsAndRejectsForeignBytes) {
    wire::HandleInfo in;
    in.family = AF_INET;
    in.port = 4242;
    in.addr = {127, 0, 0, 1};
    in.listen_id = 0x1122334455667788ull;
    uint8_t h[128];
    std::memset(h, 0xAB, sizeof(h));
    wire::encodeHandle(in, h);
    for (size_t i = wire::kHandlePublicBytes; i < 128; ++i) {
        ASSERT_EQ(h[i], 0) << "connector scratch must start zeroed";
    }
    wire::HandleInfo out;
    ASSERT_TRUE(wire::decodeHandle(h, &out).isOk());
    EXPECT_EQ(out.port, 4242);
    EXPECT_EQ(out.listen_id, in.listen_id);
    EXPECT_EQ(out.addr, in.addr);

    uint8_t bad[128] = {};
    Status st = wire::decodeHandle(bad, &out);
    EXPECT_EQ(st.code(), Code::kInvalidUsage);
    EXPECT_NE(st.message().find("magic"), std::string::npos);
    h[4] = 9;  // protocol version
    st = wire::decodeHandle(h, &out);
    EXPECT_NE(st.message().find("version"), std::string::npos) << st.message();
}

TEST(Wire, HandshakeMessagesRoundTrip) {
    uint8_t buf[wire::kHsMaxMessage];
    wire::Config c;
    c.nstreams = 17;
    c.chunk_bytes = 1 << 20;
    c.inline_bytes = 4096;
    c.rtt_ns = 50'000'000;
    c.client_mac[3] = 7;
    const size_t n = wire::encode(c, buf);
    wire::HsHeader h;
    ASSERT_TRUE(wire::decodeHsHeader({buf, n}, &h).isOk());
    EXPECT_EQ(h.type, wire::HsType::kConfig);
    ASSERT_EQ(h.body_len + wire::kHsHeaderBytes, n);
    wire::Config back;
    ASSERT_TRUE(wire::decode({buf + wire::kHsHeaderBytes, h.body_len}, &back).isOk());
    EXPECT_EQ(back.nstreams, 17u);
    EXPECT_EQ(back.rtt_ns, c.rtt_ns);
    EXPECT_EQ(back.client_mac, c.client_mac);
    // A body one byte short or long is rejected.
    EXPECT_FALSE(wire::decode({buf + wire::kHsHeaderBytes, h.body_len - 1}, &back).isOk());
}

TEST(Wire, ConfigRangesAreEnforced) {
    uint8_t buf[wire::kHsMaxMessage];
    for (uint32_t streams : {0u, 65u}) {
        wire::Config c;
        c.nstreams = streams;
        c.chunk_bytes = 1 << 20;
        const size_t n = wire::encode(c, buf);
        wire::Config back;
        Status st = wire::decode({buf + wire::kHsHeaderBytes, n - wire::kHsHeaderBytes}, &back);
        EXPECT_FALSE(st.isOk()) << streams;
        EXPECT_NE(st.message().find("stream count"), std::string::npos);
    }
}

TEST(Wire, HsHeaderRejectsForeignVersionTypeAndHugeBodies) {
    uint8_t buf[wire::kHsMaxMessage];
    const size_t n = wire::encode(wire::Ready{}, buf);
    wire::HsHeader h;
    ASSERT_TRUE(wire::decodeHsHeader({buf, n}, &h).isOk());
    auto mutate = [&](size_t at, uint8_t v) {
        uint8_t copy[wire::kHsMaxMessage];
        std::memcpy(copy, buf, n);
        copy[at] = v;
        return wire::decodeHsHeader({copy, n}, &h);
    };
    EXPECT_NE(mutate(0, 'X').message().find("magic"), std::string::npos);
    EXPECT_NE(mutate(4, 9).message().find("version"), std::string::npos);
    EXPECT_NE(mutate(6, 99).message().find("type"), std::string::npos);
    EXPECT_NE(mutate(10, 1).message().find("body"), std::string::npos);
    EXPECT_FALSE(wire::decodeHsHeader({buf, 5}, &h).isOk());
}

TEST(Wire, FrameRoundTripAndRangeChecks) {
    uint8_t b[wire::kFrameHeaderBytes];
    wire::encodeFrame({wire::FrameType::kData, 0xFFFFFFFEu, 100, 1000, 900}, b);
    wire::FrameHeader f;
    ASSERT_TRUE(wire::decodeFrame(b, 100, &f).isOk());
    EXPECT_EQ(f.seq, 0xFFFFFFFEu);
    EXPECT_EQ(f.offset, 900u);
    // Past the end of the message.
    wire::encodeFrame({wire::FrameType::kData, 1, 101, 1000, 900}, b);
    EXPECT_FALSE(wire::decodeFrame(b, 1000, &f).isOk());
    // Overflowing offset + length.
    wire::encodeFrame({wire::FrameType::kData, 1, 10, ~0ull, ~0ull - 5}, b);
    EXPECT_FALSE(wire::decodeFrame(b, 1000, &f).isOk());
    // Longer than the negotiated maximum.
    wire::encodeFrame({wire::FrameType::kData, 1, 4097, 5000, 0}, b);
    EXPECT_FALSE(wire::decodeFrame(b, 4096, &f).isOk());
    // Zero-byte message frame is valid.
    wire::encodeFrame({wire::FrameType::kData, 3, 0, 0, 0}, b);
    EXPECT_TRUE(wire::decodeFrame(b, 0, &f).isOk());
    b[4] = 7;  // unknown type
    EXPECT_FALSE(wire::decodeFrame(b, 0, &f).isOk());
}

// ---------------------------------------------------------------- striper

TEST(Striper, LoadAwarePicksLeastLoadedAndRespectsTheCap) {
    Striper s(StripeMode::kLoadAware, 3, 100, 200);
    std::vector<uint64_t> q = {50, 10, 80};
    auto a = s.next(1000, 1000, q);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->stream, 1);
    EXPECT_EQ(a->length, 100u);
    q = {200, 250, 199};
    a = s.next(1000, 1000, q);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->stream, 2);
    q = {200, 200, 200};
    EXPECT_FALSE(s.next(1000, 1000, q)) << "all streams at the cap";
    q = {0, 0, 0};
    a = s.next(1000, 30, q);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->length, 30u) << "last piece is the remainder";
}

TEST(Striper, LoadAwareBurstsReuseTheSameWarmStreams) {
    // Bursts of 3 pieces on 4 idle streams: within a burst the rising loads spread the pieces;
    // every burst starts again at stream 0, so the same streams carry every burst and keep
    // their congestion windows open (round-robin ties left every stream cold).
    Striper s(StripeMode::kLoadAware, 4, 10, 1000);
    for (int burst = 0; burst < 3; ++burst) {
        std::vector<uint64_t> q(4, 0);  // everything sent since the last burst
        std::vector<int> picks;
        for (int i = 0; i < 3; ++i) {
            auto a = s.next(30, 30 - 10 * i, q);
            ASSERT_TRUE(a);
            q[a->stream] += a->length;
            picks.push_back(a->stream);
        }
        EXPECT_EQ(picks, (std::vector<int>{0, 1, 2})) << "burst " << burst;
    }
}

TEST(Striper, LoadAwareGivesFastStreamsMoreBytes) {
    // Simulate 4 streams draining at rates 8:1:1:1 per tick; the fast one must carry most.
    Striper s(StripeMode::kLoadAware, 4, 64, 128);
    std::vector<uint64_t> q(4, 0), carried(4, 0);
    const uint64_t rate[4] = {64, 8, 8, 8};
    uint64_t remaining = 1 << 20;
    while (remaining > 0) {
        while (auto a = s.next(1 << 20, remaining, q)) {
            q[a->stream] += a->length;
            carried[a->stream] += a->length;
            remaining -= a->length;
            if (remaining == 0) {
                break;
            }
        }
        for (int i = 0; i < 4; ++i) {
            q[i] -= std::min(q[i], rate[i]);
        }
    }
    const uint64_t total = std::accumulate(carried.begin(), carried.end(), uint64_t{0});
    EXPECT_EQ(total, 1u << 20);
    EXPECT_GT(carried[0], total * 6 / 10) << carried[0] << " of " << total;
}

TEST(Striper, EvenSplitsLikeNcclSocketAndIgnoresLoad) {
    Striper s(StripeMode::kEven, 4, 1 << 20, 1, 64 * 1024);
    std::vector<uint64_t> q = {~0ull, 0, 0, 0};  // loads are ignored
    // 1 MiB over 4 streams: 256 KiB pieces, round-robin from the persistent cursor.
    uint64_t remaining = 1 << 20;
    std::vector<int> streams;
    while (remaining > 0) {
        auto a = s.next(1 << 20, remaining, q);
        ASSERT_TRUE(a);
        EXPECT_EQ(a->length, 256u * 1024);
        streams.push_back(a->stream);
        remaining -= a->length;
    }
    EXPECT_EQ(streams, (std::vector<int>{0, 1, 2, 3}));
    // A 100 KiB message: pieces are at least 64 KiB, so 2 pieces; cursor continues at 0.
    auto a = s.next(100 * 1024, 100 * 1024, q);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->stream, 0);
    EXPECT_EQ(a->length, 64u * 1024);
    a = s.next(100 * 1024, 36 * 1024, q);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->stream, 1);
    EXPECT_EQ(a->length, 36u * 1024);
}

TEST(Striper, PiecesNeverExceedTheFrameLimit) {
    Striper s(StripeMode::kEven, 1, 1 << 20, 1);
    std::vector<uint64_t> q = {0};
    auto a = s.next(4ull << 30, 4ull << 30, q);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->length, wire::kMaxFrameLength);
}

// ---------------------------------------------------------------- stream plan

StreamPlanInput wanInput(double rtt_ms, double gbps) {
    StreamPlanInput in;
    in.rtt_ns = static_cast<Nanos>(rtt_ms * 1e6);
    in.link_bps = static_cast<uint64_t>(gbps * 1e9);
    in.limits.wmem_max = 4u << 20;
    in.limits.rmem_max = 32u << 20;
    return in;
}

TEST(StreamPlan, LoopbackNeedsOneStream) {
    StreamPlan p = planStreams(wanInput(0.03, 10));
    EXPECT_EQ(p.nstreams, 1);
}

TEST(StreamPlan, FillsTheBandwidthDelayProduct) {
    // 100 ms, 1 Gbit/s: BDP 12.5 MB; window/stream 0.85*4 MiB = 3.56 MB -> ceil(1.25*12.5/3.56)=5.
    StreamPlan p = planStreams(wanInput(100, 1));
    EXPECT_EQ(p.bdp_bytes, 12'500'000u);
    EXPECT_EQ(p.nstreams, 5);
    // Twice the RTT needs about twice the streams.
    EXPECT_GE(planStreams(wanInput(200, 1)).nstreams, 2 * p.nstreams - 1);
}

TEST(StreamPlan, RespectsCapOverrideAndExplicitBuffers) {
    StreamPlanInput in = wanInput(100, 100);
    in.max_streams = 16;
    StreamPlan p = planStreams(in);
    EXPECT_EQ(p.nstreams, 16);
    EXPECT_NE(p.reason.find("capped"), std::string::npos);
    in.requested = 3;
    EXPECT_EQ(planStreams(in).nstreams, 3);
    in = wanInput(100, 1);
    in.sockbuf_bytes = 16u << 20;  // explicit buffers: the window is the buffer
    EXPECT_EQ(planStreams(in).nstreams, 1);
}

TEST(StreamPlan, AMeasuredRateIsPlannedForCappedByTheConfiguredOne) {
    // The device says 10 Gbit/s (22 streams at 50 ms); the link measured 1 Gbit/s (3).
    StreamPlanInput in = wanInput(50, 10);
    const StreamPlan device = planStreams(in);
    in.measured_bps = 1'000'000'000;
    const StreamPlan measured = planStreams(in);
    EXPECT_FALSE(device.measured);
    EXPECT_TRUE(measured.measured);
    EXPECT_EQ(measured.path_bps, 1'000'000'000u);
    EXPECT_EQ(measured.bdp_bytes, 6'250'000u);
    EXPECT_EQ(measured.nstreams, planStreams(wanInput(50, 1)).nstreams);
    EXPECT_LT(measured.nstreams, device.nstreams);
    EXPECT_NE(measured.reason.find("(measured)"), std::string::npos) << measured.reason;
    // A measurement above the device's speed is capped by it.
    in.measured_bps = 40'000'000'000ull;
    EXPECT_EQ(planStreams(in).path_bps, 10'000'000'000u);
    EXPECT_EQ(planStreams(in).nstreams, device.nstreams);
    // ATLAS_NSTREAMS still wins.
    in.requested = 7;
    EXPECT_EQ(planStreams(in).nstreams, 7);
}

TEST(StreamPlan, CpuFloorForFastLans) {
    StreamPlan p = planStreams(wanInput(0.02, 100));
    EXPECT_EQ(p.nstreams, 4);  // 100 Gbit/s / 25 Gbit/s per stream
}

}  // namespace
}  // namespace atlas::transport
