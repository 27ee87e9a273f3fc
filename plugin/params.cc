#include "plugin/params.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace atlas::plugin {
namespace {

namespace pk = param_kinds;

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

std::string formatDouble(double v) {
    std::ostringstream os;
    os << v;
    return os.str();
}

}  // namespace

// Per-kind behaviour: syntax (parse), range, formatting and the "accepted" phrase. In a named
// namespace so kinds that no variable uses yet (Int) do not trip unused-entity warnings.
namespace param_detail {

template <typename Kind>
struct KindOps;

template <>
struct KindOps<pk::String> {
    static constexpr const char* kType = "string";
    static std::string accepted(int, int) { return "any text"; }
    static std::optional<std::string> parse(std::string_view t) { return std::string(t); }
    static bool inRange(const std::string&, int, int) { return true; }
    static std::string format(const std::string& v) { return v.empty() ? "(unset)" : v; }
};

template <>
struct KindOps<pk::Secret> : KindOps<pk::String> {
    static constexpr const char* kType = "secret";
    static std::string format(const std::string& v) {
        return v.empty() ? "(unset)" : "<set, " + std::to_string(v.size()) + " bytes>";
    }
};

template <>
struct KindOps<pk::Bool> {
    static constexpr const char* kType = "bool";
    static std::string accepted(int, int) { return "one of true|false|1|0|yes|no"; }
    static std::optional<bool> parse(std::string_view t) { return parseBoolText(t); }
    static bool inRange(bool, int, int) { return true; }
    static std::string format(bool v) { return v ? "true" : "false"; }
};

template <>
struct KindOps<pk::Uint> {
    static constexpr const char* kType = "unsigned";
    static std::string accepted(uint64_t lo, uint64_t hi) {
        return "an unsigned integer in " + std::to_string(lo) + ".." + std::to_string(hi);
    }
    static std::optional<uint64_t> parse(std::string_view t) { return parseUnsignedText(t); }
    static bool inRange(uint64_t v, uint64_t lo, uint64_t hi) { return v >= lo && v <= hi; }
    static std::string format(uint64_t v) { return std::to_string(v); }
};

template <>
struct KindOps<pk::Int> {
    static constexpr const char* kType = "integer";
    static std::string accepted(int64_t lo, int64_t hi) {
        return "an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
    }
    static std::optional<int64_t> parse(std::string_view t) { return parseSignedText(t); }
    static bool inRange(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }
    static std::string format(int64_t v) { return std::to_string(v); }
};

template <>
struct KindOps<pk::Size> {
    static constexpr const char* kType = "size";
    static std::string accepted(uint64_t lo, uint64_t hi) {
        return "a size in " + formatSize(lo) + ".." + formatSize(hi) +
               " (bytes; suffix K, M or G = binary multiples)";
    }
    static std::optional<uint64_t> parse(std::string_view t) { return parseSizeText(t); }
    static bool inRange(uint64_t v, uint64_t lo, uint64_t hi) { return v >= lo && v <= hi; }
    static std::string format(uint64_t v) { return formatSize(v); }
};

template <>
struct KindOps<pk::Double> {
    static constexpr const char* kType = "number";
    static std::string accepted(double lo, double hi) {
        return "a number in " + formatDouble(lo) + ".." + formatDouble(hi);
    }
    static std::optional<double> parse(std::string_view t) { return parseDoubleText(t); }
    static bool inRange(double v, double lo, double hi) { return v >= lo && v <= hi; }
    static std::string format(double v) { return formatDouble(v); }
};

template <typename E>
struct KindOps<pk::Enum<E>> {
    static constexpr const char* kType = "enum";
    static std::string accepted(int, int) {
        std::string s = "one of ";
        bool first = true;
        for (const auto& c : EnumChoices<E>::kValues) {
            s += (first ? "" : "|");
            s += c.name;
            first = false;
        }
        return s;
    }
    static std::optional<E> parse(std::string_view t) {
        for (const auto& c : EnumChoices<E>::kValues) {
            if (equalsIgnoreCase(t, c.name)) {
                return c.value;
            }
        }
        return std::nullopt;
    }
    static bool inRange(E, int, int) { return true; }
    static std::string format(E v) {
        for (const auto& c : EnumChoices<E>::kValues) {
            if (c.value == v) {
                return c.name;
            }
        }
        return "?";
    }
};

}  // namespace param_detail

namespace {

using param_detail::KindOps;

// Values are echoed in messages; a pasted blob should not flood the log.
std::string quoteValue(std::string_view text) {
    constexpr size_t kMaxShown = 80;
    std::string shown(text.substr(0, kMaxShown));
    if (text.size() > kMaxShown) {
        shown += "...";
    }
    return "'" + shown + "'";
}

template <typename Kind>
ParamSpec makeSpec(const char* key, const char* field, const char* doc,
                   typename Kind::Value Params::*member, typename Kind::Bound lo,
                   typename Kind::Bound hi) {
    using Ops = KindOps<Kind>;
    ParamSpec s;
    s.key = key;
    s.field = field;
    s.type = Ops::kType;
    s.doc = doc;
    s.default_text = Ops::format(Params{}.*member);
    s.accepted = Ops::accepted(lo, hi);
    std::string accepted = s.accepted;
    s.parse = [key, member, lo, hi, accepted](std::string_view text, Params& out) -> Status {
        auto v = Ops::parse(text);
        if (!v) {
            return Status(Code::kInvalidUsage, std::string(key) + "=" + quoteValue(text) +
                                                   " is invalid: expected " + accepted);
        }
        if (!Ops::inRange(*v, lo, hi)) {
            return Status(Code::kInvalidUsage, std::string(key) + "=" + quoteValue(text) +
                                                   " is out of range: expected " + accepted);
        }
        out.*member = std::move(*v);
        return Status::ok();
    };
    s.format = [member](const Params& p) { return Ops::format(p.*member); };
    s.is_default = [member](const Params& p) {
        static const Params defaults;
        return p.*member == defaults.*member;
    };
    return s;
}

std::vector<ParamSpec> buildSpecs() {
    std::vector<ParamSpec> specs;
#define ATLAS_PARAM_SPEC(KEY, field, Kind, def, lo, hi, doc) \
    specs.push_back(makeSpec<pk::Kind>(#KEY, #field, doc, &Params::field, lo, hi));
    ATLAS_PARAM_LIST(ATLAS_PARAM_SPEC)
#undef ATLAS_PARAM_SPEC
    return specs;
}

// Reads the key file; the key is its contents without trailing newlines.
Status loadKeyFile(const std::string& path, std::string* key) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        int err = errno;
        return Status(Code::kInvalidUsage, "ATLAS_AUTH_KEY_FILE=" + quoteValue(path) +
                                               " is invalid: cannot open the file (" +
                                               std::strerror(err) + ")");
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    std::string contents = ss.str();
    while (!contents.empty() && (contents.back() == '\n' || contents.back() == '\r')) {
        contents.pop_back();
    }
    if (contents.empty()) {
        return Status(Code::kInvalidUsage, "ATLAS_AUTH_KEY_FILE=" + quoteValue(path) +
                                               " is invalid: the file is empty (it must hold the "
                                               "key)");
    }
    *key = std::move(contents);
    return Status::ok();
}

}  // namespace

std::optional<bool> parseBoolText(std::string_view t) {
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

std::optional<uint64_t> parseUnsignedText(std::string_view t) {
    // from_chars for unsigned types accepts no sign at all, so "-1" and "+1" both fail here.
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) {
        return std::nullopt;
    }
    return v;
}

std::optional<int64_t> parseSignedText(std::string_view t) {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size()) {
        return std::nullopt;
    }
    return v;
}

std::optional<uint64_t> parseSizeText(std::string_view t) {
    uint64_t mult = 1;
    if (!t.empty()) {
        switch (t.back()) {
            case 'k':
            case 'K':
                mult = kKiB;
                break;
            case 'm':
            case 'M':
                mult = kMiB;
                break;
            case 'g':
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
    auto v = parseUnsignedText(t);
    if (!v || *v > std::numeric_limits<uint64_t>::max() / mult) {
        return std::nullopt;
    }
    return *v * mult;
}

std::optional<double> parseDoubleText(std::string_view t) {
    // strtod wants a terminated string and accepts hex, "inf" and "nan": allow only plain
    // decimal notation.
    if (t.empty() || t.size() > 64 || t.find_first_not_of("0123456789.-+eE") != t.npos) {
        return std::nullopt;
    }
    std::string s(t);
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || !std::isfinite(v)) {
        return std::nullopt;
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

const std::vector<ParamSpec>& paramSpecs() {
    static const std::vector<ParamSpec> specs = buildSpecs();
    return specs;
}

const ParamSpec* findParam(std::string_view key) {
    for (const ParamSpec& s : paramSpecs()) {
        if (key == s.key) {
            return &s;
        }
    }
    return nullptr;
}

EnvLookup processEnv() {
    return [](const char* key) -> const char* { return std::getenv(key); };
}

Status ParamsParse::status() const {
    if (errors.empty()) {
        return Status::ok();
    }
    std::string joined;
    for (const std::string& e : errors) {
        joined += (joined.empty() ? "" : "; ") + e;
    }
    return Status(Code::kInvalidUsage, joined);
}

ParamsParse parseParams(const EnvLookup& env) {
    ParamsParse result;
    Params& p = result.params;
    for (const ParamSpec& spec : paramSpecs()) {
        const char* value = env(spec.key);
        if (value == nullptr || value[0] == '\0') {
            continue;  // unset or empty: keep the default
        }
        Status st = spec.parse(value, p);
        if (!st.isOk()) {
            result.errors.push_back(st.message());
        }
    }

    if (!p.auth_key.empty() && !p.auth_key_file.empty()) {
        result.errors.push_back(
            "ATLAS_AUTH_KEY and ATLAS_AUTH_KEY_FILE are both set: set only one of them");
    } else if (!p.auth_key_file.empty()) {
        Status st = loadKeyFile(p.auth_key_file, &p.resolved_auth_key);
        if (!st.isOk()) {
            result.errors.push_back(st.message());
        }
    } else {
        p.resolved_auth_key = p.auth_key;
    }
    if (p.nstreams > p.max_streams) {
        result.errors.push_back("ATLAS_NSTREAMS=" + std::to_string(p.nstreams) +
                                " exceeds ATLAS_MAX_STREAMS=" + std::to_string(p.max_streams));
    }
    if (p.encrypt && p.resolved_auth_key.empty() && p.auth_key_file.empty()) {
        result.errors.push_back(
            "ATLAS_ENCRYPT=1 needs a shared key: set ATLAS_AUTH_KEY or ATLAS_AUTH_KEY_FILE (the "
            "same on both sides)");
    }
    if (!p.faults.empty()) {
        // The fault seam is for tests only: a production job must never run it by accident.
        auto plan = transport::parseFaultPlan(p.faults);
        if (!p.test_mode) {
            result.errors.push_back(
                "ATLAS_FAULTS is a test-only fault injection plan and is refused unless the "
                "process declares itself a test with ATLAS_TEST_MODE=1");
        } else if (!plan.isOk()) {
            result.errors.push_back("ATLAS_FAULTS: " + plan.status().message());
        } else {
            p.resolved_faults = plan.value();
        }
    }
    return result;
}

std::vector<std::string> describeParams(const Params& params, bool include_defaults) {
    std::vector<std::string> lines;
    for (const ParamSpec& spec : paramSpecs()) {
        if (include_defaults || !spec.is_default(params)) {
            lines.push_back(std::string(spec.key) + "=" + spec.format(params));
        }
    }
    return lines;
}

transport::TransportConfig makeTransportConfig(const Params& p, int device_speed_mbps) {
    transport::TransportConfig c;
    c.engine_threads = static_cast<int>(p.engine_threads);
    c.io = p.io;
    c.nstreams = static_cast<int>(p.nstreams);
    c.max_streams = static_cast<int>(p.max_streams);
    c.sockbuf_bytes = static_cast<size_t>(p.sockbuf_bytes);
    c.chunk_bytes = static_cast<size_t>(p.chunk_bytes);
    c.inline_bytes = static_cast<size_t>(p.inline_bytes);
    c.stripe = p.stripe;
    c.timeout_ms = static_cast<int>(p.timeout_ms);
    c.auth_key = p.resolved_auth_key;
    c.resend_bytes = p.resend_bytes;
    c.encrypt = p.encrypt;
    c.faults = p.resolved_faults;
    if (p.link_gbps > 0) {
        c.link_bps = static_cast<uint64_t>(std::llround(p.link_gbps * 1e9));
    } else {
        // Below 1 Gbit/s the reported speed is almost always a virtual device's placeholder
        // (TUN reports 10 Mbit/s), not a path rate: treat it as unknown.
        int mbps = device_speed_mbps >= 1000 ? device_speed_mbps : kDefaultSpeedMbps;
        c.link_bps = static_cast<uint64_t>(mbps) * 1'000'000ull;
    }
    return c;
}

}  // namespace atlas::plugin
