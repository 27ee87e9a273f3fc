// Cuts a TCP GSO super-packet into smaller frames in userspace, so that loss and tail drops
// hit individual TCP segments (as on a real link) instead of a burst of ~44 segments.
//
// A "run" is a range of consecutive segments [first, first + count). Each run becomes one
// frame: a GSO frame again when count > 1 (the receiving kernel takes it like a GRO'd skb),
// a plain segment when count == 1. Splitting into runs of one segment each is full
// segmentation; splitting only at dropped segments keeps the fast path for the survivors.
//
// What changes per run, as the kernel's own tcp_gso_segment() does it:
//   * IPv4 tot_len and header checksum, and id advanced by `first` (one id per segment);
//     IPv6 payload_len;
//   * TCP seq advanced by first * gso_size; PSH and FIN only on the run holding the last
//     segment; CWR only on the run holding the first segment (gso_type ECN);
//   * the TCP checksum field is re-seeded with the pseudo-header sum for the run's length
//     and the frame keeps NEEDS_CSUM, so the receiving kernel completes the checksum.
// IPv6 packets with a routing header are split correctly, but their checksum seed uses the
// destination in the fixed header (atlas-wanem's testbeds never send such packets).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "perf/atlas-wanem/packet.h"

namespace atlas::wanem {

// TCP payload bytes in segments [first, first + count). Requires info.kind == kTcpGso and
// first + count <= info.segments.
uint32_t runPayloadLen(const PacketInfo& info, uint32_t first, uint32_t count);

// Bytes of the frame (vnet header included) that buildRunFrame() writes for this run.
size_t runFrameLen(const PacketInfo& info, uint32_t first, uint32_t count);

// Writes the frame for segments [first, first + count) of `frame` (which parseFrame() turned
// into `info`, kind kTcpGso) into `out`, which must hold runFrameLen() bytes. Returns the
// number of bytes written. Pure function: no allocation, reads only `frame`.
size_t buildRunFrame(std::span<const uint8_t> frame, const PacketInfo& info, uint32_t first,
                     uint32_t count, std::span<uint8_t> out);

// The pseudo-header seed the kernel expects in the TCP checksum field of a NEEDS_CSUM frame:
// the folded (not complemented) sum of the pseudo-header for `l4_len` bytes of TCP.
uint16_t tcpPseudoHeaderSeed(const uint8_t* ip_header, uint8_t ip_version, uint32_t l4_len);

}  // namespace atlas::wanem
