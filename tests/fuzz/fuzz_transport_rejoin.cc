// Fuzz target: the rejoin handshake as the rejoin listener and the dialler read it from the
// network (wire::decodeHsHeader, then the RejoinHello / RejoinAck / RejoinProof bodies).
// Every parse returns a Status and never reads past the bytes; accepted messages re-encode
// to exactly the bytes parsed, and have exactly the fixed sizes the readers rely on (they
// read precisely one message, never the stream bytes behind it).
#include <cstdint>
#include <cstring>
#include <span>

#include "transport/wire.h"

using namespace atlas::transport;

template <typename Msg>
static void roundTrip(std::span<const uint8_t> body, size_t exact_size) {
    Msg m;
    if (!wire::decode(body, &m).isOk()) {
        return;
    }
    uint8_t buf[wire::kHsMaxMessage];
    const size_t n = wire::encode(m, buf);
    if (n != exact_size || n != wire::kHsHeaderBytes + body.size() ||
        std::memcmp(buf + wire::kHsHeaderBytes, body.data(), body.size()) != 0) {
        __builtin_trap();
    }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::span<const uint8_t> all(data, size);
    wire::HsHeader h;
    if (!wire::decodeHsHeader(all, &h).isOk() || size < wire::kHsHeaderBytes + h.body_len) {
        return 0;
    }
    auto body = all.subspan(wire::kHsHeaderBytes, h.body_len);
    switch (h.type) {
        case wire::HsType::kRejoinHello:
            roundTrip<wire::RejoinHello>(body, wire::kRejoinHelloBytes);
            break;
        case wire::HsType::kRejoinAck:
            roundTrip<wire::RejoinAck>(body, wire::kRejoinAckBytes);
            break;
        case wire::HsType::kRejoinProof:
            roundTrip<wire::RejoinProof>(body, wire::kRejoinProofBytes);
            break;
        default:
            break;
    }
    return 0;
}
