// The bubbletea tokenizer: loads a Hugging Face tokenizer.json and encodes text to token ids
// (and back) exactly as the `tokenizers` library does for the byte-level BPE models that
// Llama 3, Qwen and GPT-2 use: normalizer, added/special tokens matched first, the
// pre-tokenizer's split regex (PCRE2), byte-level mapping, BPE merges by rank, the
// post-processor's BOS/EOS template, and the byte-level decoder. docs/bubbletea.md
// ("Tokenizer") lists the supported components and every known difference from the
// reference implementations.
//
// Anything else (WordPiece/Unigram models, SentencePiece-style Metaspace/ByteFallback
// pipelines, unknown component types) is refused at load with a message naming the part.
// The file is untrusted: size, nesting, counts and ids are bounded and checked, so a hostile
// file gets an error, never a crash or unbounded memory (fuzzed: fuzz_tokenizer_load).
//
// Threads: a loaded Tokenizer is immutable; encode/decode may run concurrently on any
// number of threads. Loading blocks (file read, parse, regex JIT).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/status.h"

namespace atlas::bubbletea {

struct TokenizerOptions {
    // transformers' clean_up_tokenization_spaces (from tokenizer_config.json): decode()
    // removes the space before . , ! ? and English contractions. Lossy, so off by default.
    bool clean_up_tokenization_spaces = false;
};

class Tokenizer {
  public:
    // Parses tokenizer.json text; `source` names it in errors. Text above 64 MiB, nesting
    // deeper than 64 or more than 16M JSON values is refused before it is parsed.
    static Result<std::shared_ptr<const Tokenizer>> fromJson(std::string_view json_text,
                                                             std::string_view source,
                                                             const TokenizerOptions& options = {});
    static Result<std::shared_ptr<const Tokenizer>> fromFile(const std::string& path,
                                                             const TokenizerOptions& options = {});
    // <dir>/tokenizer.json, with clean_up_tokenization_spaces taken from
    // <dir>/tokenizer_config.json when that file says so. kUnavailable when the directory
    // has no tokenizer.json.
    static Result<std::shared_ptr<const Tokenizer>> fromModelDir(const std::string& dir);

    ~Tokenizer();
    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;

    // Token ids of `text`. `add_special_tokens` applies the post-processor's template (e.g.
    // Llama 3's <|begin_of_text|>). Errors (kInvalidArgument): text that is not well-formed
    // UTF-8 (the message gives the byte offset), or a pre-tokenizer regex over its
    // backtracking limit.
    Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens) const;

    // Text of `ids` (the decoder's output; byte sequences that are not UTF-8, such as half a
    // character, become U+FFFD). `skip_special_tokens` drops added tokens marked special.
    // Error (kInvalidArgument) for an id that is not in the vocabulary, naming its index.
    Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

    // The token's string as the file spells it (byte-level alphabet included), or nullopt.
    std::optional<std::string> tokenString(int32_t id) const;

    // 1 + the largest id of the vocabulary and the added tokens: the smallest embedding
    // table that can take every id this tokenizer produces.
    int64_t vocabSize() const;
    // Short description for logs: "BPE byte-level, 128000 tokens + 256 added, 280147 merges".
    std::string describe() const;

    struct Impl;

  private:
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace atlas::bubbletea
