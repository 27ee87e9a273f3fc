#include "bubbletea/tokenizer/unicode.h"

#include <utf8proc.h>

#include <cstdlib>

namespace atlas::bubbletea::tok {
namespace {

// Length of the well-formed sequence at `pos`, or 0 (RFC 3629 table 3-7 byte ranges).
size_t sequenceLength(std::string_view t, size_t pos) {
    const auto b = [&](size_t i) { return static_cast<uint8_t>(t[i]); };
    const uint8_t c = b(pos);
    const size_t left = t.size() - pos;
    if (c < 0x80) {
        return 1;
    }
    auto cont = [&](size_t i, uint8_t lo = 0x80, uint8_t hi = 0xBF) {
        return i < left && b(pos + i) >= lo && b(pos + i) <= hi;
    };
    if (c >= 0xC2 && c <= 0xDF) {
        return cont(1) ? 2 : 0;
    }
    if (c >= 0xE0 && c <= 0xEF) {
        const uint8_t lo = c == 0xE0 ? 0xA0 : 0x80;
        const uint8_t hi = c == 0xED ? 0x9F : 0xBF;
        return cont(1, lo, hi) && cont(2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        const uint8_t lo = c == 0xF0 ? 0x90 : 0x80;
        const uint8_t hi = c == 0xF4 ? 0x8F : 0xBF;
        return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
    }
    return 0;
}

// Length of the maximal ill-formed subpart at `pos` (at least 1): the longest prefix of a
// well-formed sequence that the data breaks off.
size_t maximalSubpart(std::string_view t, size_t pos) {
    const auto b = [&](size_t i) { return static_cast<uint8_t>(t[i]); };
    const uint8_t c = b(pos);
    size_t need = 0;
    uint8_t lo = 0x80;
    uint8_t hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return 1;
    }
    size_t n = 1;
    for (size_t i = 0; i < need && pos + n < t.size(); ++i) {
        const uint8_t x = b(pos + n);
        const bool ok = i == 0 ? (x >= lo && x <= hi) : (x >= 0x80 && x <= 0xBF);
        if (!ok) {
            break;
        }
        ++n;
    }
    return n;
}

}  // namespace

size_t firstInvalidUtf8(std::string_view text) {
    size_t pos = 0;
    while (pos < text.size()) {
        // ASCII fast path, 8 bytes at a time.
        while (pos + 8 <= text.size()) {
            uint64_t w;
            __builtin_memcpy(&w, text.data() + pos, 8);
            if ((w & 0x8080808080808080ull) != 0) {
                break;
            }
            pos += 8;
        }
        if (pos >= text.size()) {
            break;
        }
        const size_t n = sequenceLength(text, pos);
        if (n == 0) {
            return pos;
        }
        pos += n;
    }
    return text.size();
}

int decodeUtf8(std::string_view t, size_t pos, char32_t* cp) {
    const auto b = [&](size_t i) { return static_cast<char32_t>(static_cast<uint8_t>(t[i])); };
    const char32_t c = b(pos);
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c < 0xE0) {
        *cp = ((c & 0x1F) << 6) | (b(pos + 1) & 0x3F);
        return 2;
    }
    if (c < 0xF0) {
        *cp = ((c & 0x0F) << 12) | ((b(pos + 1) & 0x3F) << 6) | (b(pos + 2) & 0x3F);
        return 3;
    }
    *cp = ((c & 0x07) << 18) | ((b(pos + 1) & 0x3F) << 12) | ((b(pos + 2) & 0x3F) << 6) |
          (b(pos + 3) & 0x3F);
    return 4;
}

void appendUtf8(char32_t cp, std::string* out) {
    if (cp < 0x80) {
        out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

std::string utf8Lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    size_t pos = 0;
    while (pos < bytes.size()) {
        const size_t n = sequenceLength(bytes, pos);
        if (n > 0) {
            out.append(bytes.data() + pos, n);
            pos += n;
        } else {
            out.append("\xEF\xBF\xBD");
            pos += maximalSubpart(bytes, pos);
        }
    }
    return out;
}

char32_t byteToUnicode(uint8_t b) {
    static const std::array<char32_t, 256> table = [] {
        std::array<char32_t, 256> t{};
        char32_t next = 256;
        for (int i = 0; i < 256; ++i) {
            const bool printable = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174;
            t[i] = printable ? static_cast<char32_t>(i) : next++;
        }
        return t;
    }();
    return table[b];
}

int unicodeToByte(char32_t cp) {
    if (cp < 256) {
        const bool printable = (cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || cp >= 174;
        return printable ? static_cast<int>(cp) : -1;
    }
    if (cp < 256 + 68) {
        // The 68 non-printable bytes in increasing order.
        static const std::array<uint8_t, 68> rest = [] {
            std::array<uint8_t, 68> r{};
            int k = 0;
            for (int i = 0; i < 256; ++i) {
                const bool printable = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || i >= 174;
                if (!printable) {
                    r[k++] = static_cast<uint8_t>(i);
                }
            }
            return r;
        }();
        return rest[cp - 256];
    }
    return -1;
}

Result<std::string> normalize(std::string_view text, NormalForm form) {
    if (text.empty()) {
        return std::string();
    }
    int options = UTF8PROC_STABLE;
    switch (form) {
        case NormalForm::kNfc:
            options |= UTF8PROC_COMPOSE;
            break;
        case NormalForm::kNfd:
            options |= UTF8PROC_DECOMPOSE;
            break;
        case NormalForm::kNfkc:
            options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
            break;
        case NormalForm::kNfkd:
            options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
            break;
    }
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                            static_cast<utf8proc_ssize_t>(text.size()), &out,
                                            static_cast<utf8proc_option_t>(options));
    if (n < 0) {
        return Status{Code::kInvalidArgument,
                      std::string("Unicode normalization failed: ") + utf8proc_errmsg(n)};
    }
    std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
    std::free(out);
    return result;
}

std::string lowercase(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (size_t pos = 0; pos < text.size();) {
        char32_t cp = 0;
        pos += decodeUtf8(text, pos, &cp);
        if (cp == 0x130) {  // the one unconditional multi-code-point lowercase mapping
            out.append("i\xCC\x87");
            continue;
        }
        appendUtf8(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))),
                   &out);
    }
    return out;
}

bool isWhitespace(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

bool isWordChar(char32_t c) {
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO:
        case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC:
        case UTF8PROC_CATEGORY_ME:
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_PC:
            return true;
        default:
            return false;
    }
}

bool isNumeric(char32_t c) {
    const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL ||
           cat == UTF8PROC_CATEGORY_NO;
}

}  // namespace atlas::bubbletea::tok
