#include "bubbletea/tools/synth.h"

#include "options/value.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <sstream>

namespace atlas::bubbletea::tools {

using channel::IdleInterval;
using channel::PredictedWindow;

Status validateSynthSpec(const SynthSpec& spec) {
    if (spec.period_ns <= 0) {
        return {Code::kInvalidArgument, "period must be positive"};
    }
    if (spec.idle.empty()) {
        return {Code::kInvalidArgument, "at least one idle interval is needed"};
    }
    Nanos prev_end = 0;
    for (const SynthIdle& s : spec.idle) {
        if (s.offset_ns < prev_end || s.duration_ns <= 0 ||
            s.offset_ns + s.duration_ns > spec.period_ns) {
            return {Code::kInvalidArgument,
                    "idle intervals must be sorted, non-overlapping, of positive duration and "
                    "inside one period"};
        }
        prev_end = s.offset_ns + s.duration_ns;
    }
    if (spec.horizon < 0 || spec.warmup < 1) {
        return {Code::kInvalidArgument, "horizon must be >= 0 and warmup >= 1"};
    }
    if (spec.confidence_ppm > channel::kPpmOne) {
        return {Code::kInvalidArgument, "confidence must be in [0, 1]"};
    }
    return Status::ok();
}

Result<std::vector<SynthIdle>> parseSynthIdles(const std::string& text) {
    std::vector<SynthIdle> idle;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        const auto colon = item.find(':');
        const auto offset_ms = options::parseDouble(std::string_view(item).substr(0, colon));
        const auto duration_ms =
            colon == std::string::npos
                ? std::nullopt
                : options::parseDouble(std::string_view(item).substr(colon + 1));
        if (!offset_ms || !duration_ms) {
            return Status(Code::kInvalidArgument,
                          "--idle: '" + item + "' is not OFFSET_MS:DURATION_MS");
        }
        const double offset = *offset_ms;
        const double duration = *duration_ms;
        idle.push_back({static_cast<Nanos>(std::llround(offset * kNsPerMs)),
                        static_cast<Nanos>(std::llround(duration * kNsPerMs))});
    }
    if (idle.empty()) {
        return Status(Code::kInvalidArgument, "--idle: no intervals given");
    }
    return idle;
}

std::vector<IdleInterval> synthObserved(const SynthSpec& spec, Nanos t0, uint64_t k) {
    std::vector<IdleInterval> out;
    const Nanos start = t0 + static_cast<Nanos>(k) * spec.period_ns;
    for (const SynthIdle& s : spec.idle) {
        out.push_back({start + s.offset_ns, start + s.offset_ns + s.duration_ns, k});
    }
    return out;
}

Nanos synthPublishTime(const SynthSpec& spec, Nanos t0, uint64_t k) {
    const SynthIdle& last = spec.idle.back();
    return t0 + static_cast<Nanos>(k) * spec.period_ns + last.offset_ns + last.duration_ns;
}

std::vector<PredictedWindow> synthPredictions(const SynthSpec& spec, Nanos t0, uint64_t k) {
    std::vector<PredictedWindow> out;
    const Nanos publish = synthPublishTime(spec, t0, k);
    for (uint64_t j = k; j <= k + static_cast<uint64_t>(spec.horizon); ++j) {
        for (const IdleInterval& i : synthObserved(spec, t0, j)) {
            PredictedWindow w{i.start_ns + spec.shift_ns, i.end_ns + spec.shift_ns,
                              spec.confidence_ppm, j, channel::WindowSource::kPredictor};
            if (w.end_ns > publish) {
                out.push_back(w);
            }
        }
    }
    return out;
}

namespace {

// Sleeps until `t` on CLOCK_MONOTONIC, waking early when *stop is set (signals interrupt
// clock_nanosleep with EINTR).
void sleepUntil(Nanos t, const volatile std::sig_atomic_t* stop) {
    timespec ts{static_cast<time_t>(t / kNsPerSec), static_cast<long>(t % kNsPerSec)};
    while (!*stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
    }
}

}  // namespace

void runSynth(channel::ChannelWriter& writer, const SynthSpec& spec, Nanos t0, Nanos end_ns,
              const volatile std::sig_atomic_t* stop) {
    Nanos idle_total = 0;
    for (const SynthIdle& s : spec.idle) {
        idle_total += s.duration_ns;
    }
    channel::ChannelStats stats;
    stats.period_ns = spec.period_ns;
    stats.period_confidence_ppm = 0;
    stats.idle_fraction_ppm =
        channel::toPpm(static_cast<double>(idle_total) / static_cast<double>(spec.period_ns));
    writer.setStatus(channel::PredictorState::kLearning, channel::StatusReason::kWarmup);
    for (uint64_t k = 0; !*stop; ++k) {
        for (const IdleInterval& i : synthObserved(spec, t0, k)) {
            if (end_ns != 0 && i.end_ns > end_ns) {
                return;
            }
            sleepUntil(i.end_ns, stop);
            if (*stop) {
                return;
            }
            writer.publishObserved(i);
        }
        stats.iteration = k;
        if (k + 1 >= static_cast<uint64_t>(spec.warmup)) {
            writer.publishPredictions(synthPredictions(spec, t0, k));
            writer.setStatus(channel::PredictorState::kPredicting,
                             channel::StatusReason::kSynthetic);
            stats.period_confidence_ppm = channel::kPpmOne;
        }
        writer.setStats(stats);
    }
}

}  // namespace atlas::bubbletea::tools
