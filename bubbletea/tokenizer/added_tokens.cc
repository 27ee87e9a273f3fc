#include "bubbletea/tokenizer/added_tokens.h"

#include <algorithm>

#include "bubbletea/tokenizer/unicode.h"

namespace atlas::bubbletea::tok {
namespace {

// The code point that ends at `end` (well-formed UTF-8, end > 0).
char32_t lastCodePoint(std::string_view text, size_t end) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) {
        --start;
    }
    char32_t cp = 0;
    decodeUtf8(text, start, &cp);
    return cp;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<const AddedToken*>& tokens) {
    for (const AddedToken* t : tokens) {
        if (t->content.empty()) {
            continue;
        }
        int32_t node = 0;
        for (char c : t->content) {
            const auto b = static_cast<uint8_t>(c);
            int32_t next = child(node, b);
            if (next < 0) {
                next = static_cast<int32_t>(nodes_.size());
                nodes_.push_back(Node{});
                auto& ch = nodes_[node].children;
                ch.insert(std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t{0})),
                          {b, next});
            }
            node = next;
        }
        if (nodes_[node].token < 0) {
            nodes_[node].token = static_cast<int32_t>(tokens_.size());
            tokens_.push_back(t);
        }
        first_byte_[static_cast<uint8_t>(t->content[0])] = true;
    }
}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t b) const {
    const auto& ch = nodes_[node].children;
    const auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t{0}));
    return it != ch.end() && it->first == b ? it->second : -1;
}

bool AddedTokenMatcher::acceptable(const AddedToken& t, std::string_view text, size_t start,
                                   size_t stop) const {
    if (!t.single_word) {
        return true;
    }
    if (start > 0 && isWordChar(lastCodePoint(text, start))) {
        return false;
    }
    if (stop < text.size()) {
        char32_t cp = 0;
        decodeUtf8(text, stop, &cp);
        if (isWordChar(cp)) {
            return false;
        }
    }
    return true;
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>* out) const {
    if (empty()) {
        if (!text.empty()) {
            out->push_back(Segment{-1, 0, text.size()});
        }
        return;
    }
    size_t plain_start = 0;  // start of the pending plain span
    size_t i = 0;
    while (i < text.size()) {
        if (!first_byte_[static_cast<uint8_t>(text[i])]) {
            ++i;
            continue;
        }
        // Longest token starting at i (leftmost-longest).
        int32_t best = -1;
        size_t best_end = 0;
        int32_t node = 0;
        for (size_t j = i; j < text.size(); ++j) {
            node = child(node, static_cast<uint8_t>(text[j]));
            if (node < 0) {
                break;
            }
            if (nodes_[node].token >= 0) {
                best = nodes_[node].token;
                best_end = j + 1;
            }
        }
        if (best < 0 || !acceptable(*tokens_[best], text, i, best_end)) {
            ++i;
            continue;
        }
        const AddedToken& t = *tokens_[best];
        size_t start = i;
        size_t stop = best_end;
        if (t.lstrip) {
            while (start > plain_start) {
                const char32_t cp = lastCodePoint(text, start);
                if (!isWhitespace(cp)) {
                    break;
                }
                size_t s = start - 1;
                while ((static_cast<uint8_t>(text[s]) & 0xC0) == 0x80) {
                    --s;
                }
                start = s;
            }
        }
        if (t.rstrip) {
            while (stop < text.size()) {
                char32_t cp = 0;
                const int n = decodeUtf8(text, stop, &cp);
                if (!isWhitespace(cp)) {
                    break;
                }
                stop += static_cast<size_t>(n);
            }
        }
        if (start > plain_start) {
            out->push_back(Segment{-1, plain_start, start});
        }
        out->push_back(Segment{t.id, start, stop});
        plain_start = stop;
        i = stop;
    }
    if (plain_start < text.size()) {
        out->push_back(Segment{-1, plain_start, text.size()});
    }
}

}  // namespace atlas::bubbletea::tok
