// Config parsing and validation, overrides, presets, the cost model, placements and
// schedules.
#include <gtest/gtest.h>

#include <fstream>

#include "perf/atlas-sim/model.h"
#include "perf/atlas-sim/placement.h"
#include "perf/atlas-sim/schedule.h"
#include "tests/sim/sim_test_util.h"

namespace atlas::sim {
namespace {

using nlohmann::json;
using testing::configDir;
using testing::mustParse;

json minimal() {
    return {{"job", {{"stages", {{{"forward_ms", 1}, {"backward_ms", 2}}}}}},
            {"cluster", {{"dcs", {{{"name", "A"}, {"gpus", 8}}}}}}};
}

std::string parseError(const json& j) {
    Result<SimConfig> c = parseConfig(j);
    return c.isOk() ? "" : c.status().message();
}

TEST(SimConfig, EveryCommittedConfigParses) {
    for (const char* f :
         {"testbed.json", "scale-4096.json", "testbed-transport.json", "testbed-sharing.json",
          "testbed-atlas-vs-varuna.json", "testbed-bubbletea.json", "scale-sharing.json",
          "scale-atlas-vs-varuna.json", "scale-bubbletea.json", "pipeline-bench.json",
          "plan-3dc.json"}) {
        SCOPED_TRACE(f);
        Result<json> doc = loadJsonFile(configDir() + "/" + f);
        ASSERT_TRUE(doc.isOk()) << doc.status().toString();
        Result<SimConfig> c = parseConfig(doc.value());
        ASSERT_TRUE(c.isOk()) << c.status().toString();
        for (const Variant& v : c.value().variants) {
            json vd = doc.value();
            vd.erase("variants");
            ASSERT_TRUE(applyOverrides(&vd, v.set).isOk()) << v.name;
            Result<SimConfig> vc = parseConfig(vd);
            EXPECT_TRUE(vc.isOk()) << v.name << ": " << vc.status().toString();
        }
    }
}

TEST(SimConfig, ErrorsNameThePath) {
    json j = minimal();
    j["job"]["micro_batchez"] = 4;
    EXPECT_NE(parseError(j).find("job.micro_batchez: unknown key"), std::string::npos)
        << parseError(j);
    j = minimal();
    j["job"]["micro_batches"] = 0;
    EXPECT_NE(parseError(j).find("job.micro_batches: must be in"), std::string::npos);
    j = minimal();
    j["network"] = {{"policy", "fastest"}};
    EXPECT_NE(parseError(j).find("network.policy: must be one of: fair, temporal, workload"),
              std::string::npos);
    j = minimal();
    j["network"] = {{"traffic_priority", "fastest"}};
    EXPECT_NE(
        parseError(j).find("network.traffic_priority: must be one of: pipeline, collective, equal"),
        std::string::npos)
        << parseError(j);
    j = minimal();
    j["cluster"]["wan"] = {{{"between", {"A", "Z"}}}};
    EXPECT_NE(parseError(j).find("cluster.wan.0.between"), std::string::npos);
    j = minimal();
    j.erase("cluster");
    EXPECT_NE(parseError(j).find("cluster: is required"), std::string::npos);
    j = minimal();
    j["job"]["model"] = {{"layers", 2}, {"hidden", 8}, {"seq_len", 8}};
    EXPECT_NE(parseError(j).find("exactly one of 'model' and 'stages'"), std::string::npos);
    j = minimal();
    j["parallelism"] = {{"dp", 300}, {"pp", 300}};
    EXPECT_NE(parseError(j).find("dp * pp"), std::string::npos);
    j = minimal();
    j["gpu"] = {{"preset", "V100"}};
    EXPECT_NE(parseError(j).find("unknown GPU preset"), std::string::npos);
    EXPECT_EQ(parseConfigText("{not json").status().code(), Code::kInvalidUsage);
}

TEST(SimConfig, Defaults) {
    const SimConfig c = mustParse(minimal());
    EXPECT_EQ(c.network.policy, sched::PolicyKind::kWorkload);
    EXPECT_EQ(c.network.traffic_priority, sched::PriorityOrder::kEqual)
        << "arrival order by default: published results stay reproducible";
    EXPECT_EQ(c.network.transport, TransportKind::kMulti);
    EXPECT_EQ(c.job.schedule, Schedule::k1f1b);
    EXPECT_FALSE(c.bubbletea.enabled);
    ASSERT_EQ(c.cluster.wan.size(), 1u);
}

TEST(SimConfig, OverridesEditTheDocument) {
    json j = minimal();
    ASSERT_TRUE(applyOverride(&j, "network.policy=fair").isOk());
    ASSERT_TRUE(applyOverride(&j, "parallelism.dp=4").isOk());
    ASSERT_TRUE(applyOverride(&j, "cluster.dcs.0.gpus=16").isOk());
    ASSERT_TRUE(applyOverride(&j, "job.stages.0.forward_ms=2.5").isOk());
    const SimConfig c = mustParse(j);
    EXPECT_EQ(c.network.policy, sched::PolicyKind::kFair);
    EXPECT_EQ(c.par.dp, 4);
    EXPECT_EQ(c.cluster.dcs[0].gpus, 16);
    EXPECT_EQ(c.job.stages[0].forward_ns, 2500 * kNsPerUs);
    EXPECT_FALSE(applyOverride(&j, "no-equals-sign").isOk());
    EXPECT_FALSE(applyOverride(&j, "cluster.dcs.9.gpus=1").isOk());
    EXPECT_FALSE(applyOverride(&j, "job.micro_batches.x=1").isOk() && parseConfig(j).isOk());
}

TEST(SimConfig, GpuPresets) {
    EXPECT_DOUBLE_EQ(gpuPreset("A100").value().peak_flops, 312e12);
    EXPECT_DOUBLE_EQ(gpuPreset("h100").value().peak_flops, 989e12);
    EXPECT_DOUBLE_EQ(gpuPreset("H200").value().peak_flops, 989e12);
    EXPECT_GT(gpuPreset("H200").value().memory_bytes, gpuPreset("H100").value().memory_bytes);
}

TEST(SimModel, ComputeTimeFromFlops) {
    json j = minimal();
    j["job"] = {{"model", {{"layers", 8}, {"hidden", 4096}, {"seq_len", 2048}}},
                {"micro_batch_size", 2}};
    j["parallelism"] = {{"dp", 1}, {"pp", 2}, {"tp", 2}};
    j["gpu"] = {{"preset", "H100"}, {"efficiency", 0.4}};
    const SimConfig c = mustParse(j);
    const std::vector<StageCost> cost = stageCosts(c);
    ASSERT_EQ(cost.size(), 2u);
    const double b = 2, s = 2048, h = 4096;
    const double fwd = 4 * (24 * b * s * h * h + 4 * b * s * s * h);  // 4 layers per stage
    const double rate = 989e12 * 0.4 * 2;
    EXPECT_NEAR(static_cast<double>(cost[0].forward_ns), fwd / rate * 1e9, 1.0);
    EXPECT_NEAR(static_cast<double>(cost[0].backward_ns), 2 * fwd / rate * 1e9, 1.0);
    EXPECT_EQ(cost[0].activation_bytes, static_cast<uint64_t>(b * s * h * 2));
    EXPECT_EQ(cost[1].activation_bytes, 0u);
    EXPECT_EQ(cost[0].grad_bytes, static_cast<uint64_t>(12 * h * h * 4 * 2));
}

TEST(SimModel, UnevenLayersGoToTheFirstStages) {
    json j = minimal();
    j["job"] = {{"model", {{"layers", 10}, {"hidden", 64}, {"seq_len", 64}}}};
    j["parallelism"] = {{"pp", 4}};
    const std::vector<StageCost> cost = stageCosts(mustParse(j));
    EXPECT_EQ(cost[0].layers, 3);
    EXPECT_EQ(cost[1].layers, 3);
    EXPECT_EQ(cost[2].layers, 2);
    EXPECT_EQ(cost[3].layers, 2);
}

TEST(SimModel, TransportBounds) {
    NetworkSpec net;
    net.tcp_window_bytes = 4e6;
    net.mss_bytes = 1460;
    net.streams = 8;
    const WanPath clean{10e9 / 8, 40 * kNsPerMs, 0.0};
    net.transport = TransportKind::kSingle;
    EXPECT_DOUBLE_EQ(transferRateBytesPerSec(clean, net), 4e6 / 0.04);  // window / RTT
    const WanPath lossy{10e9 / 8, 40 * kNsPerMs, 1e-4};
    EXPECT_DOUBLE_EQ(transferRateBytesPerSec(lossy, net), 1.22 * 1460 / (0.04 * 0.01));
    net.transport = TransportKind::kMulti;
    EXPECT_DOUBLE_EQ(transferRateBytesPerSec(lossy, net), 8 * 1.22 * 1460 / (0.04 * 0.01));
    EXPECT_DOUBLE_EQ(transferRateBytesPerSec(clean, net), 8 * 4e6 / 0.04);
    net.streams = 16;
    EXPECT_DOUBLE_EQ(transferRateBytesPerSec(clean, net), 10e9 / 8);  // capped by the link
    net.transport = TransportKind::kIdeal;
    EXPECT_DOUBLE_EQ(transferRateBytesPerSec(lossy, net), 10e9 / 8);
}

TEST(SimSchedule, GpipeOrder) {
    const std::vector<Task> t = stageOrder(Schedule::kGpipe, 1, 4, 3);
    const std::vector<Task> want = {{false, 0}, {false, 1}, {false, 2},
                                    {true, 2},  {true, 1},  {true, 0}};
    EXPECT_EQ(t, want);
}

TEST(SimSchedule, OneFOneBOrder) {
    // Stage 0 of 4 with 5 micro-batches: 3 warm-up forwards, then 1F1B, then the drain.
    const std::vector<Task> t = stageOrder(Schedule::k1f1b, 0, 4, 5);
    const std::vector<Task> want = {{false, 0}, {false, 1}, {false, 2}, {false, 3}, {true, 0},
                                    {false, 4}, {true, 1},  {true, 2},  {true, 3},  {true, 4}};
    EXPECT_EQ(t, want);
    // The last stage alternates from the start.
    const std::vector<Task> last = stageOrder(Schedule::k1f1b, 3, 4, 2);
    const std::vector<Task> want_last = {{false, 0}, {true, 0}, {false, 1}, {true, 1}};
    EXPECT_EQ(last, want_last);
    // Fewer micro-batches than warm-up steps.
    EXPECT_EQ(stageOrder(Schedule::k1f1b, 0, 8, 2).size(), 4u);
}

json placementCluster() {
    json j = minimal();
    j["cluster"] = {{"dcs",
                     {{{"name", "small"}, {"gpus", 8}},
                      {{"name", "big"}, {"gpus", 64}},
                      {{"name", "mid"}, {"gpus", 32}}}},
                    {"wan_default", {{"rtt_ms", 20}}}};
    j["parallelism"] = {{"dp", 4}, {"pp", 8}, {"tp", 4}};  // a stage needs 16 GPUs
    return j;
}

TEST(SimPlacement, AtlasFillsTheLargestDcsWithWholeStages) {
    // A stage needs 16 GPUs: big holds 4 stages, mid 2, small none (8 GPUs). So pp = 8
    // does not fit anywhere, pp = 6 does.
    Result<Layout> eight = placeStages(mustParse(placementCluster()));
    ASSERT_FALSE(eight.isOk());
    EXPECT_NE(eight.status().message().find("do not fit"), std::string::npos);
    json j = placementCluster();
    j["parallelism"]["pp"] = 6;
    Result<Layout> six = placeStages(mustParse(j));
    ASSERT_TRUE(six.isOk());
    EXPECT_EQ(six.value().gpus_per_dc, (std::vector<int>{0, 64, 32}));
    for (int d = 0; d < 4; ++d) {
        for (int s = 0; s < 6; ++s) {
            EXPECT_EQ(six.value().dcOf(d, s), s < 4 ? 1 : 2);
        }
    }
    // A job that fits the biggest DC stays there (other DCs would only add WAN hops).
    j["parallelism"]["pp"] = 4;
    Result<Layout> four = placeStages(mustParse(j));
    ASSERT_TRUE(four.isOk());
    EXPECT_EQ(four.value().dcsUsed(), 1);
}

TEST(SimPlacement, AtlasOrdersTheChainByRtt) {
    json j = minimal();
    j["cluster"] = {{"dcs",
                     {{{"name", "A"}, {"gpus", 4}},
                      {{"name", "B"}, {"gpus", 3}},
                      {{"name", "C"}, {"gpus", 2}}}},
                    {"wan",
                     {{{"between", {"A", "B"}}, {"rtt_ms", 80}},
                      {{"between", {"A", "C"}}, {"rtt_ms", 10}},
                      {{"between", {"B", "C"}}, {"rtt_ms", 10}}}}};
    j["parallelism"] = {{"dp", 1}, {"pp", 9}, {"tp", 1}};
    Result<Layout> l = placeStages(mustParse(j));
    ASSERT_TRUE(l.isOk());
    // Size order A(4) B(3) C(2) would cross the 80 ms A-B path; A C B uses two 10 ms hops.
    EXPECT_EQ(l.value().dcOf(0, 0), 0);
    EXPECT_EQ(l.value().dcOf(0, 4), 2);
    EXPECT_EQ(l.value().dcOf(0, 8), 1);
    j["placement"] = {{"order_chain", false}};
    Result<Layout> plain = placeStages(mustParse(j));
    ASSERT_TRUE(plain.isOk());
    EXPECT_EQ(plain.value().dcOf(0, 4), 1);
}

TEST(SimPlacement, SequentialIsDcUnaware) {
    json j = placementCluster();
    j["placement"] = {{"policy", "sequential"}};
    j["parallelism"] = {{"dp", 4}, {"pp", 4}, {"tp", 2}};
    Result<Layout> l = placeStages(mustParse(j));
    ASSERT_TRUE(l.isOk());
    // Listing order: small (4 TP groups) first. Stage 0's 4 replicas fill it.
    for (int d = 0; d < 4; ++d) {
        EXPECT_EQ(l.value().dcOf(d, 0), 0);
        EXPECT_EQ(l.value().dcOf(d, 1), 1);
    }
    j["placement"] = {{"policy", "pipeline_major"}};
    Result<Layout> pm = placeStages(mustParse(j));
    ASSERT_TRUE(pm.isOk());
    EXPECT_EQ(pm.value().dcOf(0, 3), 0);  // pipeline 0 fills small entirely
    EXPECT_EQ(pm.value().dcOf(1, 0), 1);
}

TEST(SimPlacement, ManualChecksCapacity) {
    json j = placementCluster();
    j["placement"] = {{"policy", "manual"}, {"stage_dcs", {"small", "big"}}};
    j["parallelism"] = {{"dp", 4}, {"pp", 2}, {"tp", 4}};
    Result<Layout> l = placeStages(mustParse(j));
    ASSERT_FALSE(l.isOk());
    EXPECT_NE(l.status().message().find("small"), std::string::npos);
}

}  // namespace
}  // namespace atlas::sim
