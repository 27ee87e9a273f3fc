#include "scheduler/bubble_predictor.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "scheduler/period_detail.h"
#include "scheduler/quantile.h"

namespace atlas::sched {

namespace {

using period_detail::floorDiv;
using period_detail::floorMod;

// "No iteration seen yet"; far from overflow when track_history is added or subtracted.
constexpr int64_t kNoCycle = INT64_MIN / 2;
constexpr uint64_t kNoEpoch = ~0ull;

}  // namespace

PeriodDetectorConfig defaultBubbleDetectorConfig() {
    PeriodDetectorConfig c;
    c.tolerance = 0.05;
    return c;
}

Status validate(const BubblePredictorConfig& c) {
    ATLAS_RETURN_IF_ERROR(validate(c.detector));
    auto bad = [](const std::string& what) {
        return Status(Code::kInvalidArgument, "BubblePredictorConfig: " + what);
    };
    if (c.guard_ns < 0 || c.min_idle_ns < 0 || c.min_window_ns < 1) {
        return bad("need guard_ns >= 0, min_idle_ns >= 0, min_window_ns >= 1");
    }
    if (c.horizon_iterations < 1 || c.max_tracks < 1 || c.max_tracks > 256) {
        return bad("need horizon_iterations >= 1 and 1 <= max_tracks <= 256");
    }
    if (c.track_history < 1 || c.track_history > kMaxTrackHistory || c.min_track_samples < 1 ||
        c.min_track_samples > c.track_history) {
        return bad("need 1 <= min_track_samples <= track_history <= kMaxTrackHistory (64)");
    }
    if (!(c.min_track_rate >= 0.0 && c.min_track_rate <= 1.0) ||
        !(c.duration_quantile >= 0.0 && c.duration_quantile <= 1.0)) {
        return bad("min_track_rate and duration_quantile must be in [0, 1]");
    }
    if (!(c.track_tolerance > 0.0 && c.track_tolerance <= 0.25) || c.track_tolerance_max_ns < 1) {
        return bad("need 0 < track_tolerance <= 0.25 and track_tolerance_max_ns >= 1");
    }
    if (!(c.stale_cycles > 1.0) || c.recent_intervals < 8) {
        return bad("need stale_cycles > 1 and recent_intervals >= 8");
    }
    return Status::ok();
}

const char* predictionStatusName(PredictionStatus status) {
    switch (status) {
        case PredictionStatus::kOk:
            return "ok";
        case PredictionStatus::kSearching:
            return "searching for the period";
        case PredictionStatus::kLost:
            return "period lost";
        case PredictionStatus::kStale:
            return "no recent idle interval";
        case PredictionStatus::kWarmingUp:
            return "learning bubble tracks";
    }
    return "unknown";
}

BubblePredictor::BubblePredictor(const BubblePredictorConfig& config)
    : config_(config), detector_(config.detector) {
    tracks_.reserve(static_cast<size_t>(config_.max_tracks));
    recent_.reserve(config_.recent_intervals);
    observations_.reserve(obsCapacity());
    scratch_.reserve(static_cast<size_t>(config_.track_history));
}

Status BubblePredictor::observe(const Interval& idle) {
    if (idle.end_ns < idle.start_ns) {
        return Status(Code::kInvalidArgument, "BubblePredictor: interval ends before it starts");
    }
    if (have_observation_ && idle.start_ns < last_start_ns_) {
        return Status(Code::kInvalidArgument, "BubblePredictor: interval starts went backwards");
    }
    if (idle.length() < config_.min_idle_ns) {
        return Status::ok();
    }
    ++version_;
    have_observation_ = true;
    last_start_ns_ = idle.start_ns;
    last_end_ns_ = std::max(last_end_ns_, idle.end_ns);
    if (recent_.size() < config_.recent_intervals) {
        recent_.push_back(idle);
    } else {
        recent_[recent_next_] = idle;
    }
    recent_next_ = (recent_next_ + 1) % config_.recent_intervals;

    if (idle.length() >= detector_min_wait_ns_) {
        ATLAS_RETURN_IF_ERROR(detector_.addEvent(idle.start_ns));
    }
    PeriodEstimate est = detector_.estimate(idle.start_ns);
    if (est.locked() && idle.length() > est.period_ns) {
        // A wait longer than the period is impossible when every iteration also computes:
        // the lock is on a sub-period (the spacing of a burst of small waits, which repeats
        // more often than the iteration). Search again above this length, on the recent
        // intervals, and only on the waits longer than that sub-period: inside the burst
        // every multiple of its spacing repeats too (1F1B at 4,096 GPUs: 33 waits 129 ms
        // apart in a 7.6 s iteration locked on 1.29 s), while the few long waits (the fill
        // and drain bubbles) come once per iteration. Both floors stay while the detector
        // lives.
        relearnAbove(idle.length() + idle.length() / 8, est.period_ns);
        est = detector_.estimate(idle.start_ns);
    }
    if (!est.locked()) {
        tracks_.clear();
        observations_.clear();
        tracks_epoch_ = 0;
        chain_valid_ = false;
        unmatched_count_ = 0;
        return Status::ok();
    }
    if (est.epoch != tracks_epoch_) {
        rebuild(est);
    } else {
        assign(idle, est);
    }
    return Status::ok();
}

void BubblePredictor::relearnAbove(Nanos min_period_ns, Nanos min_wait_ns) {
    PeriodDetectorConfig dc = detector_.config();
    dc.min_period_ns = std::min(std::max(dc.min_period_ns, min_period_ns), dc.max_period_ns);
    detector_ = PeriodDetector(dc);
    detector_min_wait_ns_ = std::max(detector_min_wait_ns_, min_wait_ns);
    const size_t n = recent_.size();
    const size_t first = n < config_.recent_intervals ? 0 : recent_next_;
    for (size_t k = 0; k < n; ++k) {
        const Interval& iv = recent_[(first + k) % n];  // in time order
        if (iv.length() >= detector_min_wait_ns_) {
            (void)detector_.addEvent(iv.start_ns);
        }
    }
    tracks_.clear();
    observations_.clear();
    chain_valid_ = false;
    unmatched_count_ = 0;
    tracks_epoch_ = kNoEpoch;  // the new detector's epochs restart: rebuild on its lock
}

void BubblePredictor::rebuild(const PeriodEstimate& est) {
    tracks_.clear();
    observations_.clear();
    obs_next_ = 0;
    latest_cycle_ = kNoCycle;
    chain_valid_ = false;
    unmatched_count_ = 0;
    tracks_epoch_ = est.epoch;
    // Replay the recent intervals of the current regime in time order (the ring's oldest
    // entry is at recent_next_ once it is full).
    const Nanos from = detector_.historyStartNs();
    const size_t n = recent_.size();
    const size_t first = n < config_.recent_intervals ? 0 : recent_next_;
    for (size_t k = 0; k < n; ++k) {
        const Interval& iv = recent_[(first + k) % n];
        if (iv.start_ns >= from) {
            assign(iv, est);
        }
    }
}

double BubblePredictor::hitRate(const Track& track) const {
    // Over the recent iterations this track could have appeared in.
    const int64_t window =
        std::min<int64_t>(config_.track_history, latest_cycle_ - track.first_cycle + 1);
    size_t hits = 0;
    for (size_t i = 0; i < track.count; ++i) {
        hits += track.samples[i].cycle > latest_cycle_ - config_.track_history ? 1 : 0;
    }
    return static_cast<double>(hits) / static_cast<double>(std::max<int64_t>(window, 1));
}

void BubblePredictor::refresh(Track& track) {
    scratch_.clear();
    for (size_t i = 0; i < track.count; ++i) {
        scratch_.push_back(track.samples[i].offset);
    }
    auto mid = scratch_.begin() + static_cast<ptrdiff_t>(scratch_.size() / 2);
    std::nth_element(scratch_.begin(), mid, scratch_.end());
    track.offset = *mid;

    scratch_.clear();
    for (size_t i = 0; i < track.count; ++i) {
        scratch_.push_back(track.samples[i].duration);
    }
    track.max_duration = *std::max_element(scratch_.begin(), scratch_.end());
    track.duration = lowerQuantile(std::span(scratch_), config_.duration_quantile);
}

Nanos BubblePredictor::durationGiven(const Track& track, Nanos elapsed_ns) const {
    // The duration_quantile of the track's samples that outlasted elapsed_ns: the same
    // precision-first choice as refresh(), conditioned on what is known now. None did: the
    // track's own duration (a window that has ended).
    std::array<Nanos, kMaxTrackHistory> longer{};
    size_t n = 0;
    for (size_t i = 0; i < track.count && n < longer.size(); ++i) {
        if (track.samples[i].duration > elapsed_ns) {
            longer[n++] = track.samples[i].duration;
        }
    }
    if (n == 0) {
        return track.duration;
    }
    return std::max(track.duration,
                    lowerQuantile(std::span(longer.data(), n), config_.duration_quantile));
}

void BubblePredictor::assign(const Interval& idle, const PeriodEstimate& est) {
    const Nanos period = est.period_ns;
    Match m = match(idle.start_ns, idle.length(), est);
    if (m.track == tracks_.size()) {
        // Nothing near: the pattern may have shifted as a whole (a slow iteration moved every
        // bubble after it). Find the shift under which this and the other recent unmatched
        // intervals fall on known tracks, with their lengths.
        m = resync(idle, est);
        if (m.track == tracks_.size()) {
            unmatched_[unmatched_next_] = idle;
            unmatched_next_ = (unmatched_next_ + 1) % unmatched_.size();
            unmatched_count_ = std::min(unmatched_count_ + 1, unmatched_.size());
            m.phase = floorMod(idle.start_ns - est.anchor_ns, period);
        }
    }
    Nanos phase = m.phase;
    size_t best = m.track;
    const bool created = best == tracks_.size();
    if (created) {
        if (tracks_.size() >= static_cast<size_t>(config_.max_tracks)) {
            // Full: the new kind replaces the track with the lowest hit rate (among equals,
            // the one with fewer samples, then the oldest). Refusing it instead would let
            // sporadic waits, or those of a warm-up, keep a bubble that recurs every
            // iteration out for good.
            auto weakest = std::min_element(
                tracks_.begin(), tracks_.end(), [&](const Track& a, const Track& b) {
                    const double ra = hitRate(a);
                    const double rb = hitRate(b);
                    if (ra != rb) {
                        return ra < rb;
                    }
                    return a.count != b.count ? a.count < b.count : a.last_cycle < b.last_cycle;
                });
            tracks_.erase(weakest);
        }
        Track s;
        s.id = next_track_id_++;
        s.samples.resize(static_cast<size_t>(config_.track_history));
        s.offset = phase;
        tracks_.push_back(std::move(s));
        best = tracks_.size() - 1;
    }
    Track& track = tracks_[best];
    // A new track's iteration comes from matching again, now that the track exists.
    const int64_t cycle = created ? match(idle.start_ns, idle.length(), est).cycle : m.cycle;
    // Unwrap the phase next to the track offset (a bubble near the iteration boundary can fold
    // to either end of [0, P)).
    Nanos offset = phase;
    if (offset - track.offset > period / 2) {
        offset -= period;
    } else if (track.offset - offset > period / 2) {
        offset += period;
    }
    const bool chained = chain_valid_ && idle.start_ns - chain_start_ns_ < period;
    const Sample sample{offset, idle.length(), cycle, chained ? chain_track_id_ : 0,
                        chained ? idle.start_ns - chain_end_ns_ : 0};

    const size_t cap = track.samples.size();
    const size_t last = (track.next + cap - 1) % cap;
    if (track.count > 0 && track.samples[last].cycle == cycle) {
        // Two intervals of one iteration in one track (a bubble split by a short burst of
        // work): keep the longer, the other is a fragment.
        if (sample.duration > track.samples[last].duration) {
            track.samples[last] = sample;
        }
    } else {
        if (track.count == 0) {
            track.first_cycle = cycle;
        }
        track.samples[track.next] = sample;
        track.next = (track.next + 1) % cap;
        track.count = std::min(track.count + 1, cap);
    }
    track.last_cycle = std::max(track.last_cycle, cycle);
    refresh(track);
    latest_cycle_ = std::max(latest_cycle_, cycle);
    chain_valid_ = true;
    chain_start_ns_ = idle.start_ns;
    chain_end_ns_ = idle.end_ns;
    chain_offset_ = track.offset;
    chain_track_id_ = track.id;

    const Observation obs{idle.start_ns, track.offset, cycle};
    if (observations_.size() < obsCapacity()) {
        observations_.push_back(obs);
    } else {
        observations_[obs_next_] = obs;
    }
    obs_next_ = (obs_next_ + 1) % obsCapacity();

    // Forget tracks not seen for track_history iterations (a schedule change removed them).
    std::erase_if(tracks_, [&](const Track& s) {
        return s.last_cycle + config_.track_history < latest_cycle_;
    });
}

PredictionStatus BubblePredictor::predict(Nanos now_ns, std::vector<PredictedWindow>* out,
                                          Nanos* open_track_end_ns) const {
    out->clear();
    if (open_track_end_ns != nullptr) {
        *open_track_end_ns = 0;
    }
    const PeriodEstimate est = detector_.estimate(now_ns);
    if (!est.locked()) {
        return est.state == LockState::kSearching ? PredictionStatus::kSearching
                                                  : PredictionStatus::kLost;
    }
    const Nanos period = est.period_ns;
    if (static_cast<double>(now_ns - last_end_ns_) >
        config_.stale_cycles * static_cast<double>(period)) {
        return PredictionStatus::kStale;
    }
    if (tracks_epoch_ != est.epoch || observations_.empty()) {
        return PredictionStatus::kWarmingUp;
    }

    if (cache_.version != version_) {
        // Alignment: the iteration start implied by each observation of the last period,
        // carried to the newest observation's iteration and averaged.
        const Observation* newest = &observations_[0];
        for (const Observation& o : observations_) {
            if (o.start_ns > newest->start_ns) {
                newest = &o;
            }
        }
        const int64_t ref_cycle = newest->cycle;
        double base_sum = 0.0;
        int base_n = 0;
        for (const Observation& o : observations_) {
            if (o.start_ns + period <= newest->start_ns) {
                continue;
            }
            base_sum += static_cast<double>(o.start_ns - o.track_offset +
                                            (ref_cycle - o.cycle) * period - newest->start_ns);
            ++base_n;
        }
        cache_.base =
            newest->start_ns + static_cast<Nanos>(std::llround(base_sum / std::max(base_n, 1)));
        cache_.ref_cycle = ref_cycle;
        cache_.hit_rates.clear();
        for (const Track& s : tracks_) {
            cache_.hit_rates.push_back(hitRate(s));
        }
        cache_.version = version_;
    }
    const Nanos base = cache_.base;
    const int64_t ref_cycle = cache_.ref_cycle;

    const int64_t now_cycle = ref_cycle + floorDiv(now_ns - base, period);
    Match open;
    open.track = tracks_.size();
    if (config_.confirm_open && open_start_ns_ > 0) {
        // What has elapsed bounds the length from below: a wait that has outlasted its track's
        // bubbles by far is another track's (a long bubble next to short ones).
        const Nanos elapsed = std::max<Nanos>(now_ns - open_start_ns_, 0);
        if (cache_.open_version != version_ || cache_.open_start_ns != open_start_ns_ ||
            elapsed < cache_.elapsed_from || elapsed >= cache_.elapsed_below) {
            cache_.open = match(open_start_ns_, -elapsed - 1, est, true);
            cache_.open_version = version_;
            cache_.open_start_ns = open_start_ns_;
            cache_.elapsed_from = elapsed;
            cache_.elapsed_below = kNever;
            for (const Track& s : tracks_) {
                for (size_t k = 0; k < s.count; ++k) {
                    if (s.samples[k].duration > elapsed) {
                        cache_.elapsed_below =
                            std::min(cache_.elapsed_below, s.samples[k].duration);
                    }
                }
            }
        }
        open = cache_.open;
    }
    if (open_track_end_ns != nullptr && open.track < tracks_.size() &&
        tracks_[open.track].count >= static_cast<size_t>(config_.min_track_samples)) {
        // A track too young to be predicted explains nothing yet.
        *open_track_end_ns =
            open_start_ns_ +
            durationGiven(tracks_[open.track], std::max<Nanos>(now_ns - open_start_ns_, 0));
    }
    bool any_ready = false;
    for (size_t i = 0; i < tracks_.size(); ++i) {
        const Track& s = tracks_[i];
        const double rate = cache_.hit_rates[i];
        if (s.count < static_cast<size_t>(config_.min_track_samples)) {
            continue;
        }
        // A track seen too rarely is not predicted ahead; but an interval open now in it is
        // evidence enough for the window of that one iteration.
        const bool frequent = rate >= config_.min_track_rate;
        if (!frequent && i != open.track) {
            continue;
        }
        any_ready = true;
        const double confidence = std::clamp(est.confidence * std::min(rate, 1.0), 0.0, 1.0);
        for (int64_t c = now_cycle - 1; c < now_cycle + config_.horizon_iterations; ++c) {
            Nanos start = base + (c - ref_cycle) * period + s.offset;
            if (!frequent && c != open.cycle) {
                continue;
            }
            bool is_open = false;
            Nanos duration = s.duration;
            if (config_.confirm_open) {
                if (i == open.track && c == open.cycle) {
                    start = open_start_ns_;
                    is_open = true;
                    duration = durationGiven(s, now_ns - open_start_ns_);
                } else if (start + config_.guard_ns <= now_ns) {
                    continue;  // due, but its bubble has not begun: withdrawn until it does
                }
            }
            const Nanos w_start = start + config_.guard_ns;
            const Nanos w_end = start + duration - config_.guard_ns;
            if (w_end - w_start < config_.min_window_ns || w_end <= now_ns) {
                continue;
            }
            out->push_back({w_start, w_end, confidence, c, is_open});
        }
    }
    if (!any_ready) {
        return PredictionStatus::kWarmingUp;
    }
    std::sort(out->begin(), out->end(), [](const PredictedWindow& a, const PredictedWindow& b) {
        return a.start_ns < b.start_ns;
    });
    return PredictionStatus::kOk;
}

}  // namespace atlas::sched
