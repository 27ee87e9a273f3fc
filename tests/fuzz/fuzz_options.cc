// libFuzzer target for the options layer (options/): the command-line reader and the
// environment reader over a table with every kind, and atlas-arbiter's real table (flags
// and variables). Input: NUL-separated words; the first word selects argv (even length) or
// environment (odd length, words taken as values of the table's variables in order).
// Invariants: nothing crashes or throws; every error names a flag, a variable or the word
// it is about; an accepted value of an exact kind formats back to text that parses to the
// same value.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "arbiter/options.h"
#include "options/help.h"
#include "options/table.h"

namespace {

using namespace atlas::options;
using namespace atlas::options::kinds;

enum class Mode { kA, kB };
struct ModeChoices {
    static constexpr EnumChoice<Mode> kValues[] = {{"a", Mode::kA}, {"b", Mode::kB}};
};
using ModeKind = Enum<Mode, ModeChoices>;

struct Every {
    uint64_t u = 0;
    int64_t i = 0;
    uint64_t size = 0;
    double d = 0;
    atlas::Nanos ms = 0;
    atlas::Nanos whole = 0;
    Mode mode = Mode::kA;
    std::optional<uint64_t> opt;
    std::vector<int64_t> list;
    std::vector<std::string> rep;
    HostPort addr;
    bool sw = false;
    std::string s;
    std::string secret;
};

#define FUZZ_OPTIONS(X)                                     \
    X("--u", Uint, u, 1, 1000, "N", "")                     \
    X("--i", Int, i, -5, 5, "N", "")                        \
    X("--size", Size, size, 0, kGiB, "S", "")               \
    X("--d", Double, d, -1, 1, "D", "")                     \
    X("--ms", Millis, ms, 0, 1e6, "MS", "")                 \
    X("--whole", WholeMillis, whole, 0, 1e6, "MS", "")      \
    X("--mode", ModeKind, mode, 0, 0, "M", "")              \
    X("--opt", Optional<Uint>, opt, 0, UINT64_MAX, "N", "") \
    X("--list", List<Int>, list, 0, 99, "L", "")            \
    X("--rep", Repeat<Path>, rep, 0, 0, "P", "")            \
    X("--addr", Address, addr, 0, 0, "A", "")               \
    X("--sw", Switch, sw, 0, 0, "", "")                     \
    X("ATLAS_NSTREAMS", String, s, 0, 0, "", "")            \
    X("ATLAS_AUTH_KEY", Secret, secret, 0, 0, "", "")
#define FUZZ_ALIASES(X) \
    X("-u", "--u", false) X("--old", "--u", true) X("ATLAS_MAX_STREAMS", "--u", false)

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<std::string> words(1);
    for (size_t k = 0; k < size; ++k) {
        if (data[k] == 0) {
            words.emplace_back();
        } else {
            words.back() += static_cast<char>(data[k]);
        }
    }
    const bool as_env = words[0].size() % 2 == 1;
    words.erase(words.begin());
    static const auto table = ATLAS_OPTIONS_TABLE(Every, FUZZ_OPTIONS, FUZZ_ALIASES);
    Parsed<Every> p;
    std::vector<std::string> env_names;
    if (as_env) {
        std::map<std::string, std::string> vars;
        for (const char* n :
             {"ATLAS_NSTREAMS", "ATLAS_AUTH_KEY", "ATLAS_MAX_STREAMS", "ATLAS_ARBITER_LISTEN",
              "ATLAS_ARBITER", "ATLAS_SHARING", "ATLAS_SLOT_MS"}) {
            if (!words.empty()) {
                vars[n] = words.back();
                words.pop_back();
            }
        }
        auto env = [&vars](const char* k) -> const char* {
            auto it = vars.find(k);
            return it == vars.end() ? nullptr : it->second.c_str();
        };
        readEnv(table, env, &p);
        (void)atlas::arbiter::parseOptions({}, env);
    } else {
        readArgs(table, words, &p);
        (void)atlas::arbiter::parseOptions(words,
                                           [](const char*) -> const char* { return nullptr; });
    }
    for (const std::string& e : p.errors) {
        if (e.find("--") == std::string::npos && e.find("ATLAS_") == std::string::npos &&
            e.find("-u") == std::string::npos) {
            std::abort();  // every error names what it is about
        }
    }
    // Exact kinds round-trip through their formatting.
    for (const auto& o : table.options) {
        const std::string type = o.type;
        if (type == "unsigned" || type == "integer" || type == "size" || type == "enum" ||
            type == "list") {
            const std::string shown = o.show(p.config);
            if (shown.empty() || !p.has(o.name)) {
                continue;  // only values that were parsed (a default may lie outside the range)
            }
            Every again;
            if (!o.set(shown, again).empty() || o.show(again) != shown) {
                std::abort();
            }
        }
    }
    (void)flagHelp(table);
    (void)markdown(table);
    return 0;
}
