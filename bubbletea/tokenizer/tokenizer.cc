#include "bubbletea/tokenizer/tokenizer.h"

#include <algorithm>
#include <deque>

#include "bubbletea/tokenizer/pipeline.h"

namespace atlas::bubbletea {
namespace {

using tok::PreTokenizerStep;
using tok::SplitBehavior;

struct Span {
    size_t begin;
    size_t end;
    bool is_match;
};

// tokenizers' NormalizedString::split: the text cut at `matches` (sorted, disjoint), each
// piece flagged, then grouped by `behavior`; empty pieces dropped.
void splitPieces(std::string_view text, const std::vector<std::pair<size_t, size_t>>& matches,
                 SplitBehavior behavior, bool invert, std::vector<std::string_view>* out) {
    std::vector<Span> spans;
    spans.reserve(matches.size() * 2 + 1);
    size_t prev = 0;
    for (const auto& [s, e] : matches) {
        if (prev < s) {
            spans.push_back({prev, s, false});
        }
        spans.push_back({s, e, true});
        prev = e;
    }
    if (prev < text.size()) {
        spans.push_back({prev, text.size(), false});
    }
    if (invert) {
        for (auto& sp : spans) {
            sp.is_match = !sp.is_match;
        }
    }
    std::vector<Span> grouped;
    grouped.reserve(spans.size());
    switch (behavior) {
        case SplitBehavior::kIsolated:
            grouped = spans;
            break;
        case SplitBehavior::kRemoved:
            for (const auto& sp : spans) {
                if (!sp.is_match) {
                    grouped.push_back(sp);
                }
            }
            break;
        case SplitBehavior::kMergedWithPrevious: {
            bool previous_match = false;
            for (const auto& sp : spans) {
                if (sp.is_match && !previous_match && !grouped.empty()) {
                    grouped.back().end = sp.end;
                } else {
                    grouped.push_back(sp);
                }
                previous_match = sp.is_match;
            }
            break;
        }
        case SplitBehavior::kMergedWithNext: {
            bool previous_match = false;
            for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
                if (it->is_match && !previous_match && !grouped.empty()) {
                    grouped.back().begin = it->begin;
                } else {
                    grouped.push_back(*it);
                }
                previous_match = it->is_match;
            }
            std::reverse(grouped.begin(), grouped.end());
            break;
        }
        case SplitBehavior::kContiguous: {
            bool previous_match = false;
            bool first = true;
            for (const auto& sp : spans) {
                if (!first && sp.is_match == previous_match) {
                    grouped.back().end = sp.end;
                } else {
                    grouped.push_back(sp);
                }
                previous_match = sp.is_match;
                first = false;
            }
            break;
        }
    }
    for (const auto& sp : grouped) {
        if (sp.end > sp.begin) {
            out->push_back(text.substr(sp.begin, sp.end - sp.begin));
        }
    }
}

}  // namespace

Status Tokenizer::Impl::encodePlain(std::string_view text, std::vector<int32_t>* out) const {
    // Pieces are views into `text` or into `arena` (pieces that a step rewrote).
    std::deque<std::string> arena;
    std::vector<std::string_view> pieces{text};
    std::vector<std::string_view> next;
    std::vector<std::pair<size_t, size_t>> matches;
    for (const PreTokenizerStep& step : pre_tokenizer) {
        next.clear();
        for (std::string_view piece : pieces) {
            switch (step.kind) {
                case PreTokenizerStep::Kind::kSplit: {
                    matches.clear();
                    ATLAS_RETURN_IF_ERROR(step.regex->forEachMatch(
                        piece, [&](size_t s, size_t e) { matches.emplace_back(s, e); }));
                    splitPieces(piece, matches, step.behavior, step.invert, &next);
                    break;
                }
                case PreTokenizerStep::Kind::kByteLevel: {
                    std::string_view p = piece;
                    if (step.add_prefix_space && (p.empty() || p.front() != ' ')) {
                        arena.push_back(" " + std::string(p));
                        p = arena.back();
                    }
                    if (step.regex) {
                        matches.clear();
                        ATLAS_RETURN_IF_ERROR(step.regex->forEachMatch(
                            p, [&](size_t s, size_t e) { matches.emplace_back(s, e); }));
                        splitPieces(p, matches, SplitBehavior::kIsolated, false, &next);
                    } else {
                        next.push_back(p);
                    }
                    break;
                }
                case PreTokenizerStep::Kind::kDigits: {
                    matches.clear();
                    for (size_t pos = 0; pos < piece.size();) {
                        char32_t cp = 0;
                        const int n = tok::decodeUtf8(piece, pos, &cp);
                        if (tok::isNumeric(cp)) {
                            matches.emplace_back(pos, pos + static_cast<size_t>(n));
                        }
                        pos += static_cast<size_t>(n);
                    }
                    splitPieces(piece, matches,
                                step.individual_digits ? SplitBehavior::kIsolated
                                                       : SplitBehavior::kContiguous,
                                false, &next);
                    break;
                }
            }
        }
        pieces.swap(next);
    }
    for (std::string_view word : pieces) {
        if (!word.empty()) {
            model->encodeWord(word, out);
        }
    }
    return Status::ok();
}

Status Tokenizer::Impl::encodeInto(std::string_view text, std::vector<int32_t>* out) const {
    std::vector<tok::Segment> raw;
    raw_matcher.split(text, &raw);
    std::vector<tok::Segment> inner;
    for (const tok::Segment& seg : raw) {
        if (seg.token_id >= 0) {
            out->push_back(seg.token_id);
            continue;
        }
        std::string_view piece = text.substr(seg.begin, seg.end - seg.begin);
        std::string normalized;
        if (!normalizer.empty()) {
            normalized = std::string(piece);
            for (const tok::NormalizerStep& n : normalizer) {
                switch (n.kind) {
                    case tok::NormalizerStep::Kind::kUnicode: {
                        auto r = tok::normalize(normalized, n.form);
                        if (!r.isOk()) {
                            return r.status();
                        }
                        normalized = std::move(r.value());
                        break;
                    }
                    case tok::NormalizerStep::Kind::kLowercase:
                        normalized = tok::lowercase(normalized);
                        break;
                    case tok::NormalizerStep::Kind::kPrepend:
                        if (!normalized.empty()) {
                            normalized = n.content + normalized;
                        }
                        break;
                    case tok::NormalizerStep::Kind::kReplace: {
                        std::string replaced;
                        size_t prev = 0;
                        ATLAS_RETURN_IF_ERROR(
                            n.pattern->forEachMatch(normalized, [&](size_t s, size_t e) {
                                replaced.append(normalized, prev, s - prev).append(n.content);
                                prev = e;
                            }));
                        replaced.append(normalized, prev, std::string::npos);
                        normalized = std::move(replaced);
                        break;
                    }
                }
            }
            piece = normalized;
        }
        inner.clear();
        normalized_matcher.split(piece, &inner);
        for (const tok::Segment& s : inner) {
            if (s.token_id >= 0) {
                out->push_back(s.token_id);
            } else {
                ATLAS_RETURN_IF_ERROR(encodePlain(piece.substr(s.begin, s.end - s.begin), out));
            }
        }
    }
    return Status::ok();
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text,
                                               bool add_special_tokens) const {
    const size_t bad = tok::firstInvalidUtf8(text);
    if (bad != text.size()) {
        return Status{Code::kInvalidArgument,
                      "text is not valid UTF-8 (byte offset " + std::to_string(bad) + ")"};
    }
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    ATLAS_RETURN_IF_ERROR(impl_->encodeInto(text, &ids));
    if (add_special_tokens) {
        for (const tok::Template& t : impl_->templates) {
            std::vector<int32_t> wrapped;
            wrapped.reserve(ids.size() + t.size());
            for (int32_t x : t) {
                if (x == tok::kSequenceA) {
                    wrapped.insert(wrapped.end(), ids.begin(), ids.end());
                } else {
                    wrapped.push_back(x);
                }
            }
            ids.swap(wrapped);
        }
    }
    return ids;
}

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids,
                                      bool skip_special_tokens) const {
    std::string raw;
    for (size_t i = 0; i < ids.size(); ++i) {
        const int32_t id = ids[i];
        if (id < 0 || static_cast<size_t>(id) >= impl_->kind.size() ||
            impl_->kind[id] == tok::TokenKind::kNone) {
            return Status{Code::kInvalidArgument, "token " + std::to_string(i) + " (id " +
                                                      std::to_string(id) +
                                                      ") is not in the vocabulary"};
        }
        if (skip_special_tokens && impl_->kind[id] == tok::TokenKind::kSpecial) {
            continue;
        }
        raw += impl_->bytes[id];
    }
    std::string text = tok::utf8Lossy(raw);
    if (impl_->options.clean_up_tokenization_spaces) {
        // transformers' PreTrainedTokenizerBase.clean_up_tokenization, in its order.
        static const std::pair<std::string_view, std::string_view> kRules[] = {
            {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
            {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
        for (const auto& [from, to] : kRules) {
            std::string replaced;
            size_t prev = 0;
            for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, prev)) {
                replaced.append(text, prev, at - prev).append(to);
                prev = at + from.size();
            }
            replaced.append(text, prev, std::string::npos);
            text = std::move(replaced);
        }
    }
    return text;
}

std::optional<std::string> Tokenizer::tokenString(int32_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= impl_->kind.size() ||
        impl_->kind[id] == tok::TokenKind::kNone) {
        return std::nullopt;
    }
    if (impl_->kind[id] != tok::TokenKind::kModel) {
        return impl_->bytes[id];
    }
    std::string s;
    for (char c : impl_->bytes[id]) {
        tok::appendUtf8(tok::byteToUnicode(static_cast<uint8_t>(c)), &s);
    }
    return s;
}

int64_t Tokenizer::vocabSize() const {
    return static_cast<int64_t>(impl_->kind.size());
}

std::string Tokenizer::describe() const {
    return "BPE byte-level, " + std::to_string(impl_->model_tokens) + " tokens + " +
           std::to_string(impl_->added.size()) + " added, " + std::to_string(impl_->merges) +
           " merges";
}

}  // namespace atlas::bubbletea
