// Fuzz target: the KV hand-off decoders (header, hello, hello reply, ack), which read bytes
// from the network on both sides. Invariants: no crash; an accepted header is consistent
// (payload size matches the shape, within the limit) and re-encodes to the same bytes.
#include <cstddef>
#include <cstdint>
#include <span>

#include "bubbletea/daemon/kv_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace atlas::bubbletea::kv;
    const std::span<const uint8_t> bytes(data, size);
    constexpr uint64_t kLimit = 1ull << 32;
    auto h = decodeHeader(bytes, kLimit);
    if (h.isOk()) {
        uint64_t expected = 0;
        if (!expectedPayloadBytes(h.value(), &expected) || expected != h.value().payload_bytes ||
            expected > kLimit) {
            __builtin_trap();
        }
        const auto again = encodeHeader(h.value());
        if (again.size() != size || !std::equal(again.begin(), again.end(), data)) {
            __builtin_trap();
        }
    }
    (void)decodeHello(bytes);
    (void)decodeReply(bytes);
    auto ack = decodeAck(bytes);
    if (ack.isOk() && ack.value().message.size() >= kAckMessageBytes) {
        __builtin_trap();
    }
    return 0;
}
