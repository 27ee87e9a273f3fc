#include "perf/atlas-wanem/gso_split.h"

#include <cstring>

namespace atlas::wanem {
namespace {

constexpr uint8_t kTcpFin = 0x01;
constexpr uint8_t kTcpPsh = 0x08;
constexpr uint8_t kTcpCwr = 0x80;
constexpr uint8_t kProtoTcp = 6;

uint16_t be16(const uint8_t* p) {
    return static_cast<uint16_t>((p[0] << 8) | p[1]);
}
uint32_t be32(const uint8_t* p) {
    return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
void putBe16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}
void putBe32(uint8_t* p, uint32_t v) {
    p[0] = static_cast<uint8_t>(v >> 24);
    p[1] = static_cast<uint8_t>(v >> 16);
    p[2] = static_cast<uint8_t>(v >> 8);
    p[3] = static_cast<uint8_t>(v);
}

}  // namespace

uint32_t runPayloadLen(const PacketInfo& info, uint32_t first, uint32_t count) {
    const uint32_t start = first * uint32_t{info.mss};
    uint64_t end = uint64_t{first + count} * info.mss;
    if (end > info.payload_len) {
        end = info.payload_len;
    }
    return end > start ? static_cast<uint32_t>(end - start) : 0;
}

size_t runFrameLen(const PacketInfo& info, uint32_t first, uint32_t count) {
    return kVnetHdrLen + info.headerLen() + runPayloadLen(info, first, count);
}

uint16_t tcpPseudoHeaderSeed(const uint8_t* ip_header, uint8_t ip_version, uint32_t l4_len) {
    uint32_t sum = 0;
    if (ip_version == 4) {
        sum = checksumAdd(sum, ip_header + 12, 8);  // source and destination address
        sum += kProtoTcp;
        sum += l4_len & 0xffffu;
        sum += l4_len >> 16;
    } else {
        sum = checksumAdd(sum, ip_header + 8, 32);
        sum += l4_len >> 16;
        sum += l4_len & 0xffffu;
        sum += kProtoTcp;
    }
    return checksumFold(sum);
}

size_t buildRunFrame(std::span<const uint8_t> frame, const PacketInfo& info, uint32_t first,
                     uint32_t count, std::span<uint8_t> out) {
    const uint32_t hdr = info.headerLen();
    const uint32_t payload = runPayloadLen(info, first, count);
    const size_t len = kVnetHdrLen + hdr + payload;
    if (out.size() < len || info.kind != PacketKind::kTcpGso || count == 0 ||
        first + count > info.segments) {
        return 0;
    }
    uint8_t* o = out.data();
    const uint8_t* ip_in = frame.data() + kVnetHdrLen;
    uint8_t* ip = o + kVnetHdrLen;
    uint8_t* tcp = ip + info.l3_len;

    VnetHeader vh;
    vh.flags = kVnetFlagNeedsCsum;
    vh.csum_start = info.l3_len;
    vh.csum_offset = kTcpCheckOffset;
    const bool still_gso = count > 1;
    if (still_gso) {
        vh.gso_type = info.vnet.gso_type;
        if (first > 0) {
            vh.gso_type &= static_cast<uint8_t>(~kGsoEcn);
        }
        vh.gso_size = info.mss;
        vh.hdr_len = static_cast<uint16_t>(hdr);
    }
    encodeVnetHeader(vh, o);
    std::memcpy(ip, ip_in, hdr);
    std::memcpy(ip + hdr, ip_in + hdr + size_t{first} * info.mss, payload);

    const uint32_t ip_len = hdr + payload;
    if (info.ip_version == 4) {
        putBe16(ip + 2, ip_len > 0xffff ? 0 : static_cast<uint16_t>(ip_len));
        putBe16(ip + 4, static_cast<uint16_t>(be16(ip_in + 4) + first));
        putBe16(ip + 10, 0);
        putBe16(ip + 10, static_cast<uint16_t>(~checksumFold(checksumAdd(0, ip, info.l3_len))));
    } else {
        const uint32_t pl = ip_len - 40;
        putBe16(ip + 4, pl > 0xffff ? 0 : static_cast<uint16_t>(pl));
    }
    putBe32(tcp + 4, be32(tcp + 4) + first * uint32_t{info.mss});
    uint8_t flags = tcp[13];
    if (first + count < info.segments) {
        flags &= static_cast<uint8_t>(~(kTcpFin | kTcpPsh));
    }
    if (first > 0) {
        flags &= static_cast<uint8_t>(~kTcpCwr);
    }
    tcp[13] = flags;
    putBe16(tcp + kTcpCheckOffset,
            tcpPseudoHeaderSeed(ip, info.ip_version, uint32_t{info.l4_hdr_len} + payload));
    return len;
}

}  // namespace atlas::wanem
