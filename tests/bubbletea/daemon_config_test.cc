// bubbletea's flags on the options layer: the environment it shares with the plugin
// (ATLAS_BUBBLE_CHANNEL, ATLAS_LOCAL_RANK and the launcher rule), the deprecated
// --engine-threads spelling, strict values (--cost-model), every problem at once, and that
// docs/bubbletea.md's flag table is the registry.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "atlas/bubble_channel.h"
#include "bubbletea/daemon/config.h"
#include "channel/channel_name.h"
#include "channel/local_rank.h"
#include "support/doc_blocks.h"

namespace atlas::bubbletea {
namespace {

using Vars = std::map<std::string, std::string>;

Result<ParsedArgs> parse(std::vector<std::string> args, const Vars& vars = {}) {
    std::vector<const char*> argv = {"bubbletea"};
    for (const std::string& a : args) {
        argv.push_back(a.c_str());
    }
    return parseDaemonArgs(static_cast<int>(argv.size()), argv.data(),
                           [&vars](const char* k) -> const char* {
                               auto it = vars.find(k);
                               return it == vars.end() ? nullptr : it->second.c_str();
                           });
}

TEST(DaemonOptions, OpensTheChannelThePluginWritesUnderEachLauncher) {
    // The plugin resolves its channel with channel::resolveLocalRank(ATLAS_LOCAL_RANK, env);
    // the daemon, started by the same launcher, must arrive at the same name.
    for (const Vars& launcher : std::vector<Vars>{{{"LOCAL_RANK", "3"}},
                                                  {{"OMPI_COMM_WORLD_LOCAL_RANK", "2"}},
                                                  {{"SLURM_LOCALID", "1"}, {"SLURM_PROCID", "9"}},
                                                  {{"MPI_LOCALRANKID", "4"}, {"PMI_RANK", "7"}},
                                                  {{"PMI_LOCAL_RANK", "5"}}}) {
        auto r = parse({"--engine=null"}, launcher);
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        auto plugin_rank = channel::resolveLocalRank(-1, [&launcher](const char* k) -> const char* {
            auto it = launcher.find(k);
            return it == launcher.end() ? nullptr : it->second.c_str();
        });
        ASSERT_TRUE(plugin_rank.isOk());
        EXPECT_EQ(r.value().config.local_rank, plugin_rank.value().rank) << launcher.begin()->first;
        EXPECT_EQ(channel::resolveChannelName(nullptr, r.value().config.local_rank).value(),
                  channel::defaultChannelName(plugin_rank.value().rank));
    }
    // The flag beats ATLAS_LOCAL_RANK, which beats the launcher.
    EXPECT_EQ(parse({}, {{"ATLAS_LOCAL_RANK", "6"}, {"LOCAL_RANK", "1"}}).value().config.local_rank,
              6);
    EXPECT_EQ(parse({"--local-rank", "2"}, {{"ATLAS_LOCAL_RANK", "6"}}).value().config.local_rank,
              2);
    auto bad = parse({}, {{"OMPI_COMM_WORLD_LOCAL_RANK", "x"}});
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("OMPI_COMM_WORLD_LOCAL_RANK='x'"), std::string::npos);
    // ATLAS_BUBBLE_CHANNEL unless --channel.
    EXPECT_EQ(parse({}, {{"ATLAS_BUBBLE_CHANNEL", "/job-{local_rank}"}}).value().config.channel,
              "/job-{local_rank}");
    EXPECT_EQ(parse({"--channel", "/x"}, {{"ATLAS_BUBBLE_CHANNEL", "/y"}}).value().config.channel,
              "/x");
}

TEST(DaemonOptions, EngineThreadsIsTheOldSpellingOfComputeThreads) {
    auto now = parse({"--compute-threads", "3"});
    ASSERT_TRUE(now.isOk());
    EXPECT_EQ(now.value().config.engine_threads, 3);
    EXPECT_TRUE(now.value().warnings.empty());
    auto old = parse({"--engine-threads", "4"});
    ASSERT_TRUE(old.isOk());
    EXPECT_EQ(old.value().config.engine_threads, 4);
    ASSERT_EQ(old.value().warnings.size(), 1u);
    EXPECT_EQ(old.value().warnings[0],
              "--engine-threads is deprecated: use --compute-threads instead");
    DaemonConfig fromFile;
    ASSERT_TRUE(applyConfigJson(R"({"engine-threads": 2})", "t.json", &fromFile).isOk());
    EXPECT_EQ(fromFile.engine_threads, 2);
}

// The window-end band was the "guard band" (--guard-band-us ...), a name the plugin's
// ATLAS_BUBBLE_GUARD_US band also has: the old flags and config keys are refused and the error
// names the new one, so a script that still passes one fails instead of being misread.
TEST(DaemonOptions, GuardBandFlagsAreRenamedToEndMargin) {
    auto now = parse({"--end-margin-us", "500", "--max-end-margin-us", "9000",
                      "--end-margin-half-life-ms", "20"});
    ASSERT_TRUE(now.isOk()) << now.status().toString();
    EXPECT_EQ(now.value().config.end_margin_ns, 500 * kNsPerUs);
    EXPECT_EQ(now.value().config.max_end_margin_ns, 9 * kNsPerMs);
    EXPECT_EQ(now.value().config.end_margin_half_life_ns, 20 * kNsPerMs);
    auto old = parse(
        {"--guard-band-us", "500", "--max-guard-band-us", "9000", "--guard-half-life-ms", "20"});
    ASSERT_FALSE(old.isOk());
    for (const char* part : {"'--guard-band-us' was renamed: use --end-margin-us",
                             "'--max-guard-band-us' was renamed: use --max-end-margin-us",
                             "'--guard-half-life-ms' was renamed: use --end-margin-half-life-ms"}) {
        EXPECT_NE(old.status().message().find(part), std::string::npos) << old.status().message();
    }
    DaemonConfig fromFile;
    const Status file = applyConfigJson(R"({"guard-band-us": 500})", "t.json", &fromFile);
    ASSERT_FALSE(file.isOk());
    EXPECT_NE(file.message().find("t.json: key 'guard-band-us' was renamed: use 'end-margin-us'"),
              std::string::npos)
        << file.message();
}

TEST(DaemonOptions, StrictValuesAndEveryProblemAtOnce) {
    auto cm = parse({"--cost-model", "100,2.5,0.001"});
    ASSERT_TRUE(cm.isOk()) << cm.status().toString();
    EXPECT_EQ(cm.value().config.cost_model, (std::vector<double>{100, 2.5, 0.001}));
    // strtod read "12abc" as 12 and "" as 0; the options layer rejects both.
    for (const char* bad : {"1,2", "1,2,3,4", "1,2,x", "12abc,1,1", "1,,2", "-1,1,1", "1,inf,1"}) {
        EXPECT_FALSE(parse({"--cost-model", bad}).isOk()) << bad;
    }
    auto all = parse({"--http-threads", "0", "--windows", "duty:10:20", "--kv-dtype", "fp8",
                      "--min-confidence", "1.5", "--listen", "nohost", "stray"});
    ASSERT_FALSE(all.isOk());
    for (const char* part :
         {"--http-threads='0' is out of range", "--windows='duty:10:20' is invalid",
          "--kv-dtype='fp8' is invalid", "--min-confidence='1.5' is out of range",
          "--listen='nohost' is invalid", "unexpected argument 'stray'"}) {
        EXPECT_NE(all.status().message().find(part), std::string::npos) << all.status().message();
    }
}

TEST(DaemonOptions, ConfigFileUnderTheFlags) {
    const std::string path = ::testing::TempDir() + "/bubbletea-config-test.json";
    std::ofstream(path) << R"({"queue-limit": 5, "http-threads": 3, "listen": "0.0.0.0:9100"})";
    auto r = parse({"--http-threads", "4", "--config", path});
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r.value().config.queue_limit, 5u);  // from the file
    EXPECT_EQ(r.value().config.http_threads, 4);  // the flag wins, wherever --config is
    EXPECT_EQ(r.value().config.listen_port, 9100);
    std::ofstream(path) << R"({"queue-limit": "many"})";
    auto bad = parse({"--config", path});
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find(path + ": --queue-limit='many' is invalid"),
              std::string::npos)
        << bad.status().message();
    std::remove(path.c_str());
}

TEST(DaemonOptions, DocsFlagTableIsTheRegistry) {
    EXPECT_TRUE(atlas::testing::docBlockMatches(
        std::string(ATLAS_SOURCE_DIR) + "/docs/bubbletea.md", "bubbletea", daemonFlagsMarkdown()));
}

}  // namespace
}  // namespace atlas::bubbletea
