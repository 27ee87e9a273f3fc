// atlas-bubbles: view, record and analyse Atlas bubble channels; `synth` plays a writer.
#include <cstdio>
#include <cstring>
#include <string>

#include "bubbletea/tools/cli_common.h"
#include "bubbletea/tools/commands.h"

namespace {

constexpr const char* kUsage =
    "usage: atlas-bubbles <command> [flags]   (atlas-bubbles <command> --help for details)\n"
    "\n"
    "Bubble channels are the shared-memory segments (/dev/shm/atlas-bubbles-<uid>-<rank>)\n"
    "in which the Atlas NCCL plugin publishes observed GPU idle intervals and predicted\n"
    "idle windows, one per local GPU.\n"
    "\n"
    "commands:\n"
    "  watch    live per-GPU view: status, idle fraction, upcoming windows, accuracy\n"
    "  record   record channels to a Chrome/Perfetto trace and a JSON timeline\n"
    "  stats    bubble fraction per iteration and prediction coverage/precision\n"
    "  replay   re-run the predictor over a recording with other settings, and score it\n"
    "  info     validate segments and print their headers\n"
    "  dump     copy a segment's raw bytes to a file\n"
    "  synth    write a synthetic periodic trace to a channel (demo / testing)\n";

}  // namespace

int main(int argc, char** argv) {
    using namespace atlas::bubbletea::tools;
    if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0 ||
        std::strcmp(argv[1], "help") == 0) {
        std::printf("%s", kUsage);
        return argc < 2 ? kExitUsage : kExitOk;
    }
    const std::string command = argv[1];
    if (command == "watch") {
        return cmdWatch(argc, argv);
    }
    if (command == "record") {
        return cmdRecord(argc, argv);
    }
    if (command == "stats") {
        return cmdStats(argc, argv);
    }
    if (command == "replay") {
        return cmdReplay(argc, argv);
    }
    if (command == "synth") {
        return cmdSynth(argc, argv);
    }
    if (command == "info") {
        return cmdInfo(argc, argv);
    }
    if (command == "dump") {
        return cmdDump(argc, argv);
    }
    std::fprintf(stderr, "atlas-bubbles: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return kExitUsage;
}
