// Same config + seed => identical output; a different seed changes what is random.
#include <gtest/gtest.h>

#include "tests/sim/sim_test_util.h"

namespace atlas::sim {
namespace {

using testing::loadConfig;
using testing::mustRun;

nlohmann::json randomised(uint64_t seed) {
    return {{"seed", seed},
            {"iterations", 10},
            {"warmup_iterations", 5},
            {"jitter.compute", 0.1},
            {"bubbletea.enabled", true},
            {"bubbletea.arrival_rate_per_s", 50},
            {"bubbletea.prompt_tokens",
             {{"dist", "lognormal"}, {"median", 512}, {"sigma", 1.0}, {"min", 16}, {"max", 8192}}}};
}

TEST(SimDeterminism, SameSeedSameOutput) {
    RunFlags flags;
    flags.record_timeline = true;
    flags.record_iterations = 3;
    flags.record_link_rates = true;
    const RunReport a = mustRun(loadConfig("testbed.json", randomised(7)), flags);
    const RunReport b = mustRun(loadConfig("testbed.json", randomised(7)), flags);
    EXPECT_EQ(toJson(a.summary).dump(), toJson(b.summary).dump());
    ASSERT_TRUE(a.bt && b.bt);
    EXPECT_EQ(a.bt->iteration_end_ns, b.bt->iteration_end_ns);
    EXPECT_EQ(a.bt->prefill.ttft_ns, b.bt->prefill.ttft_ns);
    ASSERT_EQ(a.bt->timeline.size(), b.bt->timeline.size());
    for (size_t g = 0; g < a.bt->timeline.size(); ++g) {
        ASSERT_EQ(a.bt->timeline[g].size(), b.bt->timeline[g].size());
        for (size_t i = 0; i < a.bt->timeline[g].size(); ++i) {
            EXPECT_EQ(a.bt->timeline[g][i].start_ns, b.bt->timeline[g][i].start_ns);
            EXPECT_EQ(a.bt->timeline[g][i].end_ns, b.bt->timeline[g][i].end_ns);
        }
    }
    ASSERT_EQ(a.base.links.size(), b.base.links.size());
    for (size_t i = 0; i < a.base.links.size(); ++i) {
        EXPECT_EQ(a.base.links[i].rate.size(), b.base.links[i].rate.size());
    }
}

TEST(SimDeterminism, DifferentSeedDifferentRandomness) {
    const RunReport a = mustRun(loadConfig("testbed.json", randomised(7)));
    const RunReport b = mustRun(loadConfig("testbed.json", randomised(8)));
    EXPECT_NE(a.base.iteration_end_ns, b.base.iteration_end_ns);  // compute jitter
    ASSERT_TRUE(a.bt && b.bt);
    EXPECT_NE(a.bt->prefill.ttft_ns, b.bt->prefill.ttft_ns);  // arrivals and prompt lengths
}

TEST(SimDeterminism, NoJitterIsIndependentOfTheSeed) {
    nlohmann::json set = {{"iterations", 6}, {"warmup_iterations", 2}};
    set["seed"] = 1;
    const RunReport a = mustRun(loadConfig("testbed.json", set));
    set["seed"] = 99;
    const RunReport b = mustRun(loadConfig("testbed.json", set));
    EXPECT_EQ(a.base.iteration_end_ns, b.base.iteration_end_ns);
}

}  // namespace
}  // namespace atlas::sim
