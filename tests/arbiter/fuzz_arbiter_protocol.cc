// libFuzzer target: the arbitration protocol decoder (arbiter/protocol.h) on arbitrary bytes,
// fed in two pieces to exercise incremental framing. Property: whatever decodes re-encodes
// to a frame that decodes to identical bytes (the codec is canonical), and nothing crashes.
#include <cstdint>
#include <cstdlib>

#include "arbiter/protocol.h"

namespace {

void drain(atlas::arbiter::Decoder& d) {
    for (int i = 0; i < 64; ++i) {
        auto r = d.next();
        if (!r.isOk() || !r.value().has_value()) {
            return;
        }
        const auto once = atlas::arbiter::encode(*r.value());
        atlas::arbiter::Decoder again;
        again.feed(once.data(), once.size());
        auto r2 = again.next();
        if (!r2.isOk() || !r2.value().has_value() || atlas::arbiter::encode(*r2.value()) != once) {
            std::abort();
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    atlas::arbiter::Decoder d;
    const size_t half = size / 2;
    d.feed(data, half);
    drain(d);
    d.feed(data + half, size - half);
    drain(d);
    return 0;
}
