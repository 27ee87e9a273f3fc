// Fuzz target: arbitrary bytes through encode and decode of a fixed byte-level BPE tokenizer
// (tokenizer_fuzz_util.h). Invariants: ill-formed UTF-8 is refused, anything
// else encodes to in-range ids whose decode is exactly the input; the same bytes read as ids
// decode to valid UTF-8 or are refused as out of range.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bubbletea/tokenizer/unicode.h"
#include "tokenizer_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using atlas::bubbletea::Tokenizer;
    const Tokenizer& t = atlas::bubbletea::testutil::fuzzTokenizer();
    const std::string text(reinterpret_cast<const char*>(data), size);
    const bool valid = atlas::bubbletea::tok::firstInvalidUtf8(text) == text.size();
    auto ids = t.encode(text, false);
    if (ids.isOk() != valid) {
        __builtin_trap();
    }
    if (ids.isOk()) {
        for (int32_t id : ids.value()) {
            if (id < 0 || id >= t.vocabSize()) {
                __builtin_trap();
            }
        }
        auto back = t.decode(ids.value(), false);
        if (!back.isOk() || back.value() != text) {
            __builtin_trap();
        }
        auto with_bos = t.encode(text, true);
        if (!with_bos.isOk() || with_bos.value().size() != ids.value().size() + 1) {
            __builtin_trap();
        }
    }
    std::vector<int32_t> as_ids(size / 4);
    if (!as_ids.empty()) {
        std::memcpy(as_ids.data(), data, as_ids.size() * 4);
    }
    auto decoded = t.decode(as_ids, true);
    if (decoded.isOk() &&
        atlas::bubbletea::tok::firstInvalidUtf8(decoded.value()) != decoded.value().size()) {
        __builtin_trap();
    }
    return 0;
}
