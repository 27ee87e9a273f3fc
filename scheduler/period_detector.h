// PeriodDetector: finds the training-iteration period in a stream of event timestamps (start
// times of WAN transfers of one class, starts of GPU-idle intervals, ...).
//
// The stream may carry several events per iteration (micro-batch bursts, fill and drain
// bubbles), per-event jitter, dropped events, pauses (evaluation, checkpoint) and period
// changes. The detector reports a period, a phase anchor (a timestamp where an iteration
// starts), a confidence, and whether it is locked; after losing lock it searches again and
// re-locks on the new period.
//
// Algorithm (docs/scheduler.md has the details and the reasons):
//  - Search (while unlocked): candidate periods are the lags between the newest three events
//    and every older one, clustered. A candidate T is judged on its window: the history after
//    the last gap longer than pause_cycles * T; a window holding under 3/4 of the history
//    means T needs "pauses" inside the history (the gaps between micro-batch bursts), and T
//    is rejected. Its score is the gap-weighted fraction of window events that have a partner
//    within +-h one period earlier (or, for dropped events, two periods earlier, credited for
//    at most half as many events), corrected for chance:
//        adjusted = (matched - chance) / (1 - chance),
//    chance = the fraction of the timeline that +-h windows around the events cover. h is
//    tolerance * T, or a narrower window (0.3 x the median gap) when many events share an
//    iteration, whichever scores better. The best candidate (or a divisor of it within 0.1:
//    the fundamental, not a harmonic) is refined to the median of unambiguous lags (or of
//    distances between iteration starts, inside bursts) and locks when adjusted >=
//    lock_score, the match count is significant (binomial tail x candidates tried <=
//    lock_significance) and the window spans min_cycles periods (relock_cycles for the
//    period that was lost last).
//  - Tracking (while locked): each event is matched one (or two) periods back; the period
//    follows the median of the last 2 x track_window unambiguous lags and anchor-to-anchor
//    distances. The chance-corrected match rate over the last track_window events is the
//    confidence; below loss_score the pattern has changed (lock lost, history trimmed to the
//    new regime, immediate re-search). Every 4 x track_window events the lock is reconsidered:
//    a multiple k * T that matches clearly more at the same absolute window (the lock was on
//    a sub-period such as a 1F1B step) or a divisor T / k that scores as well (the lock was
//    on a multiple) replaces it, with a new epoch.
//  - Pause: silence longer than pause_cycles periods. estimate() reports it at once; the next
//    event drops the history if the lock had tracked a full window (a young lock that
//    "pauses" was likely a burst spacing, and the history that refutes it is kept).
//  - Cost control: a search is O(history^2); after history/2 failed searches the detector
//    searches only every few events (at most history/16).
// Limits: bursts of more than track_window events per iteration can be taken for a periodic
// stream of their spacing (raise track_window and history for such traffic); events closer
// together than the iteration jitter cannot be told apart.
//
// Threads: not thread-safe; one owner. Time only enters through arguments. Tracking does not
// allocate (buffers are reserved at construction); searches may.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "atlas/common/status.h"
#include "scheduler/types.h"

namespace atlas::sched {

struct PeriodDetectorConfig {
    Nanos min_period_ns = 100 * kNsPerUs;  // search range for the period
    Nanos max_period_ns = 120 * kNsPerSec;
    // Half-width of the match window, relative to the period. Must exceed the lag jitter of
    // one iteration (0.15 covers +-10% iteration-length jitter with margin; a window equal to
    // the jitter biases the tracked period toward its own estimate). Wider windows cannot
    // separate events closer than ~2*tolerance*period.
    double tolerance = 0.15;
    size_t history = 64;      // events kept (>= 8)
    int min_cycles = 4;       // history must span this many periods before locking
    int relock_cycles = 3;    // ... or this many when the candidate equals the last period
    double lock_score = 0.5;  // chance-corrected score needed to lock, in (0, 1)
    // ... and the matches must be this unlikely under chance alone: the binomial tail over the
    // evaluated events, times the number of candidates tried (Bonferroni). Guards against
    // locking on a few lucky matches in random traffic.
    double lock_significance = 1e-3;
    double loss_score = 0.25;  // confidence below which a locked pattern is declared broken
    int track_window = 16;     // events in the tracking confidence window (4..64)
    // Silence longer than this many periods = pause. Eight periods keep runs of dropped
    // events from passing for a pause (7 in a row: 1.3e-5 at 20% drops).
    double pause_cycles = 8.0;
};

// Checks ranges; the constructor assumes a valid config (policies and predictors validate).
Status validate(const PeriodDetectorConfig& config);

enum class LockState : uint8_t {
    kSearching,  // never locked since construction/reset, or still learning
    kLocked,
    kLost,  // was locked; see LossReason; searching again
};

enum class LossReason : uint8_t {
    kNone,
    kPause,           // no event for pause_cycles periods (eval step, checkpoint, stall)
    kPatternChanged,  // events stopped matching the period (period change, new schedule)
};

const char* lockStateName(LockState state);
const char* lossReasonName(LossReason reason);

struct PeriodEstimate {
    LockState state = LockState::kSearching;
    LossReason reason = LossReason::kNone;  // set while state == kLost
    Nanos period_ns = 0;                    // valid when locked (last value otherwise)
    // A timestamp at which an iteration started (the event after the largest gap of the
    // folded pattern). Iteration c starts near anchor_ns + (c - anchor_cycle) * period_ns.
    Nanos anchor_ns = 0;
    int64_t anchor_cycle = 0;  // absolute iteration number of anchor_ns (counts since lock)
    double confidence = 0.0;   // chance-corrected match rate in [0, 1]
    // Increments on every (re)lock. Consumers that keep phase-relative state (offsets from
    // anchor_ns) must discard it when the epoch changes.
    uint64_t epoch = 0;
    // Match window used for this lock, relative to the period: the configured tolerance, or
    // less when many events share an iteration (see scoreCandidate in the .cc).
    double match_tolerance = 0.0;

    bool locked() const { return state == LockState::kLocked; }
    // Absolute iteration number of time t (valid when locked).
    int64_t cycleOf(Nanos t_ns) const;
    // Start of iteration `cycle` (valid when locked).
    Nanos cycleStartNs(int64_t cycle) const;
};

class PeriodDetector {
  public:
    explicit PeriodDetector(const PeriodDetectorConfig& config = {});

    // Feeds one event. Timestamps must be non-decreasing (kInvalidArgument otherwise, and the
    // event is ignored). Cost: O(log history) while locked; a search while unlocked costs
    // O(history^2 log history) (tens of microseconds at history = 64).
    Status addEvent(Nanos t_ns);

    // State as of now_ns (>= the last event). Reports a pause as soon as the silence exceeds
    // pause_cycles periods, before the next event arrives. Cheap (O(1), inline: policies
    // call it for every contender of a decision).
    PeriodEstimate estimate(Nanos now_ns) const {
        PeriodEstimate e;
        e.state = state_;
        e.reason = reason_;
        e.period_ns = period_ns_;
        e.anchor_ns = anchor_ns_;
        e.anchor_cycle = anchor_cycle_;
        e.confidence = state_ == LockState::kLocked ? confidence_ : 0.0;
        e.epoch = epoch_;
        e.match_tolerance = match_tol_;
        if (state_ == LockState::kLocked &&
            static_cast<double>(now_ns - last_event_ns_) >
                config_.pause_cycles * static_cast<double>(period_ns_)) {
            e.state = LockState::kLost;
            e.reason = LossReason::kPause;
            e.confidence = 0.0;
        }
        return e;
    }

    // Forgets everything (including the hint period).
    void reset();

    const PeriodDetectorConfig& config() const { return config_; }
    // Timestamp of the oldest event in the current regime's history (events before a pause
    // or pattern change are dropped); 0 when empty.
    Nanos historyStartNs() const;
    size_t historySize() const { return events_.size() - begin_; }
    Nanos lastEventNs() const { return last_event_ns_; }

  private:
    struct Score {
        double adjusted = -1.0;
        double raw = 0.0;  // gap-weighted match fraction of the chosen variant
        // Lag-1 matching alone: adjusted score, gap-weighted and per-event match fractions
        // (the upgrade rule compares periods on equal terms with these).
        double adjusted1 = -1.0;
        double raw1 = 0.0;
        double count_raw1 = 0.0;
        double tol = 0.0;       // match window (relative to the period) that was used
        double chance = 0.0;    // chance level of the chosen variant
        double chance1 = 0.0;   // ... of lag-1 matching
        double chance12 = 0.0;  // ... of lag-1-else-lag-2 matching
        Nanos refined_ns = 0;   // median of matched lags
        size_t evaluated = 0;
        size_t matched1 = 0;   // events matched one period back
        size_t matched12 = 0;  // ... one or (credited) two periods back
        // P(at least this many matches | chance), either variant; computed only for
        // candidates that pass lock_score (bestCandidate).
        double p_value = 1.0;
    };

    Nanos at(size_t i) const { return events_[begin_ + i]; }
    void append(Nanos t_ns, bool matched);
    void dropOldest(size_t count);
    // Index of the event nearest to t within [0, limit), or -1 if the history is empty.
    ptrdiff_t nearest(Nanos t_ns, size_t limit) const;
    // True if event j is the only one within +-h of target among [0, limit): its lag is an
    // unambiguous period sample.
    bool alone(size_t j, Nanos target, Nanos h, size_t limit) const;
    struct Pick {
        Nanos period = 0;
        size_t window = 0;
        Score score;
    };

    // First history index after the last gap longer than pause_cycles * period.
    size_t windowStart(Nanos period_ns) const;
    // Median gap between consecutive events from index w on (cached per history version).
    Nanos medianGap(size_t w);
    Score scoreCandidate(Nanos period_ns, size_t w);
    Score scoreWith(Nanos period_ns, size_t w, double tol);
    Nanos refineByGaps(Nanos period_ns, size_t w);
    enum class Related : uint8_t { kAny, kMultiple, kDivisor };
    // The candidate search() would lock on, among all candidates or only among multiples /
    // divisors (k >= 2) of base_ns. False if none qualifies.
    bool bestCandidate(Related related, Nanos base_ns, Pick* result);
    void search();
    void reconsider(bool check_divisors);
    void lockOn(Nanos period_ns, size_t w, const Score& score);
    void pushLag(Nanos lag);
    void track(Nanos t_ns);
    void loseLock(LossReason reason);
    Nanos chooseAnchor(Nanos period_ns, size_t w);

    PeriodDetectorConfig config_;
    // History window: events_[begin_, end). Compacted when begin_ grows past the history size
    // so storage stays bounded and contiguous (binary search needs contiguity).
    std::vector<Nanos> events_;
    std::vector<uint8_t> matched_;  // parallel to events_: matched one period back (tracking)
    size_t begin_ = 0;
    Nanos last_event_ns_ = 0;
    bool have_event_ = false;

    LockState state_ = LockState::kSearching;
    LossReason reason_ = LossReason::kNone;
    Nanos period_ns_ = 0;
    double match_tol_ = 0.0;    // match window of the current lock, relative to the period
    Nanos hint_period_ns_ = 0;  // period before the last loss; speeds up re-lock
    Nanos anchor_ns_ = 0;
    int64_t anchor_cycle_ = 0;
    uint64_t epoch_ = 0;
    double lock_chance1_ = 0.0;   // chance levels measured at lock time (lag-1 matching,
    double lock_chance12_ = 0.0;  // lag-1-else-lag-2 matching)
    double confidence_ = 0.0;
    size_t events_since_lock_ = 0;

    // Tracking: recent matched lags (ring) for the median period.
    std::vector<Nanos> lags_;
    std::vector<Nanos> sorted_lags_;  // the ring's values, sorted (median by index)
    size_t lag_next_ = 0;
    size_t lag_count_ = 0;
    // Tracking: match outcomes of the last track_window events (ring; bit 0 = lag-1 match,
    // bit 1 = lag-1-or-lag-2 match).
    std::vector<uint8_t> outcomes_;
    size_t outcome_next_ = 0;
    size_t outcome_count_ = 0;

    // Scratch for search(); kept to avoid reallocating.
    std::vector<Nanos> candidates_;
    std::vector<Nanos> scratch_lags_;
    std::vector<Nanos> scratch_;
    std::vector<Pick> picks_;
    uint64_t history_version_ = 0;  // bumps whenever the history changes
    uint64_t gap_cache_version_ = UINT64_MAX;
    size_t gap_cache_w_ = 0;
    Nanos gap_cache_ = 0;
    size_t failed_searches_ = 0;  // since the last lock (search back-off)
    size_t search_skip_ = 0;      // events to skip before the next search
};

}  // namespace atlas::sched
