// Fuzz target: the sealed-frame decoder (transport/seal.h StreamOpener, with the 32-byte
// wire::FrameHeader decoded from each opened prefix). Input byte 0 picks the mode:
//   even: stream mode. The rest is a preamble and the bytes one stream delivers
//         (tests/transport/seal_test_util.h, openStreamInput); frames are opened until one fails.
//         Nothing may crash or read out of bounds, and a frame counts as opened only if it
//         authenticated. Seeds hold validly sealed frames, so mutations reach past the tags.
//   odd:  round-trip property. Records of 4 bytes {u16 payload length (mod 4097), piece byte,
//         tamper byte} drive a sealer and an opener of one stream ([1] = frames_per_key, 0 =
//         default): each frame must open iff it was not tampered with, and give back exactly
//         the plaintext; a tampered frame must fail (then the stream is dead and the run ends).
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "tests/transport/seal_test_util.h"
#include "transport/seal.h"
#include "transport/wire.h"

using namespace atlas::transport;
using namespace atlas::transport::seal;

namespace {

void check(bool ok) {
    if (!ok) {
        __builtin_trap();
    }
}

void roundTrip(std::span<const uint8_t> in) {
    if (in.size() < 2) {
        return;
    }
    static const SessionSecrets secrets = testing::testSecrets();
    const Limits limits = testing::streamInputLimits(in[1]);
    auto tx = StreamSealer::create(secrets, Direction::kListenerToConnector, 3,
                                   wire::kFrameHeaderBytes, limits);
    auto rx = StreamOpener::create(secrets, Direction::kListenerToConnector, 3,
                                   wire::kFrameHeaderBytes, limits);
    check(tx.isOk() && rx.isOk());
    in = in.subspan(2);
    for (uint32_t seq = 0; in.size() >= 4; ++seq, in = in.subspan(4)) {
        const size_t len = (in[0] | (in[1] << 8)) % 4097;
        const std::vector<size_t> pieces = {in[2]};
        std::vector<uint8_t> plain(len);
        for (size_t i = 0; i < len; ++i) {
            plain[i] = static_cast<uint8_t>(seq * 31 + i);
        }
        uint8_t header[wire::kFrameHeaderBytes];
        wire::encodeFrame({wire::FrameType::kData, seq, static_cast<uint32_t>(len), len, 0},
                          header);
        atlas::Status st;
        auto w = testing::sealToWire(*tx, header, plain, (seq & 1) != 0, nullptr, &st);
        check(st.isOk());
        const bool tamper = in[3] != 0;
        if (tamper) {
            w[(in[3] * 7919u + seq) % w.size()] ^= static_cast<uint8_t>(1u << (in[3] % 8));
        }
        size_t used = 0;
        st = testing::openFromWire(*rx, w, std::nullopt, pieces, &used);
        if (tamper) {
            // A flipped length field can also make the frame too long for the bytes at hand.
            check(!st.isOk());
            return;
        }
        check(st.isOk() && used == w.size());
        check(std::memcmp(w.data(), header, sizeof(header)) == 0);
        check(len == 0 || std::memcmp(w.data() + rx->prefixBytes(), plain.data(), len) == 0);
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) {
        return 0;
    }
    std::span<const uint8_t> in(data, size);
    if ((data[0] & 1) == 0) {
        const testing::StreamDecode d = testing::openStreamInput(in);
        check(d.consumed <= size);
        check(d.frames == 0 || d.consumed >= d.frames * prefixBytes(wire::kFrameHeaderBytes));
    } else {
        roundTrip(in);
    }
    return 0;
}
