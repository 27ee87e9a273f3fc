// BubblePredictor's track matching: which track of the iteration an idle interval belongs to
// (by sequence, by phase, by order), and, when none, the shift of the whole pattern that
// explains it (resync). Learning (assign) and prediction (predict, the open wait) both ask
// this; docs/bubbles.md explains each rule with the recording that motivated it.
#include <algorithm>
#include <cstdlib>

#include "scheduler/bubble_predictor.h"
#include "scheduler/period_detail.h"

namespace atlas::sched {

namespace {

using period_detail::floorDiv;
using period_detail::floorMod;

// Rounds a/b to the nearest integer (b > 0).
int64_t roundDiv(Nanos a, Nanos b) {
    return floorDiv(a + b / 2, b);
}

}  // namespace

BubblePredictor::Match BubblePredictor::match(Nanos start_ns, Nanos length_ns,
                                              const PeriodEstimate& est, bool by_order) const {
    const Nanos period = est.period_ns;
    const Nanos narrow = trackTolerance(period);
    const Nanos wide = std::max(
        narrow, static_cast<Nanos>(config_.detector.tolerance * static_cast<double>(period)));
    // Two phase references. The anchor's: start - anchor, exact while the anchor advances
    // with every iteration, off by the iteration-length jitter when it has not. The chain's:
    // the offset of the track the previous interval joined plus the time since it started,
    // which carries only the jitter between two neighbouring bubbles. Both are matched
    // narrowly, so bubbles a few ms apart stay separate tracks.
    const Nanos anchor_phase = floorMod(start_ns - est.anchor_ns, period);
    const bool chained = chain_valid_ && start_ns - chain_start_ns_ < period;
    const Nanos chain_phase =
        chained ? floorMod(chain_offset_ + (start_ns - chain_start_ns_), period) : anchor_phase;
    auto cycleOf = [&](Nanos phase, const Track& s) {
        Nanos offset = phase;  // unwrapped next to the track offset
        if (offset - s.offset > period / 2) {
            offset -= period;
        } else if (s.offset - offset > period / 2) {
            offset += period;
        }
        return est.anchor_cycle + roundDiv(start_ns - est.anchor_ns - offset, period);
    };
    // fresh_only: only a track this iteration has not filled yet. min_count: only tracks with
    // at least that many samples.
    auto nearest = [&](Nanos phase, Nanos tol, bool fresh_only, size_t min_count) {
        size_t best = tracks_.size();
        Nanos best_dist = tol + 1;
        for (size_t i = 0; i < tracks_.size(); ++i) {
            const Nanos d = floorMod(phase - tracks_[i].offset, period);
            const Nanos dist = std::min(d, period - d);
            if (dist < best_dist && tracks_[i].count >= min_count &&
                lengthFits(length_ns, tracks_[i]) &&
                !(fresh_only && tracks_[i].count > 0 &&
                  tracks_[i].last_cycle >= cycleOf(phase, tracks_[i]))) {
                best_dist = dist;
                best = i;
            }
        }
        return best;
    };
    const Nanos lead = start_ns - chain_end_ns_;
    Match m;
    m.track = tracks_.size();
    m.phase = anchor_phase;
    if (chained) {
        // Sequence: a stage's bubbles come in the same order every iteration, each after a
        // stretch of compute from the previous one's end that varies far less than the waits
        // do. So the track that followed the previous interval's track after this lead is this
        // interval's, however far the waits before it moved its phase: bubbles 20 ms apart
        // behind a wait that varies by 10 ms are told apart only this way.
        m.track = bySequence(lead, true, narrow / 2, length_ns,
                             [&](const Track& s) { return cycleOf(chain_phase, s); });
        m.phase = chain_phase;
        if (m.track < tracks_.size()) {
            // The sample's phase only feeds the track's offset: take the reference that agrees
            // with the track, the other carries the jitter that kept the phase rules from
            // placing it (replays: precision 98.7 -> 99.1% on one GPipe stage).
            auto dist = [&](Nanos phase) {
                const Nanos d = floorMod(phase - tracks_[m.track].offset, period);
                return std::min(d, period - d);
            };
            if (dist(anchor_phase) < dist(chain_phase)) {
                m.phase = anchor_phase;
            }
        }
    }
    // Phase, narrowly: the chain first (it carries the jitter of one neighbour, the anchor
    // that of a whole iteration, and after a slow iteration the detector's anchor may sit on
    // another bubble kind), and tracks with enough samples to be predicted before the others
    // (a stray track left by a warm-up or a disturbed iteration must not capture a bubble whose
    // own track is a few ms further).
    for (const size_t min_count : {static_cast<size_t>(config_.min_track_samples), size_t{0}}) {
        if (m.track == tracks_.size() && chained) {
            m.track = nearest(chain_phase, narrow, false, min_count);
            m.phase = chain_phase;
        }
        if (m.track == tracks_.size()) {
            m.track = nearest(anchor_phase, narrow, false, min_count);
            m.phase = anchor_phase;
        }
    }
    if (m.track == tracks_.size() && chained && by_order) {
        // Order, learned: the track that follows the previous interval's, whatever the lead (a
        // slow iteration lengthens the compute before a bubble, not the bubble). Only for the
        // open interval's window, like the offset order below.
        m.track = bySequence(lead, false, narrow / 2, length_ns,
                             [&](const Track& s) { return cycleOf(s.offset, s); });
        if (m.track < tracks_.size()) {
            m.phase = tracks_[m.track].offset;
        }
    }
    if (m.track == tracks_.size()) {
        // The first bubble after an iteration boundary carries that iteration's jitter on
        // both references: a wide match on the chain, but only to a track this iteration has
        // not filled yet (a new bubble kind next to a known one is a new track).
        m.track = nearest(chain_phase, wide, true, 0);
        m.phase = m.track == tracks_.size() ? anchor_phase : chain_phase;
    }
    if (m.track == tracks_.size() && chained && by_order) {
        // Order by offset, for a sequence not seen yet: a stage's bubbles come in the same
        // order every iteration, while a wait that ran long (a slow peer) shifts every bubble
        // after it. So the track that follows the previous interval's track, if this iteration
        // has not filled it, its length fits and it is within a quarter period: matched on its
        // own offset (the shift shows in the alignment, not in the track). Only for the open
        // interval's window (predict()): learning keeps such an interval unmatched, so a
        // changed pattern still opens new tracks (applied in assign() too, replays of recorded
        // GPipe runs lost 3-6 points of coverage on a pattern change).
        size_t next = tracks_.size();
        Nanos next_gap = period;
        for (size_t i = 0; i < tracks_.size(); ++i) {
            const Nanos gap = floorMod(tracks_[i].offset - chain_offset_, period);
            if (gap > narrow && gap < next_gap && hitRate(tracks_[i]) >= config_.min_track_rate) {
                next_gap = gap;
                next = i;
            }
        }
        if (next < tracks_.size()) {
            const Track& s = tracks_[next];
            const Nanos d = floorMod(chain_phase - s.offset, period);
            if (std::min(d, period - d) <= period / 4 && lengthFits(length_ns, s) &&
                !(s.count > 0 && s.last_cycle >= cycleOf(s.offset, s))) {
                m.track = next;
                m.phase = s.offset;
            }
        }
    }
    if (m.track < tracks_.size()) {
        m.cycle = cycleOf(m.phase, tracks_[m.track]);
    }
    return m;
}

template <typename CycleOf>
size_t BubblePredictor::bySequence(Nanos lead_ns, bool match_lead, Nanos tol_ns, Nanos length_ns,
                                   CycleOf cycle_of) const {
    size_t best = tracks_.size();
    size_t best_score = static_cast<size_t>(config_.min_track_samples) - 1;
    for (size_t i = 0; i < tracks_.size(); ++i) {
        const Track& s = tracks_[i];
        size_t score = 0;
        for (size_t k = 0; k < s.count; ++k) {
            const Sample& x = s.samples[k];
            if (x.pred == chain_track_id_ &&
                (!match_lead || std::llabs(x.lead - lead_ns) <= tol_ns) &&
                lengthFitsSample(length_ns, x.duration, tol_ns)) {
                ++score;
            }
        }
        if (score > best_score && s.last_cycle < cycle_of(s)) {
            best_score = score;
            best = i;
        }
    }
    return best;
}

Nanos BubblePredictor::trackTolerance(Nanos period_ns) const {
    return std::min(static_cast<Nanos>(config_.track_tolerance * static_cast<double>(period_ns)),
                    config_.track_tolerance_max_ns);
}

bool BubblePredictor::lengthFits(Nanos length_ns, const Track& track) {
    // Loose on purpose: bubble lengths vary (a wait ends when a transfer does); this only
    // keeps a long wait from joining a short one's track, or the reverse, when a shifted
    // pattern puts it there. An open interval (length_ns < 0) has lasted -length_ns - 1 so
    // far: a lower bound. Once it has outlasted every sample of the track it is not that
    // track's bubble (no window would follow from it either, see durationGiven()), so it is
    // matched elsewhere at once rather than once it has also outlasted the slack.
    if (track.count == 0) {
        return true;
    }
    if (length_ns < 0) {
        return -length_ns - 1 < track.max_duration;
    }
    const Nanos slack = std::max(2 * track.duration, 10 * kNsPerMs);
    return std::llabs(length_ns - track.duration) <= slack;
}

bool BubblePredictor::lengthFitsSample(Nanos length_ns, Nanos sample_ns, Nanos tol_ns) {
    if (length_ns < 0) {
        return -length_ns - 1 < sample_ns;
    }
    return std::llabs(length_ns - sample_ns) <= std::max(tol_ns, sample_ns / 4);
}

BubblePredictor::Match BubblePredictor::resync(const Interval& idle,
                                               const PeriodEstimate& est) const {
    const Nanos period = est.period_ns;
    const Nanos narrow = trackTolerance(period);
    auto fits = [](const Interval& iv, const Track& s) {
        return std::llabs(iv.length() - s.duration) <= std::max(s.duration / 4, 2 * kNsPerMs);
    };
    Match best;
    best.track = tracks_.size();
    int best_score = 1;  // the interval itself plus at least one more
    for (size_t j = 0; j < tracks_.size(); ++j) {
        const Track& cand = tracks_[j];
        if (cand.count < static_cast<size_t>(config_.min_track_samples) || !fits(idle, cand)) {
            continue;
        }
        // Suppose the interval is track j's bubble: then this iteration started at `begin`,
        // and the other unmatched intervals of the last period should land on tracks too.
        const Nanos begin = idle.start_ns - cand.offset;
        int score = 1;
        for (size_t u = 0; u < unmatched_count_; ++u) {
            const Interval& iv = unmatched_[u];
            if (iv.start_ns >= idle.start_ns || idle.start_ns - iv.start_ns >= period) {
                continue;
            }
            const Nanos phase = floorMod(iv.start_ns - begin, period);
            for (const Track& k : tracks_) {
                const Nanos d = floorMod(phase - k.offset, period);
                if (std::min(d, period - d) <= narrow && fits(iv, k)) {
                    ++score;
                    break;
                }
            }
        }
        if (score > best_score) {
            best_score = score;
            best.track = j;
            best.phase = cand.offset;
            best.cycle =
                est.anchor_cycle + roundDiv(idle.start_ns - est.anchor_ns - cand.offset, period);
        }
    }
    return best;
}

}  // namespace atlas::sched
