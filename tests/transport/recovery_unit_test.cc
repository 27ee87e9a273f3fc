// Unit tests of the recovery bookkeeping: the receiver's duplicate ranges, the sender's
// ledger (confirmation, resend, retransmit store), the recovery policy, the fault plan
// parser and the new wire messages (confirmation body, rejoin handshake, goodbye/abort).
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <iterator>
#include <thread>
#include <vector>

#include "transport/auth.h"
#include "transport/faults.h"
#include "transport/ranges.h"
#include "transport/recovery.h"
#include "transport/send_ledger.h"
#include "transport/wire.h"

namespace atlas::transport {
namespace {

// ---------------------------------------------------------------- ReceivedRanges

TEST(ReceivedRanges, MergesOutOfOrderPiecesAndCountsEachByteOnce) {
    ReceivedRanges r;
    EXPECT_EQ(r.insert(100, 200), 100u);
    EXPECT_EQ(r.insert(300, 400), 100u);
    EXPECT_EQ(r.intervals(), 2u);
    EXPECT_EQ(r.insert(150, 350), 100u);  // only the gap is new
    EXPECT_EQ(r.intervals(), 1u);
    EXPECT_EQ(r.covered(), 300u);
    EXPECT_EQ(r.insert(100, 400), 0u);    // a duplicate adds nothing
    EXPECT_EQ(r.insert(400, 500), 100u);  // adjacent: merged
    EXPECT_EQ(r.intervals(), 1u);
    EXPECT_EQ(r.insert(0, 100), 100u);
    EXPECT_EQ(r.covered(), 500u);
    EXPECT_TRUE(r.contains(0, 500));
    EXPECT_FALSE(r.contains(0, 501));
}

TEST(ReceivedRanges, RunsSplitAFrameIntoReceivedAndMissingParts) {
    ReceivedRanges r;
    r.insert(0, 10);
    r.insert(20, 30);
    // A resend of [0, 40) after a cut-off piece: 10 delivered, 10 missing, 10 delivered, 10
    // missing.
    auto run = r.runAt(0, 40);
    EXPECT_TRUE(run.received);
    EXPECT_EQ(run.length, 10u);
    run = r.runAt(10, 40);
    EXPECT_FALSE(run.received);
    EXPECT_EQ(run.length, 10u);
    run = r.runAt(25, 40);
    EXPECT_TRUE(run.received);
    EXPECT_EQ(run.length, 5u);
    run = r.runAt(30, 40);
    EXPECT_FALSE(run.received);
    EXPECT_EQ(run.length, 10u);
    run = r.runAt(5, 8);  // clipped to the frame's end
    EXPECT_TRUE(run.received);
    EXPECT_EQ(run.length, 3u);
}

TEST(ReceivedRanges, ManyRandomPiecesEqualABitmap) {
    ReceivedRanges r;
    std::vector<bool> bits(5000, false);
    uint64_t x = 12345;
    for (int i = 0; i < 2000; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        const uint64_t a = (x >> 33) % 5000;
        const uint64_t len = 1 + (x >> 20) % 64;
        const uint64_t b = std::min<uint64_t>(5000, a + len);
        uint64_t fresh = 0;
        for (uint64_t k = a; k < b; ++k) {
            fresh += bits[k] ? 0 : 1;
            bits[k] = true;
        }
        ASSERT_EQ(r.insert(a, b), fresh);
    }
    uint64_t covered = 0;
    for (bool b : bits) {
        covered += b ? 1 : 0;
    }
    EXPECT_EQ(r.covered(), covered);
    for (uint64_t at = 0; at < 5000;) {
        const auto run = r.runAt(at, 5000);
        ASSERT_GT(run.length, 0u);
        for (uint64_t k = at; k < at + run.length; ++k) {
            ASSERT_EQ(bits[k], run.received) << k;
        }
        at += run.length;
    }
}

// ---------------------------------------------------------------- SendLedger

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = static_cast<uint8_t>(seed + i * 7);
    }
    return v;
}

TEST(SendLedger, ConfirmedPiecesNeedNoCopyAndCompleteAtOnce) {
    SendLedger l(3, 1 << 20, 1000);
    auto buf = pattern(2000, 1);
    const auto a = l.add(0, 0, 2000, 0, 1000, buf.data());
    const auto b = l.add(0, 0, 2000, 1000, 1000, buf.data() + 1000);
    l.assign(a, 1);
    l.assign(b, 2);
    EXPECT_FALSE(l.allAccepted(0));
    l.startOp(1, 1);
    l.startOp(2, 1);
    l.finishOp(1, 10);
    l.finishOp(2, 10);
    EXPECT_TRUE(l.allAccepted(0));
    SendLedger::ConfirmResult r;
    ASSERT_TRUE(l.confirm(1, 1, 20, &r).isOk());
    EXPECT_EQ(r.frames, 1u);
    EXPECT_EQ(r.max_lag_ns, 10);
    ASSERT_TRUE(l.confirm(2, 1, 20, &r).isOk());
    bool full = true;
    ASSERT_TRUE(l.secure(0, &full));
    EXPECT_FALSE(full);
    EXPECT_EQ(l.storeBytes(), 0u);  // nothing was copied
    EXPECT_EQ(l.liveFrames(), 0u);
}

TEST(SendLedger, UnconfirmedPiecesAreCopiedAndServeTheResend) {
    SendLedger l(3, 1 << 20, 1000);
    auto buf = pattern(1000, 2);
    const auto a = l.add(5, 5, 1000, 0, 1000, buf.data());
    l.assign(a, 1);
    l.startOp(1, 1);
    l.finishOp(1, 0);
    bool full = false;
    ASSERT_TRUE(l.secure(5, &full));
    EXPECT_EQ(l.storeBytes(), 1000u);
    // The caller reuses its buffer at once (NCCL does).
    std::fill(buf.begin(), buf.end(), 0);
    EXPECT_EQ(l.lose(1), 1u);
    ASSERT_TRUE(l.hasResend());
    const auto id = l.resendFront();
    l.popResend();
    const auto& f = l.frame(id);
    EXPECT_NE(f.src, buf.data());
    EXPECT_EQ(std::memcmp(f.src, pattern(1000, 2).data(), 1000), 0);
    l.assign(id, 2);
    l.startOp(2, 1);
    l.finishOp(2, 0);
    SendLedger::ConfirmResult r;
    ASSERT_TRUE(l.confirm(2, 1, 0, &r).isOk());
    EXPECT_EQ(l.storeBytes(), 0u);
    EXPECT_EQ(l.liveFrames(), 0u);
}

TEST(SendLedger, ConfirmationBeyondWhatWasSentIsRejected) {
    SendLedger l(2, 1 << 20, 1000);
    auto buf = pattern(100, 3);
    l.assign(l.add(0, 0, 100, 0, 100, buf.data()), 1);
    SendLedger::ConfirmResult r;
    EXPECT_FALSE(l.confirm(1, 1, 0, &r).isOk());  // not handed to the kernel yet
    l.startOp(1, 1);
    // Handed over: may be confirmed while the send is still in flight, but the frame stays
    // until the send completes (its iovecs point at it).
    ASSERT_TRUE(l.confirm(1, 1, 0, &r).isOk());
    EXPECT_EQ(r.frames, 0u);
    EXPECT_EQ(l.liveFrames(), 1u);
    l.finishOp(1, 0);
    bool full = false;
    ASSERT_TRUE(l.secure(0, &full));
    EXPECT_EQ(l.liveFrames(), 0u);
    EXPECT_FALSE(l.confirm(1, 2, 0, &r).isOk());
}

TEST(SendLedger, StoreBoundHoldsTheSendIncompleteUntilConfirmed) {
    SendLedger l(2, 1500, 1000);
    auto m0 = pattern(1000, 4), m1 = pattern(1000, 5);
    l.assign(l.add(0, 0, 1000, 0, 1000, m0.data()), 1);
    l.assign(l.add(1, 1, 1000, 0, 1000, m1.data()), 1);
    l.startOp(1, 2);
    l.finishOp(1, 0);
    bool full = false;
    ASSERT_TRUE(l.secure(0, &full));
    EXPECT_FALSE(l.secure(1, &full));  // 2000 > 1500: back-pressure, not growth
    EXPECT_TRUE(full);
    EXPECT_EQ(l.storeBytes(), 1000u);
    SendLedger::ConfirmResult r;
    ASSERT_TRUE(l.confirm(1, 1, 0, &r).isOk());  // frees message 0's copy
    EXPECT_EQ(l.storeBytes(), 0u);
    ASSERT_TRUE(l.secure(1, &full));
    EXPECT_EQ(l.storeBytes(), 1000u);
}

TEST(SendLedger, LostStreamResendsOldestFirstAndRestartsItsIndex) {
    SendLedger l(3, 1 << 20, 100);
    auto buf = pattern(300, 6);
    const auto a = l.add(0, 7, 300, 200, 100, buf.data() + 200);
    const auto b = l.add(0, 7, 300, 0, 100, buf.data());
    const auto c = l.add(1, 8, 100, 0, 100, buf.data());
    l.assign(c, 1);
    l.assign(a, 1);
    l.assign(b, 1);
    l.startOp(1, 2);  // c and a in flight, b queued
    EXPECT_EQ(l.topSeq(1), 8);
    EXPECT_EQ(l.lose(1), 3u);
    EXPECT_EQ(l.topSeq(1), -1);
    EXPECT_EQ(l.handedFrames(1), 0u);
    std::vector<std::pair<uint64_t, uint64_t>> order;
    while (l.hasResend()) {
        const auto& f = l.frame(l.resendFront());
        order.push_back({f.seq, f.offset});
        EXPECT_TRUE(f.resent);
        EXPECT_FALSE(f.in_op);
        l.popResend();
    }
    const std::vector<std::pair<uint64_t, uint64_t>> want = {{7, 0}, {7, 200}, {8, 0}};
    EXPECT_EQ(order, want);
}

TEST(SendLedger, HeldFramesAreNotFreedUntilUnhold) {
    SendLedger l(2, 1 << 20, 100);
    auto buf = pattern(100, 7);
    const auto a = l.add(0, 0, 100, 0, 100, buf.data());
    l.assign(a, 1);
    l.startOp(1, 1);
    l.finishOp(1, 0);
    bool full = false;
    ASSERT_TRUE(l.secure(0, &full));
    l.hold();  // a dead stream's send may still read the copy
    SendLedger::ConfirmResult r;
    ASSERT_TRUE(l.confirm(1, 1, 0, &r).isOk());
    EXPECT_EQ(l.storeBytes(), 100u);
    l.unhold();
    EXPECT_EQ(l.storeBytes(), 0u);
}

TEST(SendLedger, SecureWaitsWhileAResendReadsTheCallersBuffer) {
    SendLedger l(3, 1 << 20, 100);
    auto buf = pattern(100, 8);
    const auto a = l.add(0, 0, 100, 0, 100, buf.data());
    l.assign(a, 1);
    l.startOp(1, 1);
    l.finishOp(1, 0);
    (void)l.lose(1);
    const auto id = l.resendFront();
    l.popResend();
    l.assign(id, 2);
    l.startOp(2, 1);
    bool full = false;
    EXPECT_FALSE(l.secure(0, &full));  // the resend's iovec points into the caller's buffer
    EXPECT_FALSE(full);
    l.finishOp(2, 0);
    EXPECT_TRUE(l.secure(0, &full));
}

// ---------------------------------------------------------------- policy

TEST(RecoveryPolicy, BackoffDoublesToOneSecond) {
    EXPECT_EQ(RecoveryPolicy::retryDelay(0), 0);
    EXPECT_EQ(RecoveryPolicy::retryDelay(1), 100 * kNsPerMs);
    EXPECT_EQ(RecoveryPolicy::retryDelay(2), 200 * kNsPerMs);
    EXPECT_EQ(RecoveryPolicy::retryDelay(4), 800 * kNsPerMs);
    EXPECT_EQ(RecoveryPolicy::retryDelay(5), kNsPerSec);
    EXPECT_EQ(RecoveryPolicy::retryDelay(500), kNsPerSec);
}

TEST(RecoveryPolicy, AttemptAndStallBoundsFollowRttAndTimeout) {
    RecoveryPolicy p;
    p.rtt_ns = 50 * kNsPerMs;
    p.timeout_ns = 30 * kNsPerSec;
    EXPECT_EQ(p.attemptTimeout(), 450 * kNsPerMs);
    EXPECT_EQ(p.stallAfter(), 2 * kNsPerSec);
    p.rtt_ns = 300 * kNsPerMs;
    EXPECT_EQ(p.attemptTimeout(), 1450 * kNsPerMs);
    EXPECT_EQ(p.stallAfter(), 3 * kNsPerSec);
    p.timeout_ns = kNsPerSec;
    EXPECT_EQ(p.attemptTimeout(), kNsPerSec);
    EXPECT_EQ(p.stallAfter(), kNsPerSec);
    EXPECT_EQ(p.giveUpAt(5), 5 + kNsPerSec);
}

TEST(ConfirmCadence, BytesSendAtOnceTimeAfterTheDelay) {
    ConfirmCadence c;
    c.delay_ns = 500;
    c.bytes = 1000;
    EXPECT_EQ(c.dueAt(false, 0, 0), -1);
    EXPECT_EQ(c.dueAt(true, 10, 100), 600);
    EXPECT_EQ(c.dueAt(true, 1000, 100), 100);
}

// ---------------------------------------------------------------- fault plans

TEST(FaultPlan, ParsesEveryKindAndDefaults) {
    auto p = parseFaultPlan(
        "reset:stream=2,after=8M;stall:stream=1,ms=300,side=recv;drop:after=1G,ms=3000;"
        "flip:stream=0,part=header");
    ASSERT_TRUE(p.isOk()) << p.status().toString();
    ASSERT_EQ(p->size(), 4u);
    EXPECT_EQ((*p)[0].kind, FaultSpec::Kind::kReset);
    EXPECT_EQ((*p)[0].stream, 2);
    EXPECT_EQ((*p)[0].after_bytes, 8ull << 20);
    EXPECT_FALSE((*p)[0].recv_side);
    EXPECT_EQ((*p)[1].duration_ns, 300 * kNsPerMs);
    EXPECT_TRUE((*p)[1].recv_side);
    EXPECT_EQ((*p)[2].kind, FaultSpec::Kind::kDrop);
    EXPECT_EQ((*p)[2].after_bytes, 1ull << 30);
    EXPECT_FALSE((*p)[3].payload);
    EXPECT_EQ(describeFault((*p)[0]), "reset:stream=2,after=8388608,side=send");
}

TEST(FaultPlan, RejectsWhatItCannotDoWithAMessage) {
    for (const char* bad :
         {"boom:stream=1", "reset", "reset:stream=99", "stall:stream=1", "drop:stream=1,ms=5",
          "drop:ms=0", "reset:stream=1,after=12Q", "flip:stream=1,side=recv",
          "reset:stream=1,part=header", "reset:stream=1,color"}) {
        auto p = parseFaultPlan(bad);
        EXPECT_FALSE(p.isOk()) << bad;
        EXPECT_NE(p.status().message().find("fault '"), std::string::npos) << bad;
    }
    EXPECT_TRUE(parseFaultPlan("").isOk());
}

TEST(FaultInjector, FiresOnceAtItsThresholdOnItsSide) {
    auto plan = parseFaultPlan("reset:stream=1,after=100;drop:after=500,ms=10;flip:stream=2");
    ASSERT_TRUE(plan.isOk());
    FaultInjector recv(*plan, false);
    EXPECT_TRUE(recv.empty());
    FaultInjector f(*plan, true);
    EXPECT_FALSE(f.onBytes(1, 99, 0).reset.test(1));
    EXPECT_TRUE(f.onBytes(1, 1, 0).reset.test(1));
    EXPECT_FALSE(f.onBytes(1, 1000, 0).reset.test(1));  // once
    bool payload = false;
    EXPECT_FALSE(f.takeFlip(2, &payload));
    auto fired = f.onBytes(2, 1, 7);
    EXPECT_TRUE(f.takeFlip(2, &payload));
    EXPECT_TRUE(payload);
    EXPECT_FALSE(f.takeFlip(2, &payload));
    // The drop fired with the 1000 bytes above (1101 in all >= 500).
    (void)fired;
    EXPECT_TRUE(f.dialBlocked(5));
    EXPECT_FALSE(f.dialBlocked(10 * kNsPerMs));
}

// ---------------------------------------------------------------- wire

TEST(WireRecovery, ConfirmBodyRoundTripsAndRejectsMalformedOnes) {
    wire::ConfirmBody b;
    b.posted = 77;
    b.count = 3;
    b.entries[0] = {0, 0, 5};
    b.entries[1] = {3, 2, 100};
    b.entries[2] = {64, 9, ~0ull};
    uint8_t buf[wire::kMaxConfirmBody];
    const size_t n = wire::encodeConfirm(b, buf);
    EXPECT_EQ(n, wire::kConfirmFixedBytes + 3 * wire::kConfirmEntryBytes);
    wire::ConfirmBody d;
    ASSERT_TRUE(wire::decodeConfirm({buf, n}, &d).isOk());
    EXPECT_EQ(d.posted, 77u);
    EXPECT_EQ(d.entries[2].frames, ~0ull);
    EXPECT_FALSE(wire::decodeConfirm({buf, n - 1}, &d).isOk());  // count vs length
    uint8_t dup[wire::kMaxConfirmBody];
    std::memcpy(dup, buf, n);
    constexpr size_t e0 = wire::kConfirmFixedBytes;  // entry 0
    constexpr size_t e1 = e0 + wire::kConfirmEntryBytes;
    std::memcpy(dup + e1, dup + e0, 4);  // entry 1: index 0 again, another epoch: fine
    EXPECT_TRUE(wire::decodeConfirm({dup, n}, &d).isOk());
    std::memcpy(dup + e1, dup + e0, 8);  // index 0 epoch 0 twice
    EXPECT_NE(wire::decodeConfirm({dup, n}, &d).message().find("twice"), std::string::npos);
    std::memcpy(dup, buf, n);
    dup[e0] = 65;  // index beyond kMaxStreams
    EXPECT_FALSE(wire::decodeConfirm({dup, n}, &d).isOk());
    std::memcpy(dup, buf, n);
    dup[12] = 1;  // reserved
    EXPECT_FALSE(wire::decodeConfirm({dup, n}, &d).isOk());
    EXPECT_EQ(d.train_bytes, 0u);  // no train: both fields 0
    // The train: both fields or neither, and no longer than an hour.
    b.train_bytes = 5ull << 20;
    b.train_ns = 21'000'000;
    ASSERT_EQ(wire::encodeConfirm(b, buf), n);
    ASSERT_TRUE(wire::decodeConfirm({buf, n}, &d).isOk());
    EXPECT_EQ(d.train_bytes, 5ull << 20);
    EXPECT_EQ(d.train_ns, 21'000'000u);
    for (auto [bytes, ns] :
         {std::pair<uint64_t, uint64_t>{1, 0}, {0, 1}, {1, wire::kMaxTrainNs + 1}}) {
        b.train_bytes = bytes;
        b.train_ns = ns;
        wire::encodeConfirm(b, buf);
        Status st = wire::decodeConfirm({buf, n}, &d);
        EXPECT_NE(st.message().find("train"), std::string::npos) << bytes << " " << ns;
    }
}

TEST(WireRecovery, ConfirmAndGoodbyeHeadersAreChecked) {
    uint8_t h[wire::kFrameHeaderBytes];
    wire::FrameHeader f;
    wire::encodeFrame({wire::FrameType::kConfirm, 0, 32, 0, 0}, h);
    ASSERT_TRUE(wire::decodeFrame(h, 0, &f).isOk());
    EXPECT_EQ(f.type, wire::FrameType::kConfirm);
    wire::encodeFrame({wire::FrameType::kConfirm, 0, 33, 0, 0}, h);  // not 16 + k * 16
    EXPECT_FALSE(wire::decodeFrame(h, 0, &f).isOk());
    wire::encodeFrame({wire::FrameType::kConfirm, 1, 32, 0, 0}, h);
    EXPECT_FALSE(wire::decodeFrame(h, 0, &f).isOk());
    wire::encodeFrame({wire::FrameType::kGoodbye, 0, 0, 0, 0}, h);
    ASSERT_TRUE(wire::decodeFrame(h, 0, &f).isOk());
    wire::encodeFrame({wire::FrameType::kAbort, 0, 0, 0, 0}, h);
    ASSERT_TRUE(wire::decodeFrame(h, 0, &f).isOk());
    EXPECT_EQ(f.type, wire::FrameType::kAbort);
    wire::encodeFrame({wire::FrameType::kGoodbye, 0, 4, 0, 0}, h);
    EXPECT_FALSE(wire::decodeFrame(h, 0, &f).isOk());
    wire::encodeFrame({wire::FrameType::kData, 0, 0, 10, 0}, h);  // empty piece
    EXPECT_FALSE(wire::decodeFrame(h, 100, &f).isOk());
}

TEST(WireRecovery, RejoinMessagesRoundTripAndAreValidated) {
    uint8_t buf[wire::kHsMaxMessage];
    wire::RejoinHello hello;
    hello.session_id = 42;
    hello.index = 3;
    hello.epoch = 7;
    hello.client_nonce[0] = 9;
    ASSERT_EQ(wire::encode(hello, buf), wire::kRejoinHelloBytes);
    wire::HsHeader h;
    ASSERT_TRUE(wire::decodeHsHeader({buf, wire::kRejoinHelloBytes}, &h).isOk());
    EXPECT_EQ(h.type, wire::HsType::kRejoinHello);
    wire::RejoinHello d;
    ASSERT_TRUE(wire::decode({buf + wire::kHsHeaderBytes, h.body_len}, &d).isOk());
    EXPECT_EQ(d.epoch, 7u);
    hello.epoch = 0;
    wire::encode(hello, buf);
    EXPECT_FALSE(wire::decode({buf + wire::kHsHeaderBytes, h.body_len}, &d).isOk());
    wire::RejoinAck ack;
    ack.status = 2;
    ASSERT_EQ(wire::encode(ack, buf), wire::kRejoinAckBytes);
    wire::RejoinAck da;
    ASSERT_TRUE(wire::decode({buf + wire::kHsHeaderBytes, 52}, &da).isOk());
    ack.status = 9;
    wire::encode(ack, buf);
    EXPECT_FALSE(wire::decode({buf + wire::kHsHeaderBytes, 52}, &da).isOk());
    wire::RejoinProof proof;
    ASSERT_EQ(wire::encode(proof, buf), wire::kRejoinProofBytes);
}

TEST(WireRecovery, RejoinMacsBindStreamEpochAndNonces) {
    AuthContext ctx;
    ctx.session_id = 5;
    RejoinNonces n;
    n.client[0] = 1;
    n.server[0] = 2;
    const auto base = rejoinClientMac("key", ctx, 1, 1, n);
    EXPECT_TRUE(macEqual(base, rejoinClientMac("key", ctx, 1, 1, n)));
    EXPECT_FALSE(macEqual(base, rejoinServerMac("key", ctx, 1, 1, n)));  // roles differ
    EXPECT_FALSE(macEqual(base, rejoinClientMac("key", ctx, 2, 1, n)));
    EXPECT_FALSE(macEqual(base, rejoinClientMac("key", ctx, 1, 2, n)));
    EXPECT_FALSE(macEqual(base, rejoinClientMac("other", ctx, 1, 1, n)));
    RejoinNonces fresh = n;
    fresh.server[0] = 3;  // a replay meets a new listener nonce
    EXPECT_FALSE(macEqual(base, rejoinClientMac("key", ctx, 1, 1, fresh)));
}

}  // namespace
}  // namespace atlas::transport

namespace atlas::transport {
namespace {

// The stream event log hands events over oldest first; a full log drops the new event and
// counts it (never blocks the engine); a drained log takes events again.
TEST(StreamEventLog, FifoBoundedAndCountsWhatItDrops) {
    StreamEventLog log;
    EXPECT_TRUE(log.empty());
    for (size_t i = 0; i < StreamEventLog::kCapacity + 3; ++i) {
        log.push({static_cast<int32_t>(i), StreamEvent::kLost, 0, i});
    }
    EXPECT_EQ(log.dropped(), 3u);
    StreamEvent out[16];
    size_t seen = 0;
    size_t n = 0;
    while ((n = log.drain(out, std::size(out))) > 0) {
        for (size_t i = 0; i < n; ++i) {
            EXPECT_EQ(out[i].stream, static_cast<int32_t>(seen + i)) << "oldest first";
        }
        seen += n;
    }
    EXPECT_EQ(seen, StreamEventLog::kCapacity);
    EXPECT_TRUE(log.empty());
    log.push({7, StreamEvent::kRejoined, 1, 0});
    ASSERT_EQ(log.drain(out, 1), 1u);
    EXPECT_EQ(out[0].stream, 7);
    EXPECT_EQ(out[0].kind, StreamEvent::kRejoined);
    EXPECT_EQ(out[0].epoch, 1u);
}

// One producer thread, one consumer thread: every event arrives once, in order (TSan label).
TEST(StreamEventLog, OneProducerOneConsumer) {
    StreamEventLog log;
    constexpr int kEvents = 20000;
    std::atomic<bool> done{false};
    std::thread producer([&] {
        for (int i = 0; i < kEvents; ++i) {
            while (true) {
                const uint64_t before = log.dropped();
                log.push({i, StreamEvent::kLost, 0, 0});
                if (log.dropped() == before) {
                    break;
                }
                std::this_thread::yield();  // full: the consumer is behind; offer it again
            }
        }
        done.store(true, std::memory_order_release);
    });
    int next = 0;
    StreamEvent out[8];
    while (next < kEvents) {
        const size_t n = log.drain(out, std::size(out));
        for (size_t i = 0; i < n; ++i) {
            ASSERT_EQ(out[i].stream, next) << "lost or reordered";
            ++next;
        }
        if (n == 0) {
            std::this_thread::yield();
        }
    }
    producer.join();
    EXPECT_TRUE(done.load());
    EXPECT_TRUE(log.empty());
}

}  // namespace
}  // namespace atlas::transport
