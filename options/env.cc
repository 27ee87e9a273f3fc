#include "options/env.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

#include "options/value.h"

extern char** environ;  // NOLINT: POSIX

namespace atlas::options {

std::vector<std::string> unknownEnvWarnings(const char* const* envp) {
    std::vector<std::string> out;
    std::vector<std::string_view> seen;
    const std::vector<std::string_view> known(std::begin(kKnownEnvNames), std::end(kKnownEnvNames));
    for (; envp != nullptr && *envp != nullptr; ++envp) {
        const std::string_view entry(*envp);
        const std::string_view name = entry.substr(0, entry.find('='));
        if (name.rfind("ATLAS_", 0) != 0 || isKnownEnvName(name) ||
            std::find(seen.begin(), seen.end(), name) != seen.end()) {
            continue;
        }
        seen.push_back(name);
        const std::string_view near = nearestName(name, known);
        out.push_back(std::string(name) + " is not an Atlas variable" +
                      (near.empty() ? "" : " (did you mean " + std::string(near) + "?)") +
                      "; it has no effect (docs/env.md lists them)");
    }
    return out;
}

std::vector<std::string> unknownEnvWarnings() {
    return unknownEnvWarnings(environ);
}

std::vector<std::string> unknownEnvWarningsOnce(const char* const* envp) {
    // No global constructor (the plugin): a constant-initialized atomic.
    static std::atomic<bool> warned{false};
    if (warned.exchange(true, std::memory_order_relaxed)) {
        return {};
    }
    return unknownEnvWarnings(envp);
}

std::vector<std::string> unknownEnvWarningsOnce() {
    return unknownEnvWarningsOnce(environ);
}

std::string otherEnvMarkdown() {
    std::string out = "| Variable | Read by | Meaning |\n|---|---|---|\n";
#define ATLAS_ENV_ROW(NAME, READERS, DOC) \
    out += std::string("| `") + #NAME + "` | " + READERS + " | " + DOC + " |\n";
    ATLAS_BINARY_ENV_LIST(ATLAS_ENV_ROW)
    ATLAS_TOOL_ENV_LIST(ATLAS_ENV_ROW)
#undef ATLAS_ENV_ROW
    return out;
}

void warnUnknownEnv(const char* program) {
    for (const std::string& w : unknownEnvWarningsOnce()) {
        std::fprintf(stderr, "%s: warning: %s\n", program, w.c_str());
    }
}

}  // namespace atlas::options
