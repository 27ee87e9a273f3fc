// BubbleTea in the simulator: exact windows never slow training; wrong windows do, and the
// simulator measures it; prefill accounting and the cost model are consistent.
#include <gtest/gtest.h>

#include "perf/atlas-sim/model.h"
#include "tests/sim/sim_test_util.h"

namespace atlas::sim {
namespace {

using testing::loadConfig;
using testing::mustRun;

nlohmann::json btSet(const char* windows, double error, double jitter) {
    return {{"iterations", 14},
            {"warmup_iterations", 7},
            {"jitter.compute", jitter},
            {"bubbletea.enabled", true},
            {"bubbletea.windows", windows},
            {"bubbletea.prediction_error", error},
            {"bubbletea.arrival_rate_per_s", 60},
            {"bubbletea.prompt_tokens", {{"dist", "uniform"}, {"min", 128}, {"max", 2048}}}};
}

TEST(SimBubbleTea, OracleWindowsCostTrainingNothing) {
    RunFlags flags;
    flags.record_timeline = true;
    flags.record_iterations = 14;
    const RunReport rep = mustRun(loadConfig("testbed.json", btSet("oracle", 0.0, 0.0)), flags);
    ASSERT_TRUE(rep.bt.has_value());
    const RunResult& a = rep.base;
    const RunResult& b = *rep.bt;
    // Prefill really ran...
    EXPECT_GT(b.prefill.tokens, 0u);
    EXPECT_GT(b.prefill.completed, 0u);
    EXPECT_GT(rep.summary.utilization_bt, rep.summary.utilization + 0.05);
    // ... and training is bit-for-bit the run without it.
    EXPECT_EQ(a.iteration_end_ns, b.iteration_end_ns);
    EXPECT_EQ(b.training_delay_ns, 0);
    EXPECT_EQ(b.delayed_starts, 0u);
    EXPECT_EQ(rep.summary.bubbletea.slowdown, 0.0);
    for (size_t g = 0; g < b.groups.size(); ++g) {
        EXPECT_EQ(a.groups[g].compute_ns, b.groups[g].compute_ns);
    }
    // Every prefill chunk lies inside an idle interval of the run without BubbleTea, at
    // least the guard band away from its end.
    const Nanos guard = rep.config.bubbletea.guard_ns;
    size_t chunks = 0;
    for (size_t g = 0; g < b.timeline.size(); ++g) {
        for (const Activity& act : b.timeline[g]) {
            if (act.kind != ActivityKind::kPrefill) {
                continue;
            }
            ++chunks;
            bool inside = false;
            for (const sched::Interval& iv : a.idle[g]) {
                inside = inside ||
                         (act.start_ns >= iv.start_ns + guard && act.end_ns <= iv.end_ns - guard);
            }
            EXPECT_TRUE(inside) << "chunk [" << act.start_ns << ", " << act.end_ns << ")";
        }
    }
    EXPECT_GT(chunks, 0u);
}

TEST(SimBubbleTea, PredictedWindowsOnAPeriodicJobCostTrainingNothing) {
    // No jitter and a policy without learning: every iteration is identical, so the
    // predictor's windows (once learnt) hold and the training timeline is unchanged.
    nlohmann::json set = btSet("predicted", 0.0, 0.0);
    set["network.policy"] = "temporal";
    const RunReport rep = mustRun(loadConfig("testbed.json", set));
    ASSERT_TRUE(rep.bt.has_value());
    EXPECT_GT(rep.bt->prefill.tokens, 0u);
    EXPECT_GT(rep.bt->prefill.predictor_ok, 0u);
    EXPECT_EQ(rep.base.iteration_end_ns, rep.bt->iteration_end_ns);
    EXPECT_EQ(rep.bt->training_delay_ns, 0);
}

TEST(SimBubbleTea, StretchedOracleWindowsSlowTrainingAndItIsMeasured) {
    const RunReport rep = mustRun(loadConfig("testbed.json", btSet("oracle", 0.5, 0.0)));
    ASSERT_TRUE(rep.bt.has_value());
    EXPECT_GT(rep.bt->delayed_starts, 0u);
    EXPECT_GT(rep.bt->training_delay_ns, 0);
    EXPECT_GT(rep.summary.bubbletea.slowdown, 0.0);
    EXPECT_GT(rep.bt->end_ns, rep.base.end_ns);
}

TEST(SimBubbleTea, JitterMakesPredictionsMissAndTheSlowdownIsReported) {
    nlohmann::json set = btSet("predicted", 0.0, 0.15);
    set["network.policy"] = "temporal";
    const RunReport rep = mustRun(loadConfig("testbed.json", set));
    ASSERT_TRUE(rep.bt.has_value());
    // Jitter draws are a hash of (seed, iteration, group, task), so both passes see the same
    // compute times; any difference in iteration time is BubbleTea's doing.
    const double slowdown = rep.summary.bubbletea.slowdown;
    if (rep.bt->delayed_starts == 0) {
        EXPECT_EQ(rep.base.iteration_end_ns, rep.bt->iteration_end_ns);
    } else {
        EXPECT_GT(rep.bt->training_delay_ns, 0);
        EXPECT_NE(slowdown, 0.0);
    }
    EXPECT_GT(rep.bt->prefill.tokens, 0u);
}

TEST(SimBubbleTea, NoArrivalsMeansNoPrefill) {
    nlohmann::json set = btSet("oracle", 0.0, 0.0);
    set["bubbletea.arrival_rate_per_s"] = 0;
    const RunReport rep = mustRun(loadConfig("testbed.json", set));
    ASSERT_TRUE(rep.bt.has_value());
    EXPECT_EQ(rep.bt->prefill.arrived, 0u);
    EXPECT_EQ(rep.summary.utilization_bt, rep.summary.utilization);
}

TEST(SimBubbleTea, TtftIsAtLeastThePrefillCost) {
    nlohmann::json set = btSet("oracle", 0.0, 0.0);
    set["bubbletea.prompt_tokens"] = {{"dist", "fixed"}, {"tokens", 1024}};
    set["bubbletea.arrival_rate_per_s"] = 5;
    const SimConfig c = loadConfig("testbed.json", set);
    const RunReport rep = mustRun(c);
    ASSERT_TRUE(rep.bt.has_value());
    ASSERT_GT(rep.bt->prefill.completed, 0u);
    const PrefillCost cost = PrefillCost::fromSpec(c.bubbletea, c.gpu, c.par.tp);
    for (Nanos t : rep.bt->prefill.ttft_ns) {
        EXPECT_GE(t, cost.chunkNs(0, 1024) - 2 * kNsPerUs);  // chunk rounding: < 1 ns each
    }
    EXPECT_EQ(rep.bt->prefill.arrived,
              rep.bt->prefill.completed + rep.bt->prefill.dropped + rep.bt->prefill.unfinished);
}

TEST(SimPrefillCost, ChunksAddUpToTheWholePrompt) {
    const PrefillCost cost(1e-4, 2e-9);
    const Nanos whole = cost.chunkNs(0, 4096);
    Nanos sum = 0;
    int64_t done = 0;
    for (int64_t c : {512, 1000, 7, 2577}) {
        sum += cost.chunkNs(done, c);
        done += c;
    }
    ASSERT_EQ(done, 4096);
    EXPECT_GE(sum, whole);
    EXPECT_LE(sum, whole + 4);  // each chunk rounds up by < 1 ns
    // Quadratic term: the same number of tokens costs more later in the prompt.
    EXPECT_GT(cost.chunkNs(3000, 100), cost.chunkNs(0, 100));
}

TEST(SimPrefillCost, MaxTokensWithinIsTheLargestFit) {
    const PrefillCost cost(1e-4, 2e-9);
    for (int64_t start : {0, 100, 5000}) {
        for (Nanos budget : {Nanos{0}, 50 * kNsPerUs, 3 * kNsPerMs, 40 * kNsPerMs}) {
            const int64_t n = cost.maxTokensWithin(start, budget, 1 << 20);
            if (n > 0) {
                EXPECT_LE(cost.chunkNs(start, n), budget);
            }
            EXPECT_GT(cost.chunkNs(start, n + 1), budget);
        }
    }
    EXPECT_EQ(cost.maxTokensWithin(0, kNsPerSec, 77), 77);  // capped by the limit
}

TEST(SimPrefillCost, DerivedFromTheGpuPreset) {
    BubbleTeaSpec spec;
    spec.model_params = 8e9;
    spec.efficiency = 0.5;
    Result<GpuSpec> gpu = gpuPreset("a100");
    ASSERT_TRUE(gpu.isOk());
    const PrefillCost one = PrefillCost::fromSpec(spec, gpu.value(), 1);
    // 2 * 8e9 FLOPs per token at 156 TFLOP/s.
    EXPECT_NEAR(one.secPerToken(), 16e9 / 156e12, 1e-12);
    const PrefillCost four = PrefillCost::fromSpec(spec, gpu.value(), 4);
    EXPECT_NEAR(four.secPerToken() * 4, one.secPerToken(), 1e-15);
    spec.tokens_per_s = 10000;
    EXPECT_DOUBLE_EQ(PrefillCost::fromSpec(spec, gpu.value(), 1).secPerToken(), 1e-4);
}

}  // namespace
}  // namespace atlas::sim
