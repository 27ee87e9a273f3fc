// atlas-wanem packet layer: vnet header parsing, classification, flow hashing, and GSO
// splitting checked against what the receiving kernel needs (lengths, ids, seq, flags,
// checksums that complete correctly, payload bytes at the right stream position).
#include <gtest/gtest.h>

#include <set>

#include "perf/atlas-wanem/flow_hash.h"
#include "perf/atlas-wanem/gso_split.h"
#include "perf/atlas-wanem/packet.h"
#include "tests/wan/frame_builder.h"

namespace atlas::wanem {
namespace {

using test::TcpFrameSpec;

uint32_t be32(const uint8_t* p) {
    return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
uint16_t be16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] << 8 | p[1]);
}

TEST(WanemPacket, VnetHeaderRoundTripsLittleEndian) {
    VnetHeader h{1, kGsoTcpV4 | kGsoEcn, 0x1234, 1448, 20, 16};
    uint8_t raw[kVnetHdrLen] = {};
    encodeVnetHeader(h, raw);
    EXPECT_EQ(raw[2], 0x34);
    EXPECT_EQ(raw[3], 0x12);
    const VnetHeader d = decodeVnetHeader(raw);
    EXPECT_EQ(d.flags, 1);
    EXPECT_EQ(d.gso_type, kGsoTcpV4 | kGsoEcn);
    EXPECT_EQ(d.hdr_len, 0x1234);
    EXPECT_EQ(d.gso_size, 1448);
    EXPECT_EQ(d.csum_start, 20);
    EXPECT_EQ(d.csum_offset, 16);
}

TEST(WanemPacket, ParsesIpv4TcpGso) {
    TcpFrameSpec s;
    s.payload_len = 10 * 1448 + 100;
    s.gso_size = 1448;
    const auto f = test::makeTcpFrame(s);
    auto r = parseFrame(f);
    ASSERT_TRUE(r.isOk());
    const PacketInfo& p = r.value();
    EXPECT_EQ(p.kind, PacketKind::kTcpGso);
    EXPECT_EQ(p.ip_version, 4);
    EXPECT_EQ(p.l3_len, 20);
    EXPECT_EQ(p.l4_hdr_len, 32);
    EXPECT_EQ(p.payload_len, s.payload_len);
    EXPECT_EQ(p.segments, 11u);
    EXPECT_EQ(p.segmentPayload(0), 1448u);
    EXPECT_EQ(p.segmentPayload(10), 100u);
    EXPECT_EQ(p.segmentIpBytes(10), 52u + 100u);
    EXPECT_EQ(p.flow.src_port, 40000);
    EXPECT_EQ(p.flow.dst_port, 5201);
    EXPECT_EQ(p.flow.proto, 6);
}

TEST(WanemPacket, ParsesIpv6TcpGso) {
    TcpFrameSpec s;
    s.ip_version = 6;
    s.src = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    s.dst = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
    s.payload_len = 3 * 1428;
    s.gso_size = 1428;
    const auto f = test::makeTcpFrame(s);
    auto r = parseFrame(f);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r->kind, PacketKind::kTcpGso);
    EXPECT_EQ(r->ip_version, 6);
    EXPECT_EQ(r->l3_len, 40);
    EXPECT_EQ(r->segments, 3u);
}

TEST(WanemPacket, NonGsoAndUnknownFramesAreForwardableUnits) {
    TcpFrameSpec s;
    s.payload_len = 100;
    auto r = parseFrame(test::makeTcpFrame(s));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r->kind, PacketKind::kIp);
    EXPECT_EQ(r->segments, 1u);

    auto u = parseFrame(test::makeUdpFrame(64));
    ASSERT_TRUE(u.isOk());
    EXPECT_EQ(u->kind, PacketKind::kIp);
    EXPECT_EQ(u->flow.src_port, 1234);

    std::vector<uint8_t> junk(kVnetHdrLen + 30, 0xee);
    junk[1] = kGsoTcpV4;  // claims GSO but is not IP
    auto j = parseFrame(junk);
    ASSERT_TRUE(j.isOk());
    EXPECT_EQ(j->kind, PacketKind::kOpaque);
    EXPECT_EQ(j->ip_len, 30u);
}

TEST(WanemPacket, RejectsOnlyFramesShorterThanTheVnetHeader) {
    std::vector<uint8_t> tiny(kVnetHdrLen - 1, 0);
    EXPECT_FALSE(parseFrame(tiny).isOk());
    std::vector<uint8_t> header_only(kVnetHdrLen, 0);
    EXPECT_TRUE(parseFrame(header_only).isOk());
}

TEST(WanemPacket, TruncatedHeadersBecomeOpaque) {
    TcpFrameSpec s;
    s.payload_len = 2000;
    s.gso_size = 1000;
    auto f = test::makeTcpFrame(s);
    // tot_len larger than the frame: the IP header lies.
    f[kVnetHdrLen + 2] = 0xff;
    EXPECT_EQ(parseFrame(f)->kind, PacketKind::kOpaque);
    auto g = test::makeTcpFrame(s);
    g[kVnetHdrLen + 20 + 12] = 0xf0;  // TCP data offset 60 bytes: beyond a 32-byte header
    g.resize(kVnetHdrLen + 20 + 40);
    g[kVnetHdrLen + 2] = 0;
    g[kVnetHdrLen + 3] = 60;
    EXPECT_EQ(parseFrame(g)->kind, PacketKind::kOpaque);
}

TEST(WanemFlowHash, IsSymmetricAndSpreadsFlows) {
    TcpFrameSpec s;
    const auto fwd = parseFrame(test::makeTcpFrame(s)).value();
    TcpFrameSpec r = s;
    std::swap(r.src, r.dst);
    std::swap(r.src_port, r.dst_port);
    const auto rev = parseFrame(test::makeTcpFrame(r)).value();
    EXPECT_EQ(flowHash(fwd.flow, 0), flowHash(rev.flow, 0));
    EXPECT_NE(flowHash(fwd.flow, 0), flowHash(fwd.flow, 1));

    std::set<uint32_t> used;
    for (uint16_t port = 40000; port < 40064; ++port) {
        s.src_port = port;
        used.insert(pathForPacket(parseFrame(test::makeTcpFrame(s)).value(), 4, 0));
    }
    EXPECT_EQ(used.size(), 4u) << "64 flows should reach all 4 paths";
}

struct SplitCase {
    int ip_version;
    bool ecn;
};

class WanemGsoSplit : public ::testing::TestWithParam<SplitCase> {};

TEST_P(WanemGsoSplit, EverySegmentIsAValidStandalonePacket) {
    TcpFrameSpec s;
    s.ip_version = GetParam().ip_version;
    if (s.ip_version == 6) {
        s.src = {0xfd, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        s.dst = {0xfd, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    }
    s.ecn = GetParam().ecn;
    s.tcp_flags = 0x18 | 0x01 | (s.ecn ? 0x80 : 0);  // PSH ACK FIN (+CWR)
    s.seq = 0xfffff000u;                             // wraps inside the packet
    s.ip_id = 0xfffe;                                // wraps too
    s.payload_len = 5 * 1448 + 17;
    s.gso_size = 1448;
    const auto f = test::makeTcpFrame(s);
    const PacketInfo info = parseFrame(f).value();
    ASSERT_EQ(info.segments, 6u);
    uint64_t total = 0;
    for (uint32_t i = 0; i < info.segments; ++i) {
        std::vector<uint8_t> out(runFrameLen(info, i, 1));
        ASSERT_EQ(buildRunFrame(f, info, i, 1, out), out.size());
        const VnetHeader vh = decodeVnetHeader(out.data());
        EXPECT_EQ(vh.gso_type, kGsoNone);
        EXPECT_EQ(vh.flags & kVnetFlagNeedsCsum, kVnetFlagNeedsCsum);
        const uint8_t* ip = out.data() + kVnetHdrLen;
        const uint8_t* tcp = ip + info.l3_len;
        const uint32_t seg_payload = info.segmentPayload(i);
        total += seg_payload;
        EXPECT_EQ(be32(tcp + 4), s.seq + i * 1448u);
        const bool last = i + 1 == info.segments;
        EXPECT_EQ((tcp[13] & 0x09) != 0, last) << "PSH/FIN only on the last segment";
        EXPECT_EQ((tcp[13] & 0x10), 0x10) << "ACK on every segment";
        EXPECT_EQ((tcp[13] & 0x80) != 0, s.ecn && i == 0) << "CWR only on the first";
        if (s.ip_version == 4) {
            EXPECT_TRUE(test::ipv4HeaderChecksumValid(out));
            EXPECT_EQ(be16(ip + 4), static_cast<uint16_t>(s.ip_id + i));
        } else {
            EXPECT_EQ(be16(ip + 4), out.size() - kVnetHdrLen - 40);
        }
        for (uint32_t k = 0; k < seg_payload; ++k) {
            ASSERT_EQ(tcp[info.l4_hdr_len + k], test::patternByte(be32(tcp + 4) + k));
        }
        test::completeChecksum(out);
        EXPECT_TRUE(test::tcpChecksumValid(out)) << "segment " << i;
    }
    EXPECT_EQ(total, s.payload_len);
}

TEST_P(WanemGsoSplit, RunsStayGsoAndReassembleTheStream) {
    TcpFrameSpec s;
    s.ip_version = GetParam().ip_version;
    s.ecn = GetParam().ecn;
    s.payload_len = 44 * 1448;
    s.gso_size = 1448;
    const auto f = test::makeTcpFrame(s);
    const PacketInfo info = parseFrame(f).value();
    // Drop segments 0, 10 and 43: runs [1,10) and [11,43).
    for (auto [first, count] : {std::pair{1u, 9u}, std::pair{11u, 32u}}) {
        std::vector<uint8_t> out(runFrameLen(info, first, count));
        ASSERT_EQ(buildRunFrame(f, info, first, count, out), out.size());
        const auto sub = parseFrame(out).value();
        EXPECT_EQ(sub.kind, PacketKind::kTcpGso);
        EXPECT_EQ(sub.segments, count);
        EXPECT_EQ(sub.payload_len, count * 1448u);
        EXPECT_EQ(sub.vnet.gso_type & kGsoEcn, 0) << "ECN bit only on the run holding segment 0";
        const uint8_t* tcp = out.data() + kVnetHdrLen + info.l3_len;
        EXPECT_EQ(be32(tcp + 4), s.seq + first * 1448u);
        EXPECT_EQ(tcp[13] & 0x08, 0) << "PSH belongs to the (dropped) last segment";
        test::completeChecksum(out);
        EXPECT_TRUE(test::tcpChecksumValid(out));
        if (s.ip_version == 4) {
            EXPECT_TRUE(test::ipv4HeaderChecksumValid(out));
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Versions, WanemGsoSplit,
                         ::testing::Values(SplitCase{4, false}, SplitCase{4, true},
                                           SplitCase{6, false}, SplitCase{6, true}));

TEST(WanemGsoSplit, RefusesBadRanges) {
    TcpFrameSpec s;
    s.payload_len = 3000;
    s.gso_size = 1000;
    const auto f = test::makeTcpFrame(s);
    const PacketInfo info = parseFrame(f).value();
    std::vector<uint8_t> out(70000);
    EXPECT_EQ(buildRunFrame(f, info, 2, 2, out), 0u);
    EXPECT_EQ(buildRunFrame(f, info, 0, 0, out), 0u);
    std::vector<uint8_t> small(10);
    EXPECT_EQ(buildRunFrame(f, info, 0, 1, small), 0u);
}

}  // namespace
}  // namespace atlas::wanem
