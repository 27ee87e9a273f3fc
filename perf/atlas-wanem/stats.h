// The JSON document atlas-wanem prints on SIGUSR1 and on exit. Field meanings are documented
// in docs/wan.md ("Counters"); counters are cumulative since start.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "perf/atlas-wanem/options.h"
#include "perf/atlas-wanem/pipeline.h"

namespace atlas::wanem {

struct StatsHeader {
    uint64_t seq = 0;    // 1 for the first document, +1 per document
    bool final = false;  // true for the document written at exit
    double uptime_s = 0;
    uint64_t rng_seed = 0;
    int pid = 0;
};

// Counters of one direction, path by path and summed. Safe to call while the direction
// thread runs (values are read one by one with relaxed loads).
nlohmann::json directionJson(const DirectionPipeline& dir);

nlohmann::json statsJson(const StatsHeader& header, const Options& options,
                         const std::array<const DirectionPipeline*, 2>& dirs);

}  // namespace atlas::wanem
