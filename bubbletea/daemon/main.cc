// bubbletea: the prefill sidecar daemon. Everything but argument and environment handling
// lives in atlas_bubbletea_core (daemon.h); see docs/bubbletea.md.
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "bubbletea/daemon/config.h"
#include "bubbletea/daemon/daemon.h"

int main(int argc, char** argv) {
    using namespace atlas::bubbletea;
    auto parsed = parseDaemonArgs(argc, argv);
    if (!parsed.isOk()) {
        std::fprintf(stderr, "bubbletea: %s\n", parsed.status().message().c_str());
        return 2;
    }
    if (parsed.value().help) {
        std::fputs(daemonHelp().c_str(), stdout);
        return 0;
    }
    DaemonConfig config = parsed.value().config;
    // The environment is read here, once, and only where no flag was given: libraries take
    // plain config structs.
    if (config.channel.empty()) {
        if (const char* env = std::getenv("ATLAS_BUBBLE_CHANNEL"); env != nullptr && *env) {
            config.channel = env;
        }
    }
    if (config.local_rank < 0) {
        if (const char* env = std::getenv("LOCAL_RANK"); env != nullptr && *env) {
            config.local_rank = std::atoi(env);
        }
    }
    // Peers that vanish must show up as errors on the socket, not kill the daemon.
    std::signal(SIGPIPE, SIG_IGN);

    const atlas::LogLevel level = config.log_level == "warn"    ? atlas::LogLevel::kWarn
                                  : config.log_level == "trace" ? atlas::LogLevel::kTrace
                                                                : atlas::LogLevel::kInfo;
    auto daemon = Daemon::create(config, atlas::Logger::stderrLogger(level));
    if (!daemon.isOk()) {
        std::fprintf(stderr, "bubbletea: %s\n", daemon.status().toString().c_str());
        return 1;
    }
    daemon.value()->handleSignals();
    daemon.value()->start();
    daemon.value()->wait();
    std::fprintf(stderr, "[atlas] INFO bubbletea: stopped\n");
    return 0;
}
