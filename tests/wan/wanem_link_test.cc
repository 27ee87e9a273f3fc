// atlas-wanem link model (serialization, drop-tail, delay, jitter), delay-line ring, and the
// per-direction pipeline driven with synthetic frames and explicit times (no devices).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "perf/atlas-wanem/link_model.h"
#include "perf/atlas-wanem/packet.h"
#include "perf/atlas-wanem/packet_ring.h"
#include "perf/atlas-wanem/pipeline.h"
#include "tests/wan/frame_builder.h"

namespace atlas::wanem {
namespace {

constexpr Nanos kMs = kNsPerMs;

TEST(WanemLinkModel, SerializesAtTheConfiguredRate) {
    LinkParams p;
    p.rate_bps = 1e9;  // 1 byte per 8 ns
    p.buffer_bytes = 1 << 20;
    LinkModel m(p);
    const auto a = m.admit(1000, 1500);
    ASSERT_TRUE(a);
    EXPECT_DOUBLE_EQ(*a, 1000 + 12000);
    const auto b = m.admit(1000, 1500);  // queued behind the first
    ASSERT_TRUE(b);
    EXPECT_DOUBLE_EQ(*b, 1000 + 24000);
    EXPECT_EQ(m.backlogBytes(1000), 3000u);
    const auto c = m.admit(100000, 500);  // link idle again
    EXPECT_DOUBLE_EQ(*c, 100000 + 4000);
    EXPECT_EQ(m.maxQueueDelayNs(), 12000);
}

TEST(WanemLinkModel, DropTailWhenBufferFull) {
    LinkParams p;
    p.rate_bps = 8e6;  // 1 byte per us
    p.buffer_bytes = 4000;
    LinkModel m(p);
    int accepted = 0;
    for (int i = 0; i < 10; ++i) {
        accepted += m.admit(0, 1000).has_value() ? 1 : 0;
    }
    EXPECT_EQ(accepted, 4);
    // After 2 ms the 4000 queued bytes have drained: room again.
    EXPECT_TRUE(m.admit(4 * kMs, 1000).has_value());
    EXPECT_LE(m.maxBacklogBytes(), 4000u);
}

TEST(WanemLinkModel, UncappedLinkHasNoQueue) {
    LinkParams p;
    p.delay_ns = 25 * kMs;
    LinkModel m(p);
    for (int i = 0; i < 1000; ++i) {
        ASSERT_TRUE(m.admit(5, 65000).has_value());
    }
    EXPECT_EQ(m.backlogBytes(5), 0u);
    EXPECT_EQ(m.deliveryTime(5, 0), 5 + 25 * kMs);
}

TEST(WanemLinkModel, JitterStaysInBoundsAndNeverReorders) {
    LinkParams p;
    p.delay_ns = 10 * kMs;
    p.jitter_ns = 2 * kMs;
    LinkModel m(p);
    Rng rng(42);
    Nanos prev = 0;
    Nanos lo = INT64_MAX, hi = 0;
    for (int i = 0; i < 10000; ++i) {
        const Nanos now = i * 100'000;  // a frame every 0.1 ms
        const Nanos d = m.deliveryTime(static_cast<double>(now), rng.uniform() * 2 - 1);
        ASSERT_GE(d, prev);
        prev = d;
        lo = std::min(lo, d - now);
        hi = std::max(hi, d - now);
    }
    EXPECT_GE(lo, 8 * kMs);
    EXPECT_LE(hi, 12 * kMs + 1);
    EXPECT_GT(hi - lo, 3 * kMs) << "jitter should use most of its range";
}

TEST(WanemRng, BernoulliMatchesProbability) {
    Rng rng(7);
    int hits = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        hits += rng.bernoulli(0.01) ? 1 : 0;
    }
    // Binomial sd = sqrt(n p (1-p)) ~ 44.5; allow 5 sd.
    EXPECT_NEAR(hits, 2000, 225);
    EXPECT_FALSE(Rng(1).bernoulli(0));
    EXPECT_TRUE(Rng(1).bernoulli(1));
}

TEST(WanemPacketRing, FifoAcrossWrapAndFull) {
    auto r = PacketRing::create(4096);
    ASSERT_TRUE(r.isOk());
    PacketRing ring = std::move(r.value());
    uint32_t next_in = 0, next_out = 0;
    // Push frames of varying size, popping sometimes, for many laps around the ring.
    for (int step = 0; step < 5000; ++step) {
        const uint32_t len = 1 + (step * 37) % 700;
        uint8_t* p = ring.reserve(len);
        if (p != nullptr) {
            std::fill(p, p + len, static_cast<uint8_t>(next_in));
            ring.commit(next_in, len, next_in % 50);
            ++next_in;
        }
        const bool pop = p == nullptr || step % 3 == 0;
        if (pop && !ring.empty()) {
            const auto f = ring.headFrame();
            ASSERT_EQ(ring.headDeliverNs(), next_out);
            ASSERT_EQ(ring.headSegments(), next_out % 50);
            for (uint8_t b : f) {
                ASSERT_EQ(b, static_cast<uint8_t>(next_out));
            }
            ring.pop();
            ++next_out;
        }
        ASSERT_LE(ring.usedBytes(), ring.capacity());
    }
    EXPECT_GT(next_in, 2000u) << "the ring must be reused after wrapping";
    while (!ring.empty()) {
        ASSERT_EQ(ring.headDeliverNs(), next_out++);
        ring.pop();
    }
    EXPECT_EQ(next_in, next_out);
    EXPECT_EQ(ring.usedBytes(), 0u);
    EXPECT_EQ(ring.reserve(5000), nullptr) << "larger than the ring";
}

// --- pipeline ---------------------------------------------------------------------------

PipelineConfig oneLink(double rate_bps, Nanos delay, uint64_t buffer, double loss = 0) {
    PipelineConfig c;
    LinkParams lp;
    lp.rate_bps = rate_bps;
    lp.delay_ns = delay;
    lp.buffer_bytes = buffer;
    c.paths = {lp};
    c.ring_bytes = {64u << 20};
    c.loss = loss;
    c.rng_seed = 99;
    return c;
}

struct Delivered {
    Nanos at;
    std::vector<uint8_t> frame;
};

std::vector<Delivered> drainUntil(DirectionPipeline& p, Nanos until) {
    std::vector<Delivered> out;
    while (p.nextDeliveryNs() <= until) {
        const Nanos t = p.nextDeliveryNs();
        p.deliverDue(t, 1000, [&](std::span<const uint8_t> f) {
            out.push_back({t, {f.begin(), f.end()}});
            return true;
        });
    }
    return out;
}

TEST(WanemPipeline, DelaysFramesByTheOneWayDelay) {
    auto p = DirectionPipeline::create(oneLink(0, 25 * kMs, 0)).value();
    test::TcpFrameSpec s;
    s.payload_len = 100;
    const auto f = test::makeTcpFrame(s);
    p->ingest(1 * kMs, f);
    EXPECT_EQ(p->nextDeliveryNs(), 26 * kMs);
    EXPECT_EQ(p->deliverDue(26 * kMs - 1, 10, [](auto) { return true; }), 0u);
    const auto out = drainUntil(*p, 100 * kMs);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].at, 26 * kMs);
    EXPECT_EQ(out[0].frame, f) << "an undropped frame is forwarded byte for byte";
    const auto& c = *p->counters().paths[0];
    EXPECT_EQ(c.tx_frames.get(), 1u);
    EXPECT_EQ(c.tx_bytes.get(), f.size() - kVnetHdrLen);
}

TEST(WanemPipeline, RateCapSpacesGsoSegmentsOnTheWire) {
    // 100 Mbit/s: one 1448-byte segment with 52 bytes of headers takes 120 us.
    auto p = DirectionPipeline::create(oneLink(100e6, 10 * kMs, 10u << 20)).value();
    test::TcpFrameSpec s;
    s.payload_len = 40 * 1448;
    s.gso_size = 1448;
    for (int i = 0; i < 10; ++i) {
        s.seq = 1000 + i * s.payload_len;
        p->ingest(0, test::makeTcpFrame(s));
    }
    const auto out = drainUntil(*p, 1000 * kMs);
    ASSERT_EQ(out.size(), 10u);
    const Nanos per_frame = 40 * 120'000;
    for (size_t i = 0; i < out.size(); ++i) {
        EXPECT_NEAR(static_cast<double>(out[i].at),
                    static_cast<double>(10 * kMs + (i + 1) * per_frame), 2.0);
    }
    EXPECT_EQ(p->counters().paths[0]->wire_bytes.get(), 10u * 40u * 1500u);
}

TEST(WanemPipeline, ARateStepTakesEffectAtItsTimeOnce) {
    // 100 Mbit/s until t = 50 ms, then 50: a 40-segment frame (40 x 1500 wire bytes) takes
    // 4.8 ms before the step and 9.6 ms after it. Frames are sent far apart (no queue).
    PipelineConfig c = oneLink(100e6, 0, 10u << 20);
    c.rate_step_at_ns = 50 * kMs;
    c.rate_step_bps = 50e6;
    auto p = DirectionPipeline::create(c).value();
    test::TcpFrameSpec s;
    s.payload_len = 40 * 1448;
    s.gso_size = 1448;
    const Nanos sent[] = {0, 40 * kMs, 60 * kMs, 100 * kMs};
    const Nanos serial[] = {4'800'000, 4'800'000, 9'600'000, 9'600'000};
    for (int i = 0; i < 4; ++i) {
        s.seq = 1000 + i * s.payload_len;
        p->ingest(sent[i], test::makeTcpFrame(s));
        EXPECT_EQ(p->counters().rate_steps.get(), i < 2 ? 0u : 1u) << "frame " << i;
        const auto out = drainUntil(*p, sent[i] + 20 * kMs);
        ASSERT_EQ(out.size(), 1u) << "frame " << i;
        EXPECT_NEAR(static_cast<double>(out[0].at - sent[i]), static_cast<double>(serial[i]), 2.0)
            << "frame " << i;
    }
}

TEST(WanemPipeline, TailDropCutsTheBurstAndKeepsThePrefixAsGso) {
    // Buffer of 10 segments: a 44-segment burst keeps its first 10 segments.
    auto p = DirectionPipeline::create(oneLink(1e9, 0, 10 * 1500)).value();
    test::TcpFrameSpec s;
    s.payload_len = 44 * 1448;
    s.gso_size = 1448;
    p->ingest(0, test::makeTcpFrame(s));
    const auto out = drainUntil(*p, 1000 * kMs);
    ASSERT_EQ(out.size(), 1u);
    const auto info = parseFrame(out[0].frame).value();
    EXPECT_EQ(info.kind, PacketKind::kTcpGso);
    EXPECT_EQ(info.segments, 10u);
    const auto& c = *p->counters().paths[0];
    EXPECT_EQ(c.queue_segments.get(), 34u);
    EXPECT_EQ(c.split_frames.get(), 1u);
    EXPECT_EQ(c.tx_segments.get() + c.queue_segments.get(), c.rx_segments.get());
}

TEST(WanemPipeline, LossIsPerSegmentAndConservesSegments) {
    auto p = DirectionPipeline::create(oneLink(0, 1 * kMs, 0, 0.05)).value();
    test::TcpFrameSpec s;
    s.payload_len = 44 * 1448;
    s.gso_size = 1448;
    const int frames = 500;
    uint64_t payload_out = 0;
    for (int i = 0; i < frames; ++i) {
        s.seq = 1 + i * s.payload_len;
        p->ingest(i * 1000, test::makeTcpFrame(s));
    }
    for (const auto& d : drainUntil(*p, 10'000 * kMs)) {
        const auto info = parseFrame(d.frame).value();
        payload_out += info.payload_len;
        // Every delivered byte must be at its claimed stream position.
        const uint8_t* tcp = d.frame.data() + kVnetHdrLen + info.l3_len;
        const uint32_t seq =
            uint32_t{tcp[4]} << 24 | uint32_t{tcp[5]} << 16 | uint32_t{tcp[6]} << 8 | tcp[7];
        for (uint32_t k = 0; k < info.payload_len; k += 97) {
            ASSERT_EQ(tcp[info.l4_hdr_len + k], test::patternByte(seq + k));
        }
    }
    const auto& c = *p->counters().paths[0];
    const double n = frames * 44.0;
    EXPECT_EQ(c.rx_segments.get(), static_cast<uint64_t>(n));
    EXPECT_EQ(c.tx_segments.get() + c.loss_segments.get(), c.rx_segments.get());
    EXPECT_EQ(payload_out, c.tx_segments.get() * 1448u);
    // 22000 segments at p = 0.05: sd ~ 32; allow 5 sd.
    EXPECT_NEAR(static_cast<double>(c.loss_segments.get()), 0.05 * n,
                5 * std::sqrt(n * 0.05 * 0.95));
    EXPECT_GT(c.split_frames.get(), 400u) << "most 44-segment frames lose a segment at 5%";
}

TEST(WanemPipeline, SegmentsModeWritesEverySegmentAlone) {
    PipelineConfig cfg = oneLink(0, 0, 0, 1e-9);
    cfg.split = SplitMode::kSegments;
    auto p = DirectionPipeline::create(cfg).value();
    test::TcpFrameSpec s;
    s.payload_len = 5 * 1000;
    s.gso_size = 1000;
    p->ingest(0, test::makeTcpFrame(s));
    const auto out = drainUntil(*p, 1);
    ASSERT_EQ(out.size(), 5u);
    for (const auto& d : out) {
        EXPECT_EQ(parseFrame(d.frame)->kind, PacketKind::kIp);
    }
}

TEST(WanemPipeline, PathsHaveTheirOwnDelayAndQueue) {
    PipelineConfig c;
    LinkParams fast, slow;
    fast.delay_ns = 10 * kMs;
    slow.delay_ns = 40 * kMs;
    c.paths = {fast, slow};
    c.ring_bytes = {16u << 20, 16u << 20};
    auto p = DirectionPipeline::create(c).value();
    test::TcpFrameSpec s;
    s.payload_len = 10;
    for (uint16_t port = 1000; port < 1064; ++port) {
        s.src_port = port;
        p->ingest(0, test::makeTcpFrame(s));
    }
    const auto out = drainUntil(*p, 1000 * kMs);
    ASSERT_EQ(out.size(), 64u);
    int at10 = 0, at40 = 0;
    for (size_t i = 0; i < out.size(); ++i) {
        at10 += out[i].at == 10 * kMs;
        at40 += out[i].at == 40 * kMs;
        if (i > 0) {
            EXPECT_GE(out[i].at, out[i - 1].at) << "delivery in time order across paths";
        }
    }
    EXPECT_EQ(at10 + at40, 64);
    EXPECT_GT(at10, 10);
    EXPECT_GT(at40, 10);
    EXPECT_EQ(p->counters().paths[0]->tx_frames.get(), static_cast<uint64_t>(at10));
}

TEST(WanemPipeline, FullDelayLineDropsAndCounts) {
    PipelineConfig c = oneLink(0, 100 * kMs, 0);
    c.ring_bytes = {2 * PacketRing::recordBytes(65536 + 256)};
    auto p = DirectionPipeline::create(c).value();
    test::TcpFrameSpec s;
    s.payload_len = 40000;
    s.gso_size = 1000;
    for (int i = 0; i < 10; ++i) {
        p->ingest(0, test::makeTcpFrame(s));
    }
    const auto& pc = *p->counters().paths[0];
    EXPECT_GT(pc.ring_segments.get(), 0u);
    EXPECT_EQ(drainUntil(*p, 1000 * kMs).size(), 10u - pc.ring_segments.get() / 40);
}

TEST(WanemPipeline, CountsMalformedAndOpaqueFrames) {
    auto p = DirectionPipeline::create(oneLink(0, 0, 0)).value();
    std::vector<uint8_t> tiny(3, 0);
    p->ingest(0, tiny);
    std::vector<uint8_t> junk(kVnetHdrLen + 5, 0x11);
    p->ingest(0, junk);
    EXPECT_EQ(p->counters().malformed_frames.get(), 1u);
    EXPECT_EQ(p->counters().opaque_frames.get(), 1u);
    EXPECT_EQ(drainUntil(*p, 1).size(), 1u) << "opaque frames are still forwarded";
}

TEST(WanemPipeline, RejectsInconsistentConfig) {
    PipelineConfig c;
    EXPECT_FALSE(DirectionPipeline::create(c).isOk());
    c = oneLink(0, 0, 0);
    c.ring_bytes = {1024};
    EXPECT_FALSE(DirectionPipeline::create(c).isOk());
    c = oneLink(0, 0, 0, 1.5);
    EXPECT_FALSE(DirectionPipeline::create(c).isOk());
}

}  // namespace
}  // namespace atlas::wanem
