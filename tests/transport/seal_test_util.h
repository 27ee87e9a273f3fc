// Shared by the seal unit tests and the sealed-frame fuzz target: fixed session secrets and
// the reference wire loop (seal to bytes, open from bytes in pieces) over transport/seal.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "transport/seal.h"
#include "transport/wire.h"

namespace atlas::transport::seal::testing {

// A handshake's context with every byte derived from `seed` (never all zero).
inline AuthContext testContext(uint8_t seed) {
    AuthContext c;
    c.listen_id = 0x1111111111111111ull * seed;
    c.session_id = 0x0123456789abcdefull ^ seed;
    for (size_t i = 0; i < c.client_nonce.size(); ++i) {
        c.client_nonce[i] = static_cast<uint8_t>(seed + i);
        c.server_nonce[i] = static_cast<uint8_t>(0xA0 + seed + 3 * i);
    }
    return c;
}

inline SessionSecrets testSecrets(uint8_t seed = 1, std::string_view key = "atlas-test-key") {
    return std::move(SessionSecrets::derive(key, testContext(seed))).value();
}

// Seals one frame and returns its wire bytes: prefix, then payload ciphertext.
inline std::vector<uint8_t> sealToWire(StreamSealer& s, std::span<const uint8_t> header,
                                       std::span<const uint8_t> payload, bool in_place = false,
                                       SealPosition* pos = nullptr, Status* status = nullptr) {
    std::vector<uint8_t> out(s.prefixBytes() + payload.size());
    std::span<uint8_t> prefix(out.data(), s.prefixBytes());
    std::span<uint8_t> body(out.data() + s.prefixBytes(), payload.size());
    Status st;
    if (in_place) {
        std::copy(payload.begin(), payload.end(), body.begin());
        st = s.sealInPlace(header, body, prefix, pos);
    } else {
        st = s.seal(header, payload, body, prefix, pos);
    }
    if (status != nullptr) {
        *status = st;
    }
    return out;
}

// The receiver's loop for one frame at the front of `bytes`: open the prefix in place, take
// the payload length (`length`, or decoded from a 32-byte wire::FrameHeader when absent), then
// decrypt the payload in place in pieces cycling through `pieces` (0 entries mean "the rest"),
// then check its tag. *consumed is the frame's wire size when the bytes held all of it.
inline Status openFromWire(StreamOpener& o, std::span<uint8_t> bytes,
                           std::optional<uint64_t> length, std::span<const size_t> pieces,
                           size_t* consumed) {
    *consumed = 0;
    const size_t prefix = o.prefixBytes();
    if (bytes.size() < prefix) {
        return {Code::kRemote, "short prefix"};
    }
    ATLAS_RETURN_IF_ERROR(o.openPrefix(bytes.first(prefix)));
    uint64_t len = 0;
    if (length) {
        len = *length;
    } else {
        wire::FrameHeader h;
        ATLAS_RETURN_IF_ERROR(wire::decodeFrame(bytes.data(), wire::kMaxFrameLength, &h));
        len = h.length;
    }
    if (len > bytes.size() - prefix) {
        return {Code::kRemote, "short payload"};
    }
    ATLAS_RETURN_IF_ERROR(o.beginPayload(len));
    size_t off = prefix;
    size_t k = 0;
    while (o.remaining() > 0) {
        size_t n = pieces.empty() ? 0 : pieces[k++ % pieces.size()];
        n = n == 0 ? o.remaining() : std::min<uint64_t>(n, o.remaining());
        ATLAS_RETURN_IF_ERROR(o.decrypt(bytes.subspan(off, n)));
        off += n;
    }
    ATLAS_RETURN_IF_ERROR(o.finish());
    *consumed = off;
    return Status::ok();
}

// ---- fuzz input, stream mode (tests/transport/fuzz_transport_seal.cc): the bytes one stream
// delivers, after a 3-byte preamble: [0] mode (even), [1] piece size / 61 (0 = whole payload),
// [2] frames_per_key (0 = the default). Frames carry 32-byte wire::FrameHeaders.
constexpr size_t kStreamPreamble = 3;

inline Limits streamInputLimits(uint8_t selector) {
    Limits l;
    if (selector != 0) {
        l.frames_per_key = selector;
    }
    return l;
}

struct StreamDecode {
    size_t frames = 0;    // opened and authenticated
    size_t consumed = 0;  // bytes of those frames
    Status status;        // why decoding stopped (OK: the input ended at a frame boundary)
};

// The receiver's loop over one stream: opens frames until the bytes end or one fails.
inline StreamDecode openStreamInput(std::span<const uint8_t> input) {
    StreamDecode d;
    if (input.size() < kStreamPreamble) {
        return d;
    }
    auto rx = StreamOpener::create(testSecrets(), Direction::kConnectorToListener, 1,
                                   wire::kFrameHeaderBytes, streamInputLimits(input[2]));
    const std::vector<size_t> pieces = {static_cast<size_t>(input[1]) * 61};
    std::vector<uint8_t> bytes(input.begin() + kStreamPreamble, input.end());
    std::span<uint8_t> rest(bytes);
    while (!rest.empty()) {
        size_t used = 0;
        d.status = openFromWire(*rx, rest, std::nullopt, pieces, &used);
        if (!d.status.isOk()) {
            break;
        }
        ++d.frames;
        d.consumed += used;
        rest = rest.subspan(used);
    }
    return d;
}

}  // namespace atlas::transport::seal::testing
