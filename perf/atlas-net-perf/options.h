// atlas-net-perf command line: modes, the size sweep, and --config specs; one options table
// (options.cc) that also produces --help and docs/net-perf.md's option table. Pure parsing,
// no I/O (fuzzed by fuzz_net_perf_parse).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "atlas/common/env.h"
#include "atlas/common/status.h"
#include "options/table.h"

namespace atlas::netperf {

enum class Role { kLocal, kServer, kClient };
enum class Direction { kUni, kBidir };
enum class Measure { kBandwidth, kLatency };
enum class Kind { kPlugin, kRawTcp };
// How a side waits between test() calls that found nothing done (docs/net-perf.md).
enum class Poll { kYield, kSpin, kSleep };

// One configuration of the comparison: a name, the env vars its fresh processes get, and
// whether it measures the plugin or plain TCP.
struct ConfigSpec {
    std::string name;
    std::vector<std::pair<std::string, std::string>> env;
    Kind kind = Kind::kPlugin;
    int raw_streams = 1;  // Kind::kRawTcp only
};

// What the client sends the server before measuring: both sides run the same plan.
struct Plan {
    Measure measure = Measure::kBandwidth;
    Kind kind = Kind::kPlugin;
    Direction direction = Direction::kUni;
    std::vector<size_t> sizes;
    int iters = 20;
    int warmup = 5;
    int window = 8;
    int raw_streams = 1;
    int dev = 0;
    bool check = false;
    Poll poll = Poll::kYield;
};

struct Options {
    Role role = Role::kLocal;
    Plan plan;
    std::string bootstrap;            // HOST:PORT (server/client)
    std::string plugin;               // empty: next to the executable, then $ATLAS_PLUGIN
    std::vector<ConfigSpec> configs;  // local mode; empty = one default config
    std::string baseline;             // config name; empty = the first
    std::string json_path;
    std::string server_netns;
    std::string client_netns;
    std::string raw_host;  // address the raw-TCP server advertises (local mode)
    int timeout_s = 300;   // bound on one configuration's run
    bool quiet = false;
    bool help = false;
    // As given; parseOptions turns them into plan.sizes / plan.kind.
    bool raw_tcp = false;
    uint64_t sweep_min = 8;
    uint64_t sweep_max = 64 << 20;
    uint64_t sweep_factor = 2;
};

// The option registry (options/table.h).
const options::Table<Options>& optionTable();

// Bytes with an optional binary suffix: 8, 1K, 64KiB, 1M, 2G (1K = 1024). Rejects overflow,
// junk and values above `max`.
Result<size_t> parseSize(const std::string& text, size_t max = size_t{1} << 30);
// "8,1K,64K" -> sizes, in the given order.
Result<std::vector<size_t>> parseSizeList(const std::string& text);
// min, min*factor, ... <= max (factor >= 2).
Result<std::vector<size_t>> sizeSweep(size_t min, size_t max, size_t factor);
// "NAME:K=V,K=V" -> ConfigSpec. "raw" or "raw=N" in the list selects plain TCP (N streams).
Result<ConfigSpec> parseConfig(const std::string& text);
// "HOST:PORT" or "[v6]:PORT".
Result<std::pair<std::string, uint16_t>> parseHostPort(const std::string& text);

// argv (without argv[0]) -> Options; validates combinations. `env` (ATLAS_PLUGIN for
// --plugin) when given.
Result<Options> parseOptions(const std::vector<std::string>& args, const EnvLookup& env = {});
std::string usage();

std::string formatSize(size_t bytes);  // 1048576 -> "1M", 1000 -> "1000"
const char* kindName(Kind kind);
const char* directionName(Direction d);
const char* pollName(Poll p);

}  // namespace atlas::netperf
