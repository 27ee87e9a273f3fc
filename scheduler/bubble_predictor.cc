#include "scheduler/bubble_predictor.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace atlas::sched {

namespace {

Nanos floorDiv(Nanos a, Nanos b) {
    Nanos q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) {
        --q;
    }
    return q;
}

Nanos floorMod(Nanos a, Nanos b) {
    return a - floorDiv(a, b) * b;
}

// "No iteration seen yet"; far from overflow when slot_history is added or subtracted.
constexpr int64_t kNoCycle = INT64_MIN / 2;

// Rounds a/b to the nearest integer (b > 0).
int64_t roundDiv(Nanos a, Nanos b) {
    return floorDiv(a + b / 2, b);
}

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
    if (c.slot_history < 1 || c.slot_history > 64 || c.min_slot_samples < 1 ||
        c.min_slot_samples > c.slot_history) {
        return bad("need 1 <= min_slot_samples <= slot_history <= 64");
    }
    if (!(c.min_slot_rate >= 0.0 && c.min_slot_rate <= 1.0) ||
        !(c.duration_quantile >= 0.0 && c.duration_quantile <= 1.0)) {
        return bad("min_slot_rate and duration_quantile must be in [0, 1]");
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
    have_observation_ = true;
    last_start_ns_ = idle.start_ns;
    last_end_ns_ = std::max(last_end_ns_, idle.end_ns);
    if (recent_.size() < config_.recent_intervals) {
        recent_.push_back(idle);
    } else {
        recent_[recent_next_] = idle;
    }
    recent_next_ = (recent_next_ + 1) % config_.recent_intervals;

    ATLAS_RETURN_IF_ERROR(detector_.addEvent(idle.start_ns));
    const PeriodEstimate est = detector_.estimate(idle.start_ns);
    if (!est.locked()) {
        slots_.clear();
        observations_.clear();
        slots_epoch_ = 0;
        return Status::ok();
    }
    if (est.epoch != slots_epoch_) {
        rebuild(est);
    } else {
        assign(idle, est);
    }
    return Status::ok();
}

void BubblePredictor::rebuild(const PeriodEstimate& est) {
    slots_.clear();
    observations_.clear();
    obs_next_ = 0;
    latest_cycle_ = kNoCycle;
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
    const auto q = static_cast<size_t>(
        std::floor(config_.duration_quantile * static_cast<double>(scratch_.size() - 1)));
    auto qit = scratch_.begin() + static_cast<ptrdiff_t>(q);
    std::nth_element(scratch_.begin(), qit, scratch_.end());
    slot.duration = *qit;
}

void BubblePredictor::assign(const Interval& idle, const PeriodEstimate& est) {
    const Nanos period = est.period_ns;
    const Nanos tol = static_cast<Nanos>(config_.detector.tolerance * static_cast<double>(period));
    const Nanos phase = floorMod(idle.start_ns - est.anchor_ns, period);

    // Nearest slot on the circle.
    size_t best = slots_.size();
    Nanos best_dist = tol + 1;
    for (size_t i = 0; i < slots_.size(); ++i) {
        const Nanos d = floorMod(phase - slots_[i].offset, period);
        const Nanos dist = std::min(d, period - d);
        if (dist < best_dist) {
            best_dist = dist;
            best = i;
        }
    }
    if (best == slots_.size()) {
        if (slots_.size() >= static_cast<size_t>(config_.max_slots)) {
            // Full: replace the slot seen longest ago, if it is no longer seen at all.
            auto oldest = std::min_element(
                slots_.begin(), slots_.end(),
                [](const Slot& a, const Slot& b) { return a.last_cycle < b.last_cycle; });
            if (oldest->last_cycle + config_.slot_history >= latest_cycle_) {
                return;  // every slot is live; an extra bubble kind is ignored
            }
            slots_.erase(oldest);
            best = slots_.size();
        }
        Slot s;
        s.samples.resize(static_cast<size_t>(config_.slot_history));
        s.offset = phase;
        slots_.push_back(std::move(s));
        best = slots_.size() - 1;
    }
    Slot& slot = slots_[best];
    // Unwrap the phase next to the slot offset (a bubble near the iteration boundary can fold
    // to either end of [0, P)).
    Nanos offset = phase;
    if (offset - slot.offset > period / 2) {
        offset -= period;
    } else if (slot.offset - offset > period / 2) {
        offset += period;
    }
    const int64_t cycle =
        est.anchor_cycle + roundDiv(idle.start_ns - est.anchor_ns - offset, period);
    const Sample sample{offset, idle.length(), cycle};

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

PredictionStatus BubblePredictor::predict(Nanos now_ns, std::vector<PredictedWindow>* out) const {
    out->clear();
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
    const Nanos base =
        newest->start_ns + static_cast<Nanos>(std::llround(base_sum / std::max(base_n, 1)));

    const int64_t now_cycle = ref_cycle + floorDiv(now_ns - base, period);
    bool any_ready = false;
    for (const Slot& s : slots_) {
        // Hit rate over the recent iterations this slot could have appeared in.
        const int64_t window =
            std::min<int64_t>(config_.slot_history, latest_cycle_ - s.first_cycle + 1);
        size_t hits = 0;
        for (size_t i = 0; i < s.count; ++i) {
            hits += s.samples[i].cycle > latest_cycle_ - config_.slot_history ? 1 : 0;
        }
        const double rate =
            static_cast<double>(hits) / static_cast<double>(std::max<int64_t>(window, 1));
        if (s.count < static_cast<size_t>(config_.min_slot_samples) ||
            rate < config_.min_slot_rate) {
            continue;
        }
        any_ready = true;
        const double confidence = std::clamp(est.confidence * std::min(rate, 1.0), 0.0, 1.0);
        for (int64_t c = now_cycle - 1; c < now_cycle + config_.horizon_iterations; ++c) {
            const Nanos start = base + (c - ref_cycle) * period + s.offset;
            const Nanos w_start = start + config_.guard_ns;
            const Nanos w_end = start + s.duration - config_.guard_ns;
            if (w_end - w_start < config_.min_window_ns || w_end <= now_ns) {
                continue;
            }
            out->push_back({w_start, w_end, confidence, c});
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
