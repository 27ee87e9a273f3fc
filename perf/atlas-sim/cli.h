// The atlas-sim command line (docs/atlas-sim.md):
//   atlas-sim run CONFIG [--set PATH=VALUE]... [--json FILE] [--trace FILE] [--plots DIR]
//   atlas-sim compare CONFIG [--set PATH=VALUE]... [--json FILE]
//   atlas-sim plan CONFIG [--set PATH=VALUE]... [--json FILE]
// Exit status: 0 success, 1 the simulation failed, 2 bad usage or configuration.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace atlas::sim {

// Runs one command; output goes to `out`, diagnostics to `err`.
int runCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// --help, and docs/atlas-sim.md's option table, both from the flag registry (cli.cc).
std::string helpText();
std::string optionsMarkdown();

}  // namespace atlas::sim
