// The options layer itself (options/): strict value parsers, every kind, the command-line
// and environment readers (aliases, deprecated spellings, every problem at once), help
// wrapping and the Markdown table, and the nearest-name suggestion.
#include <gtest/gtest.h>

#include <map>

#include "options/env.h"
#include "options/help.h"
#include "options/table.h"

namespace atlas::options {
namespace {

using namespace kinds;

enum class Color { kRed, kGreen };
const char* colorName(Color c) {
    return c == Color::kRed ? "red" : "green";
}

struct Demo {
    uint64_t count = 4;
    int64_t offset = -1;
    uint64_t bytes = 4096;
    double ratio = 0.5;
    Nanos wait_ns = 250 * kNsPerMs;
    Nanos slot_ns = 10 * kNsPerMs;
    Color color = Color::kRed;
    std::string name;
    std::string path;
    std::optional<uint64_t> seed;
    std::vector<int64_t> list = {1, 2};
    std::vector<std::string> tags;
    HostPort addr{"0.0.0.0", 7};
    bool verbose = false;
    bool barrier = true;
    Color mode = Color::kRed;
    std::string secret;
};

using ColorKind = NamedEnum<Color, &colorName, Color::kRed, Color::kGreen>;

#define DEMO_OPTIONS(X)                                               \
    X("--count", Uint, count, 1, 64, "N", "how many")                 \
    X("--offset", Int, offset, -10, 10, "N", "signed")                \
    X("--bytes", Size, bytes, 0, kMiB, "SIZE", "bytes")               \
    X("--ratio", Double, ratio, 0, 1, "R", "a fraction")              \
    X("--wait-ms", Millis, wait_ns, 0, 1000, "MS", "a wait")          \
    X("--slot-ms", WholeMillis, slot_ns, 0, 1000, "MS", "a slot")     \
    X("--color", ColorKind, color, 0, 0, "C", "a color")              \
    X("--name", String, name, 0, 0, "NAME", "any text")               \
    X("--path", Path, path, 0, 0, "FILE", "a file")                   \
    X("--seed", Optional<Uint>, seed, 0, UINT64_MAX, "N", "optional") \
    X("--list", List<Int>, list, 0, 100, "LIST", "comma-separated")   \
    X("--tag", Repeat<String>, tags, 0, 0, "TAG", "repeatable")       \
    X("--addr", Address, addr, 1, 65535, "HOST:PORT", "an address")   \
    X("--verbose", Switch, verbose, 0, 0, "", "more output")          \
    X("--no-barrier", Off, barrier, 0, 0, "", "no barrier")           \
    X("--green", SetTo<Color::kGreen>, mode, 0, 0, "", "green mode")  \
    X("ATLAS_AUTH_KEY", Secret, secret, 0, 0, "", "a secret")

#define DEMO_ALIASES(X)                   \
    X("-c", "--count", false)             \
    X("--old-count", "--count", true)     \
    X("ATLAS_NSTREAMS", "--count", false) \
    X("ATLAS_MAX_STREAMS", "ATLAS_NSTREAMS", true)

const Table<Demo>& demo() {
    static const auto t = ATLAS_OPTIONS_TABLE(Demo, DEMO_OPTIONS, DEMO_ALIASES);
    return t;
}

Parsed<Demo> args(std::vector<std::string> a) {
    Parsed<Demo> p;
    readArgs(demo(), a, &p);
    return p;
}

std::string errorsOf(std::vector<std::string> a) {
    return args(std::move(a)).status().message();
}

TEST(OptionsValues, StrictNumbers) {
    EXPECT_EQ(parseUnsigned("18446744073709551615"), UINT64_MAX);
    for (const char* bad : {"", "-1", "+1", " 1", "1 ", "0x1", "1e3", "18446744073709551616"}) {
        EXPECT_FALSE(parseUnsigned(bad)) << bad;
    }
    EXPECT_EQ(parseSigned("-9223372036854775808"), INT64_MIN);
    EXPECT_FALSE(parseSigned("9223372036854775808"));
    EXPECT_DOUBLE_EQ(*parseDouble("-2.5e-3"), -2.5e-3);
    EXPECT_DOUBLE_EQ(*parseDouble(".5"), 0.5);
    EXPECT_DOUBLE_EQ(*parseDouble("5."), 5.0);
    for (const char* bad :
         {"", ".", "e5", "1e", "1e+", "nan", "inf", "0x1p3", "1,5", "1.5.2", "--1"}) {
        EXPECT_FALSE(parseDouble(bad)) << bad;
    }
    EXPECT_EQ(parseSize("2KiB"), 2048u);
    EXPECT_EQ(parseSize("2kb"), 2048u);
    EXPECT_FALSE(parseSize("2KiBB"));
    EXPECT_EQ(formatDouble(0.75), "0.75");
    EXPECT_EQ(formatDouble(250), "250");
    EXPECT_EQ(formatDouble(0.1), "0.1");
    EXPECT_EQ(*parseDouble(formatDouble(1.0 / 3)), 1.0 / 3);
}

TEST(OptionsValues, HostPort) {
    EXPECT_EQ(parseHostPort("h:1"), (HostPort{"h", 1}));
    EXPECT_EQ(parseHostPort("[::1]:80"), (HostPort{"::1", 80}));
    EXPECT_EQ(formatHostPort({"::1", 80}), "[::1]:80");
    for (const char* bad : {"", "h", ":1", "h:", "h:65536", "[::1]80", "h:-1"}) {
        EXPECT_FALSE(parseHostPort(bad)) << bad;
    }
}

TEST(OptionsValues, NearestName) {
    EXPECT_EQ(editDistance("--itres", "--iters"), 1u);
    EXPECT_EQ(editDistance("kitten", "sitting"), 3u);
    std::vector<std::string_view> known = {"ATLAS_NSTREAMS", "ATLAS_MAX_STREAMS"};
    EXPECT_EQ(nearestName("ATLAS_NSTREAM", known), "ATLAS_NSTREAMS");
    EXPECT_EQ(nearestName("ATLAS_SOMETHING", known), "");
    EXPECT_EQ(nearestName("ATLAS_NSTREAMS", known), "");  // itself is no suggestion
}

TEST(OptionsArgs, EveryKindAndSpelling) {
    auto p = args({"--count=8", "--offset",  "-3",        "--bytes",      "1M",      "--ratio",
                   "0.25",      "--wait-ms", "1.5",       "--slot-ms",    "20",      "--color",
                   "GREEN",     "--name",    "",          "--path",       "/x",      "--seed",
                   "0",         "--list",    "5,6,7",     "--tag",        "a",       "--tag=b",
                   "--addr",    "[::1]:9",   "--verbose", "--no-barrier", "--green", "pos",
                   "--",        "--count"});
    ASSERT_TRUE(p.status().isOk()) << p.status().toString();
    const Demo& d = p.config;
    EXPECT_EQ(d.count, 8u);
    EXPECT_EQ(d.offset, -3);
    EXPECT_EQ(d.bytes, kMiB);
    EXPECT_EQ(d.ratio, 0.25);
    EXPECT_EQ(d.wait_ns, 1500 * kNsPerUs);
    EXPECT_EQ(d.slot_ns, 20 * kNsPerMs);
    EXPECT_EQ(d.color, Color::kGreen);
    EXPECT_EQ(d.path, "/x");
    EXPECT_EQ(d.seed, 0u);
    EXPECT_EQ(d.list, (std::vector<int64_t>{5, 6, 7}));
    EXPECT_EQ(d.tags, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(d.addr, (HostPort{"::1", 9}));
    EXPECT_TRUE(d.verbose);
    EXPECT_FALSE(d.barrier);
    EXPECT_EQ(d.mode, Color::kGreen);
    EXPECT_EQ(p.positional, (std::vector<std::string>{"pos", "--count"}));
    EXPECT_TRUE(p.has("--count"));
    EXPECT_FALSE(p.has("--secret"));
    EXPECT_TRUE(p.warnings.empty());
}

TEST(OptionsArgs, EveryProblemNamedAtOnce) {
    const std::string m =
        errorsOf({"--count", "0", "--offset", "x", "--slot-ms", "1.5", "--seed", "-1", "--list",
                  "1,,2", "--path=", "--verbose=1", "--addr", "h:0", "--colour", "red", "--ratio"});
    for (const char* part :
         {"--count='0' is out of range: expected an unsigned integer in 1..64",
          "--offset='x' is invalid: expected an integer in -10..10",
          "--slot-ms='1.5' is invalid: expected whole milliseconds in 0..1000",
          "--seed='-1' is invalid", "--list='1,,2' is invalid", "--path='' is invalid",
          "--verbose takes no value", "--addr='h:0' is out of range",
          "unknown option '--colour' (did you mean --color?)", "--ratio needs a value (R)"}) {
        EXPECT_NE(m.find(part), std::string::npos) << part << "\n" << m;
    }
}

TEST(OptionsArgs, AliasesAndDeprecatedSpellings) {
    auto p = args({"-c", "3"});
    EXPECT_EQ(p.config.count, 3u);
    EXPECT_TRUE(p.warnings.empty());
    auto old = args({"--old-count", "5"});
    EXPECT_EQ(old.config.count, 5u);
    ASSERT_EQ(old.warnings.size(), 1u);
    EXPECT_EQ(old.warnings[0], "--old-count is deprecated: use --count instead");
    // A variable is not a flag.
    EXPECT_NE(errorsOf({"--ATLAS_NSTREAMS", "1"}).find("unknown option"), std::string::npos);
    EXPECT_NE(errorsOf({"ATLAS_AUTH_KEY"}).find(""), std::string::npos);
}

// A renamed name is refused everywhere it could be given (flag, variable, config-file key),
// and the error names the new one; help and docs list it only as "renamed from".
#define RENAMED_OPTIONS(X)                                   \
    X("--count", Uint, count, 1, 64, "N", "how many")        \
    X("--verbose", Switch, verbose, 0, 0, "", "more output") \
    X("ATLAS_NSTREAMS", Uint, bytes, 0, 64, "", "a variable")
#define RENAMED_ALIASES(X)                    \
    X("--old-count", "--count", kRenamed)     \
    X("--old-verbose", "--verbose", kRenamed) \
    X("ATLAS_MAX_STREAMS", "ATLAS_NSTREAMS", kRenamed)

TEST(OptionsArgs, RenamedNamesAreRefusedWithTheNewName) {
    static const auto t = ATLAS_OPTIONS_TABLE(Demo, RENAMED_OPTIONS, RENAMED_ALIASES);
    Parsed<Demo> p;
    readArgs(t, {"--old-count", "5", "--old-verbose", "word", "--old-count=6"}, &p);
    ASSERT_EQ(p.errors.size(), 3u);
    EXPECT_EQ(p.errors[0], "'--old-count' was renamed: use --count");
    EXPECT_EQ(p.errors[1], "'--old-verbose' was renamed: use --verbose");
    EXPECT_EQ(p.config.count, 4u) << "the old name sets nothing";
    EXPECT_EQ(p.positional, std::vector<std::string>{"word"}) << "a switch takes no value";
    EXPECT_EQ(t.find("--old-count"), nullptr);
    Parsed<Demo> e;
    readEnv(
        t,
        [](const char* k) -> const char* {
            return std::string(k) == "ATLAS_MAX_STREAMS" ? "3" : nullptr;
        },
        &e);
    ASSERT_EQ(e.errors.size(), 1u);
    EXPECT_EQ(e.errors[0], "'ATLAS_MAX_STREAMS' was renamed: use ATLAS_NSTREAMS");
    EXPECT_EQ(e.config.bytes, 4096u);
    Parsed<Demo> f;
    EXPECT_FALSE(applyNamed(t, "--old-count", "5", &f));
    ASSERT_EQ(f.errors.size(), 1u);
    EXPECT_EQ(f.errors[0], "'--old-count' was renamed: use --count");
    const std::string h = flagHelp(t);
    EXPECT_EQ(h.find("--old-count,"), std::string::npos) << h;
    EXPECT_NE(h.find("[renamed from --old-verbose]"), std::string::npos) << h;
    const std::string eh = "\n" + envHelp(t);
    EXPECT_EQ(eh.find("\n  ATLAS_MAX_STREAMS"), std::string::npos) << eh;  // no line of its own
    EXPECT_NE(markdown(t).find("renamed from `--old-count` (refused)"), std::string::npos);
}

TEST(OptionsEnv, VariablesFlagsWinDeprecatedLose) {
    std::map<std::string, std::string> vars = {
        {"ATLAS_MAX_STREAMS", "6"}, {"ATLAS_AUTH_KEY", "k"}, {"ATLAS_NSTREAMS", ""}};
    auto env = [&vars](const char* k) -> const char* {
        auto it = vars.find(k);
        return it == vars.end() ? nullptr : it->second.c_str();
    };
    Parsed<Demo> p;
    readEnv(demo(), env, &p);
    EXPECT_EQ(p.config.count, 6u);  // the deprecated variable, its replacement empty
    EXPECT_EQ(p.config.secret, "k");
    ASSERT_EQ(p.warnings.size(), 1u);
    EXPECT_NE(p.warnings[0].find("ATLAS_MAX_STREAMS is deprecated: use ATLAS_NSTREAMS"),
              std::string::npos);
    vars["ATLAS_NSTREAMS"] = "7";
    Parsed<Demo> q;
    readEnv(demo(), env, &q);
    EXPECT_EQ(q.config.count, 7u);
    readArgs(demo(), {"--count", "9"}, &q);
    EXPECT_EQ(q.config.count, 9u);
    vars["ATLAS_NSTREAMS"] = "99";
    Parsed<Demo> r;
    readEnv(demo(), env, &r);
    ASSERT_EQ(r.errors.size(), 1u);
    EXPECT_NE(r.errors[0].find("ATLAS_NSTREAMS='99' is out of range"), std::string::npos);
}

TEST(OptionsHelp, WrappedWithDefaultsAndGeneratedDocs) {
    const std::string h = flagHelp(demo());
    EXPECT_NE(h.find("  -c, --count N"), std::string::npos) << h;
    EXPECT_NE(h.find("[an unsigned integer in 1..64; default 4; env ATLAS_NSTREAMS;"),
              std::string::npos)
        << h;
    EXPECT_NE(h.find("old spelling --old-count]"), std::string::npos) << h;
    EXPECT_NE(h.find("  --wait-ms MS"), std::string::npos);
    EXPECT_EQ(h.find("ATLAS_AUTH_KEY"), std::string::npos);  // variables are not flags
    for (size_t start = 0, end; start < h.size(); start = end + 1) {
        end = h.find('\n', start);
        EXPECT_LE(end - start, 100u) << h.substr(start, end - start);
        EXPECT_NE(h[end - 1], ' ') << "trailing space: " << h.substr(start, end - start);
    }
    const std::string e = envHelp(demo());
    EXPECT_NE(e.find("ATLAS_NSTREAMS"), std::string::npos);
    EXPECT_NE(e.find("ATLAS_MAX_STREAMS"), std::string::npos);
    const std::string md = markdown(demo());
    EXPECT_NE(md.find("| `--count`, `-c` | `N`: an unsigned integer in 1..64 | `4` |"),
              std::string::npos)
        << md;
    EXPECT_NE(md.find("one of red\\|green"), std::string::npos) << md;  // '|' escaped
}

TEST(OptionsEnv, UnknownVariablesOnly) {
    const char* env[] = {"ATLAS_NSTREAMS=1", "ATLAS_WAN_PREFIX=x", "ATLASX=1", "ATLAS_NSTREAMZ=2",
                         nullptr};
    auto w = unknownEnvWarnings(env);
    ASSERT_EQ(w.size(), 1u);
    EXPECT_NE(w[0].find("ATLAS_NSTREAMZ is not an Atlas variable (did you mean ATLAS_NSTREAMS?)"),
              std::string::npos);
    static_assert(isKnownEnvName("ATLAS_ARBITER_LISTEN"));
    static_assert(!isKnownEnvName("ATLAS_NSTREAM"));
}

// Once per process: the plugin rebuilds its state at each init after a finalize, and must
// not repeat the warning each time (the only caller of the Once variant in this binary).
TEST(OptionsEnv, UnknownVariableWarnedOncePerProcess) {
    const char* env[] = {"ATLAS_NSTREAM=8", nullptr};
    auto first = unknownEnvWarningsOnce(env);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_NE(first[0].find("ATLAS_NSTREAM is not an Atlas variable (did you mean "
                            "ATLAS_NSTREAMS?); it has no effect"),
              std::string::npos)
        << first[0];
    EXPECT_TRUE(unknownEnvWarningsOnce(env).empty());
    EXPECT_EQ(unknownEnvWarnings(env).size(), 1u);  // the plain query still answers
}

}  // namespace
}  // namespace atlas::options
