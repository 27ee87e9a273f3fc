#include "bubbletea/tools/replay.h"

#include <algorithm>
#include <string>
#include <vector>

namespace atlas::bubbletea::tools {

namespace {

std::string at(Nanos t) {
    return std::to_string(t) + " ns";
}

sched::TransferWait waitOf(const channel::IdleInterval& iv) {
    return {iv.start_ns, iv.end_ns, iv.transfer_start_ns, iv.transfer_bytes};
}

channel::PredictedWindow toChannel(const sched::PublishedWindow& p) {
    return {p.start_ns, p.end_ns, p.confidence_ppm, p.iteration,
            p.open ? channel::WindowSource::kPredictorOpen : channel::WindowSource::kPredictor};
}

// Appends the decision's set when it changed.
void record(const sched::PipelineDecision& d, Nanos now, uint64_t generation,
            std::vector<RecordedSet>* sets) {
    if (!d.publish) {
        return;
    }
    RecordedSet s;
    s.generation = generation;
    s.set_id = sets->size() + 1;
    s.published_ns = now;
    for (const sched::PublishedWindow& w : d.windows) {
        s.windows.push_back(toChannel(w));
    }
    sets->push_back(std::move(s));
}

// The plugin's steps: every step that took a wait in or published a set, with the inputs it
// had (see replay.h).
size_t replayRecordedSteps(ChannelTimeline& c, sched::BubblePipeline& pipeline,
                           uint64_t generation) {
    std::vector<channel::IdleInterval>& obs = c.observed;
    std::vector<Nanos> times;
    times.reserve(obs.size() + c.sets.size());
    for (const channel::IdleInterval& iv : obs) {
        times.push_back(iv.taken_step_ns);
    }
    for (const RecordedSet& s : c.sets) {
        times.push_back(s.published_ns);
    }
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    // The steps that saw each wait open, by their first.
    std::vector<size_t> seen;
    for (size_t i = 0; i < obs.size(); ++i) {
        if (obs[i].open_from_step_ns != 0 && obs[i].open_to_step_ns != 0) {
            seen.push_back(i);
        }
    }
    std::stable_sort(seen.begin(), seen.end(), [&](size_t a, size_t b) {
        return obs[a].open_from_step_ns < obs[b].open_from_step_ns;
    });
    std::vector<RecordedSet> sets;
    std::vector<size_t> active;
    size_t next_obs = 0;
    size_t next_seen = 0;
    for (const Nanos t : times) {
        for (; next_obs < obs.size() && obs[next_obs].taken_step_ns == t; ++next_obs) {
            obs[next_obs].iteration = pipeline.take(waitOf(obs[next_obs]), t).iteration;
        }
        for (; next_seen < seen.size() && obs[seen[next_seen]].open_from_step_ns <= t;
             ++next_seen) {
            active.push_back(seen[next_seen]);
        }
        std::erase_if(active, [&](size_t i) { return obs[i].open_to_step_ns < t; });
        sched::TransferWait open;
        if (!active.empty()) {
            const channel::IdleInterval& w = obs[active.front()];
            open.start_ns = w.start_ns;
            if (w.transfer_seen_step_ns != 0 && w.transfer_seen_step_ns <= t) {
                open.transfer_start_ns = w.transfer_start_ns;
                open.transfer_bytes = w.transfer_bytes;
            }
        }
        record(pipeline.decide(t, open), t, generation, &sets);
    }
    c.sets = std::move(sets);
    return times.size();
}

// Ticks: a step every step_interval_ns, waits taken in once they have ended.
size_t replayTicks(ChannelTimeline& c, sched::BubblePipeline& pipeline, uint64_t generation) {
    std::vector<channel::IdleInterval>& by_end = c.observed;
    std::stable_sort(by_end.begin(), by_end.end(),
                     [](const auto& a, const auto& b) { return a.end_ns < b.end_ns; });
    std::vector<RecordedSet> sets;
    const Nanos tick = pipeline.config().step_interval_ns;
    const Nanos from = by_end.front().end_ns;
    const Nanos to = by_end.back().end_ns;
    size_t next = 0;
    size_t steps = 0;
    for (Nanos now = from; now <= to + tick; now += tick, ++steps) {
        for (; next < by_end.size() && by_end[next].end_ns <= now; ++next) {
            by_end[next].iteration = pipeline.take(waitOf(by_end[next]), now).iteration;
        }
        // The plugin's recorder knows the wait open now, and its transfer once the first
        // data arrived: here the next one if it began by now (waits never overlap).
        sched::TransferWait open;
        if (next < by_end.size() && by_end[next].start_ns <= now) {
            open.start_ns = by_end[next].start_ns;
            if (by_end[next].transfer_start_ns != 0 && by_end[next].transfer_start_ns <= now) {
                open.transfer_start_ns = by_end[next].transfer_start_ns;
                open.transfer_bytes = by_end[next].transfer_bytes;
            }
        }
        record(pipeline.decide(now, open), now, generation, &sets);
    }
    c.sets = std::move(sets);
    return steps;
}

}  // namespace

Status recordedStepsComplete(const ChannelTimeline& c) {
    auto missing = [&](const std::string& what) {
        return Status(Code::kUnavailable,
                      c.name + ": the recording lacks the plugin's steps: " + what);
    };
    if (c.lost_observed + c.lost_windows + c.incomplete_sets + c.invalid_records > 0) {
        return missing("records were lost, cut or invalid while recording");
    }
    if (c.writers.size() > 1) {
        return missing("the writer restarted during the recording");
    }
    Nanos last = 0;
    for (const channel::IdleInterval& iv : c.observed) {
        if (iv.taken_step_ns == 0) {
            return missing("the wait at " + at(iv.start_ns) +
                           " does not say when it was taken in (a writer without step "
                           "reports?)");
        }
        if (iv.taken_step_ns < last) {
            return missing("the wait at " + at(iv.start_ns) +
                           " was taken in before the one "
                           "recorded ahead of it");
        }
        last = iv.taken_step_ns;
    }
    return Status::ok();
}

Result<ReplayOutcome> replayChannel(ChannelTimeline& c, const ReplayOptions& options) {
    ReplayOutcome out;
    const Status complete = recordedStepsComplete(c);
    if (options.steps == ReplaySteps::kRecorded && !complete.isOk()) {
        return complete;
    }
    out.recorded_steps = options.steps != ReplaySteps::kTicks && complete.isOk();
    const uint64_t generation = c.writers.empty() ? 1 : c.writers.front().generation;
    if (c.observed.empty()) {
        c.sets.clear();
        return out;
    }
    sched::BubblePipeline pipeline(options.pipeline);
    out.steps = out.recorded_steps ? replayRecordedSteps(c, pipeline, generation)
                                   : replayTicks(c, pipeline, generation);
    return out;
}

Status sameSets(const ChannelTimeline& recorded, const ChannelTimeline& replayed) {
    auto differ = [&](size_t k, const std::string& what) {
        return Status(Code::kInternal,
                      recorded.name + ": prediction set " + std::to_string(k + 1) + " " + what);
    };
    const size_t n = std::min(recorded.sets.size(), replayed.sets.size());
    for (size_t k = 0; k < n; ++k) {
        const RecordedSet& a = recorded.sets[k];
        const RecordedSet& b = replayed.sets[k];
        if (a.published_ns != b.published_ns) {
            return differ(
                k, "published at " + at(a.published_ns) + ", replayed at " + at(b.published_ns));
        }
        if (a.windows.size() != b.windows.size()) {
            return differ(k, "(" + at(a.published_ns) + ") has " +
                                 std::to_string(a.windows.size()) + " windows, replayed " +
                                 std::to_string(b.windows.size()));
        }
        for (size_t i = 0; i < a.windows.size(); ++i) {
            const channel::PredictedWindow& x = a.windows[i];
            const channel::PredictedWindow& y = b.windows[i];
            if (x.start_ns != y.start_ns || x.end_ns != y.end_ns ||
                x.confidence_ppm != y.confidence_ppm || x.iteration != y.iteration ||
                x.source != y.source) {
                return differ(k, "(" + at(a.published_ns) + ") window " + std::to_string(i) +
                                     ": [" + at(x.start_ns) + ", " + at(x.end_ns) + ") " +
                                     std::to_string(x.confidence_ppm) + " ppm, replayed [" +
                                     at(y.start_ns) + ", " + at(y.end_ns) + ") " +
                                     std::to_string(y.confidence_ppm) + " ppm");
            }
        }
    }
    if (recorded.sets.size() != replayed.sets.size()) {
        return differ(n, std::string("exists only in the ") +
                             (recorded.sets.size() > n ? "recording" : "replay") + " (" +
                             std::to_string(recorded.sets.size()) + " recorded, " +
                             std::to_string(replayed.sets.size()) + " replayed)");
    }
    return Status::ok();
}

}  // namespace atlas::bubbletea::tools
