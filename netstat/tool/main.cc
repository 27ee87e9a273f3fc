// atlas-netstat: every Atlas comm on this node with its streams, read from the processes'
// stats segments (docs/netstat.md). Flags: netstat/tool/options.cc (atlas-netstat --help).
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "netstat/reader.h"
#include "netstat/render.h"
#include "netstat/tool/options.h"
#include "netstat/tool/serve.h"
#include "options/env.h"

namespace {

using atlas::netstat::ProcessView;

std::atomic<bool> g_stop{false};

void onSignal(int) {
    g_stop.store(true);
}

int64_t nowNs() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

using Options = atlas::netstat::ToolOptions;

std::vector<ProcessView> collect(const Options& o, bool report_errors) {
    std::vector<ProcessView> out;
    for (const std::string& path : atlas::netstat::listSegments(o.dir)) {
        auto p = atlas::netstat::readSegmentFile(path);
        if (!p.isOk()) {
            if (report_errors) {
                std::fprintf(stderr, "atlas-netstat: skipped %s\n", p.status().message().c_str());
            }
            continue;
        }
        if ((o.pid != 0 && static_cast<uint64_t>(p->pid) != o.pid) ||
            (!o.all && (!p->alive || p->closed))) {
            continue;
        }
        out.push_back(std::move(p.value()));
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    atlas::options::warnUnknownEnv("atlas-netstat");
    auto parsed = atlas::netstat::parseToolOptions(std::vector<std::string>(argv + 1, argv + argc),
                                                   atlas::processEnv());
    if (!parsed.isOk()) {
        std::fprintf(stderr, "atlas-netstat: %s\n", parsed.status().message().c_str());
        return 2;
    }
    const Options o = parsed.value();
    if (o.help) {
        std::fputs(atlas::netstat::toolUsage().c_str(), stdout);
        return 0;
    }
    signal(SIGINT, onSignal);
    signal(SIGTERM, onSignal);
    signal(SIGPIPE, SIG_IGN);
    if (!o.serve.empty()) {
        atlas::Status st = atlas::netstat::serveMetrics(
            o.serve, [&o] { return atlas::netstat::renderPrometheus(collect(o, false)); }, g_stop,
            [](int port) {
                std::printf("atlas-netstat: serving /metrics on port %d\n", port);
                std::fflush(stdout);
            });
        if (!st.isOk()) {
            std::fprintf(stderr, "atlas-netstat: %s\n", st.message().c_str());
            return st.code() == atlas::Code::kInvalidUsage ? 2 : 1;
        }
        return 0;
    }
    do {
        const std::vector<ProcessView> procs = collect(o, o.watch_s == 0);
        const std::string text = o.prometheus ? atlas::netstat::renderPrometheus(procs)
                                              : atlas::netstat::renderTable(procs, nowNs());
        if (o.watch_s > 0 && !o.prometheus && isatty(STDOUT_FILENO)) {
            std::fputs("\033[H\033[2J", stdout);
        }
        std::fputs(text.c_str(), stdout);
        std::fflush(stdout);
        if (o.watch_s > 0) {
            timespec ts{static_cast<time_t>(o.watch_s),
                        static_cast<long>((o.watch_s - static_cast<time_t>(o.watch_s)) * 1e9)};
            nanosleep(&ts, nullptr);
        }
    } while (o.watch_s > 0 && !g_stop.load());
    return 0;
}
