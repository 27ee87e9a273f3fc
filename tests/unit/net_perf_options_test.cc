// atlas-net-perf's command line on the options layer: modes, the size sweep, --config specs,
// combinations, strict values, every problem at once, and that docs/net-perf.md's option
// table is the registry.
#include <gtest/gtest.h>

#include "options/help.h"
#include "perf/atlas-net-perf/bootstrap.h"
#include "perf/atlas-net-perf/options.h"
#include "support/doc_blocks.h"

namespace atlas::netperf {
namespace {

Result<Options> parse(std::vector<std::string> args) {
    return parseOptions(args);
}

TEST(NetPerfOptions, ModesAndDefaults) {
    auto l = parse({"local"});
    ASSERT_TRUE(l.isOk()) << l.status().toString();
    EXPECT_EQ(l->role, Role::kLocal);
    EXPECT_EQ(l->plan.sizes,
              (std::vector<size_t>{8, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20}));
    EXPECT_EQ(l->plan.iters, 20);
    auto lat = parse({"local", "--latency"});
    ASSERT_TRUE(lat.isOk());
    EXPECT_EQ(lat->plan.measure, Measure::kLatency);
    EXPECT_EQ(lat->plan.sizes, (std::vector<size_t>{8}));
    auto c = parse({"client", "--bootstrap", "[::1]:5000", "--iters", "3"});
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->role, Role::kClient);
    EXPECT_EQ(c->bootstrap, "[::1]:5000");
    EXPECT_TRUE(parse({"--help"}).value().help);
    EXPECT_FALSE(parse({}).isOk());
    EXPECT_FALSE(parse({"sideways"}).isOk());
    EXPECT_FALSE(parse({"server"}).isOk());  // needs --bootstrap
}

TEST(NetPerfOptions, PollModeTravelsInThePlan) {
    EXPECT_EQ(parse({"local"})->plan.poll, Poll::kYield);  // NCCL's proxy thread's way
    for (auto [word, want] : {std::pair{"spin", Poll::kSpin}, std::pair{"sleep", Poll::kSleep},
                              std::pair{"yield", Poll::kYield}}) {
        auto o = parse({"local", "--poll", word});
        ASSERT_TRUE(o.isOk()) << o.status().toString();
        EXPECT_EQ(o->plan.poll, want);
        // The server follows the client's plan, so both ends poll the same way.
        Result<Plan> back = decodePlan(encodePlan(o->plan));
        ASSERT_TRUE(back.isOk()) << back.status().toString();
        EXPECT_EQ(back->poll, want) << word;
    }
    auto bad = parse({"local", "--poll", "busy"});
    ASSERT_FALSE(bad.isOk());
    EXPECT_NE(bad.status().message().find("--poll"), std::string::npos) << bad.status().message();
    std::string text = encodePlan(parse({"local"})->plan);
    text.replace(text.find("\"yield\""), 7, "\"nap\"");
    EXPECT_FALSE(decodePlan(text).isOk());
}

TEST(NetPerfOptions, SizesSweepAndConfigs) {
    auto s = parse({"local", "--sizes", "8,64KiB,1M"});
    ASSERT_TRUE(s.isOk()) << s.status().toString();
    EXPECT_EQ(s->plan.sizes, (std::vector<size_t>{8, 64 << 10, 1 << 20}));
    auto w = parse({"local", "--min", "1K", "--max", "1M", "--factor", "32"});
    ASSERT_TRUE(w.isOk()) << w.status().toString();
    EXPECT_EQ(w->plan.sizes, (std::vector<size_t>{1 << 10, 32 << 10, 1 << 20}));
    EXPECT_FALSE(parse({"local", "--sizes", "8", "--min", "8"}).isOk());
    auto cfg = parse({"local", "--config", "atlas:", "--config", "tcp:raw=4", "--baseline", "tcp"});
    ASSERT_TRUE(cfg.isOk()) << cfg.status().toString();
    ASSERT_EQ(cfg->configs.size(), 2u);
    EXPECT_EQ(cfg->configs[1].kind, Kind::kRawTcp);
    EXPECT_EQ(cfg->configs[1].raw_streams, 4);
    EXPECT_FALSE(parse({"local", "--config", "a:", "--config", "a:"}).isOk());
    EXPECT_FALSE(parse({"local", "--baseline", "nobody"}).isOk());
    EXPECT_FALSE(parse({"local", "--streams", "4"}).isOk());  // only with --raw-tcp
    auto raw = parse({"local", "--raw-tcp", "--streams", "4"});
    ASSERT_TRUE(raw.isOk());
    EXPECT_EQ(raw->plan.kind, Kind::kRawTcp);
    EXPECT_EQ(raw->plan.raw_streams, 4);
}

TEST(NetPerfOptions, StrictValuesAndEveryProblemAtOnce) {
    for (const char* bad : {"0x10", "+5", " 5", "5 ", "99999999999999999999999"}) {
        EXPECT_FALSE(parse({"local", "--iters", bad}).isOk()) << bad;
    }
    EXPECT_FALSE(parse({"local", "--sizes", "2G"}).isOk());  // above the ABI's int
    auto r = parse({"local", "--window", "33", "--direction", "sideways", "--itres", "3"});
    ASSERT_FALSE(r.isOk());
    for (const char* part : {"--window='33' is out of range", "--direction='sideways' is invalid",
                             "unknown option '--itres' (did you mean --iters?)"}) {
        EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
    }
}

TEST(NetPerfOptions, PluginFromTheEnvironmentUnlessGiven) {
    auto env = [](const char* k) -> const char* {
        return std::string(k) == "ATLAS_PLUGIN" ? "/env/p.so" : nullptr;
    };
    EXPECT_EQ(parseOptions({"local"}, env).value().plugin, "/env/p.so");
    EXPECT_EQ(parseOptions({"local", "--plugin", "/f.so"}, env).value().plugin, "/f.so");
}

TEST(NetPerfOptions, DocsOptionTableIsTheRegistry) {
    EXPECT_TRUE(atlas::testing::docBlockMatches(std::string(ATLAS_SOURCE_DIR) + "/docs/net-perf.md",
                                                "atlas-net-perf",
                                                options::markdown(optionTable())));
}

}  // namespace
}  // namespace atlas::netperf
