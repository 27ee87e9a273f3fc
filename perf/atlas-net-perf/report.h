// Result tables (nccl-tests style) and JSON for atlas-net-perf.
//
// Bandwidth columns: size (bytes), config, count (timed messages), time_us (per message),
// algbw_GB/s (size / time, 1e9 B/s), Gbit/s (algbw * 8), ratio (algbw / baseline's algbw).
// Latency columns: size, config, count, p50/p99/mean round trip in us, ratio (p50 / baseline
// p50; below 1 is faster).
#pragma once

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "perf/atlas-net-perf/bench.h"
#include "perf/atlas-net-perf/options.h"

namespace atlas::netperf {

struct ConfigResult {
    ConfigSpec spec;
    std::vector<Row> rows;
    std::string error;  // empty on success
};

struct RunInfo {
    std::string mode;  // "local" or "client"
    Plan plan;
    std::string plugin;
    std::string baseline;  // config name the ratios refer to
};

// The ratio of `row` against the baseline row of the same size; 0 when there is none.
double ratioFor(const RunInfo& info, const std::vector<ConfigResult>& results, const Row& row);

void printTable(std::FILE* out, const RunInfo& info, const std::vector<ConfigResult>& results);
nlohmann::json resultsJson(const RunInfo& info, const std::vector<ConfigResult>& results);

// Rows as JSON text (child -> parent in local mode) and back; a failed client sends
// errorToJson(text) instead, which rowsFromJson returns as a kRemote Status with that text.
std::string rowsToJson(const std::vector<Row>& rows);
std::string errorToJson(const std::string& text);
Result<std::vector<Row>> rowsFromJson(const std::string& text);

}  // namespace atlas::netperf
