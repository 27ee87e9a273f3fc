// atlas-arbiter: the DC-wide WAN link arbiter daemon (docs/arbitration.md).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "arbiter/options.h"
#include "arbiter/server.h"
#include "options/env.h"

namespace {

void logToStderr(void* ctx, atlas::LogLevel level, const char*, int, const char* msg) {
    const int max = *static_cast<int*>(ctx);
    if (static_cast<int>(level) > max) {
        return;
    }
    const char* name = level == atlas::LogLevel::kWarn   ? "WARN"
                       : level == atlas::LogLevel::kInfo ? "INFO"
                                                         : "TRACE";
    std::fprintf(stderr, "atlas-arbiter %s %s\n", name, msg);
    std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
    atlas::options::warnUnknownEnv("atlas-arbiter");
    std::vector<std::string> args(argv + 1, argv + argc);
    std::vector<std::string> warnings;
    auto parsed = atlas::arbiter::parseOptions(args, atlas::processEnv(), &warnings);
    for (const std::string& w : warnings) {
        std::fprintf(stderr, "atlas-arbiter: warning: %s\n", w.c_str());
    }
    if (!parsed) {
        std::fprintf(stderr, "atlas-arbiter: %s\n", parsed.status().message().c_str());
        return 2;
    }
    atlas::arbiter::DaemonOptions& opts = parsed.value();
    if (opts.help) {
        std::fputs(atlas::arbiter::usageText().c_str(), stdout);
        return 0;
    }
    static int level = static_cast<int>(opts.verbose ? atlas::LogLevel::kTrace
                                        : opts.quiet ? atlas::LogLevel::kWarn
                                                     : atlas::LogLevel::kInfo);
    opts.server.logger = atlas::Logger(logToStderr, &level);
    opts.server.handle_signals = true;
    auto server = atlas::arbiter::ArbiterServer::create(opts.server);
    if (!server) {
        std::fprintf(stderr, "atlas-arbiter: %s\n", server.status().message().c_str());
        return 1;
    }
    if (!opts.port_file.empty()) {
        // Written atomically (rename), so a script polling for it never reads half a number.
        const std::string tmp = opts.port_file + ".tmp." + std::to_string(::getpid());
        {
            std::ofstream f(tmp);
            f << (*server)->port() << "\n";
            if (!f) {
                std::fprintf(stderr, "atlas-arbiter: cannot write %s\n", tmp.c_str());
                return 1;
            }
        }
        if (std::rename(tmp.c_str(), opts.port_file.c_str()) != 0) {
            std::fprintf(stderr, "atlas-arbiter: cannot rename %s: %s\n", tmp.c_str(),
                         std::strerror(errno));
            return 1;
        }
    }
    atlas::Status st = (*server)->run();
    if (!st.isOk()) {
        std::fprintf(stderr, "atlas-arbiter: %s\n", st.message().c_str());
        return 1;
    }
    return 0;
}
