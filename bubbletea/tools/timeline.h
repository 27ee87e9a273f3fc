// What `atlas-bubbles record` captures from bubble channels, and what `stats` computes from
// it: the timeline model, its JSON file format, the Chrome-trace export, and the report.
// Times are CLOCK_MONOTONIC ns throughout; the trace converts to microseconds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "atlas/common/status.h"
#include "bubbletea/tools/bubble_analysis.h"
#include "channel/channel_types.h"
#include "scheduler/interval_accuracy.h"

namespace atlas::bubbletea::tools {

// One prediction set as recorded.
struct RecordedSet {
    uint64_t generation = 0;
    uint64_t set_id = 0;
    Nanos published_ns = 0;
    std::vector<channel::PredictedWindow> windows;
};

struct StateChange {
    Nanos at_ns = 0;  // when the recorder saw it (state_since_ns when known)
    channel::PredictorState state = channel::PredictorState::kStarting;
    channel::StatusReason reason = channel::StatusReason::kNone;
};

struct WriterEpoch {
    uint64_t generation = 0;
    int32_t pid = 0;
    Nanos start_ns = 0;
};

struct ChannelTimeline {
    std::string name;
    std::vector<WriterEpoch> writers;  // one per writer (re)start seen
    std::vector<channel::IdleInterval> observed;
    std::vector<RecordedSet> sets;  // in publish order
    std::vector<StateChange> states;
    uint64_t lost_observed = 0;
    uint64_t lost_windows = 0;
    uint64_t incomplete_sets = 0;  // sets dropped because ring overrun cut them
    uint64_t invalid_records = 0;
};

struct Timeline {
    Nanos from_ns = 0;  // recording start
    Nanos to_ns = 0;    // recording end
    std::vector<ChannelTimeline> channels;
};

// PREFIX.json: {"format": "atlas-bubbles-timeline", "version": 1, ...}. Each observed
// interval has start_ns, end_ns, iteration (null = unknown) and, only when nonzero (known),
// transfer_start_ns and transfer_bytes; absent ones read back as 0, so recordings made before
// these fields existed load unchanged (still version 1: the fields are optional).
nlohmann::json timelineToJson(const Timeline& timeline);
Result<Timeline> timelineFromJson(const nlohmann::json& j);
// Reads and parses PREFIX.json; errors name the file (unreadable, not JSON, not a timeline).
Result<Timeline> loadTimeline(const std::string& path);

// Chrome trace (JSON array format): per channel a process (pid = index + 1) with tracks
// tid 1 "observed idle" (args: iteration, and the transfer fields when known),
// tid 2 "predicted windows" (the effective windows, each clipped to the reign of its set),
// tid 3 "status". ts/dur in microseconds from the earliest time in the timeline.
nlohmann::json timelineToChromeTrace(const Timeline& timeline);

// The effective predicted windows of a channel with their attributes: window parts outside
// the reign [published_k, published_{k+1}) of their set are cut off.
struct EffectiveWindow {
    channel::PredictedWindow window;  // clipped
    uint64_t set_id = 0;
};
std::vector<EffectiveWindow> effectiveWindows(const ChannelTimeline& channel, Nanos until_ns);

// The `stats` report of one channel.
struct ChannelReport {
    std::string name;
    std::vector<IterationBubble> iterations;
    double bubble_mean = 0;  // NaN when no complete iteration
    double bubble_min = 0;
    double bubble_max = 0;
    size_t observed_intervals = 0;
    size_t prediction_sets = 0;
    // Accuracy is evaluated over [eval_from_ns, eval_to_ns): the complete iterations that
    // started after the first prediction set was published, less the first skip_iterations
    // of them (or, without iteration numbers,
    // from the first set to the end of the last observed interval).
    Nanos eval_from_ns = 0;
    Nanos eval_to_ns = 0;
    // coverage/precision are only meaningful when observed_ns/predicted_ns > 0 (the JSON
    // and text reports show null / n/a otherwise).
    sched::Accuracy accuracy;
    uint64_t lost_observed = 0;
    uint64_t lost_windows = 0;
};
// skip_iterations: complete iterations after the first prediction left out of the accuracy
// (the predictor's own warm-up: tracks need a few samples each).
ChannelReport analyzeChannel(const ChannelTimeline& channel, Nanos until_ns,
                             int skip_iterations = 0);
// Coverage / precision, NaN when there was nothing observed / predicted to measure against.
double coverageOf(const sched::Accuracy& accuracy);
double precisionOf(const sched::Accuracy& accuracy);
nlohmann::json reportToJson(const ChannelReport& report);
std::string reportToText(const ChannelReport& report);

}  // namespace atlas::bubbletea::tools
