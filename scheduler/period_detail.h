// Constants and helpers shared by the PeriodDetector's tracking (period_detector.cc) and
// its candidate search (period_search.cc); the floor arithmetic also serves the bubble
// predictor's phase folding. Internal to the scheduler library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "scheduler/types.h"

namespace atlas::sched::period_detail {

// Newest events whose lags to every older event become period candidates. Three covers a
// dropped newest event and a noise event without making the search quadratic in practice.
inline constexpr size_t kCandidateSources = 3;
// A match window that a random offset hits this often cannot tell structure from chance.
inline constexpr double kChanceCeiling = 0.9;
// Fewest evaluable events for a score to mean anything.
inline constexpr size_t kMinEvaluated = 3;
// Lag-2 matches (an event two periods back, for dropped events) get a wider window: the lag
// jitter of two iterations adds up.
inline constexpr double kLag2Widen = 1.5;
// Prefer the smallest candidate within this much of the best score: a pattern with period P
// is also periodic in 2P, 3P, which the chance correction only partly penalises.
inline constexpr double kSubmultipleSlack = 0.1;
// A candidate's window (history after its last pause-length gap) must hold this share of
// the history; see search().
inline constexpr double kMinWindowShare = 0.75;
// While locked, every kReconsiderWindows * track_window events the detector checks whether a
// multiple of its period explains the history better by at least this much (see reconsider()).
inline constexpr double kUpgradeMargin = 0.15;
inline constexpr size_t kReconsiderWindows = 4;
// Largest k tried when looking for k * period (or period / k) while locked.
inline constexpr int64_t kMaxMultipleFactor = 16;
inline constexpr int64_t kMaxDivisorFactor = 8;
// Failed searches per extra skipped event of search back-off.
inline constexpr size_t kSearchBackoffEvery = 8;
// The narrow match window is this fraction of the median gap between events.
inline constexpr double kGapTolerance = 0.3;
// A tracked anchor older than this many periods is re-derived from the folded history.
inline constexpr int64_t kStaleAnchorCycles = 8;

inline Nanos floorDiv(Nanos a, Nanos b) {
    Nanos q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) {
        --q;
    }
    return q;
}

inline Nanos floorMod(Nanos a, Nanos b) {
    return a - floorDiv(a, b) * b;
}

inline Nanos circularDistance(Nanos a, Nanos b, Nanos period) {
    Nanos d = floorMod(a - b, period);
    return std::min(d, period - d);
}

// Median of v (upper median for even sizes); reorders v.
inline Nanos medianOf(std::vector<Nanos>& v) {
    auto mid = v.begin() + static_cast<ptrdiff_t>(v.size() / 2);
    std::nth_element(v.begin(), mid, v.end());
    return *mid;
}

// P(X >= m) for X ~ Binomial(n, p): how likely m matches out of n are by chance alone.
// One lgamma triple for the first term, then the term ratio.
inline double binomialTail(size_t n, size_t m, double p) {
    if (m == 0 || p >= 1.0) {
        return 1.0;
    }
    if (p <= 0.0 || m > n) {
        return 0.0;
    }
    const double nd = static_cast<double>(n);
    const double md = static_cast<double>(m);
    double term =
        std::exp(std::lgamma(nd + 1.0) - std::lgamma(md + 1.0) - std::lgamma(nd - md + 1.0) +
                 md * std::log(p) + (nd - md) * std::log1p(-p));
    const double odds = p / (1.0 - p);
    double sum = 0.0;
    for (size_t k = m; k <= n; ++k) {
        sum += term;
        term *= static_cast<double>(n - k) / static_cast<double>(k + 1) * odds;
    }
    return std::min(sum, 1.0);
}

inline double adjustedScore(double raw, double chance) {
    if (chance >= kChanceCeiling) {
        return -1.0;
    }
    return (raw - chance) / (1.0 - chance);
}

}  // namespace atlas::sched::period_detail
