// The BPE model of a byte-level tokenizer.json: vocabulary, merges by rank, and the merge
// loop.
//
// Tokens are held as the raw bytes they stand for: the file spells them in GPT-2's byte
// alphabet and the loader converts them, so a word's initial symbols are its bytes. A byte
// the vocabulary lacks becomes the unknown token, or is dropped when there is none (as
// `tokenizers` does).
//
// The merge rule is Hugging Face `tokenizers`' (models/bpe/word.rs): repeatedly merge the
// adjacent pair with the lowest merge rank, the leftmost one on ties, until no adjacent pair
// has a merge. With ignore_merges a word that is itself a vocabulary entry maps to it
// directly.
//
// Threads: immutable after construction; encodeWord may run on any number of threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "atlas/common/status.h"

namespace atlas::bubbletea::tok {

struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
    bool ignore_merges = false;
    bool fuse_unk = false;
    int32_t unk_id = -1;  // -1: none (unknown symbols are dropped, as tokenizers does)
};

class BpeModel {
  public:
    // `vocab`: raw token bytes -> id. `merges`: (left, right) token bytes in rank order; each
    // side and their concatenation must be in `vocab` (else an error naming the merge). A
    // pair listed twice keeps its last rank, as tokenizers and transformers.js do.
    static Result<BpeModel> build(TokenMap vocab,
                                  const std::vector<std::pair<std::string, std::string>>& merges,
                                  const BpeOptions& options);

    // Appends the ids of one pre-tokenized word (raw bytes) to `out`.
    void encodeWord(std::string_view word, std::vector<int32_t>* out) const;

    const TokenMap& vocab() const { return vocab_; }
    const BpeOptions& options() const { return options_; }
    size_t mergeCount() const { return merge_count_; }

  private:
    struct Merge {
        uint64_t key = 0;  // (left << 32) | right, + 1 so that 0 marks an empty entry
        int32_t rank = 0;
        int32_t new_id = 0;
    };
    const Merge* findMerge(int32_t left, int32_t right) const;
    void initialSymbols(std::string_view word, std::vector<int32_t>* symbols) const;

    TokenMap vocab_;
    BpeOptions options_;
    std::vector<Merge> table_;  // open addressing, power-of-two size
    size_t merge_count_ = 0;
    int32_t byte_ids_[256];  // id of each single-byte token, or -1
};

}  // namespace atlas::bubbletea::tok
