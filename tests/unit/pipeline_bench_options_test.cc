// atlas-pipeline-bench's command line: the receive-posting pattern and per-stage CPU pinning
// (the flags the bubble and non-interference experiments depend on), and their errors.
#include <gtest/gtest.h>

#include "perf/atlas-pipeline-bench/options.h"

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
    EXPECT_NE(bad.status().message().find("expected ahead or needed"), std::string::npos);
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

}  // namespace
}  // namespace atlas::pipebench
