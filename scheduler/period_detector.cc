#include "scheduler/period_detector.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "scheduler/period_detail.h"

namespace atlas::sched {

using namespace period_detail;

Status validate(const PeriodDetectorConfig& c) {
    auto bad = [](const std::string& what) {
        return Status(Code::kInvalidArgument, "PeriodDetectorConfig: " + what);
    };
    if (c.min_period_ns <= 0 || c.max_period_ns <= c.min_period_ns) {
        return bad("need 0 < min_period_ns < max_period_ns");
    }
    if (!(c.tolerance > 0.0 && c.tolerance <= 0.25)) {
        return bad("tolerance must be in (0, 0.25]");
    }
    if (c.history < 8 || c.history > 4096) {
        return bad("history must be in [8, 4096]");
    }
    if (c.min_cycles < 2 || c.relock_cycles < 2 || c.relock_cycles > c.min_cycles) {
        return bad("need 2 <= relock_cycles <= min_cycles");
    }
    if (!(c.lock_score > 0.0 && c.lock_score < 1.0) ||
        !(c.loss_score >= 0.0 && c.loss_score < c.lock_score)) {
        return bad("need 0 <= loss_score < lock_score < 1");
    }
    if (c.track_window < 4 || c.track_window > 64) {
        return bad("track_window must be in [4, 64]");
    }
    if (!(c.lock_significance > 0.0 && c.lock_significance <= 1.0)) {
        return bad("lock_significance must be in (0, 1]");
    }
    if (!(c.pause_cycles > 1.0)) {
        return bad("pause_cycles must be > 1");
    }
    return Status::ok();
}

const char* lockStateName(LockState state) {
    switch (state) {
        case LockState::kSearching:
            return "searching";
        case LockState::kLocked:
            return "locked";
        case LockState::kLost:
            return "lost";
    }
    return "unknown";
}

const char* lossReasonName(LossReason reason) {
    switch (reason) {
        case LossReason::kNone:
            return "none";
        case LossReason::kPause:
            return "pause";
        case LossReason::kPatternChanged:
            return "pattern changed";
    }
    return "unknown";
}

int64_t PeriodEstimate::cycleOf(Nanos t_ns) const {
    if (period_ns <= 0) {
        return anchor_cycle;
    }
    return anchor_cycle + floorDiv(t_ns - anchor_ns, period_ns);
}

Nanos PeriodEstimate::cycleStartNs(int64_t cycle) const {
    return anchor_ns + (cycle - anchor_cycle) * period_ns;
}

PeriodDetector::PeriodDetector(const PeriodDetectorConfig& config) : config_(config) {
    events_.reserve(2 * config_.history + 1);
    matched_.reserve(2 * config_.history + 1);
    lags_.assign(2 * static_cast<size_t>(config_.track_window), 0);
    sorted_lags_.reserve(lags_.size());
    outcomes_.assign(static_cast<size_t>(config_.track_window), 0);
    candidates_.reserve(kCandidateSources * config_.history);
    scratch_lags_.reserve(config_.history);
    scratch_.reserve(config_.history);
    picks_.reserve(kCandidateSources * config_.history);
}

void PeriodDetector::reset() {
    *this = PeriodDetector(config_);
}

Nanos PeriodDetector::historyStartNs() const {
    return historySize() > 0 ? at(0) : 0;
}

void PeriodDetector::append(Nanos t_ns, bool matched) {
    ++history_version_;
    events_.push_back(t_ns);
    matched_.push_back(matched ? 1 : 0);
    if (historySize() > config_.history) {
        ++begin_;
    }
    if (begin_ >= config_.history) {
        dropOldest(0);  // compaction only
    }
}

void PeriodDetector::dropOldest(size_t count) {
    ++history_version_;
    begin_ += std::min(count, historySize());
    events_.erase(events_.begin(), events_.begin() + static_cast<ptrdiff_t>(begin_));
    matched_.erase(matched_.begin(), matched_.begin() + static_cast<ptrdiff_t>(begin_));
    begin_ = 0;
}

ptrdiff_t PeriodDetector::nearest(Nanos t_ns, size_t limit) const {
    if (limit == 0) {
        return -1;
    }
    auto first = events_.begin() + static_cast<ptrdiff_t>(begin_);
    auto last = first + static_cast<ptrdiff_t>(limit);
    auto it = std::lower_bound(first, last, t_ns);
    if (it == last) {
        return (last - first) - 1;
    }
    if (it != first && (t_ns - *(it - 1)) <= (*it - t_ns)) {
        --it;
    }
    return it - first;
}

bool PeriodDetector::alone(size_t j, Nanos target, Nanos h, size_t limit) const {
    if (j > 0 && std::llabs(at(j - 1) - target) <= h) {
        return false;
    }
    return j + 1 >= limit || std::llabs(at(j + 1) - target) > h;
}

Status PeriodDetector::addEvent(Nanos t_ns) {
    if (have_event_ && t_ns < last_event_ns_) {
        return Status(Code::kInvalidArgument, "PeriodDetector: event time went backwards");
    }
    if (state_ == LockState::kLocked &&
        static_cast<double>(t_ns - last_event_ns_) >
            config_.pause_cycles * static_cast<double>(period_ns_)) {
        loseLock(LossReason::kPause);
    }
    last_event_ns_ = t_ns;
    have_event_ = true;
    if (state_ == LockState::kLocked) {
        track(t_ns);
    } else {
        append(t_ns, false);
        // A search costs O(history^2); on traffic that keeps failing to lock (more failed
        // searches than half the history), back off to one search every few events (at most
        // history/16), so the detector stays cheap.
        if (search_skip_ > 0) {
            --search_skip_;
        } else {
            search();
            if (state_ != LockState::kLocked) {
                ++failed_searches_;
                const size_t grace = config_.history / 2;
                if (failed_searches_ > grace) {
                    search_skip_ = std::min((failed_searches_ - grace) / kSearchBackoffEvery + 1,
                                            std::max<size_t>(config_.history / 16, 1));
                }
            }
        }
    }
    return Status::ok();
}

Nanos PeriodDetector::chooseAnchor(Nanos period_ns, size_t w) {
    const size_t n = historySize();
    const Nanos last = at(n - 1);
    // Fold the last min_cycles periods of the window onto one period and cut the circle at
    // its largest empty gap: the event after that gap starts the iteration (for training,
    // the gap is typically the optimizer step / all-reduce, or the idle time between
    // micro-batch bursts). Older events would smear the fold by the period's error.
    std::vector<Nanos>& phases = scratch_;
    phases.clear();
    const Nanos since = last - config_.min_cycles * period_ns;
    for (size_t i = w; i < n; ++i) {
        if (at(i) >= since) {
            phases.push_back(floorMod(at(i) - last, period_ns));
        }
    }
    std::sort(phases.begin(), phases.end());
    Nanos best_gap = phases.front() + period_ns - phases.back();
    Nanos start_phase = phases.front();
    for (size_t k = 1; k < phases.size(); ++k) {
        if (phases[k] - phases[k - 1] > best_gap) {
            best_gap = phases[k] - phases[k - 1];
            start_phase = phases[k];
        }
    }
    const Nanos h = static_cast<Nanos>(match_tol_ * static_cast<double>(period_ns));
    for (size_t i = n; i-- > 0;) {
        if (at(i) < last - 2 * period_ns) {
            break;
        }
        if (circularDistance(at(i) - last, start_phase, period_ns) <= h) {
            return at(i);
        }
    }
    return last - floorMod(-start_phase, period_ns);
}

void PeriodDetector::lockOn(Nanos period_ns, size_t w, const Score& score) {
    failed_searches_ = 0;
    search_skip_ = 0;
    match_tol_ = score.tol > 0.0 ? score.tol : config_.tolerance;
    state_ = LockState::kLocked;
    reason_ = LossReason::kNone;
    period_ns_ = period_ns;
    lock_chance1_ = score.chance1;
    lock_chance12_ = score.chance12;
    confidence_ = std::clamp(score.adjusted, 0.0, 1.0);
    events_since_lock_ = 0;
    ++epoch_;
    anchor_ns_ = chooseAnchor(period_ns, w);
    anchor_cycle_ = 0;

    // Seed the lag ring with this period's matched lags so tracking starts from the median.
    (void)scoreWith(period_ns, w, match_tol_);
    lag_count_ = 0;
    lag_next_ = 0;
    sorted_lags_.clear();
    const size_t keep = std::min(scratch_lags_.size(), lags_.size());
    for (size_t i = scratch_lags_.size() - keep; i < scratch_lags_.size(); ++i) {
        pushLag(scratch_lags_[i]);
    }
    outcome_count_ = 0;
    outcome_next_ = 0;
    // Mark which history events match under this period (used to find a regime boundary
    // if the pattern later changes).
    const size_t n = historySize();
    const Nanos h = static_cast<Nanos>(match_tol_ * static_cast<double>(period_ns));
    for (size_t i = 0; i < n; ++i) {
        const ptrdiff_t j = nearest(at(i) - period_ns, i);
        matched_[begin_ + i] =
            (j >= 0 && std::llabs(at(static_cast<size_t>(j)) - (at(i) - period_ns)) <= h) ? 1 : 0;
    }
}

void PeriodDetector::pushLag(Nanos lag) {
    // The ring keeps arrival order; sorted_lags_ the same values in order, so the median is
    // an index instead of a selection per event.
    if (lag_count_ == lags_.size()) {
        const Nanos old = lags_[lag_next_];
        sorted_lags_.erase(std::lower_bound(sorted_lags_.begin(), sorted_lags_.end(), old));
    } else {
        ++lag_count_;
    }
    lags_[lag_next_] = lag;
    lag_next_ = (lag_next_ + 1) % lags_.size();
    sorted_lags_.insert(std::upper_bound(sorted_lags_.begin(), sorted_lags_.end(), lag), lag);
}

void PeriodDetector::track(Nanos t_ns) {
    const size_t n = historySize();
    const Nanos p = period_ns_;
    const Nanos h1 = static_cast<Nanos>(match_tol_ * static_cast<double>(p));
    const Nanos h2 = static_cast<Nanos>(kLag2Widen * static_cast<double>(h1));
    bool matched1 = false;
    bool matched = false;
    Nanos lag = 0;  // a period sample, or 0 when the match was ambiguous
    ptrdiff_t j = nearest(t_ns - p, n);
    if (j >= 0 && std::llabs(at(static_cast<size_t>(j)) - (t_ns - p)) <= h1) {
        matched1 = true;
        matched = true;
        if (alone(static_cast<size_t>(j), t_ns - p, h1, n)) {
            lag = t_ns - at(static_cast<size_t>(j));
        }
    } else {
        j = nearest(t_ns - 2 * p, n);
        if (j >= 0 && std::llabs(at(static_cast<size_t>(j)) - (t_ns - 2 * p)) <= h2) {
            matched = true;
            if (alone(static_cast<size_t>(j), t_ns - 2 * p, h2, n)) {
                lag = (t_ns - at(static_cast<size_t>(j))) / 2;
            }
        }
    }

    // Advance the anchor to this event when it lands on the anchor's phase. In a dense burst
    // the nearest-event lags above are ambiguous; the anchor-to-anchor distance is not.
    const double cycles = static_cast<double>(t_ns - anchor_ns_) / static_cast<double>(p);
    const auto k = static_cast<int64_t>(std::llround(cycles));
    if (k >= 1 && std::llabs(t_ns - anchor_ns_ - k * p) <= h1) {
        if (lag == 0) {
            lag = (t_ns - anchor_ns_) / k;
        }
        anchor_ns_ = t_ns;
        anchor_cycle_ += k;
    }
    if (lag > 0) {
        pushLag(lag);
        period_ns_ = std::clamp(sorted_lags_[sorted_lags_.size() / 2], config_.min_period_ns,
                                config_.max_period_ns);
    }

    outcomes_[outcome_next_] = static_cast<uint8_t>((matched1 ? 1 : 0) | (matched ? 2 : 0));
    outcome_next_ = (outcome_next_ + 1) % outcomes_.size();
    outcome_count_ = std::min(outcome_count_ + 1, outcomes_.size());
    ++events_since_lock_;
    append(t_ns, matched);

    if (t_ns - anchor_ns_ > kStaleAnchorCycles * period_ns_) {
        // The anchor's phase has no event any more (dropped repeatedly or the pattern
        // shifted); re-derive it. A phase jump means offsets measured from the old anchor are
        // void, so the epoch changes.
        const Nanos projected = anchor_ns_ + floorDiv(t_ns - anchor_ns_, period_ns_) * period_ns_;
        const Nanos fresh = chooseAnchor(period_ns_, windowStart(period_ns_));
        anchor_cycle_ += floorDiv(fresh - anchor_ns_ + period_ns_ / 2, period_ns_);
        if (circularDistance(fresh, projected, period_ns_) > h1) {
            ++epoch_;
        }
        anchor_ns_ = fresh;
    }

    // Confidence: the recent match rate corrected by the chance level of the same matching
    // rule, with the lag-2 credit capped as in scoreCandidate(). Comparing lag-1-or-2
    // matches against a lag-1 chance level would let a lock on noise sustain itself.
    size_t hits1 = 0;
    size_t hits12 = 0;
    for (size_t i = 0; i < outcome_count_; ++i) {
        hits1 += outcomes_[i] & 1;
        hits12 += (outcomes_[i] >> 1) & 1;
    }
    const double count = static_cast<double>(outcome_count_);
    const double rate1 = static_cast<double>(hits1) / count;
    const double rate12 = static_cast<double>(std::min(hits12, hits1 + hits1 / 2)) / count;
    confidence_ = std::clamp(
        std::max(adjustedScore(rate1, lock_chance1_), adjustedScore(rate12, lock_chance12_)), 0.0,
        1.0);
    if (outcome_count_ >= outcomes_.size() / 2 && confidence_ < config_.loss_score) {
        loseLock(LossReason::kPatternChanged);
        search();
        return;
    }
    if (events_since_lock_ % (kReconsiderWindows * outcomes_.size()) == 0) {
        reconsider(events_since_lock_ % (4 * kReconsiderWindows * outcomes_.size()) == 0);
    }
}

void PeriodDetector::loseLock(LossReason reason) {
    hint_period_ns_ = period_ns_;
    failed_searches_ = 0;
    search_skip_ = 0;
    state_ = LockState::kLost;
    reason_ = reason;
    confidence_ = 0.0;
    lag_count_ = 0;
    lag_next_ = 0;
    ++history_version_;
    if (reason == LossReason::kPause) {
        // A mature lock (tracked a full window) that pauses was a real pattern: what follows
        // the pause is a new regime, start over. A young lock that "pauses" was likely a
        // burst taken for the iteration; the history that refutes it is kept.
        if (events_since_lock_ >= static_cast<size_t>(config_.track_window)) {
            events_.clear();
            matched_.clear();
            begin_ = 0;
        }
    } else {
        // The new regime starts after the last matched event before the recent mismatches:
        // keep from that event on, so the search does not mix two patterns.
        const size_t n = historySize();
        const size_t window = std::min(n, outcome_count_);
        size_t first_unmatched = n;
        for (size_t i = n - window; i < n; ++i) {
            if (matched_[begin_ + i] == 0) {
                first_unmatched = i;
                break;
            }
        }
        if (first_unmatched < n) {
            dropOldest(first_unmatched > 0 ? first_unmatched - 1 : 0);
        }
    }
    outcome_count_ = 0;
    outcome_next_ = 0;
}

}  // namespace atlas::sched
