#include "scheduler/bubble_pipeline.h"

#include <algorithm>

#include "scheduler/interval_accuracy.h"

namespace atlas::sched {

Status validate(const BubblePipelineConfig& c) {
    ATLAS_RETURN_IF_ERROR(validate(c.predictor));
    ATLAS_RETURN_IF_ERROR(validate(c.open_wait));
    if (c.step_interval_ns < 1 || c.accuracy_history < 1 || c.accuracy_windows < 1) {
        return {Code::kInvalidArgument,
                "BubblePipelineConfig: need step_interval_ns, accuracy_history and "
                "accuracy_windows >= 1"};
    }
    return Status::ok();
}

bool sameWindow(const PublishedWindow& a, const PublishedWindow& b) {
    return a.start_ns == b.start_ns && a.end_ns == b.end_ns &&
           a.confidence_ppm == b.confidence_ppm && a.open == b.open;
}

BubblePipeline::BubblePipeline(const BubblePipelineConfig& config)
    : config_(config),
      predictor_(config.predictor),
      open_wait_(config.open_wait),
      effective_(config.accuracy_windows) {}

TakenWait BubblePipeline::take(const TransferWait& finished, Nanos now_ns) {
    TakenWait t;
    t.wait = finished;
    for (Seen& s : seen_) {
        if (s.start_ns != 0 && s.start_ns == finished.start_ns) {
            t.trace = s.trace;
            s = {};
        }
    }
    t.trace.taken_ns = now_ns;
    // Numbered by the period known before it is learned, as its start is folded then.
    const PeriodEstimate est = predictor_.period(finished.start_ns);
    if (est.locked()) {
        t.iteration = static_cast<uint64_t>(std::max<int64_t>(0, est.cycleOf(finished.start_ns)));
    }
    const Interval idle{finished.start_ns, finished.end_ns};
    if (first_start_ns_ == 0) {
        first_start_ns_ = idle.start_ns;
    }
    idle_ns_ += idle.length();
    last_end_ns_ = std::max(last_end_ns_, idle.end_ns);
    observed_.push_back(idle);
    if (observed_.size() > config_.accuracy_history) {
        observed_.pop_front();
    }
    (void)predictor_.observe(idle);  // out-of-order starts are ignored by contract
    open_wait_.learn(finished);
    return t;
}

const PipelineDecision& BubblePipeline::decide(Nanos now_ns, const TransferWait& open_wait) {
    const TransferWait open{open_wait.start_ns, 0, open_wait.transfer_start_ns,
                            open_wait.transfer_bytes};
    if (open.start_ns != 0) {
        auto it = std::find_if(seen_.begin(), seen_.end(),
                               [&](const Seen& s) { return s.start_ns == open.start_ns; });
        if (it == seen_.end()) {
            it = seen_.begin() + static_cast<std::ptrdiff_t>(seen_next_);
            seen_next_ = (seen_next_ + 1) % kSeenCapacity;
            *it = {open.start_ns, {}};
        }
        if (it->trace.open_from_ns == 0) {
            it->trace.open_from_ns = now_ns;
        }
        it->trace.open_to_ns = now_ns;
        if (open.transfer_start_ns != 0 && it->trace.transfer_seen_ns == 0) {
            it->trace.transfer_seen_ns = now_ns;
        }
    }

    predictor_.noteOpen(open.start_ns);
    Nanos open_track_end = 0;
    const PredictionStatus status = predictor_.predict(now_ns, &predicted_, &open_track_end);
    if (status == PredictionStatus::kOk && config_.open_wait_rules &&
        config_.predictor.confirm_open) {
        completeOpenWindow(open_wait_, open, open_track_end, config_.predictor.guard_ns, now_ns,
                           predictor_.period(now_ns).cycleOf(open.start_ns), &predicted_);
    }
    next_.clear();
    for (const PredictedWindow& p : predicted_) {
        next_.push_back({p.start_ns, p.end_ns, channel::toPpm(p.confidence),
                         static_cast<uint64_t>(std::max<int64_t>(0, p.iteration)), p.open});
    }
    const bool publish =
        !std::equal(next_.begin(), next_.end(), current_.begin(), current_.end(), sameWindow);
    if (publish) {
        current_.swap(next_);
        current_intervals_.clear();
        for (const PublishedWindow& w : current_) {
            current_intervals_.push_back({w.start_ns, w.end_ns});
        }
        effective_.publish(now_ns, current_intervals_);
    }
    decision_.status = status;
    decision_.loss_reason =
        status == PredictionStatus::kLost ? predictor_.lossReason(now_ns) : LossReason::kNone;
    decision_.publish = publish;
    decision_.windows = current_;
    return decision_;
}

PipelineStats BubblePipeline::stats(Nanos now_ns) const {
    PipelineStats s;
    const PeriodEstimate est = predictor_.period(now_ns);
    if (est.period_ns > 0) {
        s.period_ns = est.period_ns;
        s.period_confidence_ppm = channel::toPpm(est.confidence);
    }
    if (first_start_ns_ != 0 && now_ns > first_start_ns_) {
        s.idle_fraction_ppm = channel::toPpm(static_cast<double>(idle_ns_) /
                                             static_cast<double>(now_ns - first_start_ns_));
    }
    if (est.locked()) {
        s.iteration = static_cast<uint64_t>(std::max<int64_t>(0, est.cycleOf(now_ns)));
    }
    std::vector<Interval> windows;
    effective_.collect(now_ns, &windows);
    if (!windows.empty() && !observed_.empty()) {
        // Score the span where both histories exist and the outcome is known.
        const Nanos from = std::max(windows.front().start_ns, observed_.front().start_ns);
        const Nanos to = std::min(now_ns, last_end_ns_);
        if (to > from) {
            const std::vector<Interval> observed(observed_.begin(), observed_.end());
            const Accuracy acc = measureAccuracy(observed, windows, {from, to});
            if (acc.observed_ns > 0) {
                s.coverage_ppm = channel::toPpm(acc.coverage);
            }
            if (acc.predicted_ns > 0) {
                s.precision_ppm = channel::toPpm(acc.precision);
            }
        }
    }
    return s;
}

}  // namespace atlas::sched
