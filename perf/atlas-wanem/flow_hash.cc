#include "perf/atlas-wanem/flow_hash.h"

#include <algorithm>

namespace atlas::wanem {
namespace {

// FNV-1a over bytes, then a murmur3-style finaliser so that tuples differing in one port
// bit spread over all paths.
struct Hasher {
    uint64_t h = 0xcbf29ce484222325ull;
    void add(const uint8_t* p, size_t n) {
        for (size_t i = 0; i < n; ++i) {
            h = (h ^ p[i]) * 0x100000001b3ull;
        }
    }
    void add16(uint16_t v) {
        const uint8_t b[2] = {static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)};
        add(b, 2);
    }
    uint32_t finish() const {
        uint64_t x = h;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdull;
        x ^= x >> 33;
        x *= 0xc4ceb9fe1a85ec53ull;
        x ^= x >> 33;
        return static_cast<uint32_t>(x);
    }
};

}  // namespace

uint32_t flowHash(const FlowKey& key, uint32_t seed) {
    // Order the two endpoints so (src, dst) and (dst, src) hash alike.
    const bool swap = std::lexicographical_compare(key.dst.begin(), key.dst.end(), key.src.begin(),
                                                   key.src.end()) ||
                      (key.src == key.dst && key.dst_port < key.src_port);
    const auto& lo_addr = swap ? key.dst : key.src;
    const auto& hi_addr = swap ? key.src : key.dst;
    const uint16_t lo_port = swap ? key.dst_port : key.src_port;
    const uint16_t hi_port = swap ? key.src_port : key.dst_port;
    Hasher h;
    const uint8_t s[4] = {static_cast<uint8_t>(seed >> 24), static_cast<uint8_t>(seed >> 16),
                          static_cast<uint8_t>(seed >> 8), static_cast<uint8_t>(seed)};
    h.add(s, 4);
    h.add(&key.ip_version, 1);
    h.add(&key.proto, 1);
    h.add(lo_addr.data(), lo_addr.size());
    h.add(hi_addr.data(), hi_addr.size());
    h.add16(lo_port);
    h.add16(hi_port);
    return h.finish();
}

uint32_t pathForPacket(const PacketInfo& info, uint32_t num_paths, uint32_t seed) {
    if (num_paths <= 1 || info.ip_version == 0) {
        return 0;
    }
    return flowHash(info.flow, seed) % num_paths;
}

}  // namespace atlas::wanem
