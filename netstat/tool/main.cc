// atlas-netstat: every Atlas comm on this node with its streams, read from the processes'
// stats segments (docs/netstat.md).
//   atlas-netstat [--dir DIR] [--pid PID] [--all] [--watch SECONDS] [--prometheus]
//                 [--serve ADDR]
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
#include "netstat/tool/serve.h"

namespace {

using atlas::netstat::ProcessView;

const char* kUsage =
    "usage: atlas-netstat [--dir DIR] [--pid PID] [--all] [--watch SECONDS] [--prometheus]\n"
    "                     [--serve ADDR]\n"
    "Shows every Atlas comm on this node with its streams (bytes, RTT, cwnd, retransmits,\n"
    "delivery rate), read from the plugin's stats segments in DIR (default: $ATLAS_NETSTAT_DIR\n"
    "or /dev/shm).\n"
    "  --pid PID       only this process\n"
    "  --all           also segments of processes that are gone\n"
    "  --watch SECONDS redraw every SECONDS (0.1..3600) until interrupted\n"
    "  --prometheus    print the Prometheus text exposition format instead of the table\n"
    "  --serve ADDR    serve GET /metrics on ADDR (HOST:PORT, [V6]:PORT, :PORT) until SIGINT\n";

std::atomic<bool> g_stop{false};

void onSignal(int) {
    g_stop.store(true);
}

int64_t nowNs() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

struct Options {
    std::string dir;
    long pid = 0;
    bool all = false;
    double watch_s = 0;
    bool prometheus = false;
    std::string serve;
};

int usageError(const std::string& msg) {
    std::fprintf(stderr, "atlas-netstat: %s\n%s", msg.c_str(), kUsage);
    return 2;
}

bool parseNumber(const char* text, double lo, double hi, double* out) {
    char* end = nullptr;
    errno = 0;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || errno != 0 || !(v >= lo && v <= hi)) {
        return false;
    }
    *out = v;
    return true;
}

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
        if ((o.pid != 0 && p->pid != o.pid) || (!o.all && (!p->alive || p->closed))) {
            continue;
        }
        out.push_back(std::move(p.value()));
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    const char* env_dir = std::getenv("ATLAS_NETSTAT_DIR");
    o.dir = env_dir != nullptr && *env_dir != '\0' ? env_dir : "/dev/shm";
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&](const char* flag) -> const char* {
            if (i + 1 >= argc) {
                return nullptr;
            }
            (void)flag;
            return argv[++i];
        };
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            return 0;
        } else if (a == "--dir") {
            const char* v = value("--dir");
            if (v == nullptr || *v == '\0') {
                return usageError("--dir needs a directory");
            }
            o.dir = v;
        } else if (a == "--pid") {
            const char* v = value("--pid");
            double d = 0;
            if (v == nullptr || !parseNumber(v, 1, 4194304, &d) || d != static_cast<long>(d)) {
                return usageError("--pid needs a process id");
            }
            o.pid = static_cast<long>(d);
        } else if (a == "--all") {
            o.all = true;
        } else if (a == "--watch") {
            const char* v = value("--watch");
            if (v == nullptr || !parseNumber(v, 0.1, 3600, &o.watch_s)) {
                return usageError("--watch needs SECONDS in 0.1..3600");
            }
        } else if (a == "--prometheus") {
            o.prometheus = true;
        } else if (a == "--serve") {
            const char* v = value("--serve");
            if (v == nullptr || *v == '\0') {
                return usageError("--serve needs HOST:PORT");
            }
            o.serve = v;
        } else {
            return usageError("unknown option '" + a + "'");
        }
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
