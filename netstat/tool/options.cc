#include "netstat/tool/options.h"

#include "options/help.h"

namespace atlas::netstat {
namespace {

using namespace options::kinds;

#define ATLAS_NETSTAT_OPTIONS(X)                                                                  \
    X("--dir", Path, dir, 0, 0, "DIR", "directory of the stats segments (the plugin's)")          \
    X("--pid", Uint, pid, 1, 4194304, "PID", "only this process")                                 \
    X("--all", Switch, all, 0, 0, "", "also segments of processes that are gone")                 \
    X("--watch", Double, watch_s, 0.1, 3600, "SECONDS", "redraw every SECONDS until interrupted") \
    X("--prometheus", Switch, prometheus, 0, 0, "",                                               \
      "print the Prometheus text exposition format instead of the table")                         \
    X("--serve", Path, serve, 0, 0, "ADDR",                                                       \
      "serve GET /metrics on ADDR (HOST:PORT, [V6]:PORT, :PORT) until SIGINT")                    \
    X("--help", Switch, help, 0, 0, "", "this text")

#define ATLAS_NETSTAT_ALIASES(X) \
    X("-h", "--help", false)     \
    X("ATLAS_NETSTAT_DIR", "--dir", false)

}  // namespace

const options::Table<ToolOptions>& toolOptionTable() {
    static const auto t =
        ATLAS_OPTIONS_TABLE(ToolOptions, ATLAS_NETSTAT_OPTIONS, ATLAS_NETSTAT_ALIASES);
    return t;
}

std::string toolUsage() {
    return "usage: atlas-netstat [options]\n"
           "Shows every Atlas comm on this node with its streams (bytes, RTT, cwnd, retransmits,\n"
           "delivery rate), read from the plugin's stats segments (docs/netstat.md).\n\n" +
           options::flagHelp(toolOptionTable()) + "\nenvironment:\n" +
           options::envHelp(toolOptionTable());
}

Result<ToolOptions> parseToolOptions(const std::vector<std::string>& args, const EnvLookup& env) {
    options::Parsed<ToolOptions> p;
    options::readEnv(toolOptionTable(), env, &p);
    options::readArgs(toolOptionTable(), args, &p);
    for (const std::string& w : p.positional) {
        p.errors.push_back("unexpected argument '" + w + "' (see --help)");
    }
    ATLAS_RETURN_IF_ERROR(p.status(Code::kInvalidUsage));
    return p.config;
}

}  // namespace atlas::netstat
