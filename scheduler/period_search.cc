// PeriodDetector's candidate search: scoring a candidate period over the history, choosing
// and refining the best one (search), and re-checking a lock for a sub-period or a multiple
// (reconsider). Tracking and state live in period_detector.cc.
#include <algorithm>
#include <cmath>

#include "scheduler/period_detail.h"
#include "scheduler/period_detector.h"

namespace atlas::sched {

using namespace period_detail;

Nanos PeriodDetector::medianGap(size_t w) {
    if (gap_cache_version_ == history_version_ && gap_cache_w_ == w) {
        return gap_cache_;
    }
    const size_t n = historySize();
    scratch_.clear();
    for (size_t i = w + 1; i < n; ++i) {
        scratch_.push_back(at(i) - at(i - 1));
    }
    gap_cache_ = scratch_.empty() ? 0 : medianOf(scratch_);
    gap_cache_w_ = w;
    gap_cache_version_ = history_version_;
    return gap_cache_;
}

size_t PeriodDetector::windowStart(Nanos period_ns) const {
    const double pause = config_.pause_cycles * static_cast<double>(period_ns);
    for (size_t i = historySize(); i-- > 1;) {
        if (static_cast<double>(at(i) - at(i - 1)) > pause) {
            return i;
        }
    }
    return 0;
}

// Scores period candidate T over the history from index w on (see the header). Two
// variants are scored in one pass, lag-1 only and lag-1-else-lag-2, and the better
// chance-corrected one wins: lag-2 rescues streams with dropped events, lag-1 alone keeps
// dense patterns identifiable (a wider window raises the chance level).
PeriodDetector::Score PeriodDetector::scoreCandidate(Nanos period_ns, size_t w) {
    // Two match windows: the configured one (relative to the period; needed when whole
    // bursts of events shift with iteration jitter) and a narrow one scaled to the spacing
    // of the events (needed when many events share an iteration: a window of 5% of the
    // period around each of ten events covers most of the timeline and matches by chance).
    // The better chance-corrected score decides.
    double narrow = config_.tolerance;
    const Nanos median_gap = medianGap(w);
    if (median_gap > 0) {
        narrow = std::min(narrow, kGapTolerance * static_cast<double>(median_gap) /
                                      static_cast<double>(period_ns));
    }
    if (narrow >= 0.8 * config_.tolerance) {
        return scoreWith(period_ns, w, config_.tolerance);
    }
    const Score narrow_score = scoreWith(period_ns, w, narrow);
    Score wide_score = scoreWith(period_ns, w, config_.tolerance);
    if (wide_score.adjusted >= narrow_score.adjusted) {
        return wide_score;
    }
    return scoreWith(period_ns, w, narrow);  // again, so scratch_lags_ matches the result
}

PeriodDetector::Score PeriodDetector::scoreWith(Nanos period_ns, size_t w, double tol) {
    Score out;
    out.tol = tol;
    const size_t n = historySize();
    if (n < w + kMinEvaluated + 1) {
        return out;
    }
    const Nanos h1 = std::max<Nanos>(1, static_cast<Nanos>(tol * static_cast<double>(period_ns)));
    const Nanos h2 = static_cast<Nanos>(kLag2Widen * static_cast<double>(h1));
    const Nanos first = at(w);

    double total_w = 0.0;
    double matched1_w = 0.0;
    double lag2_only_w = 0.0;
    size_t matched1 = 0;
    size_t lag2_only = 0;
    size_t first_eval = n;
    scratch_lags_.clear();
    // Targets grow with i, so the nearest partner index only moves forward: one cursor per
    // lag makes the pass linear instead of a binary search per event.
    size_t cursor1 = w;
    size_t cursor2 = w;
    const auto nearestFrom = [&](size_t& cursor, Nanos target, size_t limit) {
        while (cursor + 1 < limit && at(cursor + 1) <= target) {
            ++cursor;
        }
        if (cursor + 1 < limit && at(cursor + 1) - target < target - at(cursor)) {
            return static_cast<ptrdiff_t>(cursor + 1);
        }
        return static_cast<ptrdiff_t>(cursor);
    };
    for (size_t i = w + 1; i < n; ++i) {
        const Nanos target = at(i) - period_ns;
        if (target - h1 < first) {
            continue;
        }
        if (first_eval == n) {
            first_eval = i;
        }
        // Weight: the silence before the event, capped at one period (so an event after a
        // dropped one does not count double, having no partner one period back).
        const double weight = static_cast<double>(std::min(at(i) - at(i - 1), period_ns));
        total_w += weight;
        ++out.evaluated;
        const ptrdiff_t j = nearestFrom(cursor1, target, i);
        if (std::llabs(at(static_cast<size_t>(j)) - target) <= h1) {
            matched1_w += weight;
            ++matched1;
            if (alone(static_cast<size_t>(j), target, h1, i)) {
                scratch_lags_.push_back(at(i) - at(static_cast<size_t>(j)));
            }
            continue;
        }
        const Nanos target2 = target - period_ns;
        if (target2 + h2 >= first) {
            const ptrdiff_t k = nearestFrom(cursor2, target2, i);
            if (std::llabs(at(static_cast<size_t>(k)) - target2) <= h2) {
                lag2_only_w += weight;
                ++lag2_only;
                if (alone(static_cast<size_t>(k), target2, h2, i)) {
                    scratch_lags_.push_back((at(i) - at(static_cast<size_t>(k))) / 2);
                }
            }
        }
    }
    if (out.evaluated < kMinEvaluated || total_w <= 0.0) {
        return out;
    }
    // Lag-2 matches stand in for dropped events, which are a minority: credit at most half as
    // many as lag-1 matched. Without the cap T/2 would score through its lag 2 (= T).
    const double matched12_w = matched1_w + std::min(lag2_only_w, matched1_w / 2.0);
    const size_t matched12 = matched1 + std::min(lag2_only, matched1 / 2);

    // Chance level: the fraction of the queried range covered by +-h around some event, i.e.
    // how often a target placed at random would find a partner.
    auto coverage = [&](Nanos h, Nanos shift) {
        const Nanos lo = at(first_eval) - shift - h;
        const Nanos hi = at(n - 1) - shift + h;
        Nanos covered = 0;
        Nanos run_start = 0;
        Nanos run_end = lo;
        bool open = false;
        for (size_t k = w; k < n; ++k) {
            Nanos s = std::max(at(k) - h, lo);
            Nanos e = std::min(at(k) + h, hi);
            if (e <= s) {
                continue;
            }
            if (open && s <= run_end) {
                run_end = std::max(run_end, e);
                continue;
            }
            if (open) {
                covered += run_end - run_start;
            }
            run_start = s;
            run_end = e;
            open = true;
        }
        if (open) {
            covered += run_end - run_start;
        }
        return static_cast<double>(covered) / static_cast<double>(std::max<Nanos>(hi - lo, 1));
    };
    const double p1 = coverage(h1, period_ns);
    const double p2 = coverage(h2, 2 * period_ns);
    const double chance12 = p1 + (1.0 - p1) * p2;
    const double adj1 = adjustedScore(matched1_w / total_w, p1);
    const double adj12 = adjustedScore(matched12_w / total_w, chance12);
    out.chance1 = p1;
    out.chance12 = chance12;
    out.adjusted1 = adj1;
    out.raw1 = matched1_w / total_w;
    out.count_raw1 = static_cast<double>(matched1) / static_cast<double>(out.evaluated);
    if (adj12 > adj1) {
        out.adjusted = adj12;
        out.raw = matched12_w / total_w;
        out.chance = chance12;
    } else {
        out.adjusted = adj1;
        out.raw = out.raw1;
        out.chance = p1;
    }
    // Significant if either variant is (the lag-1 one has the lower chance level, the
    // lag-2 one more matches when events are dropped).
    out.matched1 = matched1;
    out.matched12 = matched12;
    if (!scratch_lags_.empty()) {
        scratch_.assign(scratch_lags_.begin(), scratch_lags_.end());
        out.refined_ns = medianOf(scratch_);
    }
    return out;
}

Nanos PeriodDetector::refineByGaps(Nanos period_ns, size_t w) {
    // Iteration starts are the events after a long silence (at least half the longest gap in
    // the history). Their distances, divided by the number of periods they span, are period
    // samples that stay unambiguous inside dense bursts, where nearest-event lags are not.
    const size_t n = historySize();
    Nanos longest = 0;
    for (size_t i = w + 1; i < n; ++i) {
        longest = std::max(longest, at(i) - at(i - 1));
    }
    scratch_.clear();
    size_t prev = n;
    for (size_t i = w + 1; i < n; ++i) {
        if (2 * (at(i) - at(i - 1)) < longest) {
            continue;
        }
        if (prev < n) {
            // The candidate only has to tell how many periods a distance spans, so it may be
            // off by more than the match tolerance (a raw lag inside a burst often is).
            const Nanos d = at(i) - at(prev);
            const int64_t k = (d + period_ns / 2) / period_ns;
            if (k >= 1 && std::llabs(d - k * period_ns) <= period_ns / 4) {
                scratch_.push_back(d / k);
            }
        }
        prev = i;
    }
    return scratch_.size() >= 2 ? medianOf(scratch_) : 0;
}

void PeriodDetector::search() {
    Pick pick;
    if (bestCandidate(Related::kAny, 0, &pick)) {
        lockOn(pick.period, pick.window, pick.score);
    }
}

void PeriodDetector::reconsider(bool check_divisors) {
    // Down (every fourth time; it is rare and costs a few candidate scores): a lock can be on
    // a multiple of the true period (taken while the history mixed two regimes whose periods
    // share that multiple, e.g. 300 ms across a 100 -> 150 ms change). A divisor that scores
    // about as well is the fundamental: move to it, as search() would.
    Pick pick;
    if (check_divisors && bestCandidate(Related::kDivisor, period_ns_, &pick)) {
        // Lag-1 scores: with lag-2 credit, T/2 would borrow matches from its lag 2 (= T).
        const Score current = scoreCandidate(period_ns_, windowStart(period_ns_));
        if (pick.score.adjusted1 >= current.adjusted1 - kSubmultipleSlack) {
            lockOn(pick.period, pick.window, pick.score);
            return;
        }
    }
    // Up: a lock taken early can be on a sub-period: the step of a 1F1B steady phase, a
    // micro-batch spacing. Once the history holds whole iterations, a multiple of the
    // current period that explains it clearly better is the iteration: move to it. A lock
    // whose recent events nearly all match has nothing to gain: skip the search.
    size_t recent_hits = 0;
    for (size_t i = 0; i < outcome_count_; ++i) {
        recent_hits += outcomes_[i] & 1;
    }
    const double recent_rate =
        static_cast<double>(recent_hits) / static_cast<double>(std::max<size_t>(outcome_count_, 1));
    if (recent_rate >= 1.0 - kUpgradeMargin / 3 ||
        !bestCandidate(Related::kMultiple, period_ns_, &pick)) {
        return;
    }
    // Judge the multiple at the current lock's absolute match window ("does it explain the
    // history better at the same precision?"), with lag-1 matching for both (lag-2 would give
    // the longer period's 2k-th predecessor a say): the match fraction must rise clearly,
    // gap-weighted and per event, and the chance-corrected score must not fall. A true
    // multiple of a sub-period does all three. A harmonic of a true period does not: judged
    // with its own wider window it matches by chance, and gap weighting alone favours it when
    // events are dropped (the heavy event after a drop has no partner one period back, but
    // has one two periods back).
    const double same_window =
        match_tol_ * static_cast<double>(period_ns_) / static_cast<double>(pick.period);
    const Score current = scoreWith(period_ns_, windowStart(period_ns_), match_tol_);
    // Not while the current pattern is breaking up: if the recent events match clearly worse
    // than the history as a whole, a new regime is arriving, and a multiple that fits both
    // regimes (300 ms across a 100 -> 150 ms change) would only delay finding the new one.
    if (recent_rate < current.count_raw1 - kUpgradeMargin) {
        return;
    }
    const Score longer = scoreWith(pick.period, pick.window, same_window);
    if (longer.raw1 >= current.raw1 + kUpgradeMargin &&
        longer.count_raw1 >= current.count_raw1 + kUpgradeMargin &&
        longer.adjusted1 >= current.adjusted1) {
        lockOn(pick.period, pick.window, pick.score);
    }
}

bool PeriodDetector::bestCandidate(Related related, Nanos base_ns, Pick* result) {
    const size_t n = historySize();
    if (n < kMinEvaluated + 2) {
        return false;
    }
    const Nanos history_span = at(n - 1) - at(0);  // bounds every candidate window
    const auto required_cycles = [&](Nanos t) {
        const bool near_hint =
            hint_period_ns_ > 0 &&
            std::llabs(t - hint_period_ns_) <=
                static_cast<Nanos>(config_.tolerance * static_cast<double>(hint_period_ns_));
        return near_hint ? config_.relock_cycles : config_.min_cycles;
    };

    candidates_.clear();
    const auto admissible = [&](Nanos d) {
        return d >= config_.min_period_ns && d <= config_.max_period_ns &&
               d * config_.relock_cycles <= history_span;
    };
    if (related == Related::kAny) {
        for (size_t s = 0; s < std::min(kCandidateSources, n); ++s) {
            const size_t src = n - 1 - s;
            for (size_t j = 0; j < src; ++j) {
                const Nanos d = at(src) - at(j);
                if (admissible(d)) {
                    candidates_.push_back(d);
                }
            }
        }
    } else {
        // Multiples / divisors of the current period directly (a few candidates instead of
        // every lag: this runs while locked); the refinement below corrects k * error.
        const int64_t max_k =
            related == Related::kMultiple ? kMaxMultipleFactor : kMaxDivisorFactor;
        for (int64_t k = 2; k <= max_k; ++k) {
            const Nanos d = related == Related::kMultiple ? base_ns * k : base_ns / k;
            if (admissible(d)) {
                candidates_.push_back(d);
            }
        }
    }
    if (candidates_.empty()) {
        return false;
    }
    // Cluster near-equal lags (within tolerance/2) and keep each cluster's middle member.
    std::sort(candidates_.begin(), candidates_.end());
    size_t out = 0;
    for (size_t i = 0; i < candidates_.size();) {
        size_t j = i;
        const double limit = static_cast<double>(candidates_[i]) * (1.0 + config_.tolerance / 2.0);
        while (j < candidates_.size() && static_cast<double>(candidates_[j]) <= limit) {
            ++j;
        }
        candidates_[out++] = candidates_[i + (j - i) / 2];
        i = j;
    }
    candidates_.resize(out);

    // Score every candidate (ascending), then take the smallest one within
    // kSubmultipleSlack of the best. Each candidate T is judged on its own window: the
    // history after the last gap longer than pause_cycles * T (for T, an earlier part is
    // another regime). A window holding less than kMinWindowShare of the history means T
    // needs a "pause" in the middle of the history to explain it, which is structure (the
    // gap between micro-batch bursts), not a pause: T is rejected.
    std::vector<Pick>& eligible = picks_;
    eligible.clear();
    size_t tried = 0;
    for (Nanos t : candidates_) {
        const size_t w = windowStart(t);
        if (w > 0 && static_cast<double>(n - w) < kMinWindowShare * static_cast<double>(n)) {
            continue;
        }
        const Nanos span = at(n - 1) - at(w);
        if (span < static_cast<Nanos>(required_cycles(t)) * t) {
            continue;
        }
        ++tried;
        Score s = scoreCandidate(t, w);
        // Refine to the median of unambiguous lags; in bursts (few unambiguous lags) to the
        // distance between iteration starts.
        if (scratch_lags_.size() * 2 < s.evaluated) {
            s.refined_ns = refineByGaps(t, w);
        }
        if (s.refined_ns > 0 && s.refined_ns != t) {
            // The refined value is a direct period estimate. If the history is too short for
            // it, the raw candidate only qualified by being underestimated: wait.
            if (span < static_cast<Nanos>(required_cycles(s.refined_ns)) * s.refined_ns ||
                windowStart(s.refined_ns) != w) {
                continue;
            }
            // Keep the refined value unless it explains the history clearly worse (a longer
            // period's wider window raises its chance level, so a small drop is expected).
            Score r = scoreCandidate(s.refined_ns, w);
            if (r.adjusted >= s.adjusted - kSubmultipleSlack) {
                t = s.refined_ns;
                s = r;
            }
        }
        if (s.adjusted < config_.lock_score) {
            continue;
        }
        eligible.push_back({t, w, s});
    }
    const double significance =
        config_.lock_significance / static_cast<double>(std::max<size_t>(tried, 1));
    std::erase_if(eligible, [&](Pick& p) {
        Score& sc = p.score;
        sc.p_value = std::min(binomialTail(sc.evaluated, sc.matched1, sc.chance1),
                              binomialTail(sc.evaluated, sc.matched12, sc.chance12));
        return sc.p_value > significance;
    });
    if (eligible.empty()) {
        return false;
    }
    double best_adjusted = -1.0;
    for (const Pick& p : eligible) {
        best_adjusted = std::max(best_adjusted, p.score.adjusted);
    }
    const Pick* chosen = nullptr;
    if (related == Related::kMultiple) {
        // Upgrade search: the smallest multiple that matches (raw) about as well as the best.
        double best_raw = 0.0;
        for (const Pick& p : eligible) {
            best_raw = std::max(best_raw, p.score.raw);
        }
        for (const Pick& p : eligible) {
            if (p.score.raw >= best_raw - kUpgradeMargin / 3 &&
                (chosen == nullptr || p.period < chosen->period)) {
                chosen = &p;
            }
        }
        *result = *chosen;
        return true;
    }
    // The best score wins, except that a candidate dividing it (best ~ k * T, k >= 2) within
    // kSubmultipleSlack is preferred: it is the fundamental, the best one a harmonic.
    size_t best = 0;
    for (size_t i = 1; i < eligible.size(); ++i) {
        if (eligible[i].score.adjusted > eligible[best].score.adjusted) {
            best = i;
        }
    }
    chosen = &eligible[best];
    for (const Pick& p : eligible) {
        const double ratio =
            static_cast<double>(eligible[best].period) / static_cast<double>(p.period);
        const double k = std::round(ratio);
        if (k >= 2.0 && std::abs(ratio - k) <= config_.tolerance * k &&
            p.score.adjusted >= best_adjusted - kSubmultipleSlack && p.period < chosen->period) {
            chosen = &p;
        }
    }
    *result = *chosen;
    return true;
}

}  // namespace atlas::sched
