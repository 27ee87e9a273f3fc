// The atlas-bubbles building blocks without real time: bubble analysis, the synth trace's
// ground truth pushed through the whole analysis, the timeline JSON and Chrome trace, the
// recorder over an in-process writer, and the flag parser.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "bubbletea/tools/args.h"
#include "bubbletea/tools/bubble_analysis.h"
#include "bubbletea/tools/recorder.h"
#include "bubbletea/tools/synth.h"
#include "bubbletea/tools/timeline.h"
#include "channel/channel_writer.h"
#include "tests/channel/channel_test_util.h"

namespace atlas::bubbletea::tools {
namespace {

using channel::IdleInterval;
using channel::kUnknownIteration;
using channel::PredictedWindow;

TEST(BubbleAnalysis, BubblesPerIterationUseFirstIdleStartAsBoundary) {
    // Period 100: iteration k idles [k*100, k*100+20) and [k*100+50, k*100+60).
    std::vector<IdleInterval> observed;
    for (uint64_t k = 3; k < 7; ++k) {
        const Nanos t = static_cast<Nanos>(k) * 100;
        observed.push_back({t + 50, t + 60, k});
        observed.push_back({t, t + 20, k});
    }
    observed.push_back({1000, 1001, kUnknownIteration});
    const auto bubbles = bubblesPerIteration(observed);
    ASSERT_EQ(bubbles.size(), 3u);  // the last iteration has no successor
    for (size_t i = 0; i < bubbles.size(); ++i) {
        EXPECT_EQ(bubbles[i].iteration, 3 + i);
        EXPECT_EQ(bubbles[i].end_ns - bubbles[i].start_ns, 100);
        EXPECT_EQ(bubbles[i].idle_ns, 30);
        EXPECT_DOUBLE_EQ(bubbles[i].fraction(), 0.3);
    }
    EXPECT_EQ(idleTimeIn(observed, 300, 400), 30);
}

TEST(BubbleAnalysis, BubblesSkipGapsInIterationNumbers) {
    const std::vector<IdleInterval> observed = {{0, 10, 1}, {100, 110, 2}, {300, 310, 4}};
    const auto bubbles = bubblesPerIteration(observed);
    ASSERT_EQ(bubbles.size(), 1u);
    EXPECT_EQ(bubbles[0].iteration, 1u);
}

// What `record` would capture from `synth`, built without a clock: publish times are the
// ideal ones plus a random delay, like a loaded machine would add.
ChannelTimeline synthTimeline(const SynthSpec& spec, int iterations, Nanos max_delay_ns,
                              uint32_t seed) {
    std::mt19937 rng(seed);
    const Nanos t0 = 1'000'000'000;
    ChannelTimeline c;
    c.name = "/synthetic";
    uint64_t set_id = 0;
    for (int k = 0; k < iterations; ++k) {
        for (const IdleInterval& i : synthObserved(spec, t0, static_cast<uint64_t>(k))) {
            c.observed.push_back(i);
        }
        if (k + 1 >= spec.warmup) {
            RecordedSet s;
            s.generation = 1;
            s.set_id = ++set_id;
            s.published_ns = synthPublishTime(spec, t0, static_cast<uint64_t>(k)) +
                             static_cast<Nanos>(rng() % static_cast<uint32_t>(max_delay_ns + 1));
            s.windows = synthPredictions(spec, t0, static_cast<uint64_t>(k));
            c.sets.push_back(std::move(s));
        }
    }
    return c;
}

TEST(SynthGroundTruth, AnalysisRecoversBubbleFractionCoverageAndPrecision) {
    SynthSpec spec;
    spec.period_ns = 50 * kNsPerMs;
    spec.idle = {{0, 20 * kNsPerMs}};
    spec.shift_ns = 2 * kNsPerMs;
    spec.warmup = 2;
    ASSERT_TRUE(validateSynthSpec(spec).isOk());
    // Publish delays up to 25 ms (more than the 2 ms shift, less than the 30 ms gap) must
    // not change the result: every window is also in the previous set.
    const ChannelTimeline c = synthTimeline(spec, 40, 25 * kNsPerMs, 7);
    const ChannelReport r = analyzeChannel(c, c.observed.back().end_ns);
    ASSERT_EQ(r.iterations.size(), 39u);
    for (const auto& b : r.iterations) {
        EXPECT_DOUBLE_EQ(b.fraction(), 0.4);
    }
    EXPECT_DOUBLE_EQ(r.bubble_mean, 0.4);
    EXPECT_DOUBLE_EQ(coverageOf(r.accuracy), 0.9);
    EXPECT_DOUBLE_EQ(precisionOf(r.accuracy), 0.9);
    // Evaluation starts at the first iteration after the first publish (iteration 2).
    EXPECT_EQ(r.eval_from_ns, c.observed[2].start_ns);
}

TEST(SynthGroundTruth, TwoIdleIntervalsAndNegativeShift) {
    SynthSpec spec;
    spec.period_ns = 100 * kNsPerMs;
    spec.idle = {{0, 10 * kNsPerMs}, {40, 30 * kNsPerMs}};
    spec.idle[1].offset_ns = 40 * kNsPerMs;
    spec.shift_ns = -5 * kNsPerMs;
    spec.warmup = 3;
    ASSERT_TRUE(validateSynthSpec(spec).isOk());
    const ChannelTimeline c = synthTimeline(spec, 30, 0, 1);
    const ChannelReport r = analyzeChannel(c, c.observed.back().end_ns);
    EXPECT_DOUBLE_EQ(r.bubble_mean, 0.4);
    // Each interval loses 5 ms of its duration to the shift: (5 + 25) / 40.
    EXPECT_DOUBLE_EQ(coverageOf(r.accuracy), 0.75);
    EXPECT_DOUBLE_EQ(precisionOf(r.accuracy), 0.75);
}

TEST(SynthGroundTruth, SpecValidationAndIdleParsing) {
    auto idle = parseSynthIdles("0:20,25.5:4");
    ASSERT_TRUE(idle.isOk()) << idle.status().toString();
    ASSERT_EQ(idle.value().size(), 2u);
    EXPECT_EQ(idle.value()[1].offset_ns, 25'500'000);
    EXPECT_EQ(idle.value()[1].duration_ns, 4'000'000);
    EXPECT_FALSE(parseSynthIdles("20").isOk());
    EXPECT_FALSE(parseSynthIdles("a:b").isOk());
    SynthSpec spec;
    spec.idle = {{0, 60 * kNsPerMs}};  // longer than the 50 ms period
    EXPECT_FALSE(validateSynthSpec(spec).isOk());
    spec.idle = {{10 * kNsPerMs, 10 * kNsPerMs}, {5 * kNsPerMs, 1 * kNsPerMs}};  // unsorted
    EXPECT_FALSE(validateSynthSpec(spec).isOk());
}

TEST(TimelineFormat, JsonRoundTripKeepsEverything) {
    Timeline t;
    t.from_ns = 10;
    t.to_ns = 5000;
    ChannelTimeline c;
    c.name = "/atlas-bubbles-0-1";
    c.writers = {{2, 1234, 7}};
    c.observed = {{100, 200, 5}, {300, 350, kUnknownIteration}};
    c.sets.push_back(
        {2,
         9,
         150,
         {{400, 450, 250000, 6, channel::WindowSource::kArbiterPlan},
          {500, 520, channel::kPpmOne, kUnknownIteration, channel::WindowSource::kPredictor}}});
    c.states = {{20, channel::PredictorState::kPeriodLost, channel::StatusReason::kPeriodChanged}};
    c.lost_observed = 3;
    c.incomplete_sets = 1;
    t.channels.push_back(c);

    auto back = timelineFromJson(nlohmann::json::parse(timelineToJson(t).dump()));
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    const ChannelTimeline& b = back.value().channels.at(0);
    EXPECT_EQ(back.value().from_ns, 10);
    EXPECT_EQ(back.value().to_ns, 5000);
    EXPECT_EQ(b.name, c.name);
    EXPECT_EQ(b.writers.at(0).pid, 1234);
    ASSERT_EQ(b.observed.size(), 2u);
    EXPECT_EQ(b.observed[1].iteration, kUnknownIteration);
    ASSERT_EQ(b.sets.size(), 1u);
    EXPECT_EQ(b.sets[0].set_id, 9u);
    EXPECT_EQ(b.sets[0].windows[0].confidence_ppm, 250000u);
    EXPECT_EQ(b.sets[0].windows[0].source, channel::WindowSource::kArbiterPlan);
    EXPECT_EQ(b.sets[0].windows[1].iteration, kUnknownIteration);
    EXPECT_EQ(b.states.at(0).reason, channel::StatusReason::kPeriodChanged);
    EXPECT_EQ(b.lost_observed, 3u);
    EXPECT_EQ(b.incomplete_sets, 1u);

    EXPECT_FALSE(timelineFromJson(nlohmann::json{{"format", "other"}}).isOk());
    auto missing =
        timelineFromJson(nlohmann::json{{"format", "atlas-bubbles-timeline"}, {"version", 1}});
    ASSERT_FALSE(missing.isOk());
    EXPECT_NE(missing.status().message().find("malformed timeline"), std::string::npos);
}

TEST(TimelineFormat, TransferFieldsRoundTripAndAreWrittenOnlyWhenKnown) {
    Timeline t;
    t.from_ns = 0;
    t.to_ns = 1000;
    ChannelTimeline c;
    c.name = "/x";
    IdleInterval known{100, 200, 5};
    known.transfer_start_ns = 90;  // landed before the wait opened
    known.transfer_bytes = 1ull << 33;
    c.observed = {known, {300, 350, 6}};
    t.channels.push_back(c);

    const nlohmann::json j = timelineToJson(t);
    const auto& observed = j.at("channels").at(0).at("observed");
    EXPECT_EQ(observed.at(0).at("transfer_start_ns"), 90);
    EXPECT_EQ(observed.at(0).at("transfer_bytes"), 1ull << 33);
    // Unknown transfer: the interval is written exactly as before the fields existed.
    EXPECT_EQ(observed.at(1),
              (nlohmann::json{{"start_ns", 300}, {"end_ns", 350}, {"iteration", 6}}));

    auto back = timelineFromJson(nlohmann::json::parse(j.dump()));
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    const auto& b = back.value().channels.at(0).observed;
    ASSERT_EQ(b.size(), 2u);
    EXPECT_EQ(b[0].transfer_start_ns, 90);
    EXPECT_EQ(b[0].transfer_bytes, 1ull << 33);
    EXPECT_EQ(b[1].transfer_start_ns, 0);
    EXPECT_EQ(b[1].transfer_bytes, 0u);

    // The trace shows a known transfer as args of the observed slice, and omits an unknown one.
    int with_transfer = 0;
    int without = 0;
    for (const auto& e : timelineToChromeTrace(t)) {
        if (e["ph"] == "X" && e["tid"] == 1) {
            if (e["args"].contains("transfer_bytes")) {
                ++with_transfer;
                EXPECT_EQ(e["args"]["transfer_start_ns"], 90);
                EXPECT_EQ(e["args"]["transfer_bytes"], 1ull << 33);
            } else {
                ++without;
                EXPECT_FALSE(e["args"].contains("transfer_start_ns"));
            }
        }
    }
    EXPECT_EQ(with_transfer, 1);
    EXPECT_EQ(without, 1);
}

// The writer's step reports (for an exact replay) round-trip, and only known ones are written.
TEST(TimelineFormat, StepFieldsRoundTripAndAreWrittenOnlyWhenKnown) {
    Timeline t;
    t.to_ns = 1000;
    ChannelTimeline c;
    c.name = "/x";
    IdleInterval seen{100, 200, 5};
    seen.taken_step_ns = 201;
    seen.open_from_step_ns = 101;
    seen.open_to_step_ns = 199;
    c.observed = {seen, {300, 350, 6}};
    t.channels.push_back(c);
    const nlohmann::json j = timelineToJson(t);
    const auto& observed = j.at("channels").at(0).at("observed");
    EXPECT_EQ(observed.at(0).at("taken_step_ns"), 201);
    EXPECT_EQ(observed.at(0).at("open_from_step_ns"), 101);
    EXPECT_EQ(observed.at(0).at("open_to_step_ns"), 199);
    EXPECT_FALSE(observed.at(0).contains("transfer_seen_step_ns"));
    EXPECT_EQ(observed.at(1),
              (nlohmann::json{{"start_ns", 300}, {"end_ns", 350}, {"iteration", 6}}));
    auto back = timelineFromJson(nlohmann::json::parse(j.dump()));
    ASSERT_TRUE(back.isOk()) << back.status().toString();
    const auto& b = back.value().channels.at(0).observed;
    EXPECT_EQ(b[0].taken_step_ns, 201);
    EXPECT_EQ(b[0].open_from_step_ns, 101);
    EXPECT_EQ(b[0].open_to_step_ns, 199);
    EXPECT_EQ(b[0].transfer_seen_step_ns, 0);
    EXPECT_EQ(b[1].taken_step_ns, 0);
}

TEST(TimelineFormat, RecordingWithoutTransferFieldsLoadsWithZeros) {
    // A recording as `atlas-bubbles record` wrote it before ABI v2 (no transfer fields).
    const auto old = nlohmann::json::parse(R"({
        "format": "atlas-bubbles-timeline", "version": 1, "clock": "CLOCK_MONOTONIC",
        "unit": "ns", "recorded_from_ns": 5, "recorded_to_ns": 900,
        "channels": [{"name": "/old", "writers": [],
                      "observed": [{"start_ns": 10, "end_ns": 40, "iteration": 3},
                                   {"start_ns": 50, "end_ns": 60, "iteration": null}],
                      "prediction_sets": [], "states": []}]})");
    auto t = timelineFromJson(old);
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    const auto& observed = t.value().channels.at(0).observed;
    ASSERT_EQ(observed.size(), 2u);
    EXPECT_EQ(observed[0].end_ns, 40);
    EXPECT_EQ(observed[1].iteration, kUnknownIteration);
    for (const IdleInterval& i : observed) {
        EXPECT_EQ(i.transfer_start_ns, 0);
        EXPECT_EQ(i.transfer_bytes, 0u);
    }
    // Written back, the intervals are what they were.
    EXPECT_EQ(timelineToJson(t.value()).at("channels").at(0).at("observed"),
              old.at("channels").at(0).at("observed"));
}

TEST(TimelineFormat, ChromeTraceHasTracksAndMergesRepeatedWindows) {
    Timeline t;
    t.from_ns = 0;
    t.to_ns = 10'000'000;
    ChannelTimeline c;
    c.name = "/x";
    c.observed = {{1'000'000, 3'000'000, 1}};
    // The same window in two consecutive sets: one trace slice, not two.
    const PredictedWindow w{1'500'000, 3'500'000, 500000, 1, channel::WindowSource::kPredictor};
    c.sets.push_back({1, 1, 500'000, {w}});
    c.sets.push_back({1, 2, 2'000'000, {w}});
    c.states = {{0, channel::PredictorState::kPredicting, channel::StatusReason::kNone}};
    t.channels.push_back(c);
    const auto trace = timelineToChromeTrace(t);
    ASSERT_TRUE(trace.is_array());
    int observed = 0;
    int predicted = 0;
    int instants = 0;
    for (const auto& e : trace) {
        if (e["ph"] == "X" && e["tid"] == 1) {
            ++observed;
            EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1000.0);  // us from the earliest event
            EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 2000.0);
        } else if (e["ph"] == "X" && e["tid"] == 2) {
            ++predicted;
            EXPECT_DOUBLE_EQ(e["ts"].get<double>(), 1500.0);
            EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 2000.0);
            EXPECT_EQ(e["args"]["set_id"], 1);
        } else if (e["ph"] == "i") {
            ++instants;
        }
    }
    EXPECT_EQ(observed, 1);
    EXPECT_EQ(predicted, 1);
    EXPECT_EQ(instants, 1);
}

TEST(RecorderTest, CollectsSetsAndDropsOnesCutByOverrun) {
    channel::testing::ShmNameGuard guard(channel::testing::uniqueShmName("rec"));
    ManualClock clock(1000);
    channel::WriterOptions options;
    options.clock = &clock;
    auto w = channel::ChannelWriter::create(guard.name(), {8, 8}, options);  // max set 4
    ASSERT_TRUE(w.isOk()) << w.status().toString();
    Recorder recorder({guard.name()}, 0);

    std::vector<PredictedWindow> three(
        3, PredictedWindow{10, 20, 1, 1, channel::WindowSource::kPredictor});
    ASSERT_EQ(w.value().publishPredictions(three), 3u);
    ASSERT_TRUE(w.value().publishObserved({5, 9, 1}));
    w.value().setStatus(channel::PredictorState::kPredicting, channel::StatusReason::kNone);
    recorder.poll(2000);
    // Four sets of three between polls overrun the 8-cell ring: the last two survive whole,
    // the one cut in half is dropped rather than recorded partially.
    for (int i = 0; i < 4; ++i) {
        clock.advance(10);
        ASSERT_EQ(w.value().publishPredictions(three), 3u);
    }
    ASSERT_EQ(w.value().publishPredictions({}), 0u);
    recorder.poll(3000);

    const ChannelTimeline& t = recorder.channels().at(0)->timeline;
    EXPECT_EQ(t.observed.size(), 1u);
    ASSERT_GE(t.sets.size(), 3u);
    EXPECT_EQ(t.sets.front().set_id, 1u);
    EXPECT_EQ(t.sets.front().windows.size(), 3u);
    EXPECT_EQ(t.sets.back().set_id, 6u);
    EXPECT_TRUE(t.sets.back().windows.empty());  // the empty set is recorded as such
    for (const RecordedSet& s : t.sets) {
        EXPECT_TRUE(s.windows.size() == 3 || s.windows.empty()) << "set " << s.set_id;
    }
    EXPECT_GT(t.lost_windows, 0u);
    ASSERT_FALSE(t.states.empty());
    EXPECT_EQ(t.states.back().state, channel::PredictorState::kPredicting);
    ASSERT_EQ(t.writers.size(), 1u);
    EXPECT_EQ(t.writers[0].generation, 1u);
}

TEST(RecorderTest, MissingChannelIsRetriedUntilItAppears) {
    channel::testing::ShmNameGuard guard(channel::testing::uniqueShmName("late"));
    Recorder recorder({guard.name()}, 0);
    recorder.poll(1);
    EXPECT_FALSE(recorder.channels()[0]->reader.has_value());
    EXPECT_NE(recorder.channels()[0]->last_error.find("does not exist"), std::string::npos);
    auto w = channel::ChannelWriter::create(guard.name(), {8, 8});
    ASSERT_TRUE(w.isOk());
    ASSERT_TRUE(w.value().publishObserved({1, 2, 0}));
    recorder.poll(2);
    EXPECT_TRUE(recorder.channels()[0]->reader.has_value());
    EXPECT_EQ(recorder.channels()[0]->timeline.observed.size(), 1u);
}

TEST(ArgsTest, StrictNumbersAndSuggestions) {
    const std::vector<FlagSpec> specs = {{"seconds", true, "S", ""}, {"help", false, "", ""}};
    for (const char* bad : {"0x10", " 5", "5 ", "1e400", "inf", "2s"}) {
        std::vector<std::string> words = {"x", "cmd", "--seconds", bad};
        std::vector<char*> argv;
        for (auto& w : words) {
            argv.push_back(w.data());
        }
        auto a = Args::parse(static_cast<int>(argv.size()), argv.data(), 2, specs);
        ASSERT_TRUE(a.isOk());
        auto v = a.value().getDouble("seconds", 0, 0, 1e9);
        ASSERT_FALSE(v.isOk()) << bad;  // strtod accepted the first four
        EXPECT_NE(v.status().message().find("--seconds='"), std::string::npos);
    }
    std::vector<std::string> words = {"x", "cmd", "--secnods", "1", "-h"};
    std::vector<char*> argv;
    for (auto& w : words) {
        argv.push_back(w.data());
    }
    auto a = Args::parse(static_cast<int>(argv.size()), argv.data(), 2, specs);
    ASSERT_FALSE(a.isOk());
    EXPECT_NE(a.status().message().find("did you mean --seconds?"), std::string::npos)
        << a.status().message();
}

TEST(ArgsTest, ParsesFormsAndRejectsUnknownOrMissing) {
    const std::vector<FlagSpec> specs = {
        {"channel", true, "N", ""}, {"seconds", true, "S", ""}, {"json", false, "", ""}};
    std::vector<std::string> words = {
        "x", "cmd", "live", "--channel", "/a", "--channel=/b", "--seconds", "2.5", "--json"};
    std::vector<char*> argv;
    for (auto& w : words) {
        argv.push_back(w.data());
    }
    auto a = Args::parse(static_cast<int>(argv.size()), argv.data(), 2, specs);
    ASSERT_TRUE(a.isOk()) << a.status().toString();
    EXPECT_EQ(a.value().positional(), std::vector<std::string>{"live"});
    EXPECT_EQ(a.value().all("channel"), (std::vector<std::string>{"/a", "/b"}));
    EXPECT_TRUE(a.value().has("json"));
    EXPECT_DOUBLE_EQ(a.value().getDouble("seconds", 0, 0, 10).value(), 2.5);
    EXPECT_FALSE(a.value().getDouble("seconds", 0, 0, 1).isOk());  // out of range
    EXPECT_FALSE(a.value().getInt("seconds", 0, 0, 10).isOk());    // not an integer

    std::vector<std::string> bad = {"x", "cmd", "--nope"};
    std::vector<char*> bad_argv;
    for (auto& w : bad) {
        bad_argv.push_back(w.data());
    }
    auto b = Args::parse(3, bad_argv.data(), 2, specs);
    ASSERT_FALSE(b.isOk());
    EXPECT_NE(b.status().message().find("unknown option '--nope'"), std::string::npos);
    std::vector<std::string> missing = {"x", "cmd", "--seconds"};
    std::vector<char*> missing_argv;
    for (auto& w : missing) {
        missing_argv.push_back(w.data());
    }
    auto m = Args::parse(3, missing_argv.data(), 2, specs);
    ASSERT_FALSE(m.isOk());
    EXPECT_NE(m.status().message().find("needs a value"), std::string::npos);
}

}  // namespace
}  // namespace atlas::bubbletea::tools
