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

// "No iteration seen yet"; far from overflow when slot_history is added or subtracted.
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
    if (c.horizon_iterations < 1 || c.max_slots < 1 || c.max_slots > 256) {
        return bad("need horizon_iterations >= 1 and 1 <= max_slots <= 256");
    }
    if (c.slot_history < 1 || c.slot_history > kMaxSlotHistory || c.min_slot_samples < 1 ||
        c.min_slot_samples > c.slot_history) {
        return bad("need 1 <= min_slot_samples <= slot_history <= kMaxSlotHistory (64)");
    }
    if (!(c.min_slot_rate >= 0.0 && c.min_slot_rate <= 1.0) ||
        !(c.duration_quantile >= 0.0 && c.duration_quantile <= 1.0)) {
        return bad("min_slot_rate and duration_quantile must be in [0, 1]");
    }
    if (!(c.slot_tolerance > 0.0 && c.slot_tolerance <= 0.25) || c.slot_tolerance_max_ns < 1) {
        return bad("need 0 < slot_tolerance <= 0.25 and slot_tolerance_max_ns >= 1");
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
            return "learning bubble slots";
    }
    return "unknown";
}

BubblePredictor::BubblePredictor(const BubblePredictorConfig& config)
    : config_(config), detector_(config.detector) {
    slots_.reserve(static_cast<size_t>(config_.max_slots));
    recent_.reserve(config_.recent_intervals);
    observations_.reserve(obsCapacity());
    scratch_.reserve(static_cast<size_t>(config_.slot_history));
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
        slots_.clear();
        observations_.clear();
        slots_epoch_ = 0;
        chain_valid_ = false;
        unmatched_count_ = 0;
        return Status::ok();
    }
    if (est.epoch != slots_epoch_) {
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
    slots_.clear();
    observations_.clear();
    chain_valid_ = false;
    unmatched_count_ = 0;
    slots_epoch_ = kNoEpoch;  // the new detector's epochs restart: rebuild on its lock
}

void BubblePredictor::rebuild(const PeriodEstimate& est) {
    slots_.clear();
    observations_.clear();
    obs_next_ = 0;
    latest_cycle_ = kNoCycle;
    chain_valid_ = false;
    unmatched_count_ = 0;
    slots_epoch_ = est.epoch;
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

double BubblePredictor::hitRate(const Slot& slot) const {
    // Over the recent iterations this slot could have appeared in.
    const int64_t window =
        std::min<int64_t>(config_.slot_history, latest_cycle_ - slot.first_cycle + 1);
    size_t hits = 0;
    for (size_t i = 0; i < slot.count; ++i) {
        hits += slot.samples[i].cycle > latest_cycle_ - config_.slot_history ? 1 : 0;
    }
    return static_cast<double>(hits) / static_cast<double>(std::max<int64_t>(window, 1));
}

void BubblePredictor::refresh(Slot& slot) {
    scratch_.clear();
    for (size_t i = 0; i < slot.count; ++i) {
        scratch_.push_back(slot.samples[i].offset);
    }
    auto mid = scratch_.begin() + static_cast<ptrdiff_t>(scratch_.size() / 2);
    std::nth_element(scratch_.begin(), mid, scratch_.end());
    slot.offset = *mid;

    scratch_.clear();
    for (size_t i = 0; i < slot.count; ++i) {
        scratch_.push_back(slot.samples[i].duration);
    }
    slot.max_duration = *std::max_element(scratch_.begin(), scratch_.end());
    slot.duration = lowerQuantile(std::span(scratch_), config_.duration_quantile);
}

Nanos BubblePredictor::durationGiven(const Slot& slot, Nanos elapsed_ns) const {
    // The duration_quantile of the slot's samples that outlasted elapsed_ns: the same
    // precision-first choice as refresh(), conditioned on what is known now. None did: the
    // slot's own duration (a window that has ended).
    std::array<Nanos, kMaxSlotHistory> longer{};
    size_t n = 0;
    for (size_t i = 0; i < slot.count && n < longer.size(); ++i) {
        if (slot.samples[i].duration > elapsed_ns) {
            longer[n++] = slot.samples[i].duration;
        }
    }
    if (n == 0) {
        return slot.duration;
    }
    return std::max(slot.duration,
                    lowerQuantile(std::span(longer.data(), n), config_.duration_quantile));
}

void BubblePredictor::assign(const Interval& idle, const PeriodEstimate& est) {
    const Nanos period = est.period_ns;
    Match m = match(idle.start_ns, idle.length(), est);
    if (m.slot == slots_.size()) {
        // Nothing near: the pattern may have shifted as a whole (a slow iteration moved every
        // bubble after it). Find the shift under which this and the other recent unmatched
        // intervals fall on known slots, with their lengths.
        m = resync(idle, est);
        if (m.slot == slots_.size()) {
            unmatched_[unmatched_next_] = idle;
            unmatched_next_ = (unmatched_next_ + 1) % unmatched_.size();
            unmatched_count_ = std::min(unmatched_count_ + 1, unmatched_.size());
            m.phase = floorMod(idle.start_ns - est.anchor_ns, period);
        }
    }
    Nanos phase = m.phase;
    size_t best = m.slot;
    const bool created = best == slots_.size();
    if (created) {
        if (slots_.size() >= static_cast<size_t>(config_.max_slots)) {
            // Full: the new kind replaces the slot with the lowest hit rate (among equals,
            // the one with fewer samples, then the oldest). Refusing it instead would let
            // sporadic waits, or those of a warm-up, keep a bubble that recurs every
            // iteration out for good.
            auto weakest =
                std::min_element(slots_.begin(), slots_.end(), [&](const Slot& a, const Slot& b) {
                    const double ra = hitRate(a);
                    const double rb = hitRate(b);
                    if (ra != rb) {
                        return ra < rb;
                    }
                    return a.count != b.count ? a.count < b.count : a.last_cycle < b.last_cycle;
                });
            slots_.erase(weakest);
        }
        Slot s;
        s.id = next_slot_id_++;
        s.samples.resize(static_cast<size_t>(config_.slot_history));
        s.offset = phase;
        slots_.push_back(std::move(s));
        best = slots_.size() - 1;
    }
    Slot& slot = slots_[best];
    // A new slot's iteration comes from matching again, now that the slot exists.
    const int64_t cycle = created ? match(idle.start_ns, idle.length(), est).cycle : m.cycle;
    // Unwrap the phase next to the slot offset (a bubble near the iteration boundary can fold
    // to either end of [0, P)).
    Nanos offset = phase;
    if (offset - slot.offset > period / 2) {
        offset -= period;
    } else if (slot.offset - offset > period / 2) {
        offset += period;
    }
    const bool chained = chain_valid_ && idle.start_ns - chain_start_ns_ < period;
    const Sample sample{offset, idle.length(), cycle, chained ? chain_slot_id_ : 0,
                        chained ? idle.start_ns - chain_end_ns_ : 0};

    const size_t cap = slot.samples.size();
    const size_t last = (slot.next + cap - 1) % cap;
    if (slot.count > 0 && slot.samples[last].cycle == cycle) {
        // Two intervals of one iteration in one slot (a bubble split by a short burst of
        // work): keep the longer, the other is a fragment.
        if (sample.duration > slot.samples[last].duration) {
            slot.samples[last] = sample;
        }
    } else {
        if (slot.count == 0) {
            slot.first_cycle = cycle;
        }
        slot.samples[slot.next] = sample;
        slot.next = (slot.next + 1) % cap;
        slot.count = std::min(slot.count + 1, cap);
    }
    slot.last_cycle = std::max(slot.last_cycle, cycle);
    refresh(slot);
    latest_cycle_ = std::max(latest_cycle_, cycle);
    chain_valid_ = true;
    chain_start_ns_ = idle.start_ns;
    chain_end_ns_ = idle.end_ns;
    chain_offset_ = slot.offset;
    chain_slot_id_ = slot.id;

    const Observation obs{idle.start_ns, slot.offset, cycle};
    if (observations_.size() < obsCapacity()) {
        observations_.push_back(obs);
    } else {
        observations_[obs_next_] = obs;
    }
    obs_next_ = (obs_next_ + 1) % obsCapacity();

    // Forget slots not seen for slot_history iterations (a schedule change removed them).
    std::erase_if(
        slots_, [&](const Slot& s) { return s.last_cycle + config_.slot_history < latest_cycle_; });
}

PredictionStatus BubblePredictor::predict(Nanos now_ns, std::vector<PredictedWindow>* out,
                                          Nanos* open_slot_end_ns) const {
    out->clear();
    if (open_slot_end_ns != nullptr) {
        *open_slot_end_ns = 0;
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
    if (slots_epoch_ != est.epoch || observations_.empty()) {
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
            base_sum += static_cast<double>(o.start_ns - o.slot_offset +
                                            (ref_cycle - o.cycle) * period - newest->start_ns);
            ++base_n;
        }
        cache_.base =
            newest->start_ns + static_cast<Nanos>(std::llround(base_sum / std::max(base_n, 1)));
        cache_.ref_cycle = ref_cycle;
        cache_.hit_rates.clear();
        for (const Slot& s : slots_) {
            cache_.hit_rates.push_back(hitRate(s));
        }
        cache_.version = version_;
    }
    const Nanos base = cache_.base;
    const int64_t ref_cycle = cache_.ref_cycle;

    const int64_t now_cycle = ref_cycle + floorDiv(now_ns - base, period);
    Match open;
    open.slot = slots_.size();
    if (config_.confirm_open && open_start_ns_ > 0) {
        // What has elapsed bounds the length from below: a wait that has outlasted its slot's
        // bubbles by far is another slot's (a long bubble next to short ones).
        const Nanos elapsed = std::max<Nanos>(now_ns - open_start_ns_, 0);
        if (cache_.open_version != version_ || cache_.open_start_ns != open_start_ns_ ||
            elapsed < cache_.elapsed_from || elapsed >= cache_.elapsed_below) {
            cache_.open = match(open_start_ns_, -elapsed - 1, est, true);
            cache_.open_version = version_;
            cache_.open_start_ns = open_start_ns_;
            cache_.elapsed_from = elapsed;
            cache_.elapsed_below = kNever;
            for (const Slot& s : slots_) {
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
    if (open_slot_end_ns != nullptr && open.slot < slots_.size() &&
        slots_[open.slot].count >= static_cast<size_t>(config_.min_slot_samples)) {
        // A slot too young to be predicted explains nothing yet.
        *open_slot_end_ns =
            open_start_ns_ +
            durationGiven(slots_[open.slot], std::max<Nanos>(now_ns - open_start_ns_, 0));
    }
    bool any_ready = false;
    for (size_t i = 0; i < slots_.size(); ++i) {
        const Slot& s = slots_[i];
        const double rate = cache_.hit_rates[i];
        if (s.count < static_cast<size_t>(config_.min_slot_samples)) {
            continue;
        }
        // A slot seen too rarely is not predicted ahead; but an interval open now in it is
        // evidence enough for the window of that one iteration.
        const bool frequent = rate >= config_.min_slot_rate;
        if (!frequent && i != open.slot) {
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
                if (i == open.slot && c == open.cycle) {
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
