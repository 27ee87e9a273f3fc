// Fuzz target: every transport parser of peer bytes (connection handle, handshake header and
// bodies, data frame header). Each must return a Status, never read out of bounds, and
// accept only what re-encodes to the same bytes.
#include <cstdint>
#include <cstring>
#include <span>

#include "transport/wire.h"

using namespace atlas::transport;

template <typename Msg>
static void roundTrip(std::span<const uint8_t> body) {
    Msg m;
    if (!wire::decode(body, &m).isOk()) {
        return;
    }
    uint8_t buf[wire::kHsMaxMessage];
    const size_t n = wire::encode(m, buf);
    // Accepted bodies re-encode to exactly the bytes we parsed.
    if (n != wire::kHsHeaderBytes + body.size() ||
        std::memcmp(buf + wire::kHsHeaderBytes, body.data(), body.size()) != 0) {
        __builtin_trap();
    }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size >= 128) {
        wire::HandleInfo info;
        (void)wire::decodeHandle(data, &info);
    }
    if (size >= wire::kFrameHeaderBytes) {
        wire::FrameHeader f;
        if (wire::decodeFrame(data, 1u << 20, &f).isOk()) {
            // A data frame's range lies inside its message; the control frames (confirmation,
            // goodbye, abort) carry no range, and a confirmation's length is its body's.
            if (f.type == wire::FrameType::kData &&
                (f.offset > f.total || f.length > f.total - f.offset)) {
                __builtin_trap();  // validation let an out-of-range frame through
            }
            if (f.type != wire::FrameType::kData && (f.total != 0 || f.offset != 0)) {
                __builtin_trap();  // a control frame with a range
            }
        }
    }
    wire::HsHeader h;
    std::span<const uint8_t> all(data, size);
    if (!wire::decodeHsHeader(all, &h).isOk()) {
        return 0;
    }
    if (size < wire::kHsHeaderBytes + h.body_len) {
        return 0;
    }
    auto body = all.subspan(wire::kHsHeaderBytes, h.body_len);
    switch (h.type) {
        case wire::HsType::kHello:
            roundTrip<wire::Hello>(body);
            break;
        case wire::HsType::kHelloAck:
            roundTrip<wire::HelloAck>(body);
            break;
        case wire::HsType::kConfig:
            roundTrip<wire::Config>(body);
            break;
        case wire::HsType::kDataHello:
            roundTrip<wire::DataHello>(body);
            break;
        case wire::HsType::kReady:
            roundTrip<wire::Ready>(body);
            break;
        default:  // the rejoin messages: fuzz_transport_rejoin
            break;
    }
    return 0;
}
