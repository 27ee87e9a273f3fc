// Fuzz target: arbitrary bytes as a tokenizer.json. Loading must fail with a message or
// succeed; a loaded tokenizer must encode and decode a fixed multilingual text without
// crashing, and its decode output must be valid UTF-8. Memory is bounded by the loader's
// limits (64 MiB text, 16M JSON values, ids within token count + 65536).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bubbletea/tokenizer/tokenizer.h"
#include "bubbletea/tokenizer/unicode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using atlas::bubbletea::Tokenizer;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto t = Tokenizer::fromJson(text, "fuzz.json");
    if (!t.isOk()) {
        if (t.status().message().empty()) {
            __builtin_trap();
        }
        return 0;
    }
    static const std::string_view kSample =
        "Hello, world! 你好 Привет 👩‍💻 1234567 <|bos|> 'll \r\n\t  end";
    for (bool special : {false, true}) {
        auto ids = t.value()->encode(kSample, special);
        if (!ids.isOk()) {
            continue;  // e.g. a pattern over its backtracking limit
        }
        for (int32_t id : ids.value()) {
            if (id < 0 || id >= t.value()->vocabSize()) {
                __builtin_trap();
            }
        }
        auto back = t.value()->decode(ids.value(), !special);
        if (!back.isOk() ||
            atlas::bubbletea::tok::firstInvalidUtf8(back.value()) != back.value().size()) {
            __builtin_trap();
        }
    }
    return 0;
}
