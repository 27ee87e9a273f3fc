// Builds frames as a TUN device with IFF_VNET_HDR hands them out (vnet header + IP + TCP),
// for the atlas-wanem unit tests. Checksum code here is written independently of the
// emulator's so the tests check it rather than repeat it.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace atlas::wanem::test {

struct TcpFrameSpec {
    int ip_version = 4;
    std::array<uint8_t, 16> src{10, 1, 0, 1};
    std::array<uint8_t, 16> dst{10, 2, 0, 1};
    uint16_t src_port = 40000;
    uint16_t dst_port = 5201;
    uint32_t seq = 1000;
    uint16_t ip_id = 7;
    uint8_t tcp_flags = 0x18;  // PSH | ACK
    uint32_t payload_len = 0;
    uint16_t gso_size = 0;         // 0: not a GSO frame
    bool ecn = false;              // gso_type carries the ECN bit
    uint8_t tcp_options_len = 12;  // timestamps, as Linux sends them
};

// Payload byte i of a frame built with `seq` is patternByte(seq + i): a split segment can be
// checked against the stream position it claims.
inline uint8_t patternByte(uint32_t stream_pos) {
    return static_cast<uint8_t>(stream_pos * 131u + 7u);
}

std::vector<uint8_t> makeTcpFrame(const TcpFrameSpec& spec);
std::vector<uint8_t> makeUdpFrame(uint16_t payload_len);

// Does what the receiving kernel (or a NIC) does for a NEEDS_CSUM frame: sums from
// csum_start to the end and stores the complement at csum_start + csum_offset.
void completeChecksum(std::vector<uint8_t>& frame);

// True when the TCP checksum of the (completed) frame verifies against its pseudo-header.
bool tcpChecksumValid(const std::vector<uint8_t>& frame);
// True when the IPv4 header checksum verifies.
bool ipv4HeaderChecksumValid(const std::vector<uint8_t>& frame);

}  // namespace atlas::wanem::test
