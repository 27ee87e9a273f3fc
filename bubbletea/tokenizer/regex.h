// The pre-tokenizer's regular expressions: Hugging Face `tokenizers` compiles them with
// Oniguruma; this wraps PCRE2 (UTF + UCP, JIT-compiled) after a small translation that gives
// PCRE2 Oniguruma's meaning where the two differ on patterns tokenizer.json files use:
//   \s, \S  Oniguruma: U+0009-U+000D, U+0085 and the Z categories. PCRE2 with UCP adds U+180E.
//   \w, \W  Oniguruma: letters, marks, decimal digits, connector punctuation. PCRE2 (10.42)
//           has no marks and all numbers.
// Both are rewritten to explicit classes. `\S`/`\W` inside a character class have no such
// rewrite and are refused. Property names (\p{L}, \p{N}, ...) and (?i:...) are the same in
// both engines; PCRE2 10.42's tables are Unicode 14.
//
// Threads: a compiled Regex is immutable and shared; forEachMatch allocates its own match
// data, so any number of threads may match concurrently.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "atlas/common/status.h"

namespace atlas::bubbletea::tok {

class Regex {
  public:
    // `pattern` in Oniguruma syntax (as tokenizer.json stores it); `literal` compiles it as a
    // plain string instead (tokenizer.json's {"String": ...} patterns). Errors name the
    // offset and PCRE2's reason. Patterns are limited to 4 KiB.
    static Result<std::shared_ptr<const Regex>> compile(std::string_view pattern, bool literal);
    ~Regex();
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Calls on_match(start, end) for every non-overlapping match in `text` (well-formed
    // UTF-8, not re-checked), left to right; empty matches are skipped. Fails (without a
    // partial result being meaningful) when a match exceeds the backtracking limit.
    Status forEachMatch(std::string_view text,
                        const std::function<void(size_t, size_t)>& on_match) const;

    const std::string& pattern() const { return source_; }

  private:
    Regex() = default;
    std::string source_;
    void* code_ = nullptr;           // pcre2_code_8*
    void* match_context_ = nullptr;  // pcre2_match_context_8*
};

// The Oniguruma -> PCRE2 rewrite described above (exposed for tests).
Result<std::string> translateOnigPattern(std::string_view pattern);

}  // namespace atlas::bubbletea::tok
