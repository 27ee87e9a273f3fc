// atlas-nccl-sweep's command line and the NCCL environment of each net (docs/gpu-check.md).
// Pure: parsing and environment construction, no I/O.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "perf/gpu-check/sweep_core.h"

namespace atlas::gpucheck {

// A transport to sweep through: the Atlas plugin, or NCCL's own socket transport with
// NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD (0 = leave NCCL's automatic value).
struct NetSpec {
    enum class Kind : uint8_t { kAtlas, kSocket } kind = Kind::kAtlas;
    int socket_threads = 0;
    int socks_per_thread = 0;
    std::string label() const;  // "atlas", "socket", "socket:4x4"
};
// "atlas", "socket" or "socket:TxS" (1 <= T <= 16, 1 <= S, T x S <= 64: NCCL's limits).
Result<NetSpec> parseNetSpec(const std::string& text);

struct SweepOptions {
    std::vector<NetSpec> nets;  // --net; default atlas,socket
    std::vector<Op> ops;        // --ops; default all five
    size_t min_bytes = 8;
    size_t max_bytes = 256ull << 20;
    int step_factor = 2;
    int warmup = 1;  // runs per op at the largest and the smallest size before the sweep
    IterPlan iter_plan;
    double budget_s = 0;  // per net; 0 = none
    int timeout_s = 300;  // per net, hard
    std::string plugin;   // for atlas nets; resolved by the tool when empty
    std::string nccl_lib = "libnccl.so.2";
    std::vector<std::string> netns;  // per rank (empty: the caller's namespace)
    std::string addr = "127.0.0.1";  // rank 0's address: NCCL_COMM_ID
    std::string ifname = "lo";       // NCCL_SOCKET_IFNAME and ATLAS_SOCKET_IFNAME
    std::vector<std::pair<std::string, std::string>> env;
    int device = 0;
    std::string logdir;
    std::string json_path;
    bool simulate = false;
    SimLink sim_link;
    std::vector<Op> sim_corrupt;  // --simulate: ops whose results get one wrong element
    int print_env_rank = -1;      // --print-env R: print rank R's environment and exit
    bool help = false;
};

// Strict: every value checked against its flag's range (options/table.h); the first problem
// is the error, naming the flag.
Result<SweepOptions> parseSweepArgs(const std::vector<std::string>& args);
std::string sweepUsage();  // --help, generated from the flag table
// The flag table of docs/gpu-check.md (nccl_sweep_core_test compares).
std::string sweepFlagsMarkdown();

// The environment one rank of `net` runs with: KEY=VALUE pairs to set and keys to unset, in
// order (later entries win). `port` is the bootstrap root's port on opts.addr.
struct RankEnv {
    std::vector<std::pair<std::string, std::string>> set;
    std::vector<std::string> unset;
};
RankEnv rankEnvironment(const SweepOptions& opts, const NetSpec& net, int rank, int port,
                        const std::string& plugin_path, const std::string& log_path);

// --print-env: rank `rank`'s environment for the first net as lines "KEY=VALUE" (set) and
// "-KEY" (unset), the format pipeline_train.py --env-file reads, for frameworks that bring
// their own rendezvous: NCCL_COMM_ID (the sweep's bootstrap) is unset, not set.
std::string envFileText(const SweepOptions& opts, int rank, const std::string& plugin_path,
                        const std::string& log_path);

// DIR/nccl-<net label, ':' as '-'>-rank<R>.log: where rank R's NCCL_DEBUG_FILE goes.
std::string ncclLogPath(const std::string& dir, const NetSpec& net, int rank);

// The line each rank's NCCL log must contain when NCCL selected `net`'s transport.
std::string expectedNetworkLine(const NetSpec& net);

}  // namespace atlas::gpucheck
