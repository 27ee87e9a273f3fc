// Value kinds of the options layer: how the text of one ATLAS_* variable, flag or config key
// becomes a typed value, which range it must lie in, and how it is written back (help, docs,
// effective-value logs). A registry entry names its kind; options/table.h does the rest.
//
// A kind is a struct with
//   Value                      the parsed type (an element, for kRepeat kinds)
//   Bound                      the type of the entry's lo/hi columns (ignored: int)
//   kType                      one word for docs ("unsigned", "size", ...)
//   kTakesValue                false: a switch (presence stores switched())
//   kRepeat                    each occurrence appends to a vector field
//   parse(text)                optional<Value>; strict (options/value.h)
//   inRange(v, lo, hi)         the range check, after a successful parse
//   accepted(lo, hi)           the phrase after "expected" in messages
//   format(field)              text of a field value ("" = nothing to show)
// Binaries define their own kinds (e.g. atlas-wanem's per-direction values) the same way.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/clock.h"
#include "options/value.h"

namespace atlas::options {

template <typename E>
struct EnumChoice {
    const char* name;
    E value;
};
// Specialize with `static constexpr EnumChoice<E> kValues[] = {...}` (or pass a traits type
// with kValues as Enum's second argument).
template <typename E>
struct EnumChoices;

// HOST:PORT, for listen and connect addresses.
struct HostPort {
    std::string host;
    uint16_t port = 0;
    bool operator==(const HostPort&) const = default;
};
// "HOST:PORT" or "[IPV6]:PORT" with PORT 0..65535; HOST non-empty.
std::optional<HostPort> parseHostPort(std::string_view text);
std::string formatHostPort(const HostPort& hp);

namespace kinds {

struct Base {
    using Bound = int;
    static constexpr bool kTakesValue = true;
    static constexpr bool kRepeat = false;
    template <typename V>
    static bool inRange(const V&, int, int) {
        return true;
    }
};

struct String : Base {
    using Value = std::string;
    static constexpr const char* kType = "string";
    static std::optional<Value> parse(std::string_view t) { return std::string(t); }
    static std::string accepted(int, int) { return "any text"; }
    static std::string format(const std::string& v) { return v; }
};

// Non-empty text such as a file path ("" is rejected, so "--stats=" is an error).
struct Path : String {
    static constexpr const char* kType = "path";
    static std::optional<Value> parse(std::string_view t) {
        return t.empty() ? std::nullopt : std::optional<Value>(std::string(t));
    }
    static std::string accepted(int, int) { return "a non-empty path"; }
};

// Never shown: formats as its length only.
struct Secret : String {
    static constexpr const char* kType = "secret";
    static std::string format(const std::string& v) {
        return v.empty() ? "" : "<set, " + std::to_string(v.size()) + " bytes>";
    }
};

struct Bool : Base {
    using Value = bool;
    static constexpr const char* kType = "bool";
    static std::optional<bool> parse(std::string_view t) { return parseBool(t); }
    static std::string accepted(int, int) { return "one of true|false|1|0|yes|no"; }
    static std::string format(bool v) { return v ? "true" : "false"; }
};

struct Uint : Base {
    using Value = uint64_t;
    using Bound = uint64_t;
    static constexpr const char* kType = "unsigned";
    static std::optional<uint64_t> parse(std::string_view t) { return parseUnsigned(t); }
    static bool inRange(uint64_t v, uint64_t lo, uint64_t hi) { return v >= lo && v <= hi; }
    static std::string accepted(uint64_t lo, uint64_t hi) {
        return "an unsigned integer in " + std::to_string(lo) + ".." + std::to_string(hi);
    }
    static std::string format(uint64_t v) { return std::to_string(v); }
};

struct Int : Base {
    using Value = int64_t;
    using Bound = int64_t;
    static constexpr const char* kType = "integer";
    static std::optional<int64_t> parse(std::string_view t) { return parseSigned(t); }
    static bool inRange(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }
    static std::string accepted(int64_t lo, int64_t hi) {
        return "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
    }
    static std::string format(int64_t v) { return std::to_string(v); }
};

struct Size : Uint {
    static constexpr const char* kType = "size";
    static std::optional<uint64_t> parse(std::string_view t) { return parseSize(t); }
    static std::string accepted(uint64_t lo, uint64_t hi) {
        return "a size in " + formatSize(lo) + ".." + formatSize(hi) +
               " (bytes; suffix K, M or G = binary multiples)";
    }
    static std::string format(uint64_t v) { return formatSize(v); }
};

struct Double : Base {
    using Value = double;
    using Bound = double;
    static constexpr const char* kType = "number";
    static std::optional<double> parse(std::string_view t) { return parseDouble(t); }
    static bool inRange(double v, double lo, double hi) { return v >= lo && v <= hi; }
    static std::string accepted(double lo, double hi) {
        return "a number in " + formatDouble(lo) + ".." + formatDouble(hi);
    }
    static std::string format(double v) { return formatDouble(v); }
};

// A duration written as a decimal number of `NsPerUnit` units (ms, us, s), stored as Nanos;
// lo/hi are in the written unit. Whole: digits only (no fraction, no sign).
template <int64_t NsPerUnit, const char* Unit, bool Whole = false>
struct Duration : Base {
    using Value = Nanos;
    using Bound = double;
    static constexpr const char* kType = "duration";
    static std::optional<Nanos> parse(std::string_view t) {
        std::optional<double> v;
        if constexpr (Whole) {
            const auto u = parseUnsigned(t);
            v = u ? std::optional<double>(static_cast<double>(*u)) : std::nullopt;
        } else {
            v = parseDouble(t);
        }
        if (!v || std::fabs(*v) > 9e18 / static_cast<double>(NsPerUnit)) {
            return std::nullopt;
        }
        return static_cast<Nanos>(std::llround(*v * static_cast<double>(NsPerUnit)));
    }
    static bool inRange(Nanos v, double lo, double hi) {
        const double ns = static_cast<double>(NsPerUnit);
        return v >= std::llround(lo * ns) && v <= std::llround(hi * ns);
    }
    static std::string accepted(double lo, double hi) {
        return (Whole ? "whole " : "") + std::string(Unit) + " in " + formatDouble(lo) + ".." +
               formatDouble(hi);
    }
    static std::string format(Nanos v) {
        return formatDouble(static_cast<double>(v) / static_cast<double>(NsPerUnit));
    }
};
inline constexpr char kMsUnit[] = "milliseconds";
inline constexpr char kUsUnit[] = "microseconds";
inline constexpr char kSecondsUnit[] = "seconds";
using Millis = Duration<kNsPerMs, kMsUnit>;
using Micros = Duration<kNsPerUs, kUsUnit>;
using Seconds = Duration<kNsPerSec, kSecondsUnit>;
using WholeMillis = Duration<kNsPerMs, kMsUnit, true>;
using WholeMicros = Duration<kNsPerUs, kUsUnit, true>;

// One of the names of Choices::kValues, case-insensitive.
template <typename E, typename Choices = EnumChoices<E>>
struct Enum : Base {
    using Value = E;
    static constexpr const char* kType = "enum";
    static std::optional<E> parse(std::string_view t) {
        for (const auto& c : Choices::kValues) {
            if (equalsIgnoreCase(t, c.name)) {
                return c.value;
            }
        }
        return std::nullopt;
    }
    static std::string accepted(int, int) {
        std::string s = "one of ";
        for (const auto& c : Choices::kValues) {
            s += (&c == &Choices::kValues[0] ? "" : "|") + std::string(c.name);
        }
        return s;
    }
    static std::string format(E v) {
        for (const auto& c : Choices::kValues) {
            if (c.value == v) {
                return c.name;
            }
        }
        return "?";
    }
};

// An enum whose names come from a function (the owner's own name table, e.g.
// sched::policyKindName), so they are not restated: NamedEnum<E, &nameOf, E::kA, E::kB>.
template <typename E, const char* (*NameOf)(E), E... Values>
struct NamedEnum : Base {
    using Value = E;
    static constexpr const char* kType = "enum";
    static std::optional<E> parse(std::string_view t) {
        for (E v : {Values...}) {
            if (equalsIgnoreCase(t, NameOf(v))) {
                return v;
            }
        }
        return std::nullopt;
    }
    static std::string accepted(int, int) {
        std::string s;
        for (E v : {Values...}) {
            s += (s.empty() ? "one of " : "|") + std::string(NameOf(v));
        }
        return s;
    }
    static std::string format(E v) { return NameOf(v); }
};

// Switches take no value. Switch stores true, Off stores false (--no-barrier on a field that
// defaults to true), SetTo<V> stores V (--latency on a Measure field).
struct Switch : Base {
    using Value = bool;
    static constexpr const char* kType = "switch";
    static constexpr bool kTakesValue = false;
    static bool switched() { return true; }
    static std::optional<bool> parse(std::string_view) { return true; }
    static std::string accepted(int, int) { return "no value"; }
    static std::string format(bool) { return ""; }
};
struct Off : Switch {
    static bool switched() { return false; }
};
template <auto V>
struct SetTo : Base {
    using Value = decltype(V);
    static constexpr const char* kType = "switch";
    static constexpr bool kTakesValue = false;
    static Value switched() { return V; }
    static std::optional<Value> parse(std::string_view) { return V; }
    static std::string accepted(int, int) { return "no value"; }
    template <typename F>
    static std::string format(const F&) {
        return "";
    }
};

// K's value or nothing (the field is std::optional; unset shows as "").
template <typename K>
struct Optional : Base {
    using Value = std::optional<typename K::Value>;
    using Bound = typename K::Bound;
    static constexpr const char* kType = K::kType;
    static std::optional<Value> parse(std::string_view t) {
        auto v = K::parse(t);
        return v ? std::optional<Value>(Value(std::move(*v))) : std::nullopt;
    }
    static bool inRange(const Value& v, Bound lo, Bound hi) { return !v || K::inRange(*v, lo, hi); }
    static std::string accepted(Bound lo, Bound hi) { return K::accepted(lo, hi); }
    template <typename F>
    static std::string format(const std::optional<F>& v) {
        return v ? K::format(*v) : "";
    }
};

// A comma-separated, non-empty list of K values, each within lo..hi.
template <typename K>
struct List : Base {
    using Value = std::vector<typename K::Value>;
    using Bound = typename K::Bound;
    static constexpr const char* kType = "list";
    static std::optional<Value> parse(std::string_view t) {
        Value out;
        for (std::string_view item : split(t, ',')) {
            auto v = K::parse(item);
            if (!v) {
                return std::nullopt;
            }
            out.push_back(std::move(*v));
        }
        return out;
    }
    static bool inRange(const Value& v, Bound lo, Bound hi) {
        for (const auto& x : v) {
            if (!K::inRange(x, lo, hi)) {
                return false;
            }
        }
        return true;
    }
    static std::string accepted(Bound lo, Bound hi) {
        return "comma-separated, each " + K::accepted(lo, hi);
    }
    template <typename C>
    static std::string format(const C& v) {
        std::string s;
        for (const auto& x : v) {
            s += (s.empty() ? "" : ",") + K::format(x);
        }
        return s;
    }
};

// Repeatable: every occurrence appends one K value to a vector field.
template <typename K>
struct Repeat : K {
    static constexpr bool kRepeat = true;
    static std::string accepted(typename K::Bound lo, typename K::Bound hi) {
        return K::accepted(lo, hi) + ", repeatable";
    }
    template <typename C>
    static std::string format(const C& v) {
        return List<K>::format(v);
    }
};

struct Address : Base {
    using Value = HostPort;
    static constexpr const char* kType = "address";
    static std::optional<HostPort> parse(std::string_view t) { return parseHostPort(t); }
    // lo/hi: the accepted ports (0, 0 = any port 0..65535).
    static bool inRange(const HostPort& v, int lo, int hi) {
        return (lo == 0 && hi == 0) || (v.port >= lo && v.port <= hi);
    }
    static std::string accepted(int lo, int hi) {
        if (lo == 0 && hi == 0) {
            hi = 65535;
        }
        return "HOST:PORT or [IPV6]:PORT, PORT in " + std::to_string(lo) + ".." +
               std::to_string(hi);
    }
    static std::string format(const HostPort& v) { return formatHostPort(v); }
};

}  // namespace kinds
}  // namespace atlas::options
