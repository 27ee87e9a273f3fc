// Command-line options of atlas-wanem: one options table (every flag with its accepted range,
// default and doc; options.cc), validation and the derivation of each direction's
// PipelineConfig. Pure: no I/O, so the flag rules are unit-tested.
//
// Per-direction flags take "V" (both directions) or "AB:BA" (A->B then B->A). Per-path
// lists take one such value per path, comma-separated: --path-rate-mbit 1000,1000,250:500.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "atlas/common/status.h"
#include "options/table.h"
#include "perf/atlas-wanem/pipeline.h"

namespace atlas::wanem {

// Index 0 is A -> B (frames read from dev-a, written to dev-b); index 1 is B -> A.
template <typename T>
using PerDir = std::array<T, 2>;
inline constexpr int kAtoB = 0;
inline constexpr int kBtoA = 1;
inline constexpr const char* kDirName[2] = {"a2b", "b2a"};

struct Options {
    bool help = false;
    bool version = false;
    bool check = false;  // validate the flags and exit

    std::string ns_a, ns_b;  // network namespace names (/run/netns/NAME) or paths
    std::string dev_a = "wanem-a", dev_b = "wanem-b";

    PerDir<double> delay_ms{0, 0};
    PerDir<double> jitter_ms{0, 0};
    PerDir<double> rate_mbit{0, 0};  // 0 = no cap
    PerDir<double> loss{0, 0};
    std::optional<PerDir<double>> buf_ms;
    std::optional<PerDir<double>> buf_kb;
    // A mid-run rate change: rate_step_s after start every path's rate becomes rate_step_mbit.
    std::optional<double> rate_step_s;
    std::optional<PerDir<double>> rate_step_mbit;

    uint32_t paths = 1;
    std::vector<PerDir<double>> path_rate_mbit;  // empty: every path uses rate_mbit
    std::vector<PerDir<double>> path_delay_ms;   // empty: every path uses delay_ms

    SplitMode split = SplitMode::kRuns;
    uint32_t l2_overhead = 0;
    uint32_t hash_seed = 0;
    std::optional<uint64_t> seed;

    uint32_t mtu = 1500;
    uint32_t txqueuelen = 10000;
    uint64_t timer_slack_ns = 1000;
    uint32_t spin_us = 0;
    uint32_t batch = 256;
    uint32_t rt_priority = 0;       // SCHED_FIFO priority of the direction threads; 0 = normal
    std::optional<double> ring_mb;  // per path and direction; default derived from the link

    std::string stats_path;  // empty: stdout
    std::string ready_file;  // written once both devices exist and threads run
};

// The flag registry (options/table.h): parsing, --help and docs/wan.md's flag table.
const options::Table<Options>& optionTable();

// Parses argv[1..argc). Errors name the flag, the bad value and the accepted range.
Result<Options> parseOptions(int argc, const char* const* argv);

// The --help text.
std::string helpText();

// /run/netns/NAME for a bare name, the argument itself for a path.
std::string namespacePath(const std::string& ns);

// The link parameters of `path` in direction `dir`, with defaults applied (buffer: 2 x
// one-way delay of link time, at least 5 ms, at least 4 full-size segments).
LinkParams linkParams(const Options& o, int dir, uint32_t path);

// Delay-line capacity for one path and direction (see --ring-mb in the help text).
size_t ringBytes(const Options& o, int dir, uint32_t path);

// Everything one direction thread needs, with `rng_seed` for loss and jitter.
PipelineConfig pipelineConfig(const Options& o, int dir, uint64_t rng_seed);

}  // namespace atlas::wanem
