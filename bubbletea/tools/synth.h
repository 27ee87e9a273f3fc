// The synthetic writer behind `atlas-bubbles synth`: plays the NCCL plugin with a periodic
// trace whose ground truth is known exactly, so the channel, the CLI and bubbletea can be
// demoed and tested without a training job.
//
// Iteration k (k = 0, 1, ...) starts at t0 + k * period. Each idle interval {offset, duration}
// gives the observed interval [start + offset, start + offset + duration), published once it
// has ended. After the last idle interval of iteration k ends (k >= warmup - 1), one
// prediction set is published: for iterations k..k+horizon, every interval shifted by `shift`,
// keeping only windows that have not ended at that (ideal) instant. With one interval of
// duration d and 0 <= shift < d, coverage and precision are both (d - shift) / d, and the
// bubble fraction of every iteration is d / period.
#pragma once

#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"
#include "channel/channel_types.h"
#include "channel/channel_writer.h"

namespace atlas::bubbletea::tools {

struct SynthIdle {
    Nanos offset_ns = 0;
    Nanos duration_ns = 0;
};

struct SynthSpec {
    Nanos period_ns = 50 * kNsPerMs;
    std::vector<SynthIdle> idle = {{0, 20 * kNsPerMs}};
    Nanos shift_ns = 0;
    uint32_t confidence_ppm = 900000;
    int horizon = 4;  // iterations predicted beyond the current one
    int warmup = 3;   // iterations observed before the first prediction set
};

// Idle intervals must be sorted, non-overlapping and inside one period; horizon >= 0, warmup >= 1.
Status validateSynthSpec(const SynthSpec& spec);
// Parses "OFFSET:DURATION[,OFFSET:DURATION...]" in milliseconds (decimals allowed).
Result<std::vector<SynthIdle>> parseSynthIdles(const std::string& text);

// The observed intervals of iteration k for a trace that starts at t0.
std::vector<channel::IdleInterval> synthObserved(const SynthSpec& spec, Nanos t0, uint64_t k);
// The prediction set published after iteration k's last idle interval ended.
std::vector<channel::PredictedWindow> synthPredictions(const SynthSpec& spec, Nanos t0, uint64_t k);
// The instant (ideal) at which synthPredictions(k) is published.
Nanos synthPublishTime(const SynthSpec& spec, Nanos t0, uint64_t k);

// Runs the trace in real time on CLOCK_MONOTONIC until `end_ns` (0: forever) or until
// *stop becomes non-zero (a signal handler sets it). Sleeps between events.
void runSynth(channel::ChannelWriter& writer, const SynthSpec& spec, Nanos t0, Nanos end_ns,
              const volatile std::sig_atomic_t* stop);

}  // namespace atlas::bubbletea::tools
