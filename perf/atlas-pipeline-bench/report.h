// Results of one atlas-pipeline-bench run: iteration times, per-stage busy/idle time, the
// timeline; rendered as a table, JSON and a Chrome trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "perf/atlas-pipeline-bench/control.h"
#include "perf/atlas-pipeline-bench/options.h"
#include "perf/atlas-wanem/stats_reader.h"

namespace atlas::pipebench {

struct StageResult {
    int pipeline = 0;
    int stage = 0;
    std::vector<IterReport> iters;  // every iteration, warm-up included
    nlohmann::json timeline;        // [[iteration, kind, mb, start_ns, end_ns], ...]
};

struct RunResult {
    std::vector<int64_t> iter_start_ns;  // per iteration (warm-up included): earliest start
    std::vector<int64_t> iter_end_ns;    // latest end over every stage
    std::vector<StageResult> stages;     // pipeline-major
    // --link-stats: every direction of every link, per measured iteration (with the barrier),
    // or once over the whole run, warm-up included (--no-barrier: iterations overlap).
    std::vector<std::vector<wanem::DirectionUse>> link_use;
    bool link_use_whole_run = false;
};

struct Summary {
    double mean_ms = 0;
    double min_ms = 0;
    double max_ms = 0;
    double stdev_ms = 0;
    std::vector<double> iteration_ms;  // measured iterations only
    struct Stage {
        int pipeline = 0;
        int stage = 0;
        double busy_ms = 0;  // per measured iteration
        double wait_ms = 0;  // blocked on receives inside the iteration
        double idle_ms = 0;  // iteration time - busy: every bubble, the barrier wait included
        double idle_pct = 0;
    };
    std::vector<Stage> stages;
    // --link-stats, per link direction: means over the measured iterations.
    struct Link {
        std::string from;
        std::string to;
        double wire_mib = 0;      // carried per iteration
        double capacity_mib = 0;  // what the rate allows per iteration; 0 = uncapped
        double utilization = -1;  // wire / capacity over the iterations; -1 = uncapped
        double queue_drops = 0;   // segments dropped by the full buffer, per iteration
        double loss_drops = 0;    // segments dropped by random loss, per iteration
    };
    std::vector<Link> links;
    bool links_whole_run = false;
};

Summary summarize(const BenchConfig& cfg, const RunResult& run);
std::string renderTable(const BenchConfig& cfg, const Summary& s);
nlohmann::json toJson(const BenchConfig& cfg, const Summary& s, const RunResult& run);
// Chrome trace event format (https://ui.perfetto.dev opens it): one process per pipeline, one
// thread per stage; compute as slices, receive waits as "wait" slices.
nlohmann::json toChromeTrace(const BenchConfig& cfg, const RunResult& run);

}  // namespace atlas::pipebench
