// Helpers of the BubblePredictor tests (bubble_predictor_test.cc: the track model;
// bubble_open_wait_test.cc: the window of the wait open now): polling the predictor as a
// reader of the bubble channel, and predicting with a wait open.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "scheduler/bubble_predictor.h"

namespace atlas::sched::testing {

inline constexpr Nanos kP = 100 * kNsPerMs;
inline constexpr Nanos kStep = 500 * kNsPerUs;

// What a reader of the bubble channel saw: it polls the predictor every `step`, the way the
// plugin republishes, and at each instant trusts the latest prediction. Intervals are
// observed when they end, as the plugin learns about a receive wait only when it finishes.
struct Poll {
    Nanos now = 0;
    PredictionStatus status = PredictionStatus::kOk;
    LossReason reason = LossReason::kNone;
};

struct Live {
    std::vector<Interval> predicted;  // the union of what was believed, instant by instant
    std::vector<Poll> polls;
};

// With config.confirm_open the caller also reports the interval open at each poll, as the
// plugin's recorder does.
inline Live runLive(BubblePredictor& p, const std::vector<Interval>& observed, Nanos from,
                    Nanos to) {
    Live live;
    size_t next = 0;
    std::vector<PredictedWindow> out;
    for (Nanos now = from; now < to; now += kStep) {
        while (next < observed.size() && observed[next].end_ns <= now) {
            EXPECT_TRUE(p.observe(observed[next]).isOk());
            ++next;
        }
        const bool open = next < observed.size() && observed[next].start_ns <= now;
        p.noteOpen(open ? observed[next].start_ns : 0);
        const PredictionStatus st = p.predict(now, &out);
        live.polls.push_back({now, st, p.lossReason(now)});
        if (st != PredictionStatus::kOk) {
            EXPECT_TRUE(out.empty());
        }
        for (const PredictedWindow& w : out) {
            EXPECT_LT(w.start_ns, w.end_ns);
            EXPECT_GT(w.end_ns, now);
            const Interval clipped{std::max(w.start_ns, now), std::min(w.end_ns, now + kStep)};
            if (clipped.end_ns > clipped.start_ns) {
                live.predicted.push_back(clipped);
            }
        }
    }
    return live;
}

// The window whose wait has begun (confirm_open), or null.
inline const PredictedWindow* openWindowIn(const std::vector<PredictedWindow>& windows) {
    const auto it =
        std::find_if(windows.begin(), windows.end(), [](const auto& w) { return w.open; });
    return it == windows.end() ? nullptr : &*it;
}

// predict() at now_ns with the wait open since open_ns: its window, if it has one.
inline std::optional<PredictedWindow> openWindowAt(BubblePredictor& p, Nanos open_ns,
                                                   Nanos now_ns) {
    p.noteOpen(open_ns);
    std::vector<PredictedWindow> out;
    EXPECT_EQ(p.predict(now_ns, &out), PredictionStatus::kOk);
    const PredictedWindow* w = openWindowIn(out);
    return w != nullptr ? std::optional(*w) : std::nullopt;
}

// A confirm_open predictor (guard_ns) after 30 iterations of period_ns from t = 1 s, each with
// the idle intervals bubbles_ms ({start, end} in ms from the iteration start).
inline BubblePredictor trainedOnOpen(Nanos period_ns,
                                     std::initializer_list<std::pair<int, int>> bubbles_ms,
                                     Nanos guard_ns) {
    BubblePredictorConfig cfg;
    cfg.guard_ns = guard_ns;
    cfg.confirm_open = true;
    BubblePredictor p(cfg);
    for (int i = 0; i < 30; ++i) {
        const Nanos it0 = kNsPerSec + i * period_ns;
        for (const auto& [start, end] : bubbles_ms) {
            EXPECT_TRUE(p.observe({it0 + start * kNsPerMs, it0 + end * kNsPerMs}).isOk());
        }
    }
    return p;
}

// Feeds `waits` as the plugin sees them: each opens, predict() runs 200 us later and
// check(k, its open window) judges it, then the wait ends and is observed.
template <typename Check>
void feedOpenByOpen(BubblePredictor& p, const std::vector<Interval>& waits, Check check) {
    for (size_t k = 0; k < waits.size(); ++k) {
        SCOPED_TRACE(k);
        check(k, openWindowAt(p, waits[k].start_ns, waits[k].start_ns + 200 * kNsPerUs));
        p.noteOpen(0);
        ASSERT_TRUE(p.observe(waits[k]).isOk());
    }
}

}  // namespace atlas::sched::testing
