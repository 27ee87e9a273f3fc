// `atlas-bubbles replay` as a library: drives scheduler/'s BubblePipeline (the plugin's
// publishing step, the same object) over a recorded channel, and compares what it published
// with what the plugin published.
//
// Two wirings:
//  - the plugin's recorded steps: a recording of a writer that reports what its steps saw
//    of each wait (IdleInterval::*_step_ns, docs/bubble-channel.md "Publisher steps") says
//    which step took each finished wait in, which steps saw it open and its transfer, and
//    each set's published_ns is the time of the step that published it. Stepping the
//    pipeline at exactly those times with exactly those inputs publishes exactly the
//    recorded sets (the steps in between published nothing, so neither do they here);
//  - ticks: every step_interval_ns from the first wait's end, each finished wait taken in
//    at the first tick after its end, the wait open at a tick being the one that began by
//    then (with its transfer once the recorded first data has arrived). For other settings
//    than the plugin's, or recordings without the steps.
//
// Pure functions over timelines; allocate; any thread.
#pragma once

#include <string>

#include "atlas/common/status.h"
#include "bubbletea/tools/timeline.h"
#include "scheduler/bubble_pipeline.h"

namespace atlas::bubbletea::tools {

enum class ReplaySteps : uint8_t {
    kAuto,      // the recorded steps when the recording has them, else ticks
    kRecorded,  // the recorded steps; fails when the recording lacks them
    kTicks,
};

struct ReplayOptions {
    sched::BubblePipelineConfig pipeline;  // the plugin's by default
    ReplaySteps steps = ReplaySteps::kAuto;
};

struct ReplayOutcome {
    bool recorded_steps = false;  // stepped at the plugin's steps (else at ticks)
    size_t steps = 0;             // pipeline steps run
};

// Whether `channel` carries every input of the plugin's steps: each observed wait says when
// it was taken in (in recorded order), and no record was lost. The error says what is
// missing.
Status recordedStepsComplete(const ChannelTimeline& channel);

// Replays one channel in place: its prediction sets become those the pipeline publishes,
// and the observed waits' iteration numbers those it gives them (the recorded ones come
// from the recorded run's detector, and stats delimits iterations with them). With the
// recorded steps the waits stay in recorded order; with ticks they are sorted by end (the
// order the publisher learns of them). Fails only for kRecorded without the steps.
Result<ReplayOutcome> replayChannel(ChannelTimeline& channel, const ReplayOptions& options);

// Whether two channels published the same prediction sets: the same number, each at the
// same time with the same windows, field by field. The error (kInternal: the replay is not
// the plugin's step) names the first difference.
Status sameSets(const ChannelTimeline& recorded, const ChannelTimeline& replayed);

}  // namespace atlas::bubbletea::tools
