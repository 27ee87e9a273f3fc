#include "options/value.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace atlas::options {

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

std::optional<bool> parseBool(std::string_view t) {
    for (const char* yes : {"true", "1", "yes"}) {
        if (equalsIgnoreCase(t, yes)) {
            return true;
        }
    }
    for (const char* no : {"false", "0", "no"}) {
        if (equalsIgnoreCase(t, no)) {
            return false;
        }
    }
    return std::nullopt;
}

std::optional<uint64_t> parseUnsigned(std::string_view t) {
    // from_chars for an unsigned type accepts no sign at all, so "-1" and "+1" both fail.
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) {
        return std::nullopt;
    }
    return v;
}

std::optional<int64_t> parseSigned(std::string_view t) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) {
        return std::nullopt;
    }
    return v;
}

std::optional<uint64_t> parseSize(std::string_view t) {
    auto strip = [&t](std::string_view suffix) {
        if (t.size() > suffix.size() &&
            equalsIgnoreCase(t.substr(t.size() - suffix.size()), suffix)) {
            t.remove_suffix(suffix.size());
            return true;
        }
        return false;
    };
    if (!strip("iB")) {
        strip("B");
    }
    uint64_t mult = 1;
    if (!t.empty()) {
        switch (std::toupper(static_cast<unsigned char>(t.back()))) {
            case 'K':
                mult = kKiB;
                break;
            case 'M':
                mult = kMiB;
                break;
            case 'G':
                mult = kGiB;
                break;
            default:
                break;
        }
        if (mult != 1) {
            t.remove_suffix(1);
        }
    }
    auto v = parseUnsigned(t);
    if (!v || *v > std::numeric_limits<uint64_t>::max() / mult) {
        return std::nullopt;
    }
    return *v * mult;
}

std::optional<double> parseDouble(std::string_view t) {
    // Grammar first ([+-]digits[.digits][e[+-]digits], at least one digit before the
    // exponent), so strtod's hex, inf, nan and locale forms never get through.
    if (t.empty() || t.size() > 64) {
        return std::nullopt;
    }
    size_t i = 0;
    auto digits = [&] {
        const size_t from = i;
        while (i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) != 0) {
            ++i;
        }
        return i - from;
    };
    if (t[i] == '+' || t[i] == '-') {
        ++i;
    }
    size_t mantissa = digits();
    if (i < t.size() && t[i] == '.') {
        ++i;
        mantissa += digits();
    }
    if (mantissa == 0) {
        return std::nullopt;
    }
    if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
        ++i;
        if (i < t.size() && (t[i] == '+' || t[i] == '-')) {
            ++i;
        }
        if (digits() == 0) {
            return std::nullopt;
        }
    }
    if (i != t.size()) {
        return std::nullopt;
    }
    const std::string s(t);
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || !std::isfinite(v)) {
        return std::nullopt;  // overflow to inf
    }
    return v;
}

std::string formatSize(uint64_t bytes) {
    if (bytes != 0) {
        if (bytes % kGiB == 0) {
            return std::to_string(bytes / kGiB) + "G";
        }
        if (bytes % kMiB == 0) {
            return std::to_string(bytes / kMiB) + "M";
        }
        if (bytes % kKiB == 0) {
            return std::to_string(bytes / kKiB) + "K";
        }
    }
    return std::to_string(bytes);
}

std::string formatDouble(double v) {
    char buf[64];
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) {
        std::snprintf(buf, sizeof(buf), "%.0f", v);
        return buf;
    }
    for (int precision = 1; precision <= 17; ++precision) {
        std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
        if (std::strtod(buf, nullptr) == v) {
            break;
        }
    }
    return buf;
}

std::vector<std::string_view> split(std::string_view text, char sep) {
    std::vector<std::string_view> parts;
    size_t start = 0;
    while (true) {
        const size_t at = text.find(sep, start);
        parts.push_back(text.substr(start, at == std::string_view::npos ? at : at - start));
        if (at == std::string_view::npos) {
            return parts;
        }
        start = at + 1;
    }
}

std::string quote(std::string_view text) {
    constexpr size_t kMaxShown = 80;
    std::string shown;
    for (char c : text.substr(0, kMaxShown)) {
        const auto u = static_cast<unsigned char>(c);
        shown += (u < 0x20 || u == 0x7f) ? '?' : c;
    }
    if (text.size() > kMaxShown) {
        shown += "...";
    }
    return "'" + shown + "'";
}

size_t editDistance(std::string_view a, std::string_view b) {
    // Optimal string alignment: insertions, deletions, substitutions and transpositions of
    // neighbours (the typo "--itres" is one edit from "--iters").
    const size_t n = b.size() + 1;
    std::vector<size_t> prev2(n), prev(n), cur(n);
    for (size_t j = 0; j < n; ++j) {
        prev[j] = j;
    }
    for (size_t i = 1; i <= a.size(); ++i) {
        cur[0] = i;
        for (size_t j = 1; j < n; ++j) {
            const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
                cur[j] = std::min(cur[j], prev2[j - 2] + 1);
            }
        }
        prev2.swap(prev);
        prev.swap(cur);
    }
    return prev[b.size()];
}

std::string_view nearestName(std::string_view name, const std::vector<std::string_view>& known) {
    const size_t limit = name.size() <= 8 ? 1 : name.size() <= 16 ? 2 : 3;
    std::string_view best;
    size_t best_distance = limit + 1;
    for (std::string_view candidate : known) {
        const size_t d = editDistance(name, candidate);
        if (d < best_distance && d > 0) {
            best = candidate;
            best_distance = d;
        }
    }
    return best;
}

}  // namespace atlas::options
