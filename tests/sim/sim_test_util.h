// Helpers for the atlas-sim tests: build configs from JSON text, run them, and look at the
// recorded timelines.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "perf/atlas-sim/config.h"
#include "perf/atlas-sim/report.h"
#include "perf/atlas-sim/simulator.h"

namespace atlas::sim::testing {

// Directory of the committed configs (perf/atlas-sim/configs), set by CMake.
inline std::string configDir() {
    return ATLAS_SIM_CONFIG_DIR;
}

inline SimConfig mustParse(const nlohmann::json& j) {
    Result<SimConfig> c = parseConfig(j);
    EXPECT_TRUE(c.isOk()) << c.status().toString() << "\n" << j.dump(2);
    return c.isOk() ? c.value() : SimConfig{};
}

inline SimConfig loadConfig(const std::string& file, const nlohmann::json& set = {}) {
    Result<nlohmann::json> doc = loadJsonFile(configDir() + "/" + file);
    EXPECT_TRUE(doc.isOk()) << doc.status().toString();
    if (!doc.isOk()) {
        return SimConfig{};
    }
    if (!set.is_null()) {
        EXPECT_TRUE(applyOverrides(&doc.value(), set).isOk());
    }
    return mustParse(doc.value());
}

inline RunReport mustRun(const SimConfig& c, const RunFlags& flags = {}) {
    Result<RunReport> r = runConfig(c, flags);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    return r.isOk() ? std::move(r.value()) : RunReport{};
}

// A single-DC pipeline with fixed per-stage times and free communication (no bytes, no
// latency): the textbook setting of the bubble formula.
inline nlohmann::json freeCommPipeline(int pp, int m, const char* schedule, double fwd_ms,
                                       double bwd_ms) {
    return {{"name", "free-comm"},
            {"iterations", 2},
            {"warmup_iterations", 1},
            {"job",
             {{"stages", {{{"forward_ms", fwd_ms}, {"backward_ms", bwd_ms}}}},
              {"micro_batches", m},
              {"schedule", schedule}}},
            {"parallelism", {{"dp", 1}, {"pp", pp}, {"tp", 1}}},
            {"cluster",
             {{"dcs", {{{"name", "A"}, {"gpus", pp}}}},
              {"intra_dc", {{"gbps", 100}, {"latency_us", 0}}}}}};
}

// Two DCs joined by one WAN path; `dp` pipelines of 2 stages (stage 0 in A, stage 1 in B),
// fixed compute and activation size, ideal transport (the link rate, no TCP bounds).
inline nlohmann::json twoDcPipeline(int dp, int m, double fwd_ms, double bwd_ms, double act_bytes,
                                    double gbps, double rtt_ms, const char* policy) {
    return {
        {"name", "two-dc"},
        {"iterations", 2},
        {"warmup_iterations", 1},
        {"job",
         {{"stages",
           {{{"forward_ms", fwd_ms}, {"backward_ms", bwd_ms}, {"activation_bytes", act_bytes}}}},
          {"micro_batches", m},
          {"schedule", "gpipe"}}},
        {"parallelism", {{"dp", dp}, {"pp", 2}, {"tp", 1}}},
        {"placement", {{"policy", "manual"}, {"stage_dcs", {"A", "B"}}}},
        {"cluster",
         {{"dcs", {{{"name", "A"}, {"gpus", dp}}, {{"name", "B"}, {"gpus", dp}}}},
          {"intra_dc", {{"gbps", 100}, {"latency_us", 0}}},
          {"wan_default", {{"gbps", gbps}, {"rtt_ms", rtt_ms}, {"loss", 0}}}}},
        {"network", {{"transport", "ideal"}, {"policy", policy}}}};
}

// Activities of one group of the given kind in the given iteration.
inline std::vector<Activity> activities(const RunResult& r, size_t group, ActivityKind kind,
                                        int iteration) {
    std::vector<Activity> out;
    for (const Activity& a : r.timeline[group]) {
        if (a.kind == kind && a.iteration == iteration) {
            out.push_back(a);
        }
    }
    return out;
}

}  // namespace atlas::sim::testing
