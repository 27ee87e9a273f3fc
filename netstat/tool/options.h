// atlas-netstat's command line: one options table (options.cc) that also produces --help and
// the flag table of docs/netstat.md. ATLAS_NETSTAT_DIR (the plugin's variable: where it
// writes the segments) feeds --dir, so one environment file points both at the same place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atlas/common/env.h"
#include "atlas/common/status.h"
#include "atlas/netstat.h"
#include "options/table.h"

namespace atlas::netstat {

struct ToolOptions {
    std::string dir = kDefaultSegmentDir;
    uint64_t pid = 0;  // 0: every process
    bool all = false;
    double watch_s = 0;  // 0: print once
    bool prometheus = false;
    std::string serve;  // HOST:PORT, [V6]:PORT or :PORT (checked by serveMetrics)
    bool help = false;
};

const options::Table<ToolOptions>& toolOptionTable();
// argv without the program name; every problem at once, each naming the flag.
Result<ToolOptions> parseToolOptions(const std::vector<std::string>& args, const EnvLookup& env);
std::string toolUsage();

}  // namespace atlas::netstat
