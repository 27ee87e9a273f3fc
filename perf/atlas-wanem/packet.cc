#include "perf/atlas-wanem/packet.h"

#include <cstring>

namespace atlas::wanem {
namespace {

constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoSctp = 132;
constexpr uint8_t kProtoUdpLite = 136;
constexpr size_t kIpv4MinHdr = 20;
constexpr size_t kIpv6Hdr = 40;
constexpr size_t kTcpMinHdr = 20;
// IPv6 extension headers walked before giving up on finding the L4 header.
constexpr int kMaxIpv6ExtHeaders = 8;

uint16_t be16(const uint8_t* p) {
    return static_cast<uint16_t>((p[0] << 8) | p[1]);
}
uint16_t le16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
void putLe16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
}

bool hasPorts(uint8_t proto) {
    return proto == kProtoTcp || proto == kProtoUdp || proto == kProtoSctp ||
           proto == kProtoUdpLite;
}

// Fills l3_len, flow.proto and the addresses; returns false when the IP header is unusable.
// `ports_ok` is cleared for fragments whose L4 header is not in this packet.
bool parseIpv4(const uint8_t* ip, size_t n, bool gso, PacketInfo& info, bool& ports_ok) {
    if (n < kIpv4MinHdr) {
        return false;
    }
    const size_t ihl = size_t{ip[0] & 0x0fu} * 4;
    if (ihl < kIpv4MinHdr || ihl > n) {
        return false;
    }
    size_t tot_len = be16(ip + 2);
    if (tot_len == 0 && gso) {
        tot_len = n;  // BIG TCP style: the length lives in the skb, not the header
    }
    if (tot_len < ihl || tot_len > n) {
        return false;
    }
    info.ip_version = 4;
    info.ip_len = static_cast<uint32_t>(tot_len);
    info.l3_len = static_cast<uint16_t>(ihl);
    info.flow.ip_version = 4;
    info.flow.proto = ip[9];
    std::memcpy(info.flow.src.data(), ip + 12, 4);
    std::memcpy(info.flow.dst.data(), ip + 16, 4);
    const uint16_t frag = be16(ip + 6);
    ports_ok = (frag & 0x1fffu) == 0 && (frag & 0x2000u) == 0;
    return true;
}

bool parseIpv6(const uint8_t* ip, size_t n, bool gso, PacketInfo& info, bool& ports_ok) {
    if (n < kIpv6Hdr) {
        return false;
    }
    size_t ip_len = kIpv6Hdr + be16(ip + 4);
    if (ip_len == kIpv6Hdr && gso) {
        ip_len = n;  // jumbogram-style GSO packet without a length in the header
    }
    if (ip_len > n) {
        return false;
    }
    uint8_t next = ip[6];
    size_t off = kIpv6Hdr;
    ports_ok = true;
    for (int i = 0; i < kMaxIpv6ExtHeaders; ++i) {
        if (next == 0 || next == 43 || next == 60 || next == 51) {  // HbH, routing, dst, AH
            if (off + 2 > ip_len) {
                return false;
            }
            const size_t len =
                next == 51 ? (size_t{ip[off + 1]} + 2) * 4 : (size_t{ip[off + 1]} + 1) * 8;
            next = ip[off];
            off += len;
        } else if (next == 44) {  // fragment header: ports only in an unfragmented packet
            if (off + 8 > ip_len) {
                return false;
            }
            const uint16_t frag = be16(ip + off + 2);
            ports_ok = (frag & 0xfff9u) == 0;
            next = ip[off];
            off += 8;
        } else {
            break;
        }
    }
    if (off > ip_len || off > 0xffff) {
        return false;
    }
    info.ip_version = 6;
    info.ip_len = static_cast<uint32_t>(ip_len);
    info.l3_len = static_cast<uint16_t>(off);
    info.flow.ip_version = 6;
    info.flow.proto = next;
    std::memcpy(info.flow.src.data(), ip + 8, 16);
    std::memcpy(info.flow.dst.data(), ip + 24, 16);
    return true;
}

}  // namespace

VnetHeader decodeVnetHeader(const uint8_t* p) {
    VnetHeader h;
    h.flags = p[0];
    h.gso_type = p[1];
    h.hdr_len = le16(p + 2);
    h.gso_size = le16(p + 4);
    h.csum_start = le16(p + 6);
    h.csum_offset = le16(p + 8);
    return h;
}

void encodeVnetHeader(const VnetHeader& h, uint8_t* p) {
    p[0] = h.flags;
    p[1] = h.gso_type;
    putLe16(p + 2, h.hdr_len);
    putLe16(p + 4, h.gso_size);
    putLe16(p + 6, h.csum_start);
    putLe16(p + 8, h.csum_offset);
}

Result<PacketInfo> parseFrame(std::span<const uint8_t> frame) {
    if (frame.size() < kVnetHdrLen) {
        return Status(Code::kInvalidArgument, "frame shorter than the virtio_net_hdr");
    }
    PacketInfo info;
    info.vnet = decodeVnetHeader(frame.data());
    const uint8_t* ip = frame.data() + kVnetHdrLen;
    const size_t n = frame.size() - kVnetHdrLen;
    info.ip_len = static_cast<uint32_t>(n);
    if (n == 0) {
        return info;
    }
    const uint8_t gso = info.vnet.gso_type & static_cast<uint8_t>(~kGsoEcn);
    bool ports_ok = false;
    PacketInfo parsed = info;
    const uint8_t version = ip[0] >> 4;
    bool ok = false;
    if (version == 4) {
        ok = parseIpv4(ip, n, gso != kGsoNone, parsed, ports_ok);
    } else if (version == 6) {
        ok = parseIpv6(ip, n, gso != kGsoNone, parsed, ports_ok);
    }
    if (!ok) {
        return info;  // opaque: forwarded unchanged
    }
    info = parsed;
    info.kind = PacketKind::kIp;
    const uint8_t proto = info.flow.proto;
    const size_t l4 = info.l3_len;
    if (ports_ok && hasPorts(proto) && l4 + 4 <= info.ip_len) {
        info.flow.src_port = be16(ip + l4);
        info.flow.dst_port = be16(ip + l4 + 2);
    }
    bool tcp_ok = false;
    if (proto == kProtoTcp && ports_ok && l4 + kTcpMinHdr <= info.ip_len) {
        const size_t doff = static_cast<size_t>(ip[l4 + 12] >> 4) * 4;
        if (doff >= kTcpMinHdr && l4 + doff <= info.ip_len) {
            tcp_ok = true;
            info.l4_hdr_len = static_cast<uint16_t>(doff);
            info.payload_len = static_cast<uint32_t>(info.ip_len - l4 - doff);
        }
    }
    if (gso == kGsoNone) {
        return info;
    }
    // A GSO packet: only TCP of the matching IP version can be cut at gso_size here. Anything
    // else stays one opaque unit so the kernel on the far side still receives what it sent.
    const bool tcp_gso =
        (gso == kGsoTcpV4 && info.ip_version == 4) || (gso == kGsoTcpV6 && info.ip_version == 6);
    if (!tcp_gso || !tcp_ok || info.vnet.gso_size == 0) {
        info.kind = PacketKind::kOpaque;
        info.l4_hdr_len = 0;
        info.payload_len = 0;
        return info;
    }
    info.kind = PacketKind::kTcpGso;
    info.mss = info.vnet.gso_size;
    const uint32_t segs = (info.payload_len + info.mss - 1) / info.mss;
    info.segments = segs == 0 ? 1 : segs;
    return info;
}

uint32_t checksumAdd(uint32_t sum, const uint8_t* data, size_t len) {
    size_t i = 0;
    for (; i + 1 < len; i += 2) {
        sum += static_cast<uint32_t>((data[i] << 8) | data[i + 1]);
        if (sum >= 0x80000000u) {
            sum = (sum & 0xffffu) + (sum >> 16);
        }
    }
    if (i < len) {
        sum += static_cast<uint32_t>(data[i] << 8);
    }
    return sum;
}

uint16_t checksumFold(uint32_t sum) {
    while (sum >> 16) {
        sum = (sum & 0xffffu) + (sum >> 16);
    }
    return static_cast<uint16_t>(sum);
}

}  // namespace atlas::wanem
