// Frames as atlas-wanem exchanges them with TUN devices opened with IFF_TUN | IFF_NO_PI |
// IFF_VNET_HDR: a 10-byte virtio_net_hdr followed by one IPv4 or IPv6 packet, which may be a
// TCP GSO "super-packet" of up to 64 KB when TUNSETOFFLOAD enabled TSO.
//
// The bytes come from the kernel but are treated as untrusted: parseFrame() never reads
// outside the frame, and anything it cannot classify is forwarded unchanged (kOpaque) rather
// than dropped, so an unexpected protocol never silently blackholes the link.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "atlas/common/status.h"

namespace atlas::wanem {

// virtio_net_hdr without num_buffers (TUN's default TUNSETVNETHDRSZ of 10). The fields are
// little-endian: TUN uses the host's byte order unless TUNSETVNETBE is set, and atlas-wanem
// never sets it; encode/decode below read and write little-endian explicitly.
inline constexpr size_t kVnetHdrLen = 10;
inline constexpr uint8_t kVnetFlagNeedsCsum = 1;  // csum_start/offset name a partial checksum
inline constexpr uint8_t kGsoNone = 0;
inline constexpr uint8_t kGsoTcpV4 = 1;
inline constexpr uint8_t kGsoUdp = 3;
inline constexpr uint8_t kGsoTcpV6 = 4;
inline constexpr uint8_t kGsoEcn = 0x80;  // the first segment carries CWR
inline constexpr uint16_t kTcpCheckOffset = 16;

struct VnetHeader {
    uint8_t flags = 0;
    uint8_t gso_type = kGsoNone;  // kGso* plus optionally kGsoEcn
    uint16_t hdr_len = 0;         // bytes of L3+L4 headers (a hint; the kernel recomputes)
    uint16_t gso_size = 0;        // payload bytes per segment (MSS) of a GSO packet
    uint16_t csum_start = 0;      // offset from the IP header to where checksumming starts
    uint16_t csum_offset = 0;     // offset from csum_start to the checksum field
};

VnetHeader decodeVnetHeader(const uint8_t* p);
void encodeVnetHeader(const VnetHeader& h, uint8_t* p);

// The flow identity used to pin a flow to one emulated path. Addresses are stored in 16
// bytes (IPv4 in the first 4). Ports are zero for protocols without ports and for non-first
// IPv4 fragments.
struct FlowKey {
    uint8_t ip_version = 0;
    uint8_t proto = 0;
    uint16_t src_port = 0;
    uint16_t dst_port = 0;
    std::array<uint8_t, 16> src{};
    std::array<uint8_t, 16> dst{};
};

enum class PacketKind : uint8_t {
    kOpaque,  // not IPv4/IPv6 or headers that do not parse: forwarded as one unit, unchanged
    kIp,      // an IP packet that is not a splittable TCP GSO packet (one wire segment)
    kTcpGso,  // a TCP GSO packet with >= 1 segment; gso_split.h can cut it at gso_size
};

// What parseFrame() learned about one frame. Offsets are relative to the IP header (that is,
// to frame.data() + kVnetHdrLen).
struct PacketInfo {
    VnetHeader vnet;
    PacketKind kind = PacketKind::kOpaque;
    uint8_t ip_version = 0;
    uint32_t ip_len = 0;       // bytes of the IP packet (header + payload) in the frame
    uint16_t l3_len = 0;       // IP header including IPv6 extension headers
    uint16_t l4_hdr_len = 0;   // TCP header with options (TCP only, else 0)
    uint32_t payload_len = 0;  // TCP payload bytes (TCP only, else 0)
    uint32_t segments = 1;     // wire segments this frame stands for
    uint16_t mss = 0;          // payload bytes per segment (kTcpGso only; > 0)
    FlowKey flow;

    uint32_t headerLen() const { return uint32_t{l3_len} + l4_hdr_len; }
    // Payload bytes of segment i (0 <= i < segments) of a kTcpGso packet.
    uint32_t segmentPayload(uint32_t i) const {
        const uint32_t start = i * uint32_t{mss};
        const uint32_t rest = payload_len - start;
        return rest < mss ? rest : mss;
    }
    // IP bytes segment i occupies on the wire once segmented (headers repeated per segment).
    uint32_t segmentIpBytes(uint32_t i) const {
        return kind == PacketKind::kTcpGso ? headerLen() + segmentPayload(i) : ip_len;
    }
};

// Classifies one frame (vnet header + IP packet). Fails only when the frame is shorter than
// the vnet header, which cannot be forwarded at all. Thread-safe, allocation-free.
Result<PacketInfo> parseFrame(std::span<const uint8_t> frame);

// One's-complement checksum helpers (RFC 1071), big-endian 16-bit words.
uint32_t checksumAdd(uint32_t sum, const uint8_t* data, size_t len);
uint16_t checksumFold(uint32_t sum);

}  // namespace atlas::wanem
