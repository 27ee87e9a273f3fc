// The options layer: one typed registry per entry point, filled from the environment and
// the command line by the same code. docs/options.md describes it for contributors.
//
// A registry is an X-macro list, one line per knob:
//     X(NAME, Kind, field, lo, hi, METAVAR, "doc")
//   NAME     "--listen" (a flag), "-D" (a short flag) or "ATLAS_SLOT_MS" (a variable)
//   Kind     an options::kinds type (or the binary's own): syntax, range check, formatting
//   field    the member of the config struct it sets (a path: server.port); its default is
//            the struct's initializer, so help and docs show exactly what the code uses
//   lo, hi   the accepted range (0, 0 where the kind has none)
//   METAVAR  the value's name in help ("MS"); "" for switches and variables
// plus an alias list X(ALIAS, TARGET, deprecated): a second spelling of a flag or variable,
// an ATLAS_* variable that feeds a flag (the flag wins), an old name that still works and
// warns (deprecated = true), or an old name that no longer works (options::kRenamed): using
// it is an error that names TARGET, so a script with the old name fails and says what to write.
//
// ATLAS_OPTIONS_TABLE builds the Table and rejects a duplicate name at compile time. Parsing
// reports every problem at once (errors name the flag or variable, the value and what is
// accepted) and never throws. Help text and Markdown tables come from the same Table.
//
// Threads: a Table is immutable once built; build it once (a function-local static).
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "atlas/common/env.h"
#include "atlas/common/status.h"
#include "options/env.h"
#include "options/kinds.h"

namespace atlas::options {

// What docs and help need to know about one entry.
struct OptionInfo {
    std::string_view name;   // "--listen", "-D", "ATLAS_SLOT_MS"
    std::string_view field;  // "server.port"
    const char* type = "";
    const char* metavar = "";
    const char* doc = "";
    bool takes_value = true;
    bool repeatable = false;
    std::string accepted;      // "an unsigned integer in 0..64"
    std::string default_text;  // the default formatted like a value; "" = none shown
};

struct Alias {
    std::string_view name;
    std::string_view target;
    bool deprecated = false;
    bool renamed = false;  // not accepted: naming it is an error that names `target`
};

// The third argument of an alias entry that marks a renamed name (see above).
struct Renamed {};
inline constexpr Renamed kRenamed{};
constexpr Alias makeAlias(std::string_view name, std::string_view target, bool deprecated) {
    return Alias{name, target, deprecated, false};
}
constexpr Alias makeAlias(std::string_view name, std::string_view target, Renamed) {
    return Alias{name, target, false, true};
}

// Names that configure by environment: anything that does not start with '-'.
inline bool isEnvName(std::string_view name) {
    return !name.empty() && name[0] != '-';
}

template <typename Config>
struct Option : OptionInfo {
    // Parses `text` into the field. Returns "" or the reason, e.g. "is out of range:
    // expected an unsigned integer in 1..16" (the caller prefixes NAME='text').
    std::function<std::string(std::string_view text, Config&)> set;
    std::function<std::string(const Config&)> show;  // the field's value, formatted
    std::function<bool(const Config&)> is_default;
};

template <typename Config>
struct Table {
    std::vector<Option<Config>> options;
    std::vector<Alias> aliases;

    // The option `name` designates (directly or through aliases), or nullptr. `via` gets the
    // alias used, if any.
    const Option<Config>* find(std::string_view name, const Alias** via = nullptr) const {
        if (via != nullptr) {
            *via = nullptr;
        }
        for (int hops = 0; hops < 4; ++hops) {
            for (const auto& o : options) {
                if (o.name == name) {
                    return &o;
                }
            }
            const Alias* next = nullptr;
            for (const auto& a : aliases) {
                if (a.name == name && !a.renamed) {
                    next = &a;
                }
            }
            if (next == nullptr) {
                return nullptr;
            }
            if (via != nullptr && (*via == nullptr || next->deprecated)) {
                *via = next;
            }
            name = next->target;
        }
        return nullptr;
    }
    // The new name of a renamed name (an alias entry with kRenamed), or "" when `name` is not one.
    std::string_view renamedTo(std::string_view name) const {
        for (const auto& a : aliases) {
            if (a.renamed && a.name == name) {
                return a.target;
            }
        }
        return {};
    }
    std::vector<const OptionInfo*> infos() const {
        std::vector<const OptionInfo*> out;
        for (const auto& o : options) {
            out.push_back(&o);
        }
        return out;
    }
};

// The outcome of reading the environment and/or a command line into a Config.
template <typename Config>
struct Parsed {
    Config config{};
    std::vector<std::string> errors;      // complete messages, one per problem
    std::vector<std::string> warnings;    // deprecated spellings and the like
    std::vector<std::string> positional;  // words that are not flags, in order
    std::vector<std::string> given;       // canonical names of the options that were set

    bool has(std::string_view name) const {
        return std::find(given.begin(), given.end(), name) != given.end();
    }
    // OK, or `code` with every error joined by "; ".
    Status status(Code code = Code::kInvalidArgument) const { return joinErrors(errors, code); }

    static Status joinErrors(const std::vector<std::string>& errors, Code code) {
        if (errors.empty()) {
            return Status::ok();
        }
        std::string joined;
        for (const std::string& e : errors) {
            joined += (joined.empty() ? "" : "; ") + e;
        }
        return Status(code, joined);
    }
};

// ---- building a table (used through the macros below) ----

namespace detail {

template <typename F, typename V>
void store(F& field, V&& v) {
    if constexpr (std::is_arithmetic_v<F> && std::is_arithmetic_v<std::decay_t<V>>) {
        field = static_cast<F>(v);
    } else {
        field = std::forward<V>(v);
    }
}

template <typename Vec, typename V>
void append(Vec& field, V&& v) {
    using Elem = typename Vec::value_type;
    if constexpr (std::is_arithmetic_v<Elem> && std::is_arithmetic_v<std::decay_t<V>>) {
        field.push_back(static_cast<Elem>(v));
    } else {
        field.push_back(std::forward<V>(v));
    }
}

constexpr bool allDistinct(const std::string_view* names, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        for (size_t j = i + 1; j < n; ++j) {
            if (names[i] == names[j]) {
                return false;
            }
        }
    }
    return true;
}

}  // namespace detail

template <typename Config, typename Kind, typename Access>
Option<Config> makeOption(std::string_view name, const char* field, const char* metavar,
                          const char* doc, typename Kind::Bound lo, typename Kind::Bound hi,
                          Access access) {
    Option<Config> o;
    o.name = name;
    o.field = field;
    o.type = Kind::kType;
    o.metavar = metavar;
    o.doc = doc;
    o.takes_value = Kind::kTakesValue;
    o.repeatable = Kind::kRepeat;
    o.accepted = Kind::accepted(lo, hi);
    const Config defaults{};
    o.default_text = Kind::format(access(defaults));
    std::string accepted = o.accepted;
    o.set = [access, lo, hi, accepted](std::string_view text, Config& c) -> std::string {
        if constexpr (!Kind::kTakesValue) {
            (void)lo;  // a switch has no value to check (clang: -Wunused-lambda-capture)
            (void)hi;
            (void)text;
            detail::store(access(c), Kind::switched());
            return "";
        } else {
            auto v = Kind::parse(text);
            if (!v) {
                return "is invalid: expected " + accepted;
            }
            if (!Kind::inRange(*v, lo, hi)) {
                return "is out of range: expected " + accepted;
            }
            if constexpr (Kind::kRepeat) {
                detail::append(access(c), std::move(*v));
            } else {
                detail::store(access(c), std::move(*v));
            }
            return "";
        }
    };
    o.show = [access](const Config& c) { return Kind::format(access(c)); };
    // Compared as shown: what the effective-value log would print (and no operator== needed).
    o.is_default = [access](const Config& c) {
        static const Config kDefaults{};
        return Kind::format(access(c)) == Kind::format(access(kDefaults));
    };
    return o;
}

// One X-macro line -> one Option (expects `Config` to name the config type in scope).
#define ATLAS_OPTION_MAKE(NAME, Kind, FIELD, LO, HI, METAVAR, DOC) \
    ::atlas::options::makeOption<Config, Kind>(                    \
        NAME, #FIELD, METAVAR, DOC, LO, HI, [](auto& c) -> auto& { return c.FIELD; }),
#define ATLAS_OPTION_ALIAS_MAKE(NAME, TARGET, DEPRECATED) \
    ::atlas::options::makeAlias(NAME, TARGET, DEPRECATED),
#define ATLAS_OPTION_NAME_OF(NAME, ...) std::string_view(NAME),

// Expands to an expression of type Table<CONFIG> built from the X-macro lists OPTIONS and
// ALIASES; a name used twice (by an option or an alias) fails to compile. Kinds are looked
// up unqualified: use it where options::kinds (and the binary's own kinds) are visible.
#define ATLAS_OPTIONS_TABLE(CONFIG, OPTIONS, ALIASES)                                         \
    [] {                                                                                      \
        using Config = CONFIG;                                                                \
        static constexpr std::string_view kNames[] = {OPTIONS(ATLAS_OPTION_NAME_OF)           \
                                                          ALIASES(ATLAS_OPTION_NAME_OF)};     \
        static_assert(::atlas::options::detail::allDistinct(kNames, std::size(kNames)),       \
                      "an option or alias name is declared twice in " #OPTIONS "/" #ALIASES); \
        static_assert(::atlas::options::allEnvNamesKnown(kNames, std::size(kNames)),          \
                      "an ATLAS_* name of " #OPTIONS "/" #ALIASES                             \
                      " is missing from include/atlas/env_catalog.h");                        \
        return ::atlas::options::Table<Config>{{OPTIONS(ATLAS_OPTION_MAKE)},                  \
                                               {ALIASES(ATLAS_OPTION_ALIAS_MAKE)}};           \
    }()
#define ATLAS_OPTIONS_NO_ALIASES(X)

// ---- reading values ----

// "'--guard-band-us' was renamed: use --end-margin-us" for a renamed alias `a`.
inline std::string renamedError(const Alias& a) {
    return "'" + std::string(a.name) + "' was renamed: use " + std::string(a.target);
}

// Sets option `o` from `text` (spelled `spelled`: the name or alias the user wrote). On an
// error, adds "SPELLED='text' <reason>" to `into->errors`.
template <typename Config>
void applyValue(const Option<Config>& o, std::string_view spelled, std::string_view text,
                Parsed<Config>* into) {
    std::string why = o.set(text, into->config);
    if (!why.empty()) {
        into->errors.push_back(std::string(spelled) + "=" + quote(text) + " " + why);
        return;
    }
    if (!into->has(o.name)) {
        into->given.emplace_back(o.name);
    }
}

// Reads every environment variable of `table` (its options named like variables and its
// aliases named like variables). Empty values count as unset. A deprecated variable is used
// only when its replacement is unset, and warns either way.
template <typename Config>
void readEnv(const Table<Config>& table, const EnvLookup& env, Parsed<Config>* into) {
    auto value = [&](std::string_view name) -> const char* {
        const char* v = env(std::string(name).c_str());
        return v == nullptr || v[0] == '\0' ? nullptr : v;
    };
    for (const Alias& a : table.aliases) {
        if (a.renamed && isEnvName(a.name) && value(a.name) != nullptr) {
            into->errors.push_back(renamedError(a));
        }
    }
    // Deprecated spellings first, so that a current one set as well overrides them.
    for (bool deprecated : {true, false}) {
        for (const Alias& a : table.aliases) {
            const char* v =
                isEnvName(a.name) && a.deprecated == deprecated ? value(a.name) : nullptr;
            const Option<Config>* o = v == nullptr ? nullptr : table.find(a.name);
            if (o == nullptr) {
                continue;
            }
            if (deprecated) {
                const bool replaced = value(a.target) != nullptr;
                into->warnings.push_back(std::string(a.name) + " is deprecated: use " +
                                         std::string(a.target) +
                                         (replaced ? " (set too, so it wins)" : " instead"));
                if (replaced) {
                    continue;
                }
            }
            applyValue(*o, a.name, v, into);
        }
    }
    for (const auto& o : table.options) {
        if (const char* v = isEnvName(o.name) ? value(o.name) : nullptr) {
            applyValue(o, o.name, v, into);
        }
    }
}

// Reads a command line (argv without the program name): "--name value", "--name=value",
// switches, short aliases ("-D 4"), positional words, and "--" (the rest is positional). A
// value may start with '-' ("--delay-ms -1" is then a range error, not a missing value).
// Unknown flags are errors that suggest the nearest known flag.
template <typename Config>
void readArgs(const Table<Config>& table, const std::vector<std::string>& args,
              Parsed<Config>* into) {
    bool only_positional = false;
    for (size_t i = 0; i < args.size(); ++i) {
        const std::string& word = args[i];
        if (only_positional || word.size() < 2 || word[0] != '-' || parseDouble(word).has_value()) {
            into->positional.push_back(word);
            continue;
        }
        if (word == "--") {
            only_positional = true;
            continue;
        }
        std::string_view name = word;
        std::string_view inline_value;
        bool has_inline = false;
        if (const size_t eq = name.find('='); eq != std::string_view::npos && name.size() > 2) {
            inline_value = name.substr(eq + 1);
            name = name.substr(0, eq);
            has_inline = true;
        }
        const Alias* via = nullptr;
        const Option<Config>* o = table.find(name, &via);
        if (const std::string_view to = table.renamedTo(name); !to.empty()) {
            into->errors.push_back(renamedError(Alias{name, to, false, true}));
            const Option<Config>* now = table.find(to);
            if (!has_inline && now != nullptr && now->takes_value && i + 1 < args.size()) {
                ++i;  // its value, not a positional word
            }
            continue;
        }
        if (o == nullptr || isEnvName(o->name)) {
            std::vector<std::string_view> flags;
            for (const auto& opt : table.options) {
                if (!isEnvName(opt.name)) {
                    flags.push_back(opt.name);
                }
            }
            const std::string_view near = nearestName(name, flags);
            into->errors.push_back(
                "unknown option '" + std::string(name) + "'" +
                (near.empty() ? "" : " (did you mean " + std::string(near) + "?)") +
                "; see --help");
            continue;
        }
        if (via != nullptr && via->deprecated) {
            into->warnings.push_back(std::string(name) + " is deprecated: use " +
                                     std::string(o->name) + " instead");
        }
        if (!o->takes_value) {
            if (has_inline) {
                into->errors.push_back(std::string(name) + " takes no value");
                continue;
            }
            applyValue(*o, name, "", into);
            continue;
        }
        if (!has_inline) {
            if (i + 1 >= args.size()) {
                into->errors.push_back(std::string(name) + " needs a value (" +
                                       (o->metavar[0] != '\0' ? o->metavar : o->type) + ")");
                continue;
            }
            inline_value = args[++i];
        }
        applyValue(*o, name, inline_value, into);
    }
}

// Sets option `name` (a flag or variable name, or an alias) from text: for config files
// whose keys are option names. A renamed name adds renamedError() to `into->errors`. Returns
// false when there is no such option (renamed or not).
template <typename Config>
bool applyNamed(const Table<Config>& table, std::string_view name, std::string_view text,
                Parsed<Config>* into) {
    const Option<Config>* o = table.find(name);
    if (o == nullptr) {
        if (const std::string_view to = table.renamedTo(name); !to.empty()) {
            into->errors.push_back(renamedError(Alias{name, to, false, true}));
        }
        return false;
    }
    applyValue(*o, name, text, into);
    return true;
}

}  // namespace atlas::options
