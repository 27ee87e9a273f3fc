#include "bubbletea/daemon/prefill_scheduler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace atlas::bubbletea {
namespace {

// Walks the windows of a plan in time order, extending a periodic plan beyond its last
// window by whole multiples of the period (shifted by at least the plan's span, so extended
// copies never overlap the originals), up to `horizon_ns`.
class WindowWalker {
  public:
    WindowWalker(const WindowPlan& plan, Nanos now_ns, Nanos horizon_ns)
        : windows_(plan.windows), horizon_ns_(horizon_ns) {
        if (!windows_.empty() && plan.period_ns > 0 && windows_.back().end_ns < kForeverNs / 2) {
            const Nanos span = windows_.back().end_ns - windows_.front().start_ns;
            const Nanos periods = std::max<Nanos>(1, (span + plan.period_ns - 1) / plan.period_ns);
            step_ns_ = periods * plan.period_ns;
        }
        while (valid() && currentWindow().end_ns <= now_ns) {
            advance();
        }
    }

    const Window* current() {
        if (!valid()) {
            return nullptr;
        }
        cur_ = currentWindow();
        return &cur_;
    }

    void advance() {
        ++index_;
        if (index_ >= windows_.size() && step_ns_ > 0) {
            index_ = 0;
            shift_ns_ += step_ns_;
        }
    }

  private:
    bool valid() const {
        return index_ < windows_.size() && windows_[index_].start_ns + shift_ns_ <= horizon_ns_;
    }
    Window currentWindow() const {
        return {windows_[index_].start_ns + shift_ns_, windows_[index_].end_ns + shift_ns_};
    }

    const std::vector<Window>& windows_;
    Nanos horizon_ns_;
    Nanos step_ns_ = 0;
    Nanos shift_ns_ = 0;
    size_t index_ = 0;
    Window cur_;
};

// Caps the error a chunk budget is stretched for: a model that is off by more than this is
// being recalibrated, and shrinking every chunk to nothing meanwhile would stop prefill.
constexpr double kMaxRelativeError = 0.5;

std::string msString(Nanos ns) {
    char buf[48];
    std::snprintf(buf, sizeof(buf), "%.1f ms", static_cast<double>(ns) / 1e6);
    return buf;
}

}  // namespace

const char* admitOutcomeName(AdmitOutcome outcome) {
    switch (outcome) {
        case AdmitOutcome::kAccepted:
            return "accepted";
        case AdmitOutcome::kQueueFull:
            return "queue_full";
        case AdmitOutcome::kDeadline:
            return "deadline";
    }
    return "unknown";
}

PrefillScheduler::PrefillScheduler(SchedulerConfig config, CostModel& model)
    : config_(config), model_(model), end_margin_ns_(config.end_margin_ns) {
    config_.min_chunk_tokens = std::max<int64_t>(1, config_.min_chunk_tokens);
    config_.max_chunk_tokens = std::max(config_.min_chunk_tokens, config_.max_chunk_tokens);
    config_.max_end_margin_ns = std::max(config_.max_end_margin_ns, config_.end_margin_ns);
}

bool PrefillScheduler::edfLess(const Entry& a, const Entry& b) {
    if (a.deadline_ns != b.deadline_ns) {
        return a.deadline_ns < b.deadline_ns;
    }
    return a.seq < b.seq;
}

void PrefillScheduler::decayEndMargin(Nanos now_ns) {
    if (end_margin_updated_ns_ == INT64_MIN || now_ns <= end_margin_updated_ns_) {
        end_margin_updated_ns_ = std::max(end_margin_updated_ns_, now_ns);
        return;
    }
    model_.relax(now_ns - end_margin_updated_ns_);
    if (end_margin_ns_ > config_.end_margin_ns && config_.end_margin_half_life_ns > 0) {
        const double halves = static_cast<double>(now_ns - end_margin_updated_ns_) /
                              static_cast<double>(config_.end_margin_half_life_ns);
        const auto excess = static_cast<double>(end_margin_ns_ - config_.end_margin_ns);
        end_margin_ns_ = config_.end_margin_ns + static_cast<Nanos>(excess * std::exp2(-halves));
    }
    end_margin_updated_ns_ = now_ns;
}

PrefillScheduler::SimResult PrefillScheduler::simulate(const std::vector<Entry>& edf, Nanos now_ns,
                                                       const WindowPlan& plan) const {
    SimResult out;
    out.finish_ns.assign(edf.size(), kForeverNs);
    out.meets.assign(edf.size(), false);
    Nanos horizon = now_ns;
    for (const auto& e : edf) {
        horizon = std::max(horizon, e.deadline_ns);
    }
    horizon = std::min(horizon, now_ns + config_.plan_horizon_ns);
    WindowWalker walker(plan, now_ns, horizon);
    Nanos cursor = now_ns;
    for (size_t i = 0; i < edf.size(); ++i) {
        const Entry& e = edf[i];
        int64_t remaining = e.total_tokens - e.done_tokens;
        int64_t context = e.done_tokens;
        // Each iteration either runs a chunk or moves the walker forward, and both are
        // bounded (tokens, horizon), so this terminates.
        while (remaining > 0 && cursor <= e.deadline_ns) {
            const Window* w = walker.current();
            if (w == nullptr) {
                break;
            }
            const Nanos usable_end = w->end_ns - end_margin_ns_;
            if (usable_end <= w->start_ns || cursor >= usable_end) {
                walker.advance();
                continue;
            }
            cursor = std::max(cursor, w->start_ns);
            const int64_t need = std::min(config_.min_chunk_tokens, remaining);
            const int64_t t = model_.largestFitting(
                context, std::min(remaining, config_.max_chunk_tokens),
                static_cast<Nanos>(static_cast<double>(usable_end - cursor) / stretch()));
            if (t < need) {
                walker.advance();
                continue;
            }
            cursor +=
                static_cast<Nanos>(static_cast<double>(model_.predict(t, context)) * stretch());
            remaining -= t;
            context += t;
        }
        if (remaining == 0) {
            out.finish_ns[i] = cursor;
            out.meets[i] = cursor <= e.deadline_ns;
        }
    }
    return out;
}

AdmitResult PrefillScheduler::admit(RequestId id, int64_t prompt_tokens, Nanos deadline_ns,
                                    Nanos now_ns, const WindowPlan& plan) {
    decayEndMargin(now_ns);
    AdmitResult result;
    auto retryHint = [&]() {
        const Nanos drain = predictedDrainNs(now_ns, plan);
        const Nanos wait = drain >= kForeverNs ? kNsPerSec : drain - now_ns;
        return std::clamp<Nanos>(wait, kNsPerSec, 60 * kNsPerSec);
    };
    if (queue_.size() >= config_.queue_limit) {
        ++stats_.rejected_queue_full;
        result.outcome = AdmitOutcome::kQueueFull;
        result.retry_after_ns = retryHint();
        result.reason = "prefill queue is full (" + std::to_string(queue_.size()) + " requests)";
        return result;
    }
    const Entry fresh{id, deadline_ns, next_seq_, std::max<int64_t>(prompt_tokens, 1), 0};
    const SimResult base = simulate(queue_, now_ns, plan);
    std::vector<Entry> with = queue_;
    const auto pos = std::upper_bound(with.begin(), with.end(), fresh, edfLess);
    const size_t fresh_index = static_cast<size_t>(pos - with.begin());
    with.insert(pos, fresh);
    const SimResult sim = simulate(with, now_ns, plan);
    result.predicted_finish_ns = sim.finish_ns[fresh_index];
    if (!sim.meets[fresh_index]) {
        ++stats_.rejected_deadline;
        result.outcome = AdmitOutcome::kDeadline;
        result.retry_after_ns = retryHint();
        if (plan.windows.empty()) {
            result.reason = "no prefill window is predicted (" + plan.note + ")";
        } else if (sim.finish_ns[fresh_index] >= kForeverNs) {
            result.reason =
                "the prompt cannot be prefilled within the predicted windows "
                "before its deadline (" +
                msString(deadline_ns - now_ns) + ")";
        } else {
            result.reason = "predicted time to first token " +
                            msString(sim.finish_ns[fresh_index] - now_ns) +
                            " exceeds the deadline " + msString(deadline_ns - now_ns);
        }
        return result;
    }
    for (size_t i = 0, j = 0; i < queue_.size(); ++i, ++j) {
        if (j == fresh_index) {
            ++j;
        }
        if (base.meets[i] && !sim.meets[j]) {
            ++stats_.rejected_deadline;
            result.outcome = AdmitOutcome::kDeadline;
            result.retry_after_ns = retryHint();
            result.reason =
                "admitting the request would make queued requests miss their "
                "deadlines";
            return result;
        }
    }
    queue_ = std::move(with);
    ++next_seq_;
    ++stats_.admitted;
    return result;
}

Decision PrefillScheduler::next(Nanos now_ns, const WindowPlan& plan) {
    decayEndMargin(now_ns);
    Decision d;
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
        if (it->deadline_ns <= now_ns) {
            d.kind = Decision::Kind::kExpire;
            d.expired = it->id;
            queue_.erase(it);
            ++stats_.expired;
            return d;
        }
    }
    if (queue_.empty()) {
        return d;  // kIdle
    }
    const Entry& head = queue_.front();
    d.wake_ns = head.deadline_ns;  // the earliest deadline: something expires then
    const Window* w = nullptr;
    const Window* after = nullptr;
    for (size_t i = 0; i < plan.windows.size(); ++i) {
        const Window& cand = plan.windows[i];
        const Nanos usable_end = cand.end_ns - end_margin_ns_;
        if (usable_end > now_ns && usable_end > cand.start_ns) {
            w = &cand;
            after = i + 1 < plan.windows.size() ? &plan.windows[i + 1] : nullptr;
            break;
        }
    }
    d.kind = Decision::Kind::kWait;
    if (w == nullptr) {
        return d;  // no usable window known: wait for the plan to change
    }
    if (w->start_ns > now_ns) {
        d.wake_ns = std::min(d.wake_ns, w->start_ns);
        return d;
    }
    const int64_t remaining = head.total_tokens - head.done_tokens;
    const int64_t need = std::min(config_.min_chunk_tokens, remaining);
    const auto budget =
        static_cast<Nanos>(static_cast<double>(w->end_ns - end_margin_ns_ - now_ns) / stretch());
    const int64_t t = model_.largestFitting(head.done_tokens,
                                            std::min(remaining, config_.max_chunk_tokens), budget);
    if (t < need || t <= 0) {
        // Not even the smallest allowed chunk fits in what is left of this window.
        d.wake_ns = std::min(d.wake_ns, after != nullptr ? after->start_ns : w->end_ns);
        return d;
    }
    d.kind = Decision::Kind::kRun;
    d.wake_ns = kForeverNs;
    d.chunk.id = head.id;
    d.chunk.start_token = head.done_tokens;
    d.chunk.tokens = t;
    d.chunk.last = t == remaining;
    d.chunk.predicted_ns = model_.predict(t, head.done_tokens);
    d.chunk.window = *w;
    return d;
}

double PrefillScheduler::stretch() const {
    return 1.0 + config_.error_margin * std::min(model_.relativeErrorEwma(), kMaxRelativeError);
}

void PrefillScheduler::chunkDone(const ChunkOutcome& outcome) {
    if (outcome.cancelled) {
        ++stats_.cancelled;
        // A cancelled chunk's time is only a lower bound of its cost. Below the prediction it
        // says nothing; above it, the model was too optimistic, and without learning that it
        // would plan the same chunk again, to be cancelled again (seen on a contended core:
        // one 238-token chunk cancelled four times in a row). The bound is a sample biased
        // low, which moves the model the right way.
        const Nanos ran = outcome.finished_ns - outcome.started_ns;
        if (ran > model_.predict(outcome.tokens, outcome.context)) {
            model_.observe({outcome.tokens, outcome.context, ran});
        }
    } else {
        for (auto& e : queue_) {
            if (e.id == outcome.id) {
                e.done_tokens = std::min(e.total_tokens, e.done_tokens + outcome.tokens);
                break;
            }
        }
        model_.observe({outcome.tokens, outcome.context, outcome.finished_ns - outcome.started_ns});
        ++stats_.chunks;
    }
    // Cancelled chunks count too: one the watcher stopped at its window's end still ran
    // past it, and the end margin must learn from that.
    decayEndMargin(outcome.finished_ns);
    if (outcome.finished_ns > outcome.window_end_ns) {
        const Nanos over = outcome.finished_ns - outcome.window_end_ns;
        ++stats_.overruns;
        stats_.overrun_ns_total += over;
        // Grow by twice the overrun, but by at most max(margin, end_margin_step) at a time: a
        // one-off stall (a preempted engine, 5x its usual time) must not push the end margin
        // past the windows themselves; repeated overruns still double it quickly.
        const Nanos step = std::min(2 * over, std::max(end_margin_ns_, config_.end_margin_step_ns));
        end_margin_ns_ = std::min(config_.max_end_margin_ns, end_margin_ns_ + step);
    }
}

bool PrefillScheduler::remove(RequestId id) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
        if (it->id == id) {
            queue_.erase(it);
            return true;
        }
    }
    return false;
}

bool PrefillScheduler::contains(RequestId id) const {
    return doneTokens(id) >= 0;
}

int64_t PrefillScheduler::doneTokens(RequestId id) const {
    for (const auto& e : queue_) {
        if (e.id == id) {
            return e.done_tokens;
        }
    }
    return -1;
}

std::vector<RequestId> PrefillScheduler::edfOrder() const {
    std::vector<RequestId> out;
    out.reserve(queue_.size());
    for (const auto& e : queue_) {
        out.push_back(e.id);
    }
    return out;
}

Nanos PrefillScheduler::predictedDrainNs(Nanos now_ns, const WindowPlan& plan) const {
    if (queue_.empty()) {
        return now_ns;
    }
    const SimResult sim = simulate(queue_, now_ns, plan);
    Nanos last = now_ns;
    for (Nanos f : sim.finish_ns) {
        last = std::max(last, f);
    }
    return last;
}

}  // namespace atlas::bubbletea
