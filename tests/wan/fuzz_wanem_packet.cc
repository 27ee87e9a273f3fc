// libFuzzer target: atlas-wanem's frame parser and GSO segmenter on arbitrary bytes. Frames
// come from the kernel but are treated as untrusted. Beyond "no crash, no out-of-bounds"
// (ASan), it checks the segmenter's invariants: every run it builds parses back with the
// expected segment count and payload, and the runs together carry the whole payload.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "perf/atlas-wanem/flow_hash.h"
#include "perf/atlas-wanem/gso_split.h"
#include "perf/atlas-wanem/packet.h"

namespace {

void check(bool ok) {
    if (!ok) {
        __builtin_trap();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace atlas::wanem;
    if (size > 70000) {
        return 0;
    }
    const std::span<const uint8_t> frame(data, size);
    auto parsed = parseFrame(frame);
    if (!parsed) {
        check(size < kVnetHdrLen);
        return 0;
    }
    const PacketInfo& info = parsed.value();
    check(info.ip_len <= size - kVnetHdrLen);
    check(pathForPacket(info, 7, 0) < 7);
    if (info.kind != PacketKind::kTcpGso) {
        return 0;
    }
    check(info.mss > 0 && info.segments >= 1);
    check(info.headerLen() + info.payload_len == info.ip_len);
    uint64_t total = 0;
    std::vector<uint8_t> out;
    for (uint32_t first = 0; first < info.segments;) {
        // Run lengths 1..7 chosen by the input itself.
        uint32_t count = 1 + data[first % size] % 7;
        if (count > info.segments - first) {
            count = info.segments - first;
        }
        const size_t len = runFrameLen(info, first, count);
        out.assign(len, 0);
        check(buildRunFrame(frame, info, first, count, out) == len);
        const uint32_t payload = runPayloadLen(info, first, count);
        auto sub = parseFrame(out);
        check(sub.isOk());
        if (info.headerLen() + payload <= 0xffff) {
            if (count > 1) {
                check(sub->kind == PacketKind::kTcpGso);
                check(sub->segments == count);
            } else {
                check(sub->kind == PacketKind::kIp);
            }
            check(sub->payload_len == payload);
        }
        total += payload;
        first += count;
    }
    check(total == info.payload_len);
    return 0;
}
