#include "perf/atlas-sim/bubbletea.h"

#include <algorithm>
#include <cmath>

namespace atlas::sim {

namespace {

// How far down the FIFO a group looks for a request whose first chunk fits its window.
constexpr size_t kLookAhead = 64;
constexpr double kTwoPi = 6.283185307179586;

}  // namespace

double hashUniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    Rng r(seed ^ (a * 0x9e3779b97f4a7c15ULL) ^ (b * 0xc2b2ae3d27d4eb4fULL) ^
          (c * 0x165667b19e3779f9ULL));
    r.next();
    return r.uniform();
}

BubbleTea::BubbleTea(const SimConfig& config, int groups, EventQueue* queue, PrefillHost* host,
                     const std::vector<std::vector<sched::Interval>>* oracle)
    : spec_(config.bubbletea),
      cost_(PrefillCost::fromSpec(config.bubbletea, config.gpu, config.par.tp)),
      queue_(queue),
      host_(host),
      oracle_(oracle),
      g_(static_cast<size_t>(groups)),
      min_confidence_ppm_(channel::toPpm(config.bubbletea.min_confidence)),
      rng_(config.seed * 0x2545f4914f6cdd1dULL + 0xb7e15162) {
    if (spec_.windows == WindowSource::kPredicted) {
        pipelines_.reserve(static_cast<size_t>(groups));
        for (int i = 0; i < groups; ++i) {
            pipelines_.emplace_back(spec_.pipeline);
        }
    }
}

void BubbleTea::start(Nanos now_ns) {
    running_ = true;
    if (spec_.arrival_rate_per_s > 0.0) {
        onArrival(now_ns);  // schedules the first arrival; draws no request at start
    }
}

int32_t BubbleTea::drawTokens() {
    const PromptSpec& p = spec_.prompt;
    switch (p.dist) {
        case PromptDist::kFixed:
            return p.fixed;
        case PromptDist::kUniform:
            return p.min + static_cast<int32_t>(rng_.uniform() * (p.max - p.min + 1));
        case PromptDist::kLognormal: {
            // Box-Muller from two uniforms (the second keeps the stream length fixed).
            const double u1 = 1.0 - rng_.uniform();
            const double u2 = rng_.uniform();
            const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
            const double x = p.median * std::exp(p.sigma * z);
            return static_cast<int32_t>(std::clamp(std::llround(x), static_cast<long long>(p.min),
                                                   static_cast<long long>(p.max)));
        }
    }
    return p.fixed;
}

// Schedules the next arrival (exponential gap).
void BubbleTea::onArrival(Nanos now_ns) {
    if (!running_) {
        return;
    }
    const double gap_s = -std::log(1.0 - rng_.uniform()) / spec_.arrival_rate_per_s;
    queue_->push(now_ns + static_cast<Nanos>(std::ceil(gap_s * 1e9)), kArrivalEvent);
}

int64_t BubbleTea::minChunk(const Request& r) const {
    return std::min<int64_t>(spec_.min_chunk_tokens, r.tokens - r.done);
}

BubbleTea::Window BubbleTea::window(int group, Nanos now_ns) {
    Window w;
    GroupState& g = g_[static_cast<size_t>(group)];
    if (spec_.windows == WindowSource::kOracle) {
        const std::vector<sched::Interval>& iv = (*oracle_)[static_cast<size_t>(group)];
        auto adjusted = [&](const sched::Interval& x) {
            const Nanos stretch =
                static_cast<Nanos>(spec_.prediction_error * static_cast<double>(x.length()));
            return sched::Interval{x.start_ns + spec_.guard_ns,
                                   x.end_ns - spec_.guard_ns + stretch};
        };
        while (g.oracle_cursor < iv.size() && adjusted(iv[g.oracle_cursor]).end_ns <= now_ns) {
            ++g.oracle_cursor;
        }
        for (size_t i = g.oracle_cursor; i < iv.size(); ++i) {
            const sched::Interval a = adjusted(iv[i]);
            if (a.end_ns <= a.start_ns || a.end_ns <= now_ns) {
                continue;
            }
            if (a.start_ns <= now_ns) {
                w.open = true;
                w.end_ns = a.end_ns;
            } else {
                w.next_start_ns = a.start_ns;
            }
            break;
        }
        return w;
    }
    // The set the pipeline has in force now, the group's wait open since it became idle.
    const Nanos open_start = host_->prefillAllowed(group) ? host_->waitStart(group) : 0;
    const sched::PipelineDecision& d =
        pipelines_[static_cast<size_t>(group)].decide(now_ns, {open_start, 0, 0, 0});
    if (d.status != sched::PredictionStatus::kOk) {
        ++stats_.predictor_none;
        return w;
    }
    ++stats_.predictor_ok;
    for (const sched::PublishedWindow& p : d.windows) {
        if (p.confidence_ppm < min_confidence_ppm_) {
            continue;
        }
        if (p.open && p.start_ns <= now_ns && now_ns < p.end_ns) {
            // Overlapping windows: trust the earliest end (the conservative one).
            w.end_ns = w.open ? std::min(w.end_ns, p.end_ns) : p.end_ns;
            w.open = true;
        } else if (p.start_ns > now_ns && w.next_start_ns == kNone) {
            w.next_start_ns = p.start_ns;
        }
    }
    return w;
}

void BubbleTea::scheduleWindow(int group, Nanos at_ns) {
    GroupState& g = g_[static_cast<size_t>(group)];
    if (at_ns == kNone || g.window_event_at == at_ns) {
        return;
    }
    g.window_event_at = at_ns;
    queue_->push(at_ns, kWindowEvent, static_cast<uint32_t>(group), static_cast<uint64_t>(at_ns));
}

void BubbleTea::onIdle(int group, Nanos now_ns) {
    if (running_) {
        dispatch(group, now_ns);
    }
}

void BubbleTea::observeIdle(int group, const sched::Interval& idle) {
    if (!pipelines_.empty() && idle.length() > 0) {
        // Taken in the moment it ends (the plugin: within a publish tick). Backwards input
        // is the predictor's to ignore; the run goes on.
        (void)pipelines_[static_cast<size_t>(group)].take({idle.start_ns, idle.end_ns, 0, 0},
                                                          idle.end_ns);
    }
}

void BubbleTea::runChunk(int group, int32_t request, int64_t tokens, Nanos now_ns) {
    GroupState& g = g_[static_cast<size_t>(group)];
    Request& r = requests_[static_cast<size_t>(request)];
    const Nanos dur = cost_.chunkNs(r.done, tokens);
    r.group = group;
    g.active = request;
    g.chunk_end = now_ns + dur;
    g.chunk_tokens = static_cast<int32_t>(tokens);
    ++stats_.chunks;
    host_->recordPrefill(group, now_ns, now_ns + dur, request);
    queue_->push(now_ns + dur, kChunkDoneEvent, static_cast<uint32_t>(group));
}

void BubbleTea::dispatch(int group, Nanos now_ns) {
    GroupState& g = g_[static_cast<size_t>(group)];
    if (g.chunk_end != kNone || !host_->prefillAllowed(group)) {
        return;
    }
    if (g.active < 0 && queue_reqs_.empty() && !running_) {
        return;
    }
    const Window w = window(group, now_ns);
    if (!w.open) {
        scheduleWindow(group, w.next_start_ns);
        return;
    }
    const Nanos budget = w.end_ns - now_ns;
    if (g.active >= 0) {
        const Request& r = requests_[static_cast<size_t>(g.active)];
        const int64_t c = cost_.maxTokensWithin(
            r.done, budget, std::min<int64_t>(spec_.chunk_tokens, r.tokens - r.done));
        if (c > 0 && c >= minChunk(r)) {
            runChunk(group, g.active, c, now_ns);
        } else {
            scheduleWindow(group, w.end_ns);  // look again when this window is over
        }
        return;
    }
    for (size_t i = 0; i < queue_reqs_.size() && i < kLookAhead;) {
        const int32_t id = queue_reqs_[i];
        const Request& r = requests_[static_cast<size_t>(id)];
        if (spec_.max_wait_ns > 0 && now_ns - r.arrival_ns > spec_.max_wait_ns) {
            ++stats_.dropped;
            queue_reqs_.erase(queue_reqs_.begin() + static_cast<ptrdiff_t>(i));
            continue;
        }
        const int64_t c =
            cost_.maxTokensWithin(0, budget, std::min<int64_t>(spec_.chunk_tokens, r.tokens));
        if (c > 0 && c >= minChunk(r)) {
            queue_reqs_.erase(queue_reqs_.begin() + static_cast<ptrdiff_t>(i));
            runChunk(group, id, c, now_ns);
            return;
        }
        ++i;
    }
    // Nothing fits now: offer the group to the next arrival until its window ends.
    g.window_end = w.end_ns;
    if (!g.in_ready) {
        g.in_ready = true;
        ready_.push_back(group);
    }
    scheduleWindow(group, w.end_ns);
}

void BubbleTea::onChunkDone(int group, Nanos now_ns) {
    GroupState& g = g_[static_cast<size_t>(group)];
    Request& r = requests_[static_cast<size_t>(g.active)];
    r.done += g.chunk_tokens;
    stats_.tokens += static_cast<uint64_t>(g.chunk_tokens);
    g.chunk_end = kNone;
    g.chunk_tokens = 0;
    if (r.done >= r.tokens) {
        ++stats_.completed;
        stats_.ttft_ns.push_back(now_ns - r.arrival_ns + spec_.kv_handoff_ns);
        g.active = -1;
    }
    host_->prefillFinished(group, now_ns);
}

void BubbleTea::handle(const Event& e) {
    switch (e.type) {
        case kArrivalEvent: {
            if (!running_) {
                return;
            }
            Request r;
            r.arrival_ns = e.time_ns;
            r.tokens = drawTokens();
            requests_.push_back(r);
            ++stats_.arrived;
            queue_reqs_.push_back(static_cast<int32_t>(requests_.size() - 1));
            onArrival(e.time_ns);
            // Offer it to the idle group with the most window left.
            while (!queue_reqs_.empty() && !ready_.empty()) {
                std::erase_if(ready_, [&](int grp) {
                    GroupState& gs = g_[static_cast<size_t>(grp)];
                    const bool stale = gs.window_end <= e.time_ns || gs.chunk_end != kNone ||
                                       !host_->prefillAllowed(grp);
                    gs.in_ready = gs.in_ready && !stale;
                    return stale;
                });
                if (ready_.empty()) {
                    break;
                }
                size_t best = 0;
                for (size_t i = 1; i < ready_.size(); ++i) {
                    if (g_[static_cast<size_t>(ready_[i])].window_end >
                        g_[static_cast<size_t>(ready_[best])].window_end) {
                        best = i;
                    }
                }
                const int grp = ready_[best];
                g_[static_cast<size_t>(grp)].in_ready = false;
                ready_[best] = ready_.back();
                ready_.pop_back();
                const size_t before = queue_reqs_.size();
                dispatch(grp, e.time_ns);
                if (queue_reqs_.size() == before) {
                    break;  // the best window is too short for anything queued
                }
            }
            return;
        }
        case kChunkDoneEvent:
            onChunkDone(static_cast<int>(e.a), e.time_ns);
            return;
        case kWindowEvent: {
            GroupState& g = g_[e.a];
            if (g.window_event_at == static_cast<Nanos>(e.b)) {
                g.window_event_at = kNone;
            }
            dispatch(static_cast<int>(e.a), e.time_ns);
            return;
        }
        default:
            return;
    }
}

PrefillStats BubbleTea::finish() {
    PrefillStats s = stats_;
    s.unfinished = s.arrived - s.completed - s.dropped;
    return s;
}

}  // namespace atlas::sim
