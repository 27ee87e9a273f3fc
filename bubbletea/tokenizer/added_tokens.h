// Added tokens (tokenizer.json "added_tokens"): strings matched in the text before the
// normalizer and the BPE model see it, each becoming its own id. Matching follows Hugging
// Face `tokenizers` (tokenizer/added_vocabulary.rs): leftmost-longest over the text; a
// single_word token only matches between non-word characters; lstrip/rstrip tokens absorb
// the whitespace on their side. Tokens with normalized=false are matched on the raw text,
// those with normalized=true on the normalizer's output.
//
// Threads: immutable after construction; split() may run on any number of threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace atlas::bubbletea::tok {

struct AddedToken {
    int32_t id = 0;
    std::string content;
    bool special = false;
    bool normalized = false;
    bool single_word = false;
    bool lstrip = false;
    bool rstrip = false;
};

// A piece of text after splitting: an added token's id, or a span of plain text.
struct Segment {
    int32_t token_id = -1;  // >= 0: an added token
    size_t begin = 0;       // plain text: [begin, end) of the split text
    size_t end = 0;
};

class AddedTokenMatcher {
  public:
    AddedTokenMatcher() = default;
    // `tokens` are those of one matching pass (all normalized=false ones, or all
    // normalized=true ones); empty contents are ignored.
    explicit AddedTokenMatcher(const std::vector<const AddedToken*>& tokens);

    bool empty() const { return nodes_.size() <= 1; }
    // Splits well-formed UTF-8 `text` into added tokens and the plain spans between them
    // (empty plain spans are omitted).
    void split(std::string_view text, std::vector<Segment>* out) const;

  private:
    struct Node {
        std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
        int32_t token = -1;                                 // index into tokens_
    };
    int32_t child(int32_t node, uint8_t b) const;
    bool acceptable(const AddedToken& t, std::string_view text, size_t start, size_t stop) const;

    std::vector<Node> nodes_{Node{}};
    std::vector<const AddedToken*> tokens_;
    bool first_byte_[256] = {};
};

}  // namespace atlas::bubbletea::tok
