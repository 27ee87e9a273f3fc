// atlas-nccl-sweep as a process, in --simulate mode (no GPU): two rank processes per net,
// the lock-step protocol, the checks, the iteration plan, the budget, the tables and the
// JSON. A corrupted result must turn into #wrong > 0 and exit status 1; bad flags exit 2.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

struct SweepRun {
    int code = -1;
    std::string out;
    std::string err;
    json doc;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

class SweepCli : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/atlas-sweep-cli-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override { std::system(("rm -rf '" + dir_ + "'").c_str()); }

    SweepRun sweep(const std::string& args) {
        SweepRun r;
        const std::string json_path = dir_ + "/out.json";
        std::remove(json_path.c_str());
        const std::string cmd = std::string("timeout 60 ") + ATLAS_SWEEP_EXE +
                                " --simulate --logdir " + dir_ + " --json " + json_path + " " +
                                args + " >" + dir_ + "/out.txt 2>" + dir_ + "/err.txt";
        const int st = std::system(cmd.c_str());
        r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        r.out = slurp(dir_ + "/out.txt");
        r.err = slurp(dir_ + "/err.txt");
        const std::string j = slurp(json_path);
        if (!j.empty()) {
            r.doc = json::parse(j, nullptr, false);
        }
        return r;
    }

    std::string dir_;
};

TEST_F(SweepCli, EveryPointOfEveryOpAndNetIsCheckedAndReported) {
    const SweepRun r = sweep("--net atlas,socket:4x4 -b 8 -e 64K");
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    ASSERT_TRUE(r.doc.is_object()) << r.out;
    EXPECT_TRUE(r.doc["pass"].get<bool>());
    ASSERT_EQ(r.doc["nets"].size(), 2u);
    for (const json& net : r.doc["nets"]) {
        // 14 sizes (8 B .. 64 KiB) x 5 ops
        EXPECT_EQ(net["points"].size(), 70u) << net["net"];
        EXPECT_TRUE(net["skipped"].empty());
        for (const json& p : net["points"]) {
            EXPECT_EQ(p["wrong"].get<int>(), 0);
            // 50 ms per op, a 200 ms target: 3 timed iterations after the check run
            if (p["size_B"].get<int>() > 0) {
                EXPECT_EQ(p["iters"].get<int>(), 3) << p.dump();
                EXPECT_GT(p["busbw_GBps"].get<double>(), 0);
            }
        }
    }
    EXPECT_EQ(r.doc["nets"][1]["net"], "socket:4x4");
    // nccl-tests' table per op and net, and the comparison of the two nets.
    EXPECT_NE(r.out.find("#       size         count      type   redop    root"),
              std::string::npos);
    EXPECT_NE(r.out.find("# alltoall, net socket:4x4"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos);
    EXPECT_NE(r.out.find("a = atlas, b = socket:4x4"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\nPASS\n"), std::string::npos);
}

TEST_F(SweepCli, AWrongElementFailsTheRun) {
    const SweepRun r =
        sweep("--net atlas --ops all_gather,sendrecv -b 1K -e 4K --sim-corrupt sendrecv");
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    ASSERT_TRUE(r.doc.is_object());
    EXPECT_FALSE(r.doc["pass"].get<bool>());
    size_t wrong_points = 0;
    for (const json& p : r.doc["nets"][0]["points"]) {
        if (p["op"] == "sendrecv") {
            // one wrong element per rank
            EXPECT_EQ(p["wrong"].get<int>(), 2) << p.dump();
            EXPECT_NE(p["detail"].get<std::string>().find("first at"), std::string::npos);
            ++wrong_points;
        } else {
            EXPECT_EQ(p["wrong"].get<int>(), 0);
        }
    }
    EXPECT_EQ(wrong_points, 3u);
    EXPECT_NE(r.out.find("Out of bounds values : 6 FAILED"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\nFAIL\n"), std::string::npos);
}

TEST_F(SweepCli, TheBudgetSkipsPointsThatWouldEndLate) {
    // 1 Gbit/s, 50 ms per op: a point at 16 MiB takes ~0.2 s, at 256 MiB ~2.2 s per run; the
    // modelled times of the points up to 128 MiB alone add up to ~2.8 s. A 3 s budget is thus
    // exceeded by the model whatever the machine adds in wall time (an 8 s budget was not,
    // once the machine was quick: everything fitted).
    const SweepRun r = sweep("--net atlas --ops sendrecv -b 1M -e 256M --budget-s 3 -w 0");
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    const json& net = r.doc["nets"][0];
    ASSERT_FALSE(net["skipped"].empty());
    ASSERT_FALSE(net["points"].empty());
    // Doubling sizes: everything up to some size ran, everything above was skipped.
    const size_t last_run = net["points"].back()["requested_B"].get<size_t>();
    for (const json& s : net["skipped"]) {
        EXPECT_GT(s["requested_B"].get<size_t>(), last_run);
    }
    EXPECT_LT(last_run, 256ull << 20);
    EXPECT_NE(r.out.find("points skipped"), std::string::npos);
}

TEST_F(SweepCli, BadFlagsExitWithStatus2AndSayWhy) {
    SweepRun r = sweep("--ops broadcast");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("unknown op 'broadcast'"), std::string::npos) << r.err;
    r = sweep("--net socket:16x8");
    EXPECT_EQ(r.code, 2);
    EXPECT_NE(r.err.find("at most 64 sockets"), std::string::npos) << r.err;
}

}  // namespace
