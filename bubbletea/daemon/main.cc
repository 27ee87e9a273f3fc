// bubbletea: the prefill sidecar daemon. Everything but argument and environment handling
// lives in atlas_bubbletea_core (daemon.h); see docs/bubbletea.md.
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "bubbletea/daemon/config.h"
#include "bubbletea/daemon/daemon.h"
#include "options/env.h"

int main(int argc, char** argv) {
    using namespace atlas::bubbletea;
    atlas::options::warnUnknownEnv("bubbletea");
    auto parsed = parseDaemonArgs(argc, argv, atlas::processEnv());
    if (!parsed.isOk()) {
        std::fprintf(stderr, "bubbletea: %s\n", parsed.status().message().c_str());
        return 2;
    }
    for (const std::string& w : parsed.value().warnings) {
        std::fprintf(stderr, "bubbletea: warning: %s\n", w.c_str());
    }
    if (parsed.value().help) {
        std::fputs(daemonHelp().c_str(), stdout);
        return 0;
    }
    // The environment was read by parseDaemonArgs, once, only where no flag was given:
    // libraries take plain config structs.
    DaemonConfig config = parsed.value().config;
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
