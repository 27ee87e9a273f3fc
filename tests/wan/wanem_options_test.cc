// atlas-wanem flag parsing: every flag's range is enforced with a message naming the flag,
// per-direction and per-path syntax, and the defaults derived for buffers and rings.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "options/help.h"
#include "perf/atlas-wanem/options.h"
#include "perf/atlas-wanem/stats.h"
#include "support/doc_blocks.h"

namespace atlas::wanem {
namespace {

Result<Options> parse(std::initializer_list<const char*> args, bool with_ns = true) {
    std::vector<const char*> argv = {"atlas-wanem"};
    if (with_ns) {
        argv.insert(argv.end(), {"--ns-a", "dcA", "--ns-b", "dcB"});
    }
    argv.insert(argv.end(), args);
    return parseOptions(static_cast<int>(argv.size()), argv.data());
}

void expectError(std::initializer_list<const char*> args, const std::string& needle) {
    auto r = parse(args);
    ASSERT_FALSE(r.isOk()) << "accepted: " << needle;
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(WanemOptions, MinimalAndDefaults) {
    auto r = parse({});
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const Options& o = r.value();
    EXPECT_EQ(o.dev_a, "wanem-a");
    EXPECT_EQ(o.paths, 1u);
    EXPECT_EQ(o.rate_mbit[0], 0);
    EXPECT_EQ(namespacePath(o.ns_a), "/run/netns/dcA");
    EXPECT_EQ(namespacePath("/proc/1/ns/net"), "/proc/1/ns/net");
}

TEST(WanemOptions, PerDirectionValues) {
    auto r = parse({"--delay-ms", "25:30", "--rate-mbit=1000", "--loss", "0.01:0"});
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r->delay_ms[kAtoB], 25);
    EXPECT_EQ(r->delay_ms[kBtoA], 30);
    EXPECT_EQ(r->rate_mbit[kAtoB], 1000);
    EXPECT_EQ(r->rate_mbit[kBtoA], 1000);
    EXPECT_DOUBLE_EQ(r->loss[kAtoB], 0.01);
    EXPECT_EQ(r->loss[kBtoA], 0);
    const LinkParams ab = linkParams(r.value(), kAtoB, 0);
    EXPECT_EQ(ab.delay_ns, 25 * kNsPerMs);
    EXPECT_EQ(ab.rate_bps, 1e9);
    // Default buffer: 2 x 25 ms of 1 Gbit/s.
    EXPECT_EQ(ab.buffer_bytes, 6250000u);
    EXPECT_EQ(linkParams(r.value(), kBtoA, 0).buffer_bytes, 7500000u);
}

TEST(WanemOptions, Paths) {
    auto r = parse({"--paths", "4", "--path-rate-mbit", "1000,1000,1000,250:100", "--path-delay-ms",
                    "10,10,20,40", "--buf-kb", "512"});
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(linkParams(r.value(), kAtoB, 3).rate_bps, 250e6);
    EXPECT_EQ(linkParams(r.value(), kBtoA, 3).rate_bps, 100e6);
    EXPECT_EQ(linkParams(r.value(), kBtoA, 2).delay_ns, 20 * kNsPerMs);
    EXPECT_EQ(linkParams(r.value(), kAtoB, 0).buffer_bytes, 512u * 1024u);
    const PipelineConfig c = pipelineConfig(r.value(), kAtoB, 5);
    EXPECT_EQ(c.paths.size(), 4u);
    EXPECT_EQ(c.ring_bytes.size(), 4u);
    EXPECT_EQ(c.rng_seed, 5u);
    expectError({"--paths", "3", "--path-rate-mbit", "1,2"}, "--path-rate-mbit has 2 values");
    expectError({"--paths", "2", "--path-delay-ms", "1,2,3"}, "--path-delay-ms has 3 values");
}

TEST(WanemOptions, RateStep) {
    auto r = parse({"--rate-mbit", "1000", "--rate-step-s", "10", "--rate-step-mbit", "500:250"});
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(pipelineConfig(r.value(), kAtoB, 1).rate_step_bps, 500e6);
    EXPECT_EQ(pipelineConfig(r.value(), kBtoA, 1).rate_step_bps, 250e6);
    // pipelineConfig has no clock: the caller (atlas-wanem's main) schedules the step.
    EXPECT_EQ(pipelineConfig(r.value(), kAtoB, 1).rate_step_at_ns, INT64_MAX);
    expectError({"--rate-step-s", "10"}, "--rate-step-s and --rate-step-mbit go together");
    expectError({"--rate-step-mbit", "500"}, "--rate-step-s and --rate-step-mbit go together");
    expectError({"--rate-step-s", "0", "--rate-step-mbit", "500"}, "--rate-step-s");
    expectError({"--rate-step-s", "1", "--rate-step-mbit", "0.001"}, "--rate-step-mbit");
}

TEST(WanemOptions, RingSizeFollowsTheLink) {
    auto capped = parse({"--delay-ms", "50", "--rate-mbit", "1000"});
    auto uncapped = parse({"--delay-ms", "50"});
    auto fixed = parse({"--ring-mb", "8"});
    ASSERT_TRUE(capped.isOk() && uncapped.isOk() && fixed.isOk());
    // 2 x (125 MB/s x 50 ms + 12.5 MB buffer) + 16 MiB
    EXPECT_NEAR(static_cast<double>(ringBytes(capped.value(), 0, 0)),
                2 * (6.25e6 + 12.5e6) + 16777216, 2);
    EXPECT_GT(ringBytes(uncapped.value(), 0, 0), ringBytes(capped.value(), 0, 0));
    EXPECT_EQ(ringBytes(fixed.value(), 0, 0), 8u << 20);
}

TEST(WanemOptions, EveryRangeIsEnforced) {
    expectError({"--delay-ms", "-1"},
                "--delay-ms='-1' is out of range: expected 0..10000, as V or A2B:B2A");
    expectError({"--delay-ms", "1x"}, "--delay-ms='1x' is invalid");
    expectError({"--hash-seed", "0x10"}, "--hash-seed='0x10' is invalid");  // strict: no hex
    expectError({"--delay-ms", "10001"}, "--delay-ms");
    expectError({"--delay-ms", "nan"}, "--delay-ms");
    expectError({"--delay-ms", "5:"}, "--delay-ms");
    expectError({"--rate-mbit", "0.001"}, "--rate-mbit");
    expectError({"--rate-mbit", "500000"}, "--rate-mbit");
    expectError({"--loss", "1.5"}, "--loss");
    expectError({"--buf-ms", "0"}, "--buf-ms");
    expectError({"--buf-kb", "1"}, "--buf-kb");
    expectError({"--buf-ms", "10", "--buf-kb", "100"}, "mutually exclusive");
    expectError({"--jitter-ms", "5"}, "--jitter-ms (a2b) exceeds the one-way delay");
    expectError({"--paths", "0"}, "--paths");
    expectError({"--paths", "65"}, "--paths");
    expectError({"--paths", "-1"}, "--paths");
    expectError({"--split", "some"}, "--split");
    expectError({"--l2-overhead", "129"}, "--l2-overhead");
    expectError({"--hash-seed", "4294967296"}, "--hash-seed");
    expectError({"--seed", "x"}, "--seed");
    expectError({"--mtu", "100"}, "--mtu");
    expectError({"--txqueuelen", "0"}, "--txqueuelen");
    expectError({"--timer-slack-ns", "0"}, "--timer-slack-ns");
    expectError({"--spin-us", "10001"}, "--spin-us");
    expectError({"--batch", "0"}, "--batch");
    expectError({"--ring-mb", "1"}, "--ring-mb");
    expectError({"--rt-priority", "100"}, "--rt-priority");
    expectError({"--dev-a", "this-name-is-too-long"}, "--dev-a");
    expectError({"--dev-b", "bad/name"}, "--dev-b");
    expectError({"--ns-a", "a/b"}, "--ns-a");
    expectError({"--stats", ""}, "--stats");
    expectError({"--bogus"}, "unknown option '--bogus'");
    expectError({"--delay-ms"}, "--delay-ms needs a value");
    expectError({"--help=1"}, "--help takes no value");
}

TEST(WanemOptions, NamespacesRequiredAndDistinct) {
    auto none = parse({}, false);
    ASSERT_FALSE(none.isOk());
    EXPECT_NE(none.status().message().find("--ns-a and --ns-b are required"), std::string::npos);
    auto same = parse({"--ns-a", "x", "--ns-b", "/run/netns/x"}, false);
    ASSERT_FALSE(same.isOk());
    EXPECT_NE(same.status().message().find("same namespace"), std::string::npos);
    auto help = parse({"--help"}, false);
    ASSERT_TRUE(help.isOk());
    EXPECT_TRUE(help->help);
}

TEST(WanemOptions, HelpDocumentsEveryFlag) {
    const std::string h = helpText();
    for (const char* flag :
         {"--ns-a",        "--ns-b",           "--dev-a",          "--dev-b",
          "--delay-ms",    "--rate-step-s",    "--rate-step-mbit", "--jitter-ms",
          "--rate-mbit",   "--buf-ms",         "--buf-kb",         "--loss",
          "--paths",       "--path-rate-mbit", "--path-delay-ms",  "--split",
          "--l2-overhead", "--hash-seed",      "--seed",           "--mtu",
          "--txqueuelen",  "--timer-slack-ns", "--spin-us",        "--batch",
          "--rt-priority", "--ring-mb",        "--stats",          "--ready-file",
          "--check",       "--help",           "--version"}) {
        EXPECT_TRUE(h.find(std::string("  ") + flag + " ") != std::string::npos ||
                    h.find(std::string(", ") + flag + " ") != std::string::npos)
            << flag;
    }
    for (size_t start = 0, end; start < h.size(); start = end + 1) {
        end = h.find('\n', start);
        EXPECT_LE(end - start, 100u) << h.substr(start, end - start);
    }
}

TEST(WanemOptions, EveryProblemIsReportedAtOnce) {
    auto r = parse({"--mtu", "100", "--loss", "2", "--bogus"});
    ASSERT_FALSE(r.isOk());
    for (const char* part : {"--mtu='100' is out of range", "--loss='2' is out of range",
                             "unknown option '--bogus'"}) {
        EXPECT_NE(r.status().message().find(part), std::string::npos) << r.status().message();
    }
}

TEST(WanemOptions, DocsFlagTableIsTheRegistry) {
    EXPECT_TRUE(atlas::testing::docBlockMatches(std::string(ATLAS_SOURCE_DIR) + "/docs/wan.md",
                                                "atlas-wanem", options::markdown(optionTable())));
}

TEST(WanemStats, JsonHasCountersPerDirectionAndPath) {
    auto o = parse({"--paths", "2", "--rate-mbit", "100"});
    ASSERT_TRUE(o.isOk());
    auto a2b = DirectionPipeline::create(pipelineConfig(o.value(), kAtoB, 1)).value();
    auto b2a = DirectionPipeline::create(pipelineConfig(o.value(), kBtoA, 2)).value();
    std::vector<uint8_t> junk(kVnetHdrLen + 20, 0x11);
    a2b->ingest(0, junk);
    StatsHeader h;
    h.seq = 3;
    h.final = true;
    const auto j = statsJson(h, o.value(), {a2b.get(), b2a.get()});
    EXPECT_EQ(j["seq"], 3);
    EXPECT_EQ(j["final"], true);
    EXPECT_EQ(j["directions"]["a2b"]["rx"]["frames"], 1);
    EXPECT_EQ(j["directions"]["a2b"]["opaque_frames"], 1);
    EXPECT_EQ(j["directions"]["a2b"]["paths"].size(), 2u);
    EXPECT_EQ(j["directions"]["b2a"]["paths"][1]["rate_mbit"], 100.0);
    EXPECT_TRUE(j["directions"]["b2a"]["drops"].contains("queue"));
    EXPECT_TRUE(j["directions"]["b2a"]["drops"].contains("loss"));
}

}  // namespace
}  // namespace atlas::wanem
