// Shared plumbing of the atlas-bubbles subcommands: channel selection, signals, output.
// Exit codes: 0 success, 1 runtime failure (missing/foreign segment, I/O), 2 usage error.
#pragma once

#include <csignal>
#include <string>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"
#include "bubbletea/tools/args.h"

namespace atlas::bubbletea::tools {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Flags every channel-reading subcommand accepts.
std::vector<FlagSpec> channelFlags();

// The channels named by --channel/--rank, or every /dev/shm/atlas-bubbles-* when none.
// Errors: a bad name or rank (kInvalidArgument), nothing found (kUnavailable).
Result<std::vector<std::string>> selectChannels(const Args& args);

// Set by SIGINT/SIGTERM once installStopHandlers() ran.
extern volatile std::sig_atomic_t g_stop;
void installStopHandlers();

// Prints "atlas-bubbles <command>: <message>" to stderr and returns `code`.
int fail(const char* command, const std::string& message, int code = kExitFailure);
// For a failed Args::parse or typed getter: the message plus a pointer to --help.
int usageError(const char* command, const Status& status);

// Writes text to a file; the Status names the path on failure.
Status writeFile(const std::string& path, const std::string& text);
Result<std::string> readFile(const std::string& path);

// "+12.3 ms", "1.250 s" and the like.
std::string formatDuration(Nanos ns);

}  // namespace atlas::bubbletea::tools
