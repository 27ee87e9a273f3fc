// `atlas-bubbles replay` reproduces exactly what the plugin published: the plugin's
// BubblePublisher (the real one, over a real shared-memory channel, read by the real
// recorder) and the replay drive the same BubblePipeline, and the publisher reports what each
// step saw of each wait. Two recordings:
//  - one made here with a ManualClock (no sleeps), with the races a live publisher meets: a
//    wait that ends after a step read the clock but before it drained, a wait posted after
//    the clock read but seen by that step, steps at irregular times;
//  - one recorded live from the plugin (tests/unit/data/, see its README), replayed from
//    the committed file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "bubbletea/tools/recorder.h"
#include "bubbletea/tools/replay.h"
#include "bubbletea/tools/timeline.h"
#include "plugin/bubbles.h"
#include "tests/scheduler/trace_gen.h"

namespace atlas::plugin {
namespace {

using bubbletea::tools::ChannelTimeline;
using bubbletea::tools::Recorder;
using bubbletea::tools::ReplayOptions;
using bubbletea::tools::ReplaySteps;
using bubbletea::tools::Timeline;

constexpr Nanos kMs = kNsPerMs;
constexpr Nanos kUs = kNsPerUs;

// A publisher stepped by hand at irregular times over a GPipe-like stage: per 100 ms
// iteration a fill wait, two short waits and a drain wait, with jitter, some transfers
// landing before the wait opened, and the two races above.
class ReplayedPublisherTest : public ::testing::Test {
  protected:
    void SetUp() override {
        name_ = "/atlas-test-replay-" + std::to_string(::getpid());
        BubbleConfig cfg;
        cfg.channel_name = name_;
        auto p = BubblePublisher::manual(cfg, &rec_, clock_, Logger());
        ASSERT_TRUE(p.isOk()) << p.status().toString();
        pub_ = std::move(p.value());
        recorder_ = std::make_unique<Recorder>(std::vector<std::string>{name_}, clock_.nowNs());
    }

    // Steps at now, every `step` on average until `until`, polling the recorder now and then.
    void stepUntil(Nanos until) {
        while (next_step_ < until) {
            clock_.set(next_step_);
            pub_->step();
            last_step_ = next_step_;
            if (++steps_ % 16 == 0) {
                recorder_->poll(next_step_);
            }
            next_step_ += static_cast<Nanos>(rng_.uniform(300, 2000)) * kUs;
        }
    }
    // One wait [start, end) with its transfer's first data at `data` (0: none), posted and
    // completed while the publisher steps.
    void wait(Nanos start, Nanos end, Nanos data) {
        stepUntil(start);
        obs_.posted(seq_, start);
        if (data != 0) {
            stepUntil(std::max(start, data));
            obs_.arrived(seq_, 2 << 20, data);
        }
        stepUntil(end);
        obs_.completed(seq_++, end);
    }

    std::string name_;
    ManualClock clock_{5 * kNsPerSec};
    IdleRecorder rec_;
    CommIdleObserver obs_{&rec_, 1};
    uint64_t seq_ = 0;
    std::unique_ptr<BubblePublisher> pub_;
    std::unique_ptr<Recorder> recorder_;
    sched::testing::Rng rng_{7};
    Nanos next_step_ = 5 * kNsPerSec;
    Nanos last_step_ = 0;
    int steps_ = 0;
};

// The recording of the publisher, through the timeline file format.
Timeline recorded(Recorder& r, Nanos end) {
    r.poll(end);
    auto back = bubbletea::tools::timelineFromJson(
        nlohmann::json::parse(bubbletea::tools::timelineToJson(r.timeline(end)).dump()));
    EXPECT_TRUE(back.isOk()) << back.status().toString();
    return back.value();
}

TEST_F(ReplayedPublisherTest, ReplayAtTheRecordedStepsPublishesExactlyTheRecordedSets) {
    const Nanos t0 = 5 * kNsPerSec + 10 * kMs;
    for (int k = 0; k < 40; ++k) {
        const Nanos b = t0 + k * 100 * kMs + static_cast<Nanos>(rng_.uniform(0, 3000)) * kUs;
        const Nanos fill_end = b + 25 * kMs + static_cast<Nanos>(rng_.uniform(0, 4000)) * kUs;
        wait(b, fill_end, fill_end - 8 * kMs);
        wait(b + 40 * kMs, b + 41 * kMs, b + 39 * kMs);  // data buffered before the post
        wait(b + 50 * kMs, b + 51 * kMs, 0);
        const Nanos drain = b + 65 * kMs;
        const Nanos drain_end = drain + 20 * kMs + static_cast<Nanos>(rng_.uniform(0, 2000)) * kUs;
        wait(drain, drain_end, drain_end - 9 * kMs);
        if (k % 5 == 2) {
            // A wait stamped before a step read the clock that the step did not see yet (the
            // poster had not published it), and its first data likewise one step later.
            stepUntil(b + 90 * kMs);
            obs_.posted(seq_, last_step_ - 100 * kUs);
            stepUntil(next_step_ + 1);
            obs_.arrived(seq_, 2 << 20, last_step_ - 50 * kUs);
            stepUntil(next_step_ + 1);
            // It ends after the next step read the clock, and that step takes it in; the
            // wait after it opens after that clock read too, and that step sees it.
            const Nanos now = next_step_;
            clock_.set(now);
            obs_.completed(seq_++, now + 400 * kUs);
            obs_.posted(seq_, now + 500 * kUs);
            pub_->step();
            last_step_ = now;
            next_step_ = now + kMs;
            stepUntil(now + 3 * kMs);
            obs_.completed(seq_++, now + 2500 * kUs);
        }
    }
    stepUntil(t0 + 41 * 100 * kMs);
    const Timeline t = recorded(*recorder_, next_step_);
    ASSERT_EQ(t.channels.size(), 1u);
    const ChannelTimeline& live = t.channels[0];
    ASSERT_TRUE(bubbletea::tools::recordedStepsComplete(live).isOk());
    ASSERT_GT(live.sets.size(), 100u) << "the predictor published from the recorded steps";

    ChannelTimeline replayed = live;
    ReplayOptions options;
    options.steps = ReplaySteps::kRecorded;
    auto outcome = bubbletea::tools::replayChannel(replayed, options);
    ASSERT_TRUE(outcome.isOk()) << outcome.status().toString();
    EXPECT_TRUE(outcome.value().recorded_steps);
    const Status same = bubbletea::tools::sameSets(live, replayed);
    EXPECT_TRUE(same.isOk()) << same.toString();

    // Ticks are not the plugin's steps: the same recording replayed at 1 ms ticks differs.
    ChannelTimeline ticked = live;
    options.steps = ReplaySteps::kTicks;
    ASSERT_TRUE(bubbletea::tools::replayChannel(ticked, options).isOk());
    EXPECT_FALSE(bubbletea::tools::sameSets(live, ticked).isOk());

    // Without what the steps saw of the open waits, the replay is not exact either.
    ChannelTimeline blind = live;
    for (auto& iv : blind.observed) {
        iv.open_from_step_ns = iv.open_to_step_ns = iv.transfer_seen_step_ns = 0;
    }
    options.steps = ReplaySteps::kRecorded;
    ASSERT_TRUE(bubbletea::tools::replayChannel(blind, options).isOk());
    EXPECT_FALSE(bubbletea::tools::sameSets(live, blind).isOk());
}

TEST_F(ReplayedPublisherTest, ARecordingWithoutTheStepsCannotBeReplayedAtThem) {
    wait(5 * kNsPerSec + 10 * kMs, 5 * kNsPerSec + 20 * kMs, 0);
    stepUntil(5 * kNsPerSec + 30 * kMs);
    Timeline t = recorded(*recorder_, next_step_);
    ASSERT_TRUE(bubbletea::tools::recordedStepsComplete(t.channels[0]).isOk());
    t.channels[0].observed[0].taken_step_ns = 0;  // as an older writer records it
    const Status s = bubbletea::tools::recordedStepsComplete(t.channels[0]);
    EXPECT_FALSE(s.isOk());
    EXPECT_NE(s.message().find("taken in"), std::string::npos) << s.message();
    ReplayOptions options;
    options.steps = ReplaySteps::kRecorded;
    EXPECT_FALSE(bubbletea::tools::replayChannel(t.channels[0], options).isOk());
    options.steps = ReplaySteps::kAuto;
    auto outcome = bubbletea::tools::replayChannel(t.channels[0], options);
    ASSERT_TRUE(outcome.isOk());
    EXPECT_FALSE(outcome.value().recorded_steps) << "falls back to ticks";
}

// A run of the real plugin (atlas-pipeline-bench over the emulated WAN, recorded by
// `atlas-bubbles record`; tests/unit/data/README.md says how it was made), replayed from the
// committed recording: every stage's prediction sets, bit for bit.
TEST(ReplayedLiveRun, EveryStagePublishedExactlyWhatTheReplayPublishes) {
    auto t = bubbletea::tools::loadTimeline(ATLAS_TEST_DATA_DIR "/bubbles-live-1f1b.json");
    ASSERT_TRUE(t.isOk()) << t.status().toString();
    ASSERT_FALSE(t.value().channels.empty());
    for (const ChannelTimeline& live : t.value().channels) {
        SCOPED_TRACE(live.name);
        ASSERT_TRUE(bubbletea::tools::recordedStepsComplete(live).isOk());
        ASSERT_GT(live.sets.size(), 50u);
        ChannelTimeline replayed = live;
        auto outcome = bubbletea::tools::replayChannel(replayed, ReplayOptions{});
        ASSERT_TRUE(outcome.isOk()) << outcome.status().toString();
        EXPECT_TRUE(outcome.value().recorded_steps);
        const Status same = bubbletea::tools::sameSets(live, replayed);
        EXPECT_TRUE(same.isOk()) << same.toString();
    }
}

}  // namespace
}  // namespace atlas::plugin
