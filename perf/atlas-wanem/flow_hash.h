// Pins each transport flow to one emulated path, like ECMP hashing on a real WAN.
//
// The hash is symmetric: a flow's data (A->B) and its ACKs (B->A) map to the same path index,
// so each TCP connection sees one consistent RTT. Packets without ports (ICMP, fragments)
// hash on addresses and protocol only.
#pragma once

#include <cstdint>

#include "perf/atlas-wanem/packet.h"

namespace atlas::wanem {

// 32-bit hash of the canonicalised 5-tuple, mixed with `seed` (change the seed to get a
// different flow-to-path assignment). Pure.
uint32_t flowHash(const FlowKey& key, uint32_t seed);

// The path in [0, num_paths) that carries this frame. Non-IP frames go to path 0.
uint32_t pathForPacket(const PacketInfo& info, uint32_t num_paths, uint32_t seed);

}  // namespace atlas::wanem
