#include "scheduler/interval_accuracy.h"

#include <gtest/gtest.h>

#include <vector>

namespace atlas::sched {
namespace {

TEST(IntervalAccuracyTest, ExactOverlap) {
    const std::vector<Interval> observed = {{0, 10}, {20, 30}};
    const std::vector<Interval> predicted = {{5, 25}};
    const Accuracy a = measureAccuracy(observed, predicted);
    EXPECT_EQ(a.observed_ns, 20);
    EXPECT_EQ(a.predicted_ns, 20);
    EXPECT_EQ(a.overlap_ns, 10);
    EXPECT_DOUBLE_EQ(a.coverage, 0.5);
    EXPECT_DOUBLE_EQ(a.precision, 0.5);
}

TEST(IntervalAccuracyTest, MergesOverlapsAndIgnoresOrder) {
    // Predicted windows overlap each other and arrive unsorted; they cover [2, 12) once.
    const std::vector<Interval> observed = {{0, 10}};
    const std::vector<Interval> predicted = {{6, 12}, {2, 8}, {4, 5}};
    const Accuracy a = measureAccuracy(observed, predicted);
    EXPECT_EQ(a.predicted_ns, 10);
    EXPECT_EQ(a.overlap_ns, 8);
    EXPECT_DOUBLE_EQ(a.coverage, 0.8);
    EXPECT_DOUBLE_EQ(a.precision, 0.8);
    const std::vector<Interval> merged = normalizeIntervals(predicted);
    ASSERT_EQ(merged.size(), 1u);
    EXPECT_EQ(merged[0], (Interval{2, 12}));
}

TEST(IntervalAccuracyTest, RangeLimitsTheAccounting) {
    const std::vector<Interval> observed = {{0, 100}};
    const std::vector<Interval> predicted = {{50, 150}};
    const Accuracy a = measureAccuracy(observed, predicted, Interval{40, 120});
    EXPECT_EQ(a.observed_ns, 60);   // [40, 100)
    EXPECT_EQ(a.predicted_ns, 70);  // [50, 120)
    EXPECT_EQ(a.overlap_ns, 50);    // [50, 100)
    EXPECT_DOUBLE_EQ(a.coverage, 50.0 / 60.0);
    EXPECT_DOUBLE_EQ(a.precision, 50.0 / 70.0);
}

TEST(IntervalAccuracyTest, EmptyListsAreVacuouslyPerfect) {
    const std::vector<Interval> some = {{0, 10}};
    const std::vector<Interval> none;
    const Accuracy nothing_predicted = measureAccuracy(some, none);
    EXPECT_DOUBLE_EQ(nothing_predicted.coverage, 0.0);
    EXPECT_DOUBLE_EQ(nothing_predicted.precision, 1.0);
    const Accuracy nothing_idle = measureAccuracy(none, some);
    EXPECT_DOUBLE_EQ(nothing_idle.coverage, 1.0);
    EXPECT_DOUBLE_EQ(nothing_idle.precision, 0.0);
    // Zero-length and inverted intervals count for nothing.
    const std::vector<Interval> degenerate = {{5, 5}, {9, 3}};
    EXPECT_EQ(measureAccuracy(degenerate, some).observed_ns, 0);
}

}  // namespace
}  // namespace atlas::sched
