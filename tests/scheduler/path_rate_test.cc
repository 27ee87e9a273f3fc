// sched::PathRate: the path rate from message trains. What it must do: nothing before it has
// samples (the first grants are never held on a guess), the rate of exclusive trains, a high
// quantile so one compressed train cannot inflate it, ignore trains too small or too short to
// mean anything, and follow a rate change once the old samples age out.
#include <gtest/gtest.h>

#include "scheduler/path_rate.h"

namespace atlas::sched {
namespace {

constexpr uint64_t kMiB = 1ull << 20;
constexpr Nanos kMs = kNsPerMs;

// A train of `bytes` ending at `end` that crossed a path of `gbps`.
void train(PathRate& p, uint64_t bytes, double gbps, Nanos end) {
    const auto ns = static_cast<Nanos>(static_cast<double>(bytes) * 8 / gbps);
    p.addMessage(bytes, end - ns, end);
}

TEST(PathRate, UnknownUntilEnoughSamples) {
    PathRate p;
    EXPECT_EQ(p.bitsPerSec(0), 0u);
    train(p, 4 * kMiB, 1.0, 100 * kMs);
    train(p, 4 * kMiB, 1.0, 200 * kMs);
    EXPECT_EQ(p.bitsPerSec(200 * kMs), 0u) << "two samples are not an estimate";
    train(p, 4 * kMiB, 1.0, 300 * kMs);
    EXPECT_NEAR(static_cast<double>(p.bitsPerSec(300 * kMs)), 1e9, 1e6);
}

TEST(PathRate, SmallOrInstantTrainsAreNotSamples) {
    PathRate p;
    EXPECT_FALSE(p.addMessage(512 * 1024, 0, 5 * kMs));                     // below 1 MiB
    EXPECT_FALSE(p.addMessage(8 * kMiB, 10 * kMs, 10 * kMs + 100 * 1000));  // 0.1 ms
    EXPECT_TRUE(p.addMessage(8 * kMiB, 10 * kMs, 80 * kMs));
    EXPECT_EQ(p.samples(80 * kMs), 1u);
}

TEST(PathRate, SharedTrainsSitLowAndExclusiveOnesLiftIt) {
    PathRate p;
    Nanos t = 0;
    // Fair sharing by four flows: each train is a quarter of the 1 Gbit/s path.
    for (int i = 0; i < 8; ++i) {
        train(p, 2 * kMiB, 0.25, t += 30 * kMs);
    }
    EXPECT_NEAR(static_cast<double>(p.bitsPerSec(t)), 0.25e9, 1e6);
    // Temporal sharing from now on: exclusive trains. Once a quarter of the window's samples
    // are exclusive the quantile is the path's rate.
    for (int i = 0; i < 4; ++i) {
        train(p, 2 * kMiB, 1.0, t += 30 * kMs);
    }
    EXPECT_NEAR(static_cast<double>(p.bitsPerSec(t)), 1e9, 1e6);
}

TEST(PathRate, OneCompressedTrainDoesNotInflateIt) {
    PathRate p;
    Nanos t = 0;
    for (int i = 0; i < 15; ++i) {
        train(p, 2 * kMiB, 1.0, t += 30 * kMs);
    }
    // The receiver read a backlog at once: the train looks 20 times faster than the path.
    train(p, 2 * kMiB, 20.0, t += 30 * kMs);
    EXPECT_NEAR(static_cast<double>(p.bitsPerSec(t)), 1e9, 1e6);
}

TEST(PathRate, FollowsARateDropWithinTheWindow) {
    PathRate p;  // window 3 s
    Nanos t = 0;
    for (int i = 0; i < 16; ++i) {
        train(p, 2 * kMiB, 1.0, t += 100 * kMs);
    }
    EXPECT_NEAR(static_cast<double>(p.bitsPerSec(t)), 1e9, 1e6);
    // The path drops to 0.5 Gbit/s; a transfer every 100 ms.
    const Nanos drop = t;
    Nanos settled = -1;
    for (int i = 0; i < 60; ++i) {
        train(p, 2 * kMiB, 0.5, t += 100 * kMs);
        if (settled < 0 && p.bitsPerSec(t) < 0.55e9) {
            settled = t;
        }
    }
    ASSERT_GE(settled, 0) << "never followed the drop";
    EXPECT_LE(settled - drop, 2 * kNsPerSec);
    EXPECT_NEAR(static_cast<double>(p.bitsPerSec(t)), 0.5e9, 1e6);
    // No samples for longer than the window: the newest three still count for max_age (10 s),
    // then the rate is unknown again, not a stale rate.
    EXPECT_NEAR(static_cast<double>(p.bitsPerSec(t + 4 * kNsPerSec)), 0.5e9, 1e6);
    EXPECT_EQ(p.bitsPerSec(t + 11 * kNsPerSec), 0u);
}

TEST(PathRate, ALevelShiftIsFollowedAfterThreeSamplesNotTheWindow) {
    // Dense samples at 1 Gbit/s, then the path drops to 0.5 and samples come every 500 ms (64
    // MiB-ish messages): the window still holds a dozen old samples when three new ones are
    // in, and the quantile alone would wait for them to age out (3 s).
    PathRate p;
    Nanos t = 0;
    for (int i = 0; i < 16; ++i) {
        train(p, 4 * kMiB, 1.0, t += 100 * kMs);
    }
    const Nanos drop = t;
    train(p, 32 * kMiB, 0.5, t += 500 * kMs);
    train(p, 32 * kMiB, 0.52, t += 500 * kMs);
    EXPECT_NEAR(static_cast<double>(p.bitsPerSec(t)), 1e9, 1e6) << "two samples are no shift";
    train(p, 32 * kMiB, 0.48, t += 500 * kMs);
    EXPECT_NEAR(static_cast<double>(p.bitsPerSec(t)), 0.5e9, 1e6)
        << "the median of the three newest, " << (t - drop) / kMs << " ms after the drop";
    // Upward too: the shared trains of the first, unheld grants, then exclusive ones (the
    // quantile of 12 shares and 3 exclusive trains is still a share).
    PathRate u;
    t = 0;
    for (int i = 0; i < 12; ++i) {
        train(u, 2 * kMiB, 0.25, t += 30 * kMs);
    }
    for (int i = 0; i < 3; ++i) {
        train(u, 2 * kMiB, 0.96, t += 30 * kMs);
    }
    EXPECT_NEAR(static_cast<double>(u.bitsPerSec(t)), 0.96e9, 1e6);
    // Newest samples that straddle the quantile are no shift: the quantile stands.
    PathRate q;
    t = 0;
    for (int i = 0; i < 12; ++i) {
        train(q, 4 * kMiB, 1.0, t += 100 * kMs);
    }
    train(q, 4 * kMiB, 0.5, t += 100 * kMs);
    train(q, 4 * kMiB, 1.3, t += 100 * kMs);
    train(q, 4 * kMiB, 0.5, t += 100 * kMs);
    EXPECT_NEAR(static_cast<double>(q.bitsPerSec(t)), 1e9, 1e6);
}

TEST(PathRate, SparseSamplesKeepAnEstimate) {
    // 64 MiB messages at 0.5 Gbit/s, one every 1.6 s: a 3 s window holds two samples.
    PathRate p;
    Nanos t = 0;
    for (int i = 0; i < 10; ++i) {
        train(p, 64 * kMiB, 0.5, t += 1600 * kMs);
        if (i >= 2) {
            EXPECT_NEAR(static_cast<double>(p.bitsPerSec(t)), 0.5e9, 1e6) << "sample " << i;
        }
    }
    EXPECT_EQ(p.samples(t), 3u);  // two in the window, one more of the newest three
}

}  // namespace
}  // namespace atlas::sched
