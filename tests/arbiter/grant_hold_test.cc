// GrantHold (scheduler/grant_hold.h): the hold/drain rule both plugin gates run. A released
// grant is kept until its bytes crossed the link at the rate given, never past its slot; a
// message in that window resumes it; without a rate the grant goes back at once. A grant's
// byte budget is its slot's link time at the rate; a flow that spent it waits for its own
// drain and then asks again.
#include <gtest/gtest.h>

#include "scheduler/grant_hold.h"

namespace atlas::sched {
namespace {

using A = GrantHold::Acquire;
using G = GrantHold::Granted;
using R = GrantHold::Release;
using P = GrantHold::Phase;

constexpr uint64_t kMBps = 8'000'000;  // 1 MB/s: 1000 bytes take 1 ms
// What the engine has queued when a test does not care: more than any slot carries.
constexpr uint64_t kQueued = 1ull << 40;

TEST(GrantHold, DrainEndIsStartPlusBytesOverRate) {
    EXPECT_EQ(drainEndNs(1000, 100'000, kMBps), 1000 + 100 * kNsPerMs);
    EXPECT_EQ(drainEndNs(1000, 100'000, 0), 1000) << "unknown rate: no hold";
    EXPECT_EQ(drainEndNs(kNever - 10, 1ull << 60, 1), kNever) << "saturates";
}

TEST(GrantHold, DrainedGrantIsHeldUntilItsBytesCrossedAndResumesWithoutAsking) {
    GrantHold h;
    EXPECT_EQ(h.acquire(0, kQueued, false), A::kAsk);
    EXPECT_TRUE(h.waiting());
    EXPECT_EQ(h.untilNs(), 0) << "no grant: holds() is false";
    EXPECT_EQ(h.onGrant(10 * kNsPerMs, kNever), G::kWake);
    EXPECT_EQ(h.untilNs(), kNever);
    EXPECT_EQ(h.acquire(10 * kNsPerMs, kQueued, false), A::kHolds)
        << "the grant came before the engine asked";
    // The kernel took 100 KB at once, at t = 11 ms: they cross until 10 + 100 ms.
    EXPECT_EQ(h.release(100'000, 11 * kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(h.phase(), P::kDraining);
    EXPECT_EQ(h.dueNs(), 110 * kNsPerMs);
    EXPECT_FALSE(h.finishDrain(109 * kNsPerMs));
    // The next message at 50 ms resumes the grant; its bytes count from the same start.
    EXPECT_EQ(h.acquire(50 * kNsPerMs, kQueued, false), A::kResumed);
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
    h.acquire(0, kQueued, false);
    h.onGrant(0, kNever);
    EXPECT_EQ(h.release(100'000, 1, 0), R::kGiveBack);
    EXPECT_EQ(h.phase(), P::kIdle);
    EXPECT_EQ(h.grantBytes(), 100'000u) << "what the give-back reports";
}

TEST(GrantHold, TheHoldNeverOutlastsTheSlot) {
    GrantHold h;
    h.acquire(0, kQueued, false);
    h.onGrant(0, 20 * kNsPerMs);
    EXPECT_EQ(h.release(100'000, 1, kMBps), R::kHold);
    EXPECT_EQ(h.dueNs(), 20 * kNsPerMs) << "slot end, not 100 ms";
    // A message after the slot end cannot resume: give the grant back, then ask again.
    EXPECT_EQ(h.acquire(20 * kNsPerMs, kQueued, false), A::kGiveBack);
    EXPECT_TRUE(h.waiting());
    // Released after the slot end: nothing left to hold.
    GrantHold late;
    late.acquire(0, kQueued, false);
    late.onGrant(0, 20 * kNsPerMs);
    EXPECT_EQ(late.release(1000, 25 * kNsPerMs, kMBps), R::kGiveBack);
}

TEST(GrantHold, TheBudgetIsTheSlotsLinkTimeLessWhatEarlierReleasesSent) {
    GrantHold h;
    EXPECT_EQ(h.budgetBytes(kMBps), 0u) << "no grant, no budget";
    h.acquire(0, kQueued, false);
    EXPECT_EQ(h.budgetBytes(kMBps), 0u) << "waiting";
    h.onGrant(0, 100 * kNsPerMs);
    EXPECT_EQ(h.budgetBytes(kMBps), 100'000u) << "100 ms at 1 MB/s";
    EXPECT_EQ(h.budgetBytes(2 * kMBps), 200'000u) << "the rate of the moment";
    EXPECT_EQ(h.budgetBytes(0), kQueued) << "unknown rate: what was asked for";
    EXPECT_EQ(h.release(30'000, kNsPerMs, kMBps), R::kHold);  // due at 30 ms
    EXPECT_EQ(h.acquire(2 * kNsPerMs, kQueued, false), A::kResumed);
    EXPECT_EQ(h.budgetBytes(kMBps), 70'000u) << "what the first release sent is spent";
    GrantHold endless;
    endless.acquire(0, kQueued, false);
    endless.onGrant(0, kNever);
    EXPECT_EQ(endless.budgetBytes(kMBps), kQueued) << "no slot end: what was asked for";
    GrantHold open;
    open.open();
    EXPECT_EQ(open.budgetBytes(kMBps), UINT64_MAX);
    // Resumed with room at the rate of its release, but the rate fell since: one more piece
    // may go (that release then fills the slot), never a release/resume loop without progress.
    GrantHold moved;
    moved.acquire(0, kQueued, false);
    moved.onGrant(0, 100 * kNsPerMs);
    EXPECT_EQ(moved.release(90'000, kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(moved.acquire(2 * kNsPerMs, kQueued, false), A::kResumed);
    EXPECT_EQ(moved.budgetBytes(kMBps / 2), 1u);
}

TEST(GrantHold, ASpentBudgetWaitsForItsOwnBytesThenAsksAgain) {
    GrantHold h;
    h.acquire(0, kQueued, false);
    h.onGrant(0, 100 * kNsPerMs);
    // The whole slot's bytes are committed at 2 ms: they cross until 100 ms.
    EXPECT_EQ(h.release(100'000, 2 * kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(h.dueNs(), 100 * kNsPerMs);
    // More data: no resume into a full slot (those bytes would run past its end, into the
    // next holder's turn); wait for the drain.
    EXPECT_EQ(h.acquire(3 * kNsPerMs, kQueued, false), A::kAfterDrain);
    EXPECT_EQ(h.phase(), P::kDraining);
    EXPECT_EQ(h.budgetBytes(kMBps), 0u);
    EXPECT_EQ(h.acquire(4 * kNsPerMs, kQueued, false), A::kAfterDrain)
        << "asking again changes nothing";
    EXPECT_FALSE(h.finishDrain(99 * kNsPerMs));
    EXPECT_TRUE(h.finishDrain(100 * kNsPerMs)) << "give the grant back...";
    EXPECT_TRUE(h.waiting()) << "...and ask for the link again";
    EXPECT_EQ(h.onGrant(120 * kNsPerMs, 220 * kNsPerMs), G::kWake);
    EXPECT_EQ(h.budgetBytes(kMBps), 100'000u) << "a new grant, a new slot's budget";
    // A drain nobody waits behind ends idle, as before.
    EXPECT_EQ(h.release(10'000, 121 * kNsPerMs, kMBps), R::kHold);
    EXPECT_TRUE(h.finishDrain(130 * kNsPerMs));
    EXPECT_EQ(h.phase(), P::kIdle);
}

TEST(GrantHold, AWaitBehindADrainEndsWithThatDrain) {
    // The engine gave up the wait (a release of the draining grant: close, revocation): the
    // next drain of this flow ends idle, it does not ask for the link on nobody's behalf.
    GrantHold h;
    h.acquire(0, kQueued, false);
    h.onGrant(0, 100 * kNsPerMs);
    EXPECT_EQ(h.release(100'000, 2 * kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(h.acquire(3 * kNsPerMs, kQueued, false), A::kAfterDrain);
    EXPECT_EQ(h.release(0, 4 * kNsPerMs, kMBps), R::kGiveBack);
    EXPECT_EQ(h.acquire(5 * kNsPerMs, kQueued, false), A::kAsk);
    h.onGrant(6 * kNsPerMs, 200 * kNsPerMs);
    EXPECT_EQ(h.release(10'000, 7 * kNsPerMs, kMBps), R::kHold);
    EXPECT_TRUE(h.finishDrain(16 * kNsPerMs));
    EXPECT_EQ(h.phase(), P::kIdle) << "this drain had no waiter";
}

TEST(GrantHold, ARenewalWakesAFlowThatWaitedBehindItsFullSlot) {
    GrantHold h;
    h.acquire(0, kQueued, false);
    h.onGrant(0, 100 * kNsPerMs);
    EXPECT_EQ(h.release(100'000, 2 * kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(h.acquire(3 * kNsPerMs, kQueued, false), A::kAfterDrain);
    // Nobody else waited: the arbiter renewed the slot. There is room again: wake the engine.
    EXPECT_EQ(h.onGrant(50 * kNsPerMs, 300 * kNsPerMs), G::kWake);
    EXPECT_EQ(h.phase(), P::kGranted);
    EXPECT_EQ(h.budgetBytes(kMBps), 200'000u) << "300 ms from the grant's start, less 100 KB";
    // A renewal of a drain nobody waits behind only moves the slot end.
    GrantHold quiet;
    quiet.acquire(0, kQueued, false);
    quiet.onGrant(0, 100 * kNsPerMs);
    EXPECT_EQ(quiet.release(100'000, 2 * kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(quiet.onGrant(50 * kNsPerMs, 300 * kNsPerMs), G::kRenewed);
    EXPECT_EQ(quiet.phase(), P::kDraining);
}

TEST(GrantHold, AContendedFlowTakesATurnPerTransfer) {
    // F0 (100 KB) queued at 0 asks for the link; F1 (50 KB) comes while the flow still waits:
    // the turn carries F0 only.
    GrantHold h;
    EXPECT_EQ(h.acquire(0, 100'000, false), A::kAsk);
    EXPECT_EQ(h.acquire(5 * kNsPerMs, 150'000, false), A::kAsk) << "a repeated ask";
    EXPECT_EQ(h.onGrant(10 * kNsPerMs, 300 * kNsPerMs), G::kWake);
    EXPECT_EQ(h.budgetBytes(kMBps), 100'000u) << "what was queued at the ask, not the slot";
    EXPECT_EQ(h.budgetBytes(0), 100'000u) << "with no rate too";
    EXPECT_EQ(h.release(100'000, 11 * kNsPerMs, kMBps), R::kHold);  // due at 110 ms
    // F1 is still queued and another flow waits: no resume; F1 asks once F0 is through.
    EXPECT_EQ(h.acquire(12 * kNsPerMs, 50'000, true), A::kAfterDrain);
    EXPECT_EQ(h.budgetBytes(kMBps), 0u);
    EXPECT_TRUE(h.finishDrain(110 * kNsPerMs));
    EXPECT_TRUE(h.waiting()) << "the next turn is F1's";
    EXPECT_EQ(h.onGrant(150 * kNsPerMs, 400 * kNsPerMs), G::kWake);
    EXPECT_EQ(h.budgetBytes(kMBps), 50'000u) << "F1's bytes";
    // Alone, a new message resumes the draining grant and its bytes ride it.
    EXPECT_EQ(h.release(50'000, 151 * kNsPerMs, kMBps), R::kHold);  // due at 200 ms
    EXPECT_EQ(h.acquire(160 * kNsPerMs, 30'000, false), A::kResumed);
    EXPECT_EQ(h.budgetBytes(kMBps), 30'000u);
    // A renewal of a contended flow's drain (the others left meanwhile) carries its bytes.
    GrantHold r;
    r.acquire(0, 100'000, false);
    r.onGrant(0, 300 * kNsPerMs);
    EXPECT_EQ(r.release(100'000, kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(r.acquire(2 * kNsPerMs, 40'000, true), A::kAfterDrain);
    EXPECT_EQ(r.onGrant(50 * kNsPerMs, 600 * kNsPerMs), G::kWake);
    EXPECT_EQ(r.budgetBytes(kMBps), 40'000u);
}

TEST(GrantHold, TheHandOffLeadGivesTheLinkOnBeforeTheBytesAreThrough) {
    GrantHold h(3 * kNsPerMs);
    h.acquire(0, kQueued, false);
    h.onGrant(0, kNever);
    EXPECT_EQ(h.release(100'000, kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(h.dueNs(), 97 * kNsPerMs) << "100 ms of bytes, handed on 3 ms early";
    EXPECT_FALSE(h.finishDrain(97 * kNsPerMs - 1));
    EXPECT_TRUE(h.finishDrain(97 * kNsPerMs));
    // A message within the lead of its drain end: nothing to hold any more.
    GrantHold late(3 * kNsPerMs);
    late.acquire(0, kQueued, false);
    late.onGrant(0, kNever);
    EXPECT_EQ(late.release(2'000, kNsPerMs, kMBps), R::kGiveBack) << "due at -1 ms";
    // The slot end is not moved by the lead: it is the arbiter's, not the bytes'.
    GrantHold slot(3 * kNsPerMs);
    slot.acquire(0, kQueued, false);
    slot.onGrant(0, 50 * kNsPerMs);
    EXPECT_EQ(slot.release(100'000, kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(slot.dueNs(), 50 * kNsPerMs);
}

TEST(GrantHold, TheRateIsTakenAtEachRelease) {
    // A measured rate (issue 17) may change between messages: the due follows it.
    GrantHold h;
    h.acquire(0, kQueued, false);
    h.onGrant(0, kNever);
    h.release(100'000, 1, kMBps);
    EXPECT_EQ(h.dueNs(), 100 * kNsPerMs);
    h.acquire(2, kQueued, false);
    h.release(0, 3, kMBps / 2);
    EXPECT_EQ(h.dueNs(), 200 * kNsPerMs);
}

TEST(GrantHold, RenewalsKeepCountingAndUnwantedGrantsAreSaid) {
    GrantHold h;
    EXPECT_EQ(h.onGrant(0, 10), G::kUnwanted) << "nothing asked";
    h.acquire(0, kQueued, false);
    h.onGrant(0, 10 * kNsPerMs);
    h.release(5'000, 1, kMBps);
    EXPECT_EQ(h.onGrant(10 * kNsPerMs, 20 * kNsPerMs), G::kRenewed);
    EXPECT_EQ(h.phase(), P::kDraining) << "a renewal keeps the drain";
    EXPECT_EQ(h.dueNs(), 5 * kNsPerMs);
    EXPECT_EQ(h.acquire(6 * kNsPerMs, kQueued, false), A::kResumed);
    h.release(5'000, 7 * kNsPerMs, kMBps);
    EXPECT_EQ(h.dueNs(), 10 * kNsPerMs) << "10 KB from the first grant's start";
    // Granted again after an acquire whose slot had ended: asks, then a fresh count.
    GrantHold g;
    g.acquire(0, kQueued, false);
    g.onGrant(0, 10);
    EXPECT_EQ(g.acquire(10, kQueued, false), A::kAsk);
    EXPECT_EQ(g.onGrant(20, 30), G::kWake);
    EXPECT_EQ(g.grantBytes(), 0u);
}

TEST(GrantHold, AGrantIsPacedAtTheLinksRateWithHeadroomAndNothingElseIs) {
    // An exclusive grant never needs to send faster than the link: what it sends above the
    // link's rate queues at the bottleneck. Twice the rate: the header says why.
    GrantHold h;
    EXPECT_EQ(h.paceBps(kMBps), 0u) << "idle: nothing to pace";
    EXPECT_EQ(h.acquire(0, kQueued, false), A::kAsk);
    EXPECT_EQ(h.paceBps(kMBps), 0u) << "waiting";
    EXPECT_EQ(h.onGrant(0, 100 * kNsPerMs), G::kWake);
    EXPECT_EQ(h.acquire(0, kQueued, false), A::kHolds);
    EXPECT_EQ(h.paceBps(kMBps), 2 * kMBps) << "granted: twice the rate";
    EXPECT_EQ(h.paceBps(3 * kMBps), 6 * kMBps) << "the rate of the moment";
    EXPECT_EQ(h.paceBps(0), 0u) << "unknown rate: unpaced, as the first grants are unheld";
    EXPECT_EQ(h.paceBps(UINT64_MAX), UINT64_MAX) << "saturates";
    EXPECT_EQ(h.release(10'000, 1 * kNsPerMs, kMBps), R::kHold);
    EXPECT_EQ(h.paceBps(kMBps), 0u) << "draining: no new pace (the engine keeps its caps)";
    GrantHold open;
    open.open();
    EXPECT_EQ(open.paceBps(kMBps), 0u) << "unarbitrated (fair, fail-open): TCP decides";
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
    EXPECT_EQ(h.acquire(5, kQueued, false), A::kAsk);
}

}  // namespace
}  // namespace atlas::sched
