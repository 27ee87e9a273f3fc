// The atlas-sim command line (run / compare / plan, JSON, trace and plot outputs) and the
// plan search.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "perf/atlas-sim/cli.h"
#include "perf/atlas-sim/plan.h"
#include "support/doc_blocks.h"
#include "tests/sim/sim_test_util.h"

namespace atlas::sim {
namespace {

using nlohmann::json;
using testing::configDir;
using testing::mustParse;

class TempDir {
  public:
    TempDir() {
        char tmpl[] = "/tmp/atlas-sim-test-XXXXXX";
        const char* p = mkdtemp(tmpl);
        EXPECT_NE(p, nullptr);
        path_ = p != nullptr ? p : "/tmp";
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::string& path() const { return path_; }

  private:
    std::string path_;
};

int cli(const std::vector<std::string>& args, std::string* out, std::string* err = nullptr) {
    std::ostringstream o, e;
    const int rc = runCli(args, o, e);
    *out = o.str();
    if (err != nullptr) {
        *err = e.str();
    }
    return rc;
}

json readJson(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str(), nullptr, false);
}

TEST(SimCli, UsageErrors) {
    std::string out, err;
    EXPECT_EQ(cli({"--help"}, &out), 0);
    EXPECT_NE(out.find("atlas-sim run CONFIG"), std::string::npos);
    EXPECT_EQ(cli({}, &out), 0);
    EXPECT_EQ(cli({"fly", "x.json"}, &out, &err), 2);
    EXPECT_EQ(cli({"run"}, &out, &err), 2);
    EXPECT_EQ(cli({"run", "/nonexistent.json"}, &out, &err), 2);
    EXPECT_NE(err.find("cannot open"), std::string::npos);
    EXPECT_EQ(cli({"run", configDir() + "/testbed.json", "--bogus"}, &out, &err), 2);
    EXPECT_EQ(
        cli({"run", configDir() + "/testbed.json", "--set", "network.policy=best"}, &out, &err), 2);
    EXPECT_NE(err.find("network.policy"), std::string::npos);
    EXPECT_EQ(cli({"compare", configDir() + "/testbed.json"}, &out, &err), 2);  // no variants
}

TEST(SimCli, EveryProblemAtOnceAndStrictNumbers) {
    std::string out, err;
    EXPECT_EQ(
        cli({"run", "x.json", "--trace-iterations", "0", "--trace-pipelines", "1e3", "--quite"},
            &out, &err),
        2);
    for (const char* part :
         {"--trace-iterations='0' is out of range", "--trace-pipelines='1e3' is invalid",
          "unknown option '--quite' (did you mean --quiet?)"}) {
        EXPECT_NE(err.find(part), std::string::npos) << err;
    }
}

TEST(SimCli, DocsOptionTableIsTheRegistry) {
    EXPECT_TRUE(atlas::testing::docBlockMatches(
        std::string(ATLAS_SOURCE_DIR) + "/docs/atlas-sim.md", "atlas-sim", optionsMarkdown()));
}

TEST(SimCli, RunWritesJsonTraceAndPlots) {
    TempDir dir;
    const std::string js = dir.path() + "/out.json";
    const std::string tr = dir.path() + "/trace.json";
    const std::string pl = dir.path() + "/plots";
    std::string out, err;
    ASSERT_EQ(cli({"run", configDir() + "/testbed.json", "--set", "iterations=6", "--set",
                   "warmup_iterations=2", "--set", "bubbletea.enabled=true", "--json", js,
                   "--trace", tr, "--plots", pl},
                  &out, &err),
              0)
        << err;
    EXPECT_NE(out.find("iteration"), std::string::npos);
    EXPECT_NE(out.find("BubbleTea"), std::string::npos);
    const json j = readJson(js);
    ASSERT_FALSE(j.is_discarded());
    EXPECT_EQ(j["config"]["iterations"], 6);
    EXPECT_GT(j["summary"]["iteration_ms"]["mean"].get<double>(), 0.0);
    EXPECT_EQ(j["summary"]["iteration_ms"]["all"].size(), 6u);
    const json t = readJson(tr);
    ASSERT_FALSE(t.is_discarded());
    ASSERT_TRUE(t["traceEvents"].is_array());
    size_t complete = 0, counters = 0;
    for (const json& e : t["traceEvents"]) {
        complete += e["ph"] == "X" ? 1 : 0;
        counters += e["ph"] == "C" ? 1 : 0;
    }
    EXPECT_GT(complete, 0u);
    EXPECT_GT(counters, 0u);
    EXPECT_TRUE(std::filesystem::exists(pl + "/plots.gp"));
    EXPECT_TRUE(std::filesystem::exists(pl + "/timeline.dat"));
    if (out.find("gnuplot not found") == std::string::npos) {
        EXPECT_GT(std::filesystem::file_size(pl + "/timeline.png"), 0u);
        EXPECT_GT(std::filesystem::file_size(pl + "/utilization.png"), 0u);
    }
}

TEST(SimCli, CompareRunsEveryVariant) {
    TempDir dir;
    const std::string js = dir.path() + "/cmp.json";
    std::string out, err;
    ASSERT_EQ(cli({"compare", configDir() + "/testbed-sharing.json", "--set", "iterations=10",
                   "--set", "warmup_iterations=5", "--quiet", "--json", js},
                  &out, &err),
              0)
        << err;
    const json j = readJson(js);
    ASSERT_EQ(j["variants"].size(), 3u);
    EXPECT_DOUBLE_EQ(j["variants"][0]["speedup_vs_first"].get<double>(), 1.0);
    EXPECT_NE(out.find("speed-up"), std::string::npos);
}

json planConfig() {
    // Two close DCs and a small, far one behind a thin link.
    return {
        {"name", "plan-test"},
        {"gpu", {{"preset", "H100"}}},
        {"job",
         {{"model", {{"layers", 16}, {"hidden", 2048}, {"seq_len", 1024}}}, {"micro_batches", 8}}},
        {"parallelism", {{"dp", 2}, {"pp", 4}, {"tp", 1}}},
        {"cluster",
         {{"dcs",
           {{{"name", "A"}, {"gpus", 8}},
            {{"name", "B"}, {"gpus", 8}},
            {{"name", "far"}, {"gpus", 4}}}},
          {"wan_default", {{"gbps", 0.2}, {"rtt_ms", 150}}},
          {"wan", {{{"between", {"A", "B"}}, {"gbps", 50}, {"rtt_ms", 5}}}}}},
        {"network", {{"policy", "temporal"}}},
        {"plan",
         {{"global_batch", 32},
          {"tp", {1, 2}},
          {"micro_batch_sizes", {1, 2}},
          {"top", 5},
          {"iterations", 2}}}};
}

TEST(SimPlan, FindsTheFastestPlanAndLeavesTheFarDcOut) {
    const SimConfig c = mustParse(planConfig());
    Result<PlanResult> r = plan(c);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const PlanResult& p = r.value();
    ASSERT_FALSE(p.top.empty());
    EXPECT_GT(p.simulated, 0);
    for (size_t i = 1; i < p.top.size(); ++i) {
        EXPECT_LE(p.top[i - 1].iteration_ms, p.top[i].iteration_ms);
    }
    EXPECT_EQ(p.top[0].dcs.find("far"), std::string::npos) << p.top[0].dcs;
    for (const PlanCandidate& cand : p.top) {
        EXPECT_EQ(32 % (cand.dp * cand.micro_batch_size), 0);
        EXPECT_EQ(cand.dp * cand.micro_batch_size * cand.micro_batches, 32);
        EXPECT_LE(cand.lower_bound_ms, cand.iteration_ms + 1e-6);
    }
    // Some plan that uses the far DC was simulated, and it is slower.
    bool far_seen = false;
    for (const PlanCandidate& cand : p.best_per_subset) {
        if (cand.dcs.find("far") != std::string::npos) {
            far_seen = true;
            EXPECT_GT(cand.iteration_ms, p.top[0].iteration_ms);
        }
    }
    EXPECT_TRUE(far_seen);
}

TEST(SimPlan, PruningDoesNotChangeTheWinner) {
    SimConfig c = mustParse(planConfig());
    Result<PlanResult> pruned = plan(c);
    c.plan.top = 100000;  // nothing can be pruned: every candidate is simulated
    Result<PlanResult> all = plan(c);
    ASSERT_TRUE(pruned.isOk() && all.isOk());
    EXPECT_EQ(all.value().pruned, 0);
    EXPECT_GT(all.value().simulated, pruned.value().simulated);
    EXPECT_DOUBLE_EQ(pruned.value().top[0].iteration_ms, all.value().top[0].iteration_ms);
}

TEST(SimPlan, NeedsAModel) {
    json j = planConfig();
    j["job"] = {{"stages", {{{"forward_ms", 1}, {"backward_ms", 2}}}}};
    Result<PlanResult> r = plan(mustParse(j));
    EXPECT_FALSE(r.isOk());
}

}  // namespace
}  // namespace atlas::sim
