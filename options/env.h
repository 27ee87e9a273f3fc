// The catalogue of ATLAS_* names (include/atlas/env_catalog.h) as data, and the warning for
// variables that are in none of its lists: a typo such as ATLAS_NSTREAM=8 would otherwise be
// ignored without a word.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "atlas/env_catalog.h"

namespace atlas::options {

#define ATLAS_ENV_CATALOG_NAME(KEY, ...) std::string_view(#KEY),
#define ATLAS_ENV_CATALOG_ALIAS_NAME(OLD, NEW) std::string_view(#OLD),
inline constexpr std::string_view kKnownEnvNames[] = {
    ATLAS_PARAM_LIST(ATLAS_ENV_CATALOG_NAME) ATLAS_PARAM_ALIASES(ATLAS_ENV_CATALOG_ALIAS_NAME)
        ATLAS_BINARY_ENV_LIST(ATLAS_ENV_CATALOG_NAME) ATLAS_TOOL_ENV_LIST(ATLAS_ENV_CATALOG_NAME)};
#undef ATLAS_ENV_CATALOG_NAME
#undef ATLAS_ENV_CATALOG_ALIAS_NAME

constexpr bool isKnownEnvName(std::string_view name) {
    for (std::string_view known : kKnownEnvNames) {
        if (known == name) {
            return true;
        }
    }
    return false;
}

// Options tables may only read catalogued variables (checked at compile time by
// ATLAS_OPTIONS_TABLE): `names` holds flag and variable names alike.
constexpr bool allEnvNamesKnown(const std::string_view* names, size_t n) {
    for (size_t i = 0; i < n; ++i) {
        if (!names[i].empty() && names[i][0] != '-' && !isKnownEnvName(names[i])) {
            return false;
        }
    }
    return true;
}

// One message per "ATLAS_*=..." entry of `envp` (a NULL-terminated array such as environ)
// whose name is not catalogued, e.g. "ATLAS_NSTREAM is not an Atlas variable (did you mean
// ATLAS_NSTREAMS?); it has no effect". Each name at most once, in environment order.
std::vector<std::string> unknownEnvWarnings(const char* const* envp);
// The same for this process's environment.
std::vector<std::string> unknownEnvWarnings();
// unknownEnvWarnings(envp) the first time any caller in the process asks, nothing after: the
// plugin's state is rebuilt at every init after a finalize, and a long job must not repeat
// the same warning at every communicator. Thread-safe.
std::vector<std::string> unknownEnvWarningsOnce(const char* const* envp);
std::vector<std::string> unknownEnvWarningsOnce();
// A Markdown table of the variables that only daemons, tools, scripts and tests read
// (ATLAS_BINARY_ENV_LIST, ATLAS_TOOL_ENV_LIST): | Variable | Read by | Meaning |.
std::string otherEnvMarkdown();

// Prints unknownEnvWarningsOnce() to stderr as "<program>: warning: <message>" lines: what
// each binary that reads ATLAS_* variables calls first.
void warnUnknownEnv(const char* program);

}  // namespace atlas::options
