// Invariants checked over whole runs: no GPU group does two things at once, every task runs
// exactly once per iteration and after its input, link capacity is never exceeded and the
// bytes the links carried equal the integral of their sending rate.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "perf/atlas-sim/model.h"
#include "perf/atlas-sim/placement.h"
#include "tests/sim/sim_test_util.h"

namespace atlas::sim {
namespace {

using testing::loadConfig;
using testing::mustRun;

struct Case {
    const char* name;
    nlohmann::json set;
};

void checkTimeline(const RunReport& rep, const RunResult& r) {
    const SimConfig& c = rep.config;
    const Layout& l = rep.layout;
    const int m = c.job.micro_batches;
    ASSERT_EQ(r.timeline.size(), static_cast<size_t>(l.groups()));
    // (group, iteration, backward, micro-batch) -> activity
    std::map<std::tuple<size_t, int, bool, int>, Activity> tasks;
    for (size_t g = 0; g < r.timeline.size(); ++g) {
        std::vector<Activity> acts = r.timeline[g];
        std::sort(acts.begin(), acts.end(),
                  [](const Activity& a, const Activity& b) { return a.start_ns < b.start_ns; });
        for (size_t i = 0; i < acts.size(); ++i) {
            ASSERT_LE(acts[i].start_ns, acts[i].end_ns);
            if (i > 0) {
                ASSERT_LE(acts[i - 1].end_ns, acts[i].start_ns)
                    << "group " << g << " runs " << activityName(acts[i - 1].kind) << " and "
                    << activityName(acts[i].kind) << " at once";
            }
            if (acts[i].kind == ActivityKind::kForward || acts[i].kind == ActivityKind::kBackward) {
                const bool bwd = acts[i].kind == ActivityKind::kBackward;
                const auto key = std::make_tuple(g, acts[i].iteration, bwd, acts[i].index);
                ASSERT_TRUE(tasks.emplace(key, acts[i]).second) << "task ran twice";
            }
        }
    }
    // Every recorded iteration has every task once, after its dependency.
    const int first = std::max(0, c.iterations - 2);
    for (int it = first; it < c.iterations; ++it) {
        for (int d = 0; d < l.dp; ++d) {
            for (int s = 0; s < l.pp; ++s) {
                const size_t g = static_cast<size_t>(d) * l.pp + s;
                for (int mb = 0; mb < m; ++mb) {
                    auto f = tasks.find({g, it, false, mb});
                    auto b = tasks.find({g, it, true, mb});
                    ASSERT_NE(f, tasks.end());
                    ASSERT_NE(b, tasks.end());
                    ASSERT_LE(f->second.end_ns, b->second.start_ns);
                    if (s > 0) {
                        ASSERT_LE(tasks.at({g - 1, it, false, mb}).end_ns, f->second.start_ns);
                    }
                    if (s + 1 < l.pp) {
                        ASSERT_LE(tasks.at({g + 1, it, true, mb}).end_ns, b->second.start_ns);
                    }
                }
            }
        }
    }
}

void checkLinks(const RunResult& r) {
    ASSERT_FALSE(r.links.empty());
    for (const LinkStats& ls : r.links) {
        EXPECT_LE(ls.max_share_sum, 1.0 + 1e-9);
        ASSERT_FALSE(ls.rate.empty());
        double integral = 0.0;
        for (size_t i = 0; i < ls.rate.size(); ++i) {
            EXPECT_LE(ls.rate[i].bytes_per_sec, ls.capacity_bytes_per_sec * (1.0 + 1e-9))
                << "link " << ls.from << "->" << ls.to << " over capacity";
            EXPECT_GE(ls.rate[i].bytes_per_sec, 0.0);
            if (i + 1 < ls.rate.size()) {
                integral += ls.rate[i].bytes_per_sec *
                            static_cast<double>(ls.rate[i + 1].start_ns - ls.rate[i].start_ns) /
                            1e9;
            }
        }
        // The run ends with every transfer delivered: the link is idle, and it moved exactly
        // what it delivered (each completion is rounded up to a whole nanosecond).
        EXPECT_EQ(ls.rate.back().bytes_per_sec, 0.0);
        EXPECT_NEAR(integral, static_cast<double>(ls.bytes),
                    1e-6 * static_cast<double>(ls.bytes) +
                        ls.capacity_bytes_per_sec * 1e-9 * static_cast<double>(ls.transfers));
    }
}

TEST(SimInvariants, WholeRuns) {
    const std::vector<Case> cases = {
        {"atlas workload", {}},
        {"fair single-stream", {{"network.policy", "fair"}, {"network.transport", "single"}}},
        {"temporal gpipe", {{"network.policy", "temporal"}, {"job.schedule", "gpipe"}}},
        {"jitter + bubbletea predicted",
         {{"jitter.compute", 0.1},
          {"bubbletea.enabled", true},
          {"bubbletea.arrival_rate_per_s", 40}}},
        {"bubbletea oracle with prediction error",
         {{"bubbletea.enabled", true},
          {"bubbletea.windows", "oracle"},
          {"bubbletea.prediction_error", 0.3},
          {"bubbletea.arrival_rate_per_s", 40}}},
        {"varuna straddling all-reduce",
         {{"placement.policy", "sequential"},
          {"parallelism.dp", 3},
          {"parallelism.pp", 2},
          {"network.policy", "fair"}}},
    };
    for (const Case& k : cases) {
        SCOPED_TRACE(k.name);
        nlohmann::json set = k.set;
        set["iterations"] = 8;
        set["warmup_iterations"] = 4;
        const SimConfig c = loadConfig("testbed.json", set);
        RunFlags flags;
        flags.record_timeline = true;
        flags.record_iterations = 2;
        flags.record_link_rates = true;
        const RunReport rep = mustRun(c, flags);
        checkTimeline(rep, rep.bt ? *rep.bt : rep.base);
        checkLinks(rep.base);
        if (rep.bt) {
            checkLinks(*rep.bt);
        }
    }
}

TEST(SimInvariants, VarunaStageStraddlesDcsAndItsAllReduceUsesTheWan) {
    nlohmann::json set = {{"placement.policy", "sequential"},
                          {"parallelism.dp", 3},
                          {"parallelism.pp", 2},
                          {"iterations", 3},
                          {"warmup_iterations", 1}};
    const SimConfig c = loadConfig("testbed.json", set);
    Result<Layout> l = placeStages(c);
    ASSERT_TRUE(l.isOk());
    // 3 replicas of stage 0 take A's two GPUs and one of B's: the stage straddles A and B.
    EXPECT_EQ(l.value().dcOf(0, 0), 0);
    EXPECT_EQ(l.value().dcOf(2, 0), 1);
    const RunReport rep = mustRun(c);
    // The all-reduce of stage 0 crosses A<->B both ways, on top of the pipeline traffic.
    uint64_t ab = 0;
    for (const LinkStats& ls : rep.base.links) {
        if (ls.from == 0 && ls.to == 1) {
            ab = ls.bytes;
        }
    }
    const StageCost sc = stageCosts(c)[0];
    EXPECT_GE(ab, static_cast<uint64_t>(2.0 * 2 / 3 * static_cast<double>(sc.grad_bytes)));
}

}  // namespace
}  // namespace atlas::sim
