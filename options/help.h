// Help text and Markdown tables generated from an options Table, so --help and the docs show
// exactly the names, ranges and defaults the parser applies.
#pragma once

#include <string>
#include <vector>

#include "options/table.h"

namespace atlas::options {

// The flags, one entry each:
//   "  -D, --pipelines N       data-parallel pipelines [an unsigned integer in 1..64;
//                              default 4; env ATLAS_X]"
// wrapped at 100 columns. Deprecated aliases are listed as "old spelling: ...".
std::string formatFlagHelp(const std::vector<const OptionInfo*>& options,
                           const std::vector<Alias>& aliases);
// The environment variables of the table (options named like variables, and variables that
// feed a flag), one line each.
std::string formatEnvHelp(const std::vector<const OptionInfo*>& options,
                          const std::vector<Alias>& aliases);
// A Markdown table: | Flag | Value | Default | Meaning | for every entry (env_names = false;
// variables appear by name), or | Variable | Type | Default | Accepted | Meaning | for the
// variables only (env_names = true).
std::string markdownTable(const std::vector<const OptionInfo*>& options,
                          const std::vector<Alias>& aliases, bool env_names);

template <typename Config>
std::string flagHelp(const Table<Config>& t) {
    return formatFlagHelp(t.infos(), t.aliases);
}
template <typename Config>
std::string envHelp(const Table<Config>& t) {
    return formatEnvHelp(t.infos(), t.aliases);
}
template <typename Config>
std::string markdown(const Table<Config>& t, bool env_names = false) {
    return markdownTable(t.infos(), t.aliases, env_names);
}

}  // namespace atlas::options
