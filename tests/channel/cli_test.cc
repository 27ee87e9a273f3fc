// atlas-bubbles end to end: a `synth` writer process with a known periodic trace, then
// `record`, `stats` (from file and live), `watch`, `info` and `dump` as separate processes.
// Checks the outputs parse and that the numbers match the synthetic ground truth:
// period 50 ms, one 20 ms idle interval at offset 0, predictions shifted by 2 ms, so the bubble
// fraction is 20/50 = 0.4 and coverage = precision = (20-2)/20 = 0.9 exactly.
// Real time (~6 s): the synth writer runs on the wall clock, like the plugin would.
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/channel/channel_test_util.h"
#include "tests/support/subprocess.h"

extern char** environ;

namespace atlas::channel {
namespace {

using nlohmann::json;

struct RunResult {
    int exit_code = -1;  // -1: killed after the timeout or not started
    std::string out;
    std::string err;
};

std::string slurp(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

class CliTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/atlas-bubbles-cli-XXXXXX";
        ASSERT_NE(::mkdtemp(tmpl), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        stopSynth();
        std::system(("rm -rf '" + dir_ + "'").c_str());
    }

    pid_t spawn(const std::vector<std::string>& args, const std::string& tag) {
        std::vector<char*> argv;
        std::string exe = ATLAS_BUBBLES_EXE;
        argv.push_back(exe.data());
        std::vector<std::string> copy = args;
        for (std::string& a : copy) {
            argv.push_back(a.data());
        }
        argv.push_back(nullptr);
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        const std::string out = dir_ + "/" + tag + ".out";
        const std::string err = dir_ + "/" + tag + ".err";
        posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
        posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
        pid_t pid = -1;
        const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&actions);
        return rc == 0 ? pid : -1;
    }

    // Waits up to timeout_ms for pid, killing it after that (tests/support/subprocess.h).
    static int waitFor(pid_t pid, int timeout_ms) {
        return atlas::testing::waitOrKill(pid, timeout_ms);
    }

    RunResult run(const std::vector<std::string>& args, int timeout_ms = 20000) {
        const std::string tag = "run" + std::to_string(runs_++);
        RunResult r;
        const pid_t pid = spawn(args, tag);
        if (pid < 0) {
            return r;
        }
        r.exit_code = waitFor(pid, timeout_ms);
        r.out = slurp(dir_ + "/" + tag + ".out");
        r.err = slurp(dir_ + "/" + tag + ".err");
        return r;
    }

    void startSynth(double seconds) {
        synth_ =
            spawn({"synth", "--channel", channel_.name(), "--period-ms", "50", "--idle", "0:20",
                   "--shift-ms", "2", "--warmup", "2", "--seconds", std::to_string(seconds)},
                  "synth");
        ASSERT_GT(synth_, 0);
    }
    int stopSynth() {
        if (synth_ <= 0) {
            return -1;
        }
        ::kill(synth_, SIGTERM);
        const int rc = waitFor(synth_, 5000);
        synth_ = -1;
        return rc;
    }

    std::string dir_;
    testing::ShmNameGuard channel_{testing::uniqueShmName("cli")};
    pid_t synth_ = -1;
    int runs_ = 0;
};

void expectGroundTruth(const json& report, size_t min_iterations) {
    ASSERT_GE(report.at("iterations").size(), min_iterations) << report.dump(1);
    for (const json& it : report.at("iterations")) {
        EXPECT_EQ(it.at("end_ns").get<int64_t>() - it.at("start_ns").get<int64_t>(), 50'000'000);
        EXPECT_EQ(it.at("idle_ns").get<int64_t>(), 20'000'000);
        EXPECT_NEAR(it.at("bubble_fraction").get<double>(), 0.4, 1e-12);
    }
    EXPECT_NEAR(report.at("bubble_fraction").at("mean").get<double>(), 0.4, 1e-12);
    EXPECT_NEAR(report.at("coverage").get<double>(), 0.9, 1e-9);
    EXPECT_NEAR(report.at("precision").get<double>(), 0.9, 1e-9);
    EXPECT_EQ(report.at("lost_observed").get<uint64_t>(), 0u);
}

TEST_F(CliTest, RecordStatsWatchInfoAgainstSynthWriter) {
    startSynth(30);
    const std::string prefix = dir_ + "/rec";
    // --wait: the synth process may not have created the channel yet.
    RunResult rec =
        run({"record", "--channel", channel_.name(), "--out", prefix, "--seconds", "2", "--wait"});
    ASSERT_EQ(rec.exit_code, 0) << rec.err;
    EXPECT_NE(rec.out.find("wrote " + prefix + ".trace.json"), std::string::npos) << rec.out;

    // The Chrome trace: a JSON array of events, complete events with ts/dur in us on
    // track 1 (observed) and 2 (predicted).
    const json trace = json::parse(slurp(prefix + ".trace.json"));
    ASSERT_TRUE(trace.is_array());
    size_t observed_events = 0;
    size_t predicted_events = 0;
    for (const json& e : trace) {
        if (e.at("ph") != "X") {
            continue;
        }
        ASSERT_TRUE(e.at("ts").is_number() && e.at("dur").is_number());
        if (e.at("tid") == 1) {
            ++observed_events;
            EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 20000.0);
        } else if (e.at("tid") == 2) {
            ++predicted_events;
            EXPECT_LE(e.at("dur").get<double>(), 20000.0);
        }
    }
    EXPECT_GE(observed_events, 30u);  // 2 s of a 50 ms period, plus ring history
    EXPECT_GE(predicted_events, 30u);

    // The plain JSON timeline holds the exact synthetic intervals.
    const json timeline = json::parse(slurp(prefix + ".json"));
    ASSERT_EQ(timeline.at("format"), "atlas-bubbles-timeline");
    ASSERT_EQ(timeline.at("channels").size(), 1u);
    const json& ch = timeline.at("channels")[0];
    EXPECT_EQ(ch.at("name"), channel_.name());
    const json& observed = ch.at("observed");
    ASSERT_GE(observed.size(), 30u);
    for (size_t i = 1; i < observed.size(); ++i) {
        EXPECT_EQ(observed[i].at("start_ns").get<int64_t>() -
                      observed[i - 1].at("start_ns").get<int64_t>(),
                  50'000'000);
        EXPECT_EQ(
            observed[i].at("end_ns").get<int64_t>() - observed[i].at("start_ns").get<int64_t>(),
            20'000'000);
        EXPECT_EQ(observed[i].at("iteration").get<uint64_t>(),
                  observed[i - 1].at("iteration").get<uint64_t>() + 1);
    }
    ASSERT_FALSE(ch.at("prediction_sets").empty());
    for (const json& set : ch.at("prediction_sets")) {
        for (const json& w : set.at("windows")) {
            // Predicted window of iteration j = observed interval of j shifted by 2 ms.
            const int64_t start = w.at("start_ns").get<int64_t>();
            const int64_t first_start = observed[0].at("start_ns").get<int64_t>();
            const int64_t j = static_cast<int64_t>(w.at("iteration").get<uint64_t>()) -
                              static_cast<int64_t>(observed[0].at("iteration").get<uint64_t>());
            EXPECT_EQ(start, first_start + j * 50'000'000 + 2'000'000);
            EXPECT_EQ(w.at("end_ns").get<int64_t>() - start, 20'000'000);
            EXPECT_NEAR(w.at("confidence").get<double>(), 0.9, 1e-6);
        }
    }

    // stats from the file.
    RunResult stats = run({"stats", "--from", prefix + ".json", "--json"});
    ASSERT_EQ(stats.exit_code, 0) << stats.err;
    const json report = json::parse(stats.out);
    ASSERT_EQ(report.at("channels").size(), 1u);
    expectGroundTruth(report.at("channels")[0], 30);

    // replay: the plugin's predictor re-run over the recorded intervals. On this exact
    // periodic trace its windows are the observed ones minus the 200 us guard at each end
    // and the 1 ms publish tick a window waits for its interval to open.
    RunResult replay =
        run({"replay", "--from", prefix + ".json", "--json", "--out", dir_ + "/replayed"});
    ASSERT_EQ(replay.exit_code, 0) << replay.err;
    const json replayed = json::parse(replay.out).at("channels")[0];
    EXPECT_GE(replayed.at("coverage").get<double>(), 0.9) << replay.out;
    EXPECT_GE(replayed.at("precision").get<double>(), 0.99) << replay.out;
    EXPECT_EQ(json::parse(slurp(dir_ + "/replayed.json")).at("format"), "atlas-bubbles-timeline");
    RunResult bad_tol = run({"replay", "--from", prefix + ".json", "--track-tolerance", "2"});
    EXPECT_EQ(bad_tol.exit_code, 2);
    EXPECT_NE(bad_tol.err.find("track-tolerance"), std::string::npos) << bad_tol.err;
    // The predictor's recurring bubbles were "slots" (the word of the time slot): the old
    // flags are refused with the new names.
    RunResult old_names = run({"replay", "--from", prefix + ".json", "--slot-tolerance", "0.1",
                               "--slot-tolerance-max-us", "5", "--slots-only"});
    EXPECT_EQ(old_names.exit_code, 2);
    for (const char* part : {"'--slot-tolerance' was renamed: use --track-tolerance",
                             "'--slot-tolerance-max-us' was renamed: use --track-tolerance-max-us",
                             "'--slots-only' was renamed: use --tracks-only"}) {
        EXPECT_NE(old_names.err.find(part), std::string::npos) << old_names.err;
    }

    // Text form of the same report.
    RunResult text = run({"stats", "--from", prefix + ".json"});
    ASSERT_EQ(text.exit_code, 0) << text.err;
    EXPECT_NE(text.out.find("mean 40.0%"), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("coverage (recall)    90.0%"), std::string::npos) << text.out;

    // stats live against the running writer.
    RunResult live =
        run({"stats", "live", "--channel", channel_.name(), "--seconds", "1", "--json"});
    ASSERT_EQ(live.exit_code, 0) << live.err;
    expectGroundTruth(json::parse(live.out).at("channels")[0], 10);

    RunResult watch =
        run({"watch", "--channel", channel_.name(), "--count", "2", "--interval-ms", "100"});
    ASSERT_EQ(watch.exit_code, 0) << watch.err;
    EXPECT_NE(watch.out.find("predicting (synthetic)"), std::string::npos) << watch.out;
    EXPECT_NE(watch.out.find("period      50.0 ms"), std::string::npos) << watch.out;
    EXPECT_NE(watch.out.find("coverage 90.0%, precision 90.0%"), std::string::npos) << watch.out;

    RunResult info = run({"info", "--channel", channel_.name()});
    ASSERT_EQ(info.exit_code, 0) << info.err;
    EXPECT_NE(info.out.find("generation 1"), std::string::npos) << info.out;

    const std::string image = dir_ + "/segment.bin";
    RunResult dump = run({"dump", "--channel", channel_.name(), "--out", image});
    ASSERT_EQ(dump.exit_code, 0) << dump.err;
    RunResult image_info = run({"info", "--image", image});
    EXPECT_EQ(image_info.exit_code, 0) << image_info.err;

    // SIGTERM: the writer stops cleanly and unlinks its segment.
    EXPECT_EQ(stopSynth(), 0);
    RunResult gone = run({"info", "--channel", channel_.name()});
    EXPECT_EQ(gone.exit_code, 1);
    EXPECT_NE(gone.err.find("does not exist"), std::string::npos) << gone.err;
}

TEST_F(CliTest, ClearErrorsForBadFlagsAndBadSegments) {
    RunResult unknown = run({"record", "--bogus", "1"});
    EXPECT_EQ(unknown.exit_code, 2);
    EXPECT_NE(unknown.err.find("unknown option '--bogus'"), std::string::npos) << unknown.err;

    RunResult no_out = run({"record", "--channel", channel_.name()});
    EXPECT_EQ(no_out.exit_code, 2);
    EXPECT_NE(no_out.err.find("--out PREFIX is required"), std::string::npos) << no_out.err;

    RunResult bad_number = run({"watch", "--interval-ms", "fast"});
    EXPECT_EQ(bad_number.exit_code, 2);
    EXPECT_NE(bad_number.err.find("--interval-ms='fast' is invalid: expected a number"),
              std::string::npos)
        << bad_number.err;

    RunResult bad_name = run({"info", "--channel", "no-slash"});
    EXPECT_EQ(bad_name.exit_code, 2);
    EXPECT_NE(bad_name.err.find("must start with '/'"), std::string::npos) << bad_name.err;

    RunResult missing = run({"watch", "--channel", channel_.name(), "--count", "1"});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;

    RunResult missing_file = run({"stats", "--from", dir_ + "/nope.json"});
    EXPECT_EQ(missing_file.exit_code, 1);
    EXPECT_NE(missing_file.err.find("cannot read"), std::string::npos) << missing_file.err;

    std::ofstream(dir_ + "/other.json") << R"({"hello": 1})";
    RunResult not_timeline = run({"stats", "--from", dir_ + "/other.json"});
    EXPECT_EQ(not_timeline.exit_code, 1);
    EXPECT_NE(not_timeline.err.find("not an atlas-bubbles timeline"), std::string::npos);

    std::vector<unsigned char> garbage(4096, 0x5a);
    ASSERT_TRUE(testing::writeShmBytes(channel_.name(), garbage));
    RunResult foreign = run({"info", "--channel", channel_.name()});
    EXPECT_EQ(foreign.exit_code, 1);
    EXPECT_NE(foreign.err.find("foreign segment"), std::string::npos) << foreign.err;
    RunResult foreign_watch = run({"watch", "--channel", channel_.name(), "--count", "1"});
    EXPECT_EQ(foreign_watch.exit_code, 1);
    EXPECT_NE(foreign_watch.err.find("foreign segment"), std::string::npos);

    for (const char* cmd : {"watch", "record", "stats", "replay", "synth", "info", "dump"}) {
        RunResult help = run({cmd, "--help"});
        EXPECT_EQ(help.exit_code, 0) << cmd;
        EXPECT_NE(help.out.find("usage: atlas-bubbles " + std::string(cmd)), std::string::npos)
            << help.out;
    }
    RunResult top = run({"frobnicate"});
    EXPECT_EQ(top.exit_code, 2);
    EXPECT_NE(top.err.find("unknown command 'frobnicate'"), std::string::npos);
}

}  // namespace
}  // namespace atlas::channel
