#include "tests/wan/frame_builder.h"

#include <cstring>

namespace atlas::wanem::test {
namespace {

constexpr size_t kVnet = 10;

uint32_t sum16(const uint8_t* p, size_t n, uint32_t acc = 0) {
    for (size_t i = 0; i < n; ++i) {
        acc += (i % 2 == 0) ? uint32_t{p[i]} << 8 : p[i];
    }
    return acc;
}
uint16_t fold(uint32_t s) {
    while (s > 0xffff) {
        s = (s & 0xffff) + (s >> 16);
    }
    return static_cast<uint16_t>(s);
}
void put16(uint8_t* p, uint32_t v) {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}
void put32(uint8_t* p, uint32_t v) {
    put16(p, v >> 16);
    put16(p + 2, v & 0xffff);
}
uint16_t get16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] << 8 | p[1]);
}

uint32_t pseudoSum(const uint8_t* ip, int version, uint32_t l4_len) {
    uint32_t s = 0;
    if (version == 4) {
        s = sum16(ip + 12, 8);
    } else {
        s = sum16(ip + 8, 32);
    }
    return s + 6 + (l4_len >> 16) + (l4_len & 0xffff);
}

}  // namespace

std::vector<uint8_t> makeTcpFrame(const TcpFrameSpec& spec) {
    const size_t l3 = spec.ip_version == 4 ? 20 : 40;
    const size_t l4 = 20 + spec.tcp_options_len;
    std::vector<uint8_t> f(kVnet + l3 + l4 + spec.payload_len, 0);
    uint8_t* ip = f.data() + kVnet;
    uint8_t* tcp = ip + l3;
    const uint32_t ip_len = static_cast<uint32_t>(l3 + l4 + spec.payload_len);
    if (spec.ip_version == 4) {
        ip[0] = 0x45;
        put16(ip + 2, ip_len);
        put16(ip + 4, spec.ip_id);
        put16(ip + 6, 0x4000);  // DF
        ip[8] = 64;
        ip[9] = 6;
        std::memcpy(ip + 12, spec.src.data(), 4);
        std::memcpy(ip + 16, spec.dst.data(), 4);
        put16(ip + 10, static_cast<uint16_t>(~fold(sum16(ip, 20))));
    } else {
        ip[0] = 0x60;
        put16(ip + 4, ip_len - 40);
        ip[6] = 6;
        ip[7] = 64;
        std::memcpy(ip + 8, spec.src.data(), 16);
        std::memcpy(ip + 24, spec.dst.data(), 16);
    }
    put16(tcp, spec.src_port);
    put16(tcp + 2, spec.dst_port);
    put32(tcp + 4, spec.seq);
    put32(tcp + 8, 555);
    tcp[12] = static_cast<uint8_t>((l4 / 4) << 4);
    tcp[13] = spec.tcp_flags;
    put16(tcp + 14, 65535);
    for (size_t i = 20; i < l4; ++i) {
        tcp[i] = 1;  // NOP options
    }
    for (uint32_t i = 0; i < spec.payload_len; ++i) {
        tcp[l4 + i] = patternByte(spec.seq + i);
    }
    // NEEDS_CSUM: the checksum field holds the folded pseudo-header sum, as Linux TSO does.
    put16(tcp + 16,
          fold(pseudoSum(ip, spec.ip_version, static_cast<uint32_t>(l4 + spec.payload_len))));
    f[0] = 1;  // NEEDS_CSUM
    if (spec.gso_size > 0) {
        f[1] = static_cast<uint8_t>((spec.ip_version == 4 ? 1 : 4) | (spec.ecn ? 0x80 : 0));
        const auto hdr = static_cast<uint16_t>(l3 + l4);
        f[2] = static_cast<uint8_t>(hdr);
        f[3] = static_cast<uint8_t>(hdr >> 8);
        f[4] = static_cast<uint8_t>(spec.gso_size);
        f[5] = static_cast<uint8_t>(spec.gso_size >> 8);
    }
    f[6] = static_cast<uint8_t>(l3);
    f[8] = 16;
    return f;
}

std::vector<uint8_t> makeUdpFrame(uint16_t payload_len) {
    std::vector<uint8_t> f(kVnet + 28 + payload_len, 0);
    uint8_t* ip = f.data() + kVnet;
    ip[0] = 0x45;
    put16(ip + 2, 28u + payload_len);
    ip[8] = 64;
    ip[9] = 17;
    const uint8_t src[4] = {10, 1, 0, 1}, dst[4] = {10, 2, 0, 1};
    std::memcpy(ip + 12, src, 4);
    std::memcpy(ip + 16, dst, 4);
    put16(ip + 10, static_cast<uint16_t>(~fold(sum16(ip, 20))));
    put16(ip + 20, 1234);
    put16(ip + 22, 4321);
    put16(ip + 24, 8u + payload_len);
    return f;
}

void completeChecksum(std::vector<uint8_t>& frame) {
    const size_t start = kVnet + (frame[6] | frame[7] << 8);
    const size_t off = frame[8] | frame[9] << 8;
    const uint16_t c =
        static_cast<uint16_t>(~fold(sum16(frame.data() + start, frame.size() - start)));
    put16(frame.data() + start + off, c);
}

bool tcpChecksumValid(const std::vector<uint8_t>& frame) {
    const uint8_t* ip = frame.data() + kVnet;
    const int version = ip[0] >> 4;
    const size_t l3 = version == 4 ? size_t{ip[0] & 15u} * 4 : 40;
    const size_t l4_len = frame.size() - kVnet - l3;
    const uint32_t s =
        pseudoSum(ip, version, static_cast<uint32_t>(l4_len)) + sum16(ip + l3, l4_len);
    return fold(s) == 0xffff;
}

bool ipv4HeaderChecksumValid(const std::vector<uint8_t>& frame) {
    const uint8_t* ip = frame.data() + kVnet;
    return fold(sum16(ip, size_t{ip[0] & 15u} * 4)) == 0xffff &&
           get16(ip + 2) == frame.size() - kVnet;
}

}  // namespace atlas::wanem::test
