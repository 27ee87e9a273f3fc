// The atlas-bubbles subcommands. Each takes the full argv (argv[1] is the subcommand name)
// and returns the process exit code (cli_common.h).
#pragma once

namespace atlas::bubbletea::tools {

int cmdWatch(int argc, char** argv);
int cmdRecord(int argc, char** argv);
int cmdStats(int argc, char** argv);
int cmdReplay(int argc, char** argv);
int cmdSynth(int argc, char** argv);
int cmdInfo(int argc, char** argv);
int cmdDump(int argc, char** argv);

}  // namespace atlas::bubbletea::tools
