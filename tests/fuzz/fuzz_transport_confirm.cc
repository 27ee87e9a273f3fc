// Fuzz target: the receiver's confirmation as the sender reads it from the network, a frame
// header then its body (wire::decodeFrame + wire::decodeConfirm), and applied to a
// SendLedger holding frames on a few streams, as CommCore does. Every malformed or hostile
// confirmation must be a Status (never a crash, an out-of-bounds read or a frame forgotten
// that was not handed to the kernel); accepted bodies re-encode to the same bytes.
#include <cstdint>
#include <cstring>
#include <span>

#include "transport/send_ledger.h"
#include "transport/wire.h"

using namespace atlas::transport;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < wire::kFrameHeaderBytes) {
        return 0;
    }
    wire::FrameHeader h;
    if (!wire::decodeFrame(data, 0, &h).isOk() || h.type != wire::FrameType::kConfirm) {
        return 0;
    }
    const size_t body_len = std::min<size_t>(h.length, size - wire::kFrameHeaderBytes);
    std::span<const uint8_t> body(data + wire::kFrameHeaderBytes, body_len);
    wire::ConfirmBody c;
    if (!wire::decodeConfirm(body, &c).isOk()) {
        return 0;
    }
    uint8_t again[wire::kMaxConfirmBody];
    if (wire::encodeConfirm(c, again) != body.size() ||
        std::memcmp(again, body.data(), body.size()) != 0) {
        __builtin_trap();
    }
    // A ledger with 3 streams: stream 1 has 4 frames handed to the kernel (2 accepted, 2 in
    // a send), stream 2 has 2 queued, never handed over.
    static uint8_t payload[64];
    SendLedger l(3, 1 << 20, 16);
    for (int i = 0; i < 4; ++i) {
        l.assign(l.add(0, 0, 64, static_cast<uint64_t>(i) * 16, 16, payload + i * 16), 1);
    }
    l.assign(l.add(1, 1, 32, 0, 16, payload), 2);
    l.assign(l.add(1, 1, 32, 16, 16, payload + 16), 2);
    l.startOp(1, 2);
    l.finishOp(1, 0);
    l.startOp(1, 2);
    for (uint32_t i = 0; i < c.count; ++i) {
        const wire::ConfirmEntry& e = c.entries[i];
        if (e.index >= 3) {
            continue;  // the comm ignores streams it does not have
        }
        const uint64_t handed = l.handedFrames(static_cast<int>(e.index));
        SendLedger::ConfirmResult r;
        const bool ok = l.confirm(static_cast<int>(e.index), e.frames, 1, &r).isOk();
        if (ok != (e.frames <= handed)) {
            __builtin_trap();  // accepted a confirmation of frames never sent, or refused a true one
        }
    }
    l.finishOp(1, 2);
    return 0;
}
