// Visual outputs of one run: a Chrome trace (JSON "traceEvents", opens in Perfetto and
// chrome://tracing) with one track per stage group and a rate counter per WAN link, and PNG
// plots made by gnuplot (a Gantt timeline of the last iterations and per-stage utilization
// bars with and without BubbleTea).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "atlas/common/status.h"
#include "perf/atlas-sim/report.h"

namespace atlas::sim {

// At most `max_pipelines` pipelines' groups get tracks (all stages of each).
nlohmann::json chromeTrace(const RunReport& report, int max_pipelines);
Status writeChromeTrace(const RunReport& report, const std::string& path, int max_pipelines);

// Writes DIR/timeline.dat, DIR/utilization.dat and DIR/plots.gp, then runs gnuplot on the
// script to produce DIR/timeline.png and DIR/utilization.png. When gnuplot is not installed
// the data and script are still written and *message says so (not an error).
Status writePlots(const RunReport& report, const std::string& dir, int max_pipelines,
                  std::string* message);

}  // namespace atlas::sim
