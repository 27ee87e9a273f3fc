// The consumer side of atlas-wanem's counters (perf/atlas-wanem/stats_reader.h): it reads the
// documents the emulator's own writer (stats.h) produces, computes link utilization from two
// of them, rejects anything else with the field named, and waits for a signalled emulator to
// rewrite its file without ever hanging on a dead or silent one.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "perf/atlas-wanem/stats.h"
#include "perf/atlas-wanem/stats_reader.h"
#include "tests/wan/frame_builder.h"

namespace atlas::wanem::stats_reader_test {
namespace {

constexpr Nanos kMs = 1'000'000;

PipelineConfig capped(double rate_bps) {
    PipelineConfig c;
    LinkParams lp;
    lp.rate_bps = rate_bps;
    lp.delay_ns = 5 * kMs;
    lp.buffer_bytes = 10u << 20;
    c.paths = {lp};
    c.ring_bytes = {16u << 20};
    return c;
}

Options namespaces() {
    Options o;
    o.ns_a = "t-dc0";
    o.ns_b = "t-dc1";
    return o;
}

// Sends `frames` GSO frames of 40 x 1448 bytes a->b; returns the wire bytes they count.
uint64_t send(DirectionPipeline& p, int frames) {
    test::TcpFrameSpec s;
    s.payload_len = 40 * 1448;
    s.gso_size = 1448;
    for (int i = 0; i < frames; ++i) {
        s.seq = 1000 + static_cast<uint32_t>(i) * s.payload_len;
        p.ingest(0, test::makeTcpFrame(s));
    }
    return static_cast<uint64_t>(frames) * 40u * 1500u;
}

std::string document(uint64_t seq, DirectionPipeline& a2b, DirectionPipeline& b2a) {
    StatsHeader h;
    h.seq = seq;
    return statsJson(h, namespaces(), {&a2b, &b2a}).dump(2);
}

TEST(WanemStatsReader, ReadsTheEmulatorsOwnDocument) {
    auto a2b = DirectionPipeline::create(capped(1e9)).value();
    auto b2a = DirectionPipeline::create(capped(5e8)).value();
    const uint64_t wire = send(*a2b, 3);
    auto snap = parseLinkStats(document(7, *a2b, *b2a));
    ASSERT_TRUE(snap.isOk()) << snap.status().toString();
    EXPECT_EQ(snap->seq, 7u);
    ASSERT_EQ(snap->dirs.size(), 2u);
    EXPECT_EQ(snap->dirs[0].from, "t-dc0");
    EXPECT_EQ(snap->dirs[0].to, "t-dc1");
    EXPECT_EQ(snap->dirs[0].wire_bytes, wire);
    EXPECT_EQ(snap->dirs[0].rate_bps, 1'000'000'000u);
    EXPECT_EQ(snap->dirs[1].from, "t-dc1");
    EXPECT_EQ(snap->dirs[1].wire_bytes, 0u);
    EXPECT_EQ(snap->dirs[1].rate_bps, 500'000'000u);
}

TEST(WanemStatsReader, AnAppliedRateStepIsTheRate) {
    PipelineConfig c = capped(1e9);
    c.rate_step_at_ns = 0;  // the first frame applies it
    c.rate_step_bps = 2e8;
    auto stepped = DirectionPipeline::create(c).value();
    auto idle = DirectionPipeline::create(c).value();
    auto before = parseLinkStats(document(1, *stepped, *idle));
    ASSERT_TRUE(before.isOk()) << before.status().toString();
    EXPECT_EQ(before->dirs[0].rate_bps, 1'000'000'000u) << "not applied yet";
    send(*stepped, 1);
    auto after = parseLinkStats(document(2, *stepped, *idle));
    ASSERT_TRUE(after.isOk()) << after.status().toString();
    EXPECT_EQ(after->dirs[0].rate_bps, 200'000'000u);
    EXPECT_EQ(after->dirs[1].rate_bps, 1'000'000'000u) << "that direction saw no frame";
}

TEST(WanemStatsReader, UtilizationIsWireBytesOverWhatTheRateCarries) {
    auto a2b = DirectionPipeline::create(capped(1e9)).value();
    auto b2a = DirectionPipeline::create(capped(0)).value();  // uncapped
    auto s0 = parseLinkStats(document(1, *a2b, *b2a));
    const uint64_t wire = send(*a2b, 10);
    send(*b2a, 2);
    auto s1 = parseLinkStats(document(2, *a2b, *b2a));
    ASSERT_TRUE(s0.isOk() && s1.isOk());
    // 10 frames of 60,000 wire bytes over 1 ms at 1 Gbit/s (125,000 bytes): 4.8.
    auto use = linkUse(*s0, *s1, 1 * kMs);
    ASSERT_TRUE(use.isOk()) << use.status().toString();
    ASSERT_EQ(use->size(), 2u);
    EXPECT_EQ((*use)[0].wire_bytes, wire);
    EXPECT_DOUBLE_EQ((*use)[0].capacity_bytes, 125000.0);
    EXPECT_DOUBLE_EQ((*use)[0].utilization, static_cast<double>(wire) / 125000.0);
    EXPECT_EQ((*use)[1].wire_bytes, 2u * 40u * 1500u);
    EXPECT_EQ((*use)[1].utilization, -1) << "an uncapped direction has no utilization";
    EXPECT_EQ((*linkUse(*s0, *s1, 0))[0].utilization, -1) << "an empty window neither";

    auto backwards = linkUse(*s1, *s0, kMs);
    ASSERT_FALSE(backwards.isOk());
    EXPECT_NE(backwards.status().message().find("different emulator runs"), std::string::npos);
    LinkSnapshot other = *s1;
    other.dirs[0].from = "elsewhere";
    EXPECT_FALSE(linkUse(*s0, other, kMs).isOk());
    other.dirs.pop_back();
    EXPECT_FALSE(linkUse(*s0, other, kMs).isOk());
}

TEST(WanemStatsReader, DropsAreCountedPerWindowByCause) {
    PipelineConfig shallow = capped(1e9);
    shallow.paths[0].buffer_bytes = 10 * 1500;  // ten segments: a burst overflows it
    auto a2b = DirectionPipeline::create(shallow).value();
    PipelineConfig lossy = capped(1e9);
    lossy.loss = 1.0;
    auto b2a = DirectionPipeline::create(lossy).value();
    auto s0 = parseLinkStats(document(1, *a2b, *b2a));
    send(*a2b, 1);  // 40 segments at once into a 10-segment buffer
    send(*b2a, 1);
    auto s1 = parseLinkStats(document(2, *a2b, *b2a));
    ASSERT_TRUE(s0.isOk() && s1.isOk());
    auto use = linkUse(*s0, *s1, kMs);
    ASSERT_TRUE(use.isOk()) << use.status().toString();
    EXPECT_GT((*use)[0].queue_drops, 0u);
    EXPECT_EQ((*use)[0].loss_drops, 0u);
    EXPECT_EQ((*use)[0].queue_drops + (*use)[0].wire_bytes / 1500, 40u)
        << "every segment is either carried or dropped";
    EXPECT_EQ((*use)[1].loss_drops, 40u);
    EXPECT_EQ((*use)[1].wire_bytes, 0u);
}

TEST(WanemStatsReader, RejectsDocumentsItCannotTrustNamingTheField) {
    auto a2b = DirectionPipeline::create(capped(1e9)).value();
    auto b2a = DirectionPipeline::create(capped(1e9)).value();
    const nlohmann::json good = nlohmann::json::parse(document(1, *a2b, *b2a));
    struct Case {
        const char* what;
        std::string text;
    };
    auto edit = [&](auto fn) {
        nlohmann::json j = good;
        fn(j);
        return j.dump();
    };
    const Case cases[] = {
        {"not a JSON object", ""},
        {"not a JSON object", "[1,2]"},
        {"not a JSON object", "{\"tool\": \"atlas-wanem\""},
        {"'tool'", edit([](auto& j) { j["tool"] = "iperf3"; })},
        {"'seq'", edit([](auto& j) { j["seq"] = -1; })},
        {"'seq'", edit([](auto& j) { j.erase("seq"); })},
        {"'config.ns_a'", edit([](auto& j) { j["config"].erase("ns_b"); })},
        {"'config.ns_a'", edit([](auto& j) { j["config"] = 3; })},
        {"'directions'", edit([](auto& j) { j["directions"] = "a2b"; })},
        {"no direction", edit([](auto& j) { j["directions"] = nlohmann::json::object(); })},
        {"'directions.a2b.wire_bytes'",
         edit([](auto& j) { j["directions"]["a2b"]["wire_bytes"] = "9"; })},
        {"'directions.b2a.wire_bytes'",
         edit([](auto& j) { j["directions"]["b2a"]["wire_bytes"] = -5; })},
        {"'directions.a2b.paths'",
         edit([](auto& j) { j["directions"]["a2b"]["paths"] = nlohmann::json::array(); })},
        {"rate_mbit", edit([](auto& j) { j["directions"]["a2b"]["paths"][0]["rate_mbit"] = -1; })},
        {"rate_mbit", edit([](auto& j) { j["directions"]["a2b"]["paths"][0].erase("rate_mbit"); })},
        {"rate_step", edit([](auto& j) {
             j["directions"]["a2b"]["rate_step"] = {{"mbit", 5}};
         })},
        {"drops",
         edit([](auto& j) { j["directions"]["a2b"]["drops"]["queue"].erase("segments"); })},
        {"drops", edit([](auto& j) { j["directions"]["b2a"].erase("drops"); })},
    };
    for (const Case& c : cases) {
        auto r = parseLinkStats(c.text);
        ASSERT_FALSE(r.isOk()) << c.what << ": " << c.text.substr(0, 200);
        EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
        EXPECT_NE(r.status().message().find(c.what), std::string::npos) << r.status().message();
    }
    EXPECT_TRUE(parseLinkStats(good.dump()).isOk()) << "the unedited document parses";
}

// The fuzz target's seeds (tests/fuzz/corpus/fuzz_wanem_stats, valid_* taken from a real
// bench-sharing run's emulator, bad_* edits of it) say what they claim.
TEST(WanemStatsReader, SeedCorpusParsesAsNamed) {
    const std::filesystem::path dir =
        std::filesystem::path(ATLAS_SOURCE_DIR) / "tests/fuzz/corpus/fuzz_wanem_stats";
    int valid = 0;
    int bad = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        std::ifstream f(e.path());
        const std::string text((std::istreambuf_iterator<char>(f)), {});
        const std::string name = e.path().filename().string();
        const bool ok = parseLinkStats(text).isOk();
        if (name.rfind("valid_", 0) == 0) {
            EXPECT_TRUE(ok) << name;
            ++valid;
        } else {
            EXPECT_EQ(name.rfind("bad_", 0), 0u) << name << ": seeds are valid_* or bad_*";
            EXPECT_FALSE(ok) << name;
            ++bad;
        }
    }
    EXPECT_GE(valid, 1);
    EXPECT_GE(bad, 1);
}

// A child that answers SIGUSR1 the way atlas-wanem does (rewrites the file with the next seq)
// `answers` times, then exits. The real emulator is driven by the bench-sharing runs.
pid_t emulatorLike(const std::string& path, int answers) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, nullptr);  // the child inherits the mask: no lost signal
    const pid_t pid = fork();
    if (pid == 0) {
        alarm(30);  // never outlives a test that failed before killing it
        auto a2b = DirectionPipeline::create(capped(1e9)).value();
        auto b2a = DirectionPipeline::create(capped(1e9)).value();
        for (int i = 1; i <= answers; ++i) {
            int sig = 0;
            sigwait(&set, &sig);
            send(*a2b, 1);
            std::ofstream(path + ".tmp") << document(static_cast<uint64_t>(i), *a2b, *b2a);
            std::rename((path + ".tmp").c_str(), path.c_str());
        }
        // Stay alive, ignoring further signals, until killed.
        for (;;) {
            int sig = 0;
            sigwait(&set, &sig);
        }
    }
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    return pid;
}

// Kills and reaps the child however the test ends.
struct Reaped {
    pid_t pid;
    ~Reaped() {
        if (pid > 0) {
            kill(pid, SIGKILL);
            int st = 0;
            waitpid(pid, &st, 0);
        }
    }
};

TEST(WanemStatsReader, SnapshotWaitsForTheRewriteAndNeverHangs) {
    const std::string path = ::testing::TempDir() + "wanem-stats-" + std::to_string(getpid());
    std::remove(path.c_str());
    const pid_t pid = emulatorLike(path, 2);
    ASSERT_GT(pid, 0);
    Reaped child{pid};
    auto s1 = snapshotLink({pid, path}, 5'000 * kMs);
    ASSERT_TRUE(s1.isOk()) << s1.status().toString();
    EXPECT_EQ(s1->seq, 1u);
    auto s2 = snapshotLink({pid, path}, 5'000 * kMs);
    ASSERT_TRUE(s2.isOk()) << s2.status().toString();
    EXPECT_EQ(s2->seq, 2u) << "a newer document, not the one already on disk";
    EXPECT_EQ(s2->dirs[0].wire_bytes - s1->dirs[0].wire_bytes, 40u * 1500u);

    // A live process that does not answer: a timeout, bounded.
    const auto t0 = std::chrono::steady_clock::now();
    auto silent = snapshotLink({pid, path}, 200 * kMs);
    const auto waited = std::chrono::steady_clock::now() - t0;
    ASSERT_FALSE(silent.isOk());
    EXPECT_EQ(silent.status().code(), Code::kTimeout);
    EXPECT_LT(waited, std::chrono::seconds(2));

    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    child.pid = -1;
    auto gone = snapshotLink({pid, path}, 200 * kMs);
    ASSERT_FALSE(gone.isOk());
    EXPECT_EQ(gone.status().code(), Code::kUnavailable) << gone.status().toString();
    std::remove(path.c_str());
}

}  // namespace
}  // namespace atlas::wanem::stats_reader_test
