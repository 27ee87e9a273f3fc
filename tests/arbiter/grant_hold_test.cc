// GrantHold (scheduler/grant_hold.h): the hold/drain rule both plugin gates run. A released
// grant is kept until its bytes crossed the link at the rate given, never past its slot; a
// message in that window resumes it; without a rate the grant goes back at once.
#include <gtest/gtest.h>

#include "scheduler/grant_hold.h"

namespace atlas::sched {
namespace {

using A = GrantHold::Acquire;
using G = GrantHold::Granted;
using R = GrantHold::Release;
using P = GrantHold::Phase;

constexpr uint64_t kMBps = 8'000'000;  // 1 MB/s: 1000 bytes take 1 ms

TEST(GrantHold, DrainEndIsStartPlusBytesOverRate) {
    EXPECT_EQ(drainEndNs(1000, 100'000, kMBps), 1000 + 100 * kNsPerMs);
    EXPECT_EQ(drainEndNs(1000, 100'000, 0), 1000) << "unknown rate: no hold";
    EXPECT_EQ(drainEndNs(kNever - 10, 1ull << 60, 1), kNever) << "saturates";
}

TEST(GrantHold, DrainedGrantIsHeldUntilItsBytesCrossedAndResumesWithoutAsking) {
    GrantHold h;
    EXPECT_EQ(h.acquire(0), A::kAsk);
    EXPECT_TRUE(h.waiting());
    EXPECT_EQ(h.untilNs(), 0) << "no grant: holds() is false";
    EXPECT_EQ(h.onGrant(10 * kNsPerMs, kNever), G::kWake);
    EXPECT_EQ(h.untilNs(), kNever);
    EXPECT_EQ(h.acquire(10 * kNsPerMs), A::kHolds) << "the grant came before the engine asked";
    // The kernel took 100 KB at once, at t = 11 ms: they cross until 10 + 100 ms.
    EXPECT_EQ(h.release(100'000, 11 * kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(h.phase(), P::kDraining);
    EXPECT_EQ(h.dueNs(), 110 * kNsPerMs);
    EXPECT_FALSE(h.finishDrain(109 * kNsPerMs));
    // The next message at 50 ms resumes the grant; its bytes count from the same start.
    EXPECT_EQ(h.acquire(50 * kNsPerMs), A::kResumed);
    EXPECT_EQ(h.release(50'000, 51 * kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(h.dueNs(), 160 * kNsPerMs);
    EXPECT_EQ(h.grantBytes(), 150'000u);
    EXPECT_TRUE(h.finishDrain(160 * kNsPerMs));
    EXPECT_EQ(h.phase(), P::kIdle);
    EXPECT_EQ(h.untilNs(), 0);
    EXPECT_EQ(h.dueNs(), kNever);
}

TEST(GrantHold, WithoutARateTheGrantGoesBackWhenTheQueueDrains) {
    GrantHold h;
    h.acquire(0);
    h.onGrant(0, kNever);
    EXPECT_EQ(h.release(100'000, 1, 0), R::kGiveBack);
    EXPECT_EQ(h.phase(), P::kIdle);
    EXPECT_EQ(h.grantBytes(), 100'000u) << "what the give-back reports";
}

TEST(GrantHold, TheHoldNeverOutlastsTheSlot) {
    GrantHold h;
    h.acquire(0);
    h.onGrant(0, 20 * kNsPerMs);
    EXPECT_EQ(h.release(100'000, 1, kMBps), R::kHold);
    EXPECT_EQ(h.dueNs(), 20 * kNsPerMs) << "slot end, not 100 ms";
    // A message after the slot end cannot resume: give the grant back, then ask again.
    EXPECT_EQ(h.acquire(20 * kNsPerMs), A::kGiveBack);
    EXPECT_TRUE(h.waiting());
    // Released after the slot end: nothing left to hold.
    GrantHold late;
    late.acquire(0);
    late.onGrant(0, 20 * kNsPerMs);
    EXPECT_EQ(late.release(1000, 25 * kNsPerMs, kMBps), R::kGiveBack);
}

TEST(GrantHold, TheRateIsTakenAtEachRelease) {
    // A measured rate (issue 17) may change between messages: the due follows it.
    GrantHold h;
    h.acquire(0);
    h.onGrant(0, kNever);
    h.release(100'000, 1, kMBps);
    EXPECT_EQ(h.dueNs(), 100 * kNsPerMs);
    h.acquire(2);
    h.release(0, 3, kMBps / 2);
    EXPECT_EQ(h.dueNs(), 200 * kNsPerMs);
}

TEST(GrantHold, RenewalsKeepCountingAndUnwantedGrantsAreSaid) {
    GrantHold h;
    EXPECT_EQ(h.onGrant(0, 10), G::kUnwanted) << "nothing asked";
    h.acquire(0);
    h.onGrant(0, 10 * kNsPerMs);
    h.release(5'000, 1, kMBps);
    EXPECT_EQ(h.onGrant(10 * kNsPerMs, 20 * kNsPerMs), G::kRenewed);
    EXPECT_EQ(h.phase(), P::kDraining) << "a renewal keeps the drain";
    EXPECT_EQ(h.dueNs(), 5 * kNsPerMs);
    EXPECT_EQ(h.acquire(6 * kNsPerMs), A::kResumed);
    h.release(5'000, 7 * kNsPerMs, kMBps);
    EXPECT_EQ(h.dueNs(), 10 * kNsPerMs) << "10 KB from the first grant's start";
    // Granted again after an acquire whose slot had ended: asks, then a fresh count.
    GrantHold g;
    g.acquire(0);
    g.onGrant(0, 10);
    EXPECT_EQ(g.acquire(10), A::kAsk);
    EXPECT_EQ(g.onGrant(20, 30), G::kWake);
    EXPECT_EQ(g.grantBytes(), 0u);
}

TEST(GrantHold, OpenSendsFreelyAndReleasesNothing) {
    GrantHold h;
    h.open();
    EXPECT_EQ(h.untilNs(), kNever);
    EXPECT_EQ(h.release(1000, 1, kMBps), R::kNone);
    EXPECT_EQ(h.onGrant(2, 3), G::kUnwanted);
    h.open();
    h.reset();
    EXPECT_EQ(h.untilNs(), 0);
    EXPECT_EQ(h.acquire(5), A::kAsk);
}

}  // namespace
}  // namespace atlas::sched
