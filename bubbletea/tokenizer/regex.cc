#define PCRE2_CODE_UNIT_WIDTH 8
#include "bubbletea/tokenizer/regex.h"

#include <pcre2.h>

namespace atlas::bubbletea::tok {
namespace {

constexpr size_t kMaxPatternBytes = 4096;
// Backtracking budget per match attempt (PCRE2 applies it to JIT code too): a hostile pattern
// such as (a+)+$ fails the request instead of spinning; real pre-tokenizer patterns stay
// orders of magnitude below it on any input.
constexpr uint32_t kMatchLimit = 10'000'000;

constexpr std::string_view kSpaceClass = "\\t-\\r\\x{85}\\p{Z}";
constexpr std::string_view kWordClass = "\\p{L}\\p{M}\\p{Nd}\\p{Pc}";

std::string pcre2Message(int code) {
    PCRE2_UCHAR buf[256];
    if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) {
        return "error " + std::to_string(code);
    }
    return reinterpret_cast<const char*>(buf);
}

}  // namespace

Result<std::string> translateOnigPattern(std::string_view p) {
    std::string out;
    out.reserve(p.size() + 32);
    bool in_class = false;
    for (size_t i = 0; i < p.size(); ++i) {
        const char c = p[i];
        if (c == '\\' && i + 1 < p.size()) {
            const char e = p[i + 1];
            ++i;
            if (e == 's' || e == 'w') {
                const std::string_view cls = e == 's' ? kSpaceClass : kWordClass;
                if (in_class) {
                    out.append(cls);
                } else {
                    out.append("[").append(cls).append("]");
                }
            } else if (e == 'S' || e == 'W') {
                if (in_class) {
                    return Status{Code::kInvalidArgument,
                                  std::string("\\") + e +
                                      " inside a character class is not supported (offset " +
                                      std::to_string(i - 1) + ")"};
                }
                out.append("[^").append(e == 'S' ? kSpaceClass : kWordClass).append("]");
            } else {
                out.push_back('\\');
                out.push_back(e);
            }
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            out.push_back(c);
            // A ']' or '^]' right after '[' is literal.
            if (i + 1 < p.size() && p[i + 1] == '^') {
                out.push_back('^');
                ++i;
            }
            if (i + 1 < p.size() && p[i + 1] == ']') {
                out.push_back(']');
                ++i;
            }
            continue;
        }
        if (in_class && c == '[') {
            // Oniguruma nests classes ([a-z&&[^x]]); PCRE2 reads '[' literally there.
            if (i + 1 < p.size() && p[i + 1] == ':') {
                out.push_back(c);  // POSIX [:alpha:]: same in both
                continue;
            }
            return Status{
                Code::kInvalidArgument,
                "nested character classes are not supported (offset " + std::to_string(i) + ")"};
        }
        if (in_class && c == ']') {
            in_class = false;
        }
        out.push_back(c);
    }
    return out;
}

Result<std::shared_ptr<const Regex>> Regex::compile(std::string_view pattern, bool literal) {
    if (pattern.size() > kMaxPatternBytes) {
        return Status{Code::kInvalidArgument, "pattern is longer than 4096 bytes"};
    }
    std::string translated;
    if (!literal) {
        auto t = translateOnigPattern(pattern);
        if (!t.isOk()) {
            return t.status();
        }
        translated = std::move(t.value());
    } else {
        translated = std::string(pattern);
    }
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    // PCRE2 allows only UTF (not UCP) with LITERAL; a literal needs no character classes.
    const uint32_t options = literal ? PCRE2_UTF | PCRE2_LITERAL : PCRE2_UTF | PCRE2_UCP;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()),
                                     translated.size(), options, &err, &err_offset, nullptr);
    if (code == nullptr) {
        return Status{Code::kInvalidArgument, "bad regex '" + std::string(pattern) +
                                                  "' at offset " + std::to_string(err_offset) +
                                                  ": " + pcre2Message(err)};
    }
    // JIT is an accelerator: when it is unavailable (or refuses the pattern) the interpreter
    // gives the same matches.
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    pcre2_match_context* ctx = pcre2_match_context_create(nullptr);
    if (ctx == nullptr) {
        pcre2_code_free(code);
        return Status{Code::kSystem, "out of memory compiling a regex"};
    }
    pcre2_set_match_limit(ctx, kMatchLimit);
    auto re = std::shared_ptr<Regex>(new Regex());
    re->source_ = std::string(pattern);
    re->code_ = code;
    re->match_context_ = ctx;
    return std::shared_ptr<const Regex>(std::move(re));
}

Regex::~Regex() {
    pcre2_match_context_free(static_cast<pcre2_match_context*>(match_context_));
    pcre2_code_free(static_cast<pcre2_code*>(code_));
}

Status Regex::forEachMatch(std::string_view text,
                           const std::function<void(size_t, size_t)>& on_match) const {
    auto* code = static_cast<pcre2_code*>(code_);
    auto* ctx = static_cast<pcre2_match_context*>(match_context_);
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
        pcre2_match_data_create(1, nullptr), pcre2_match_data_free);
    if (!md) {
        return Status{Code::kSystem, "out of memory matching a regex"};
    }
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0;
    uint32_t flags = 0;
    while (pos <= text.size()) {
        const int rc =
            pcre2_match(code, subject, text.size(), pos, flags | PCRE2_NO_UTF_CHECK, md.get(), ctx);
        if (rc == PCRE2_ERROR_NOMATCH) {
            if (flags == 0 || pos >= text.size()) {
                break;
            }
            // After an empty match: move on by one code point and search normally again.
            flags = 0;
            ++pos;
            while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) {
                ++pos;
            }
            continue;
        }
        if (rc < 0) {
            return Status{Code::kInvalidArgument,
                          "pre-tokenizer regex failed: " + pcre2Message(rc)};
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
        const size_t start = ov[0];
        const size_t end = ov[1];
        if (end > start) {
            on_match(start, end);
            pos = end;
            flags = 0;
        } else {
            // Empty match: retry at the same place for a non-empty one, else step.
            pos = end;
            flags = PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED;
        }
    }
    return Status::ok();
}

}  // namespace atlas::bubbletea::tok
