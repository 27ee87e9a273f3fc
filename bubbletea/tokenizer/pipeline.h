// Internal: the loaded form of a tokenizer.json, shared by the loader (tokenizer_load.cc)
// and the encoder/decoder (tokenizer.cc). Not installed; include only from this folder.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bubbletea/tokenizer/added_tokens.h"
#include "bubbletea/tokenizer/bpe.h"
#include "bubbletea/tokenizer/regex.h"
#include "bubbletea/tokenizer/tokenizer.h"
#include "bubbletea/tokenizer/unicode.h"

namespace atlas::bubbletea {
namespace tok {

struct NormalizerStep {
    enum class Kind { kUnicode, kLowercase, kReplace, kPrepend };
    Kind kind = Kind::kUnicode;
    NormalForm form = NormalForm::kNfc;    // kUnicode
    std::shared_ptr<const Regex> pattern;  // kReplace
    std::string content;                   // kReplace, kPrepend
};

// tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
    enum class Kind { kSplit, kByteLevel, kDigits };
    Kind kind = Kind::kSplit;
    std::shared_ptr<const Regex> regex;  // kSplit; kByteLevel with use_regex (GPT-2's)
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;   // kByteLevel
    bool individual_digits = false;  // kDigits
};

// One post-processor template ("single" of TemplateProcessing, or cls/sep of Bert/Roberta
// processing): ids, with kSequenceA where the encoded text goes.
constexpr int32_t kSequenceA = -1;
using Template = std::vector<int32_t>;

// GPT-2's pre-tokenizer pattern (ByteLevel with use_regex), as tokenizers hard-codes it.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

enum class TokenKind : uint8_t { kNone, kModel, kAdded, kSpecial };

}  // namespace tok

struct Tokenizer::Impl {
    TokenizerOptions options;
    std::vector<tok::NormalizerStep> normalizer;
    std::vector<tok::PreTokenizerStep> pre_tokenizer;
    std::optional<tok::BpeModel> model;
    std::vector<tok::AddedToken> added;
    tok::AddedTokenMatcher raw_matcher;         // added tokens with normalized=false
    tok::AddedTokenMatcher normalized_matcher;  // normalized=true
    std::vector<tok::Template> templates;       // applied in order with add_special_tokens
    // Per id: what it is, and the bytes the decoder turns it into.
    std::vector<tok::TokenKind> kind;
    std::vector<std::string> bytes;
    size_t merges = 0;
    size_t model_tokens = 0;

    Status encodeInto(std::string_view text, std::vector<int32_t>* out) const;
    Status encodePlain(std::string_view text, std::vector<int32_t>* out) const;
};

}  // namespace atlas::bubbletea
