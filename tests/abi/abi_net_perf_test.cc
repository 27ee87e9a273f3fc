// atlas-net-perf end to end: `local` mode with two configurations, JSON checked row by row.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/abi/isolate.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(180 * kNsPerSec);

class NetPerfTool : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/atlas-net-perf-test-XXXXXX";
        ASSERT_NE(mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }

    // Runs the tool with `args`; stdout goes to <dir>/stdout.txt. Returns the wait status.
    Result<int> run(std::vector<std::string> args) {
        const std::string out = dir_ + "/stdout.txt";
        Result<ChildProcess> child = ChildProcess::spawn([&](int) {
            int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) {
                return 126;
            }
            std::vector<char*> argv;
            std::string tool = ATLAS_NET_PERF_PATH;
            argv.push_back(tool.data());
            for (std::string& a : args) {
                argv.push_back(a.data());
            }
            argv.push_back(nullptr);
            execv(tool.c_str(), argv.data());
            return 127;
        });
        if (!child.isOk()) {
            return child.status();
        }
        return child->wait(Deadline(kBudget));
    }

    std::string readFile(const std::string& path) {
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }

    std::string dir_;
};

TEST_F(NetPerfTool, LocalBandwidthTwoConfigsWritesConsistentJson) {
    const std::string json_path = dir_ + "/out.json";
    Result<int> st = run({"local",   "--plugin", pluginPath(), "--sizes",  "8,64K,1M",
                          "--iters", "5",        "--warmup",   "1",        "--window",
                          "4",       "--config", "atlas:",     "--config", "one:ATLAS_NSTREAMS=1",
                          "--json",  json_path,  "--timeout",  "120",      "--quiet"});
    ATLAS_ASSERT_OK(st);
    const std::string table = readFile(dir_ + "/stdout.txt");
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << describeWaitStatus(*st) << "\n"
                                                         << table;
    EXPECT_NE(table.find("# atlas-net-perf"), std::string::npos) << table;
    EXPECT_NE(table.find("algbw_GB/s"), std::string::npos) << table;

    nlohmann::json j = nlohmann::json::parse(readFile(json_path), nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << "invalid JSON in " << json_path;
    EXPECT_EQ(j.value("tool", ""), "atlas-net-perf");
    EXPECT_EQ(j.value("measure", ""), "bandwidth");
    EXPECT_EQ(j.value("baseline", ""), "atlas");
    ASSERT_TRUE(j["configs"].is_array());
    ASSERT_EQ(j["configs"].size(), 2u);
    const std::vector<size_t> sizes = {8, 64 * 1024, 1024 * 1024};
    const char* names[] = {"atlas", "one"};
    for (size_t c = 0; c < 2; ++c) {
        const nlohmann::json& cfg = j["configs"][c];
        SCOPED_TRACE(cfg.dump());
        EXPECT_EQ(cfg.value("name", ""), names[c]);
        EXPECT_EQ(cfg.value("kind", ""), "plugin");
        EXPECT_TRUE(cfg.value("ok", false));
        ASSERT_EQ(cfg["rows"].size(), sizes.size());
        for (size_t r = 0; r < sizes.size(); ++r) {
            const nlohmann::json& row = cfg["rows"][r];
            EXPECT_EQ(row.value("size", size_t{0}), sizes[r]);
            EXPECT_EQ(row.value("count", 0), 5);
            const double t = row.value("time_us", 0.0);
            const double bw = row.value("algbw_GBps", 0.0);
            EXPECT_GT(t, 0.0);
            // algbw is size / time, and Gbit/s is algbw * 8.
            EXPECT_NEAR(bw, static_cast<double>(sizes[r]) / (t * 1e3), 1e-9 + bw * 1e-6);
            EXPECT_NEAR(row.value("gbps", 0.0), bw * 8, 1e-9 + bw * 1e-6);
            if (c == 0) {
                EXPECT_DOUBLE_EQ(row.value("ratio", 0.0), 1.0);
            } else {
                const double base = j["configs"][0]["rows"][r].value("algbw_GBps", 0.0);
                EXPECT_NEAR(row.value("ratio", 0.0), bw / base, 1e-9 + bw / base * 1e-6);
            }
        }
    }
    EXPECT_EQ(j["configs"][1]["env"].value("ATLAS_NSTREAMS", ""), "1");
}

TEST_F(NetPerfTool, LocalLatencyAgainstRawTcp) {
    const std::string json_path = dir_ + "/lat.json";
    Result<int> st = run({"local", "--plugin", pluginPath(), "--latency", "--iters", "50",
                          "--warmup", "5", "--config", "atlas:", "--config", "tcp:raw",
                          "--baseline", "tcp", "--json", json_path, "--timeout", "120", "--quiet"});
    ATLAS_ASSERT_OK(st);
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << describeWaitStatus(*st) << "\n"
                                                         << readFile(dir_ + "/stdout.txt");
    nlohmann::json j = nlohmann::json::parse(readFile(json_path), nullptr, false);
    ASSERT_FALSE(j.is_discarded());
    EXPECT_EQ(j.value("measure", ""), "latency");
    EXPECT_EQ(j.value("baseline", ""), "tcp");
    ASSERT_EQ(j["configs"].size(), 2u);
    EXPECT_EQ(j["configs"][1].value("kind", ""), "raw-tcp");
    for (const nlohmann::json& cfg : j["configs"]) {
        SCOPED_TRACE(cfg.dump());
        ASSERT_EQ(cfg["rows"].size(), 1u);
        const nlohmann::json& row = cfg["rows"][0];
        EXPECT_EQ(row.value("size", size_t{0}), 8u);
        EXPECT_EQ(row.value("count", 0), 50);
        EXPECT_GT(row.value("p50_us", 0.0), 0.0);
        EXPECT_GE(row.value("p99_us", 0.0), row.value("p50_us", 0.0));
        EXPECT_GE(row.value("max_us", 0.0), row.value("p99_us", 0.0));
        EXPECT_LE(row.value("min_us", 1e9), row.value("p50_us", 0.0));
    }
    EXPECT_DOUBLE_EQ(j["configs"][1]["rows"][0].value("ratio", 0.0), 1.0);
}

TEST_F(NetPerfTool, BadUsageAndMissingPluginExitTwo) {
    Result<int> st = run({"local", "--sizes", "8,bogus"});
    ATLAS_ASSERT_OK(st);
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 2) << describeWaitStatus(*st);
    st = run({"local", "--plugin", dir_ + "/no-such-plugin.so", "--sizes", "8"});
    ATLAS_ASSERT_OK(st);
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 2) << describeWaitStatus(*st);
}

}  // namespace
}  // namespace atlas::abi
