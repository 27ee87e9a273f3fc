// atlas-pipeline-bench's command line: the receive-posting pattern and per-stage CPU pinning
// (the flags the bubble and non-interference experiments depend on), and their errors.
#include <gtest/gtest.h>

#include "options/help.h"
#include "perf/atlas-pipeline-bench/options.h"
#include "support/doc_blocks.h"

namespace atlas::pipebench {
namespace {

Result<BenchConfig> parse(std::vector<std::string> args) {
    return parseArgs(args);
}

TEST(PipelineBenchOptions, RecvPostDefaultsToAheadAndAcceptsNeeded) {
    auto d = parse({});
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    EXPECT_EQ(d->recv_post, RecvPost::kAhead);
    auto n = parse({"--recv-post", "needed"});
    ASSERT_TRUE(n.isOk()) << n.status().toString();
    EXPECT_EQ(n->recv_post, RecvPost::kNeeded);
    EXPECT_STREQ(recvPostName(n->recv_post), "needed");
    auto bad = parse({"--recv-post", "later"});
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(
        bad.status().message().find("--recv-post='later' is invalid: expected one of ahead|needed"),
        std::string::npos)
        << bad.status().message();
}

TEST(PipelineBenchOptions, StageCpusParsesListsAndRanges) {
    auto c = parse({"-P", "3", "--stage-cpus", "0:0", "--stage-cpus", "2:1-3,6"});
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    ASSERT_EQ(c->stage_cpus.size(), 2u);
    EXPECT_EQ(c->stage_cpus[0].stage, 0);
    EXPECT_EQ(c->stage_cpus[0].cpus, (std::vector<int>{0}));
    EXPECT_EQ(c->stage_cpus[1].stage, 2);
    EXPECT_EQ(c->stage_cpus[1].cpus, (std::vector<int>{1, 2, 3, 6}));
}

TEST(PipelineBenchOptions, StageCpusErrorsNameTheFlag) {
    for (const char* v : {"0", "0:", "0:a", "0:3-1", "0:1,", "x:1", "0:1--2"}) {
        auto c = parse({"--stage-cpus", v});
        ASSERT_FALSE(c.isOk()) << v;
        EXPECT_NE(c.status().message().find("--stage-cpus"), std::string::npos)
            << v << ": " << c.status().message();
    }
    auto beyond = parse({"-P", "2", "--stage-cpus", "2:0"});
    ASSERT_FALSE(beyond.isOk());
    EXPECT_NE(beyond.status().message().find("--stages is 2"), std::string::npos)
        << beyond.status().message();
}

TEST(PipelineBenchOptions, CpuListParser) {
    auto r = parseCpuList("--x", "0-2,5");
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value(), (std::vector<int>{0, 1, 2, 5}));
    EXPECT_FALSE(parseCpuList("--x", "").isOk());
    EXPECT_FALSE(parseCpuList("--x", "5000").isOk());
}

TEST(PipelineBenchOptions, DefaultsDerivedAndStrictNumbers) {
    auto d = parse({"--fwd-ms", "7.5"});
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    EXPECT_EQ(d->bwd_ns, 15 * kNsPerMs);  // 2 x fwd unless --bwd-ms
    auto b = parse({"--fwd-ms", "10", "--bwd-ms", "0"});
    ASSERT_TRUE(b.isOk());
    EXPECT_EQ(b->bwd_ns, 0);
    auto s = parse({"-P", "3", "--stage-ms", "2:5:6", "-D=2", "--act-bytes", "64KiB"});
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    EXPECT_EQ(s->pipelines, 2);
    EXPECT_EQ(s->act_bytes, 64u * 1024);
    EXPECT_EQ(s->cost(2).fwd_ns, 5 * kNsPerMs);
    EXPECT_EQ(s->cost(0).fwd_ns, 20 * kNsPerMs);
    // strtod accepted these; the options layer does not.
    for (const char* bad : {"0x10", " 5", "5 ", "1e400", "inf", "5ms"}) {
        EXPECT_FALSE(parse({"--fwd-ms", bad}).isOk()) << bad;
    }
    auto all = parse({"-D", "0", "--act-bytes", "2G", "--compute", "burn"});
    ASSERT_FALSE(all.isOk());
    for (const char* part : {"-D='0' is out of range", "--act-bytes='2G' is out of range",
                             "--compute='burn' is invalid"}) {
        EXPECT_NE(all.status().message().find(part), std::string::npos) << all.status().message();
    }
}

TEST(PipelineBenchOptions, PluginFromTheEnvironmentUnlessGiven) {
    auto env = [](const char* k) -> const char* {
        return std::string(k) == "ATLAS_PLUGIN" ? "/env/plugin.so" : nullptr;
    };
    auto e = parseArgs({}, env);
    ASSERT_TRUE(e.isOk());
    EXPECT_EQ(e->plugin, "/env/plugin.so");
    auto f = parseArgs({"--plugin", "/flag/plugin.so"}, env);
    ASSERT_TRUE(f.isOk());
    EXPECT_EQ(f->plugin, "/flag/plugin.so");
}

TEST(PipelineBenchOptions, LinkStatsTakePidAndFileRepeatedly) {
    auto two = parse({"--link-stats", "123:/run/a.stats", "--link-stats", "9:rel/b:c.stats"});
    ASSERT_TRUE(two.isOk()) << two.status().toString();
    ASSERT_EQ(two->link_stats.size(), 2u);
    EXPECT_EQ(two->link_stats[0], (wanem::LinkSource{123, "/run/a.stats"}));
    EXPECT_EQ(two->link_stats[1], (wanem::LinkSource{9, "rel/b:c.stats"})) << "first colon splits";
    for (const char* bad : {"", "123", "123:", ":/x", "0:/x", "-4:/x", "x:/y", "99999999999:/x"}) {
        auto r = parse({"--link-stats", bad});
        ASSERT_FALSE(r.isOk()) << bad;
        EXPECT_NE(r.status().message().find("--link-stats"), std::string::npos)
            << r.status().message();
    }
    EXPECT_TRUE(parse({})->link_stats.empty());
}

TEST(PipelineBenchOptions, DocsFlagTableIsTheRegistry) {
    EXPECT_TRUE(
        atlas::testing::docBlockMatches(std::string(ATLAS_SOURCE_DIR) + "/docs/arbitration.md",
                                        "atlas-pipeline-bench", options::markdown(optionTable())));
}

}  // namespace
}  // namespace atlas::pipebench
