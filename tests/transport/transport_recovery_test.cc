// Recovery over real loopback sockets, on both I/O backends, driven by the transport's fault
// seam (TransportConfig::faults): a reset data or control stream, a reset on the receiving
// side, a stalled stream, every stream dropped for a while (a link flap), an outage past the
// bound, a corrupted frame header, the retransmit store's back-pressure, and authenticated
// rejoins. Every transfer is checked byte for byte; the recovery counters say what happened.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/transport/loopback_util.h"
#include "transport/faults.h"
#include "transport/net.h"
#include "transport/wire.h"

namespace atlas::transport {
namespace {

using namespace std::chrono_literals;
using testing::connectPair;
using testing::fillPattern;
using testing::Pair;

uint64_t get(const std::atomic<uint64_t>& c) {
    return c.load(std::memory_order_relaxed);
}

class RecoveryTest : public ::testing::TestWithParam<IoBackend> {
  protected:
    // Sender and receiver get their own Transport, so a plan can target one side.
    struct Setup {
        std::string send_plan, recv_plan;  // fault plans of the two sides
        int timeout_ms = 5000;
        std::string key;
        uint64_t resend_bytes = 64ull << 20;
        ConfirmCadence recv_cadence;
        bool encrypt = false;  // both sides (needs key)
    };
    void start(const std::string& send_plan, const std::string& recv_plan = "") {
        Setup o;
        o.send_plan = send_plan;
        o.recv_plan = recv_plan;
        start(o);
    }
    void start(const Setup& o) {
        auto c = testing::loopbackConfig(GetParam());
        c.nstreams = 4;
        c.chunk_bytes = 64 * 1024;
        c.inline_bytes = 1024;
        c.timeout_ms = o.timeout_ms;
        c.auth_key = o.key;
        c.resend_bytes = o.resend_bytes;
        c.encrypt = o.encrypt;
        auto sp = parseFaultPlan(o.send_plan);
        auto rp = parseFaultPlan(o.recv_plan);
        ASSERT_TRUE(sp.isOk() && rp.isOk());
        TransportConfig sc = c, rc = c;
        sc.faults = *sp;
        rc.faults = *rp;
        rc.confirm = o.recv_cadence;
        auto s = Transport::create(sc);
        if (!s.isOk() && GetParam() == IoBackend::kUring) {
            GTEST_SKIP() << "io_uring unavailable: " << s.status().toString();
        }
        ASSERT_TRUE(s.isOk()) << s.status().toString();
        auto r = Transport::create(rc);
        ASSERT_TRUE(r.isOk());
        sender_ = std::move(s.value());
        receiver_ = std::move(r.value());
        Status st = connectPair(*sender_, *receiver_, &p_);
        ASSERT_TRUE(st.isOk()) << st.toString();
        rejoin_port_ = p_.listen->rejoinPort();
        p_.listen.reset();  // as NCCL does right after accept: rejoins must not need it
    }
    void TearDown() override {
        if (p_.send != nullptr) {
            EXPECT_TRUE(p_.send->close().isOk());
        }
        if (p_.recv != nullptr) {
            EXPECT_TRUE(p_.recv->close().isOk());
        }
    }
    // Moves `count` messages of `size` bytes with up to 8 in flight each way (NCCL's window),
    // checking every byte. Fails on the first error or after `limit`. The buffers belong to
    // the fixture: requests still outstanding after a failure keep them until TearDown()
    // closed the comms (NCCL's rule too).
    Status transfer(Pair& p, int count, size_t size, uint64_t seed,
                    std::chrono::milliseconds limit = 20000ms) {
        constexpr int kWindow = 8;
        bufs_.emplace_back(2 * kWindow, std::vector<uint8_t>(size));
        auto& all = bufs_.back();
        std::vector<std::vector<uint8_t>*> src, dst;
        for (int k = 0; k < kWindow; ++k) {
            src.push_back(&all[k]);
            dst.push_back(&all[kWindow + k]);
        }
        std::vector<Request*> sreq(kWindow, nullptr), rreq(kWindow, nullptr);
        int sent = 0, received = 0, send_done = 0;
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (received < count) {
            // Post receives and sends in order, each request reused only once it completed.
            while (received + kWindow > sent && sent < count && sent - send_done < kWindow) {
                const int k = sent % kWindow;
                if (rreq[k] == nullptr) {
                    std::fill(dst[k]->begin(), dst[k]->end(), 0xEE);
                    ATLAS_RETURN_IF_ERROR(p.recv->irecv(dst[k]->data(), size, &rreq[k]));
                    if (rreq[k] == nullptr) {
                        break;
                    }
                }
                fillPattern(*src[k], seed + static_cast<uint64_t>(sent));
                ATLAS_RETURN_IF_ERROR(p.send->isend(src[k]->data(), size, &sreq[k]));
                if (sreq[k] == nullptr) {
                    break;
                }
                ++sent;
            }
            bool done = false;
            size_t n = 0;
            if (send_done < sent) {
                const int k = send_done % kWindow;
                ATLAS_RETURN_IF_ERROR(test(sreq[k], &done, &n));
                if (done) {
                    // NCCL reuses the send buffer as soon as test() says done: scribble on it,
                    // so a resend that still read it would deliver garbage.
                    std::fill(src[k]->begin(), src[k]->end(), 0x5A);
                    sreq[k] = nullptr;
                    ++send_done;
                }
            }
            if (received < sent) {
                const int k = received % kWindow;
                ATLAS_RETURN_IF_ERROR(test(rreq[k], &done, &n));
                if (done) {
                    std::vector<uint8_t> want(size);
                    fillPattern(want, seed + static_cast<uint64_t>(received));
                    if (n != size ||
                        (size > 0 && std::memcmp(want.data(), dst[k]->data(), size) != 0)) {
                        return {Code::kInternal, "message " + std::to_string(received) +
                                                     " arrived with wrong bytes or size"};
                    }
                    rreq[k] = nullptr;
                    ++received;
                }
            }
            if (std::chrono::steady_clock::now() > deadline) {
                return {Code::kTimeout, "transfer stalled at message " + std::to_string(received) +
                                            " of " + std::to_string(count)};
            }
            std::this_thread::yield();
        }
        while (send_done < sent) {
            bool done = false;
            size_t n = 0;
            ATLAS_RETURN_IF_ERROR(test(sreq[send_done % kWindow], &done, &n));
            send_done += done ? 1 : 0;
            if (std::chrono::steady_clock::now() > deadline) {
                return {Code::kTimeout, "sends did not complete"};
            }
        }
        return Status::ok();
    }

    const RecoveryCounters& sc() { return p_.send->recovery(); }
    const RecoveryCounters& rc() { return p_.recv->recovery(); }

    std::vector<std::vector<std::vector<uint8_t>>> bufs_;  // outlive the comms (declared first)
    std::unique_ptr<Transport> sender_, receiver_;
    uint16_t rejoin_port_ = 0;  // the receiving process's rejoin listener
    Pair p_;
};

TEST_P(RecoveryTest, ResetDataStreamIsResentAndRejoined) {
    start("reset:stream=2,after=1M");
    Status st = transfer(p_, 40, 1 << 20, 1);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(get(sc().stream_resets), 1u);
    EXPECT_EQ(get(sc().rejoins), 1u);
    EXPECT_GE(get(rc().stream_resets), 1u);  // the reset reached the receiver as a loss
    EXPECT_EQ(get(rc().rejoins), 1u);
    EXPECT_GT(get(sc().confirms), 0u);
    EXPECT_GT(get(rc().confirms), 0u);  // sent by the receiver, applied by the sender
    EXPECT_LE(get(sc().store_peak_bytes), 64ull << 20);
    EXPECT_GE(get(sc().payload_bytes), 40ull << 20);  // resends included
    EXPECT_GT(get(sc().confirm_lag_max_ns), 0u);
    EXPECT_GT(get(sc().confirm_lag_last_ns), 0u);
    EXPECT_LE(get(sc().confirm_lag_last_ns), get(sc().confirm_lag_max_ns));
}

TEST_P(RecoveryTest, ResetControlStreamCarriesInlineMessagesElsewhere) {
    start("reset:stream=0,after=2K");
    // Inline (<= 1 KiB) messages ride the control stream; they must survive its loss too.
    Status st = transfer(p_, 200, 700, 2);
    ASSERT_TRUE(st.isOk()) << st.toString();
    st = transfer(p_, 10, 300000, 3);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(get(sc().stream_resets), 1u);
    EXPECT_EQ(get(sc().rejoins), 1u);
}

TEST_P(RecoveryTest, ResetOnTheReceivingSide) {
    start("", "reset:stream=1,after=512K,side=recv;reset:stream=3,after=2M,side=recv");
    Status st = transfer(p_, 40, 1 << 20, 4);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(get(rc().stream_resets), 2u);
    EXPECT_EQ(get(sc().rejoins), 2u);
}

TEST_P(RecoveryTest, ResentBytesAreWrittenOnceAndDuplicatesDropped) {
    // A reset while frames are in flight: the receiver got some of them before the loss was
    // noticed, so part of what is resent is already in the posted buffer.
    start("reset:stream=1,after=256K;reset:stream=3,after=256K");
    Status st = transfer(p_, 30, 2 << 20, 5);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_GT(get(sc().resent_bytes), 0u);
    EXPECT_GT(get(sc().resent_frames), 0u);
    // Every resent byte either filled a gap or was dropped; never more dropped than resent.
    EXPECT_LE(get(rc().duplicate_bytes), get(sc().resent_bytes));
}

TEST_P(RecoveryTest, BytesTheReceiverNeverReadAreResent) {
    // The receiver stops reading stream 2 (its socket keeps what arrived), then the sender
    // resets that stream: what sat unread dies with it, and only the resend can deliver it.
    // The stall (30 s) outlasts the transfer by far (under 1 s in release, 6 s under ASan on
    // a loaded machine), so only the resend can have finished it within 15 s.
    start("reset:stream=2,after=384K", "stall:stream=2,after=256K,ms=30000,side=recv");
    const auto t0 = std::chrono::steady_clock::now();
    Status st = transfer(p_, 20, 1 << 20, 11, 40000ms);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 15000ms);  // not waiting for the stall
    EXPECT_GT(get(sc().resent_bytes), 0u);
    EXPECT_EQ(get(rc().payload_bytes), 20u << 20);  // every byte written exactly once
}

TEST_P(RecoveryTest, DuplicatesOfDeliveredFramesAreDroppedNotWritten) {
    // Confirmations only every 200 ms, and the receiver resets the streams itself after
    // consuming 3 MiB (1 KiB): what it consumed was not confirmed, so the sender resends it,
    // and it must be recognised as duplicate, even for messages that completed (and whose
    // buffers were reused) meanwhile.
    ConfirmCadence slow;
    slow.delay_ns = 200 * kNsPerMs;
    slow.bytes = ~0ull;
    Setup o;
    o.recv_plan = "reset:stream=1,after=3M,side=recv;reset:stream=0,after=1K,side=recv";
    o.recv_cadence = slow;
    start(o);
    // 16 MiB messages: the reset lands in the middle of one, so some resent pieces belong to
    // a message still incomplete (caught by its received ranges), others to messages already
    // complete (caught by their sequence number).
    Status st = transfer(p_, 4, 16 << 20, 12);
    ASSERT_TRUE(st.isOk()) << st.toString();
    st = transfer(p_, 300, 600, 13);  // inline messages, after the control stream's reset
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_GT(get(rc().duplicate_bytes), 0u);
    EXPECT_EQ(get(rc().payload_bytes), (64u << 20) + 300u * 600u);  // written exactly once
}

TEST_P(RecoveryTest, ResentFramesOfCompletedMessagesAreDroppedBySequence) {
    // Inline messages only, confirmations once a second: when the receiver resets the control
    // stream in the middle of the 11th message, the ten before it are complete (their buffers
    // reused) but unconfirmed, so the sender resends them. They must be recognised by their
    // sequence number (duplicate frames), never written again.
    ConfirmCadence slow;
    slow.delay_ns = kNsPerSec;
    slow.bytes = ~0ull;
    Setup o;
    o.recv_plan = "reset:stream=0,after=6K,side=recv";
    o.recv_cadence = slow;
    start(o);
    Status st = transfer(p_, 300, 600, 14);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(get(rc().stream_resets), 1u);
    EXPECT_GT(get(sc().resent_frames), 0u);
    EXPECT_GT(get(rc().duplicate_frames), 0u);
    EXPECT_EQ(get(rc().payload_bytes), 300u * 600u);  // written exactly once
}

TEST_P(RecoveryTest, EveryStreamDroppedForAWhileResumesAfterTheOutage) {
    start("drop:after=4M,ms=700");
    const auto t0 = std::chrono::steady_clock::now();
    Status st = transfer(p_, 30, 1 << 20, 6);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 700ms);
    EXPECT_EQ(get(sc().outages), 1u);
    EXPECT_EQ(get(sc().stream_resets), 5u);
    EXPECT_EQ(get(sc().rejoins), 5u);
    EXPECT_GT(get(sc().rejoin_failures), 0u);  // dials during the outage failed
    // ... but with backoff (100, 200, 400 ms, ...): about 4 failed dials per stream over a
    // 700 ms outage, 20 in all. A load only spaces dials further apart; redialling at once
    // after each failure would make thousands.
    EXPECT_LE(get(sc().rejoin_failures), 5u * 10u) << "rejoin dials did not back off";
}

TEST_P(RecoveryTest, OutagePastTheBoundFailsBothSidesWithinIt) {
    Setup o;
    o.send_plan = "drop:after=1M,ms=60000";
    o.timeout_ms = 1000;
    start(o);
    const auto t0 = std::chrono::steady_clock::now();
    Status st = transfer(p_, 30, 1 << 20, 7, 30000ms);
    const auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(st.code(), Code::kRemote) << st.toString();
    EXPECT_NE(st.message().find("ATLAS_TIMEOUT_MS"), std::string::npos) << st.toString();
    // About 1 s (the bound) in release; the ceiling leaves room for a loaded sanitizer run
    // and is still far below the 60 s outage that would end it without the bound.
    EXPECT_LT(took, 8000ms);
    // The receiver, which saw every stream go, fails on its own bound too.
    Request* r = nullptr;
    std::vector<uint8_t> b(16);
    Status rs = p_.recv->irecv(b.data(), b.size(), &r);
    if (rs.isOk() && r != nullptr) {
        size_t n = 0;
        rs = testing::waitFor(r, &n, 5000ms);
    }
    EXPECT_EQ(rs.code(), Code::kRemote) << rs.toString();
}

TEST_P(RecoveryTest, StalledStreamIsDeclaredLostAndItsFramesResent) {
    // The receiver stops reading stream 1 for 30 s; the sender sees no confirmation from it
    // while the receive is posted, declares it stalled (after 2 s), resends and rejoins (the
    // rejoined incarnation is not stalled). The transfer takes 2-3 s, 6 s under ASan on a
    // loaded machine: far from the 30 s it would take waiting for the stall.
    Setup o;
    o.recv_plan = "stall:stream=1,after=256K,ms=30000,side=recv";
    o.timeout_ms = 40000;
    start(o);
    const auto t0 = std::chrono::steady_clock::now();
    Status st = transfer(p_, 20, 1 << 20, 8, 40000ms);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 15000ms);  // did not wait for the stall
    EXPECT_EQ(get(sc().stream_resets), 1u);
    EXPECT_GT(get(sc().resent_bytes), 0u);
    EXPECT_EQ(get(rc().rejoins), 1u);
}

TEST_P(RecoveryTest, CorruptFrameHeaderFailsTheCommOnBothSides) {
    start("flip:stream=1,after=1M,part=header");
    Status st = transfer(p_, 20, 1 << 20, 9, 10000ms);
    EXPECT_FALSE(st.isOk());
    EXPECT_NE(st.code(), Code::kTimeout) << st.toString();
    Request* r = nullptr;
    std::vector<uint8_t> b(16);
    Status rs = p_.recv->irecv(b.data(), b.size(), &r);
    EXPECT_NE(rs.message().find("malformed frame"), std::string::npos) << rs.toString();
    // The sender learns it from the receiver's abort frame, not by failing to rejoin a comm
    // that is gone.
    Status ss = Status::ok();
    const auto deadline = std::chrono::steady_clock::now() + 10000ms;
    while (ss.isOk() && std::chrono::steady_clock::now() < deadline) {
        Request* sr = nullptr;
        ss = p_.send->isend(b.data(), b.size(), &sr);
        if (ss.isOk() && sr != nullptr) {
            size_t n = 0;
            ss = testing::waitFor(sr, &n, 1000ms);
            if (ss.code() == Code::kTimeout) {
                ss = Status::ok();  // not failed yet: the receiver posts nothing more
            }
        }
        std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(ss.code(), Code::kRemote) << ss.toString();
    EXPECT_NE(ss.message().find("failed the connection"), std::string::npos) << ss.toString();
}

TEST_P(RecoveryTest, AuthenticatedRejoin) {
    Setup o;
    o.send_plan = "reset:stream=1,after=1M;reset:stream=0,after=0";
    o.key = "k3y";
    start(o);
    Status st = transfer(p_, 20, 1 << 20, 10);
    ASSERT_TRUE(st.isOk()) << st.toString();
    EXPECT_EQ(get(sc().rejoins), 2u);
    EXPECT_TRUE(p_.send->info().authenticated);
}

TEST_P(RecoveryTest, FullStoreHoldsSendsIncompleteUntilConfirmed) {
    constexpr uint64_t kStore = 256 << 10;
    Setup o;
    o.resend_bytes = kStore;
    start(o);
    // Sends with no receive posted: the data sits in socket buffers unconfirmed (about 1 MiB
    // on loopback before the kernel stops taking more), and the sends complete only as far as
    // the 256 KiB store takes copies, then back-pressure.
    constexpr size_t kSize = 128 << 10;
    constexpr int kCount = 24;
    bufs_.emplace_back(kCount, std::vector<uint8_t>(kSize));
    auto& src = bufs_.back();
    std::vector<Request*> s(kCount, nullptr);
    int posted = 0;
    for (; posted < kCount && posted < 32; ++posted) {
        fillPattern(src[posted], 100 + posted);
        ASSERT_TRUE(p_.send->isend(src[posted].data(), kSize, &s[posted]).isOk());
        ASSERT_NE(s[posted], nullptr);
    }
    std::this_thread::sleep_for(300ms);
    int done = 0;
    for (; done < kCount; ++done) {
        bool d = false;
        size_t n = 0;
        ASSERT_TRUE(test(s[done], &d, &n).isOk());
        if (!d) {
            break;
        }
    }
    EXPECT_LT(done, kCount) << "every send completed: nothing bounds the store";
    EXPECT_GE(done, 1) << "the store took nothing";
    EXPECT_LE(get(sc().store_peak_bytes), kStore);
    EXPECT_GT(get(sc().store_peak_bytes), 0u);
    EXPECT_GT(get(sc().store_bytes), 0u) << "completed sends are unconfirmed: the store holds them";
    EXPECT_GT(get(sc().store_full_waits), 0u);
    // Now the receiver drains everything, byte-exact.
    std::vector<uint8_t> dst(kSize);
    for (int i = 0; i < kCount; ++i) {
        Request* r = nullptr;
        ASSERT_TRUE(p_.recv->irecv(dst.data(), kSize, &r).isOk());
        size_t n = 0;
        ASSERT_TRUE(testing::waitFor(r, &n).isOk());
        std::vector<uint8_t> want(kSize);
        fillPattern(want, 100 + i);
        ASSERT_EQ(0, std::memcmp(want.data(), dst.data(), kSize)) << i;
    }
    for (int i = done; i < kCount; ++i) {
        size_t n = 0;
        ASSERT_TRUE(testing::waitFor(s[i], &n).isOk());
    }
    // Everything is confirmed in the end: the store empties.
    const auto deadline = std::chrono::steady_clock::now() + 10000ms;
    while (get(sc().store_bytes) > 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(get(sc().store_bytes), 0u);
}

// ---------------------------------------------------------------- sealed (ATLAS_ENCRYPT)

TEST_P(RecoveryTest, SealedTransfersAreByteExactAcrossResetsAndRejoins) {
    Setup o;
    o.key = "s3al";
    o.encrypt = true;
    o.send_plan = "reset:stream=2,after=1M;reset:stream=0,after=3K";
    o.recv_plan = "reset:stream=3,after=2M,side=recv";
    start(o);
    ASSERT_TRUE(p_.send->info().encrypted);
    ASSERT_TRUE(p_.recv->info().encrypted);
    for (size_t size : {size_t{0}, size_t{1}, size_t{700}, size_t{1024}, size_t{1025},
                        size_t{64 << 10}, size_t{300000}, size_t{1 << 20}}) {
        Status st = transfer(p_, 12, size, size + 20);
        ASSERT_TRUE(st.isOk()) << size << ": " << st.toString();
    }
    EXPECT_GE(get(sc().rejoins), 2u);
    EXPECT_GE(get(rc().rejoins), 3u);
    EXPECT_EQ(get(sc().seal_failures), 0u);
    EXPECT_EQ(get(rc().seal_failures), 0u);
    const uint64_t bytes = 12u * (1 + 700 + 1024 + 1025 + (64 << 10) + 300000 + (1 << 20));
    EXPECT_EQ(get(rc().payload_bytes), bytes);  // each byte written once, resends included
}

TEST_P(RecoveryTest, SealedPayloadAlteredOnTheWayFailsAndIsNeverDelivered) {
    Setup o;
    o.key = "s3al";
    o.encrypt = true;
    o.send_plan = "flip:stream=1,after=512K,part=payload";
    start(o);
    Status st = transfer(p_, 20, 1 << 20, 30, 10000ms);
    EXPECT_EQ(st.code(), Code::kRemote) << st.toString();
    EXPECT_EQ(get(rc().seal_failures), 1u);
    Request* r = nullptr;
    std::vector<uint8_t> b(16);
    Status rs = p_.recv->irecv(b.data(), b.size(), &r);
    EXPECT_NE(rs.message().find("failed authentication"), std::string::npos) << rs.toString();
    // The message the altered frame belonged to never completed; the one before it did.
    EXPECT_LT(get(rc().payload_bytes), 20u << 20);
}

TEST_P(RecoveryTest, SealedGoodbyeEndsAPendingReceiveAtOnce) {
    // The sender's goodbye is sealed like every frame: the receiver authenticates it and fails
    // its pending receive naming the close, at once. (Sent in clear, it failed the tag check,
    // every end of stream looked like a lost stream, and the receive waited out the 5 s
    // outage bound.)
    Setup o;
    o.key = "s3al";
    o.encrypt = true;
    start(o);
    ASSERT_TRUE(transfer(p_, 2, 1 << 20, 41, 10000ms).isOk());
    std::vector<uint8_t> dst(1 << 20);
    Request* rr = nullptr;
    ASSERT_TRUE(p_.recv->irecv(dst.data(), dst.size(), &rr).isOk());
    ASSERT_TRUE(p_.send->close().isOk());
    p_.send.reset();
    size_t n = 0;
    Status st = testing::waitFor(rr, &n, 4000ms);
    EXPECT_EQ(st.code(), Code::kRemote) << st.toString();
    EXPECT_NE(st.message().find("closed the connection with"), std::string::npos) << st.toString();
    EXPECT_EQ(get(rc().seal_failures), 0u);
}

TEST_P(RecoveryTest, ARejoinWithoutTheKeyIsRefusedAndTheCommGoesOn) {
    // A stranger who saw the session id on the wire asks the rejoin listener to take over
    // stream 1 and proves it with a MAC it could not have computed (no key): the listener
    // answers the hello, then drops the connection at the proof; the comm keeps its streams.
    Setup o;
    o.key = "rej0in";
    start(o);
    ASSERT_TRUE(transfer(p_, 4, 1 << 20, 51, 10000ms).isOk());
    ASSERT_NE(rejoin_port_, 0);
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(rejoin_port_);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0) << errno;
    auto readSome = [fd](uint8_t* buf, size_t want) -> ssize_t {  // bounded: 5 s
        size_t got = 0;
        while (got < want) {
            pollfd p{fd, POLLIN, 0};
            if (::poll(&p, 1, 5000) != 1) {
                return -2;  // nothing within 5 s: the listener kept the connection
            }
            const ssize_t n = ::read(fd, buf + got, want - got);
            if (n <= 0) {
                return n < 0 ? -1 : static_cast<ssize_t>(got);
            }
            got += static_cast<size_t>(n);
        }
        return static_cast<ssize_t>(got);
    };
    wire::RejoinHello hello;
    hello.session_id = p_.send->info().session_id;
    hello.index = 1;
    hello.epoch = 1000;
    hello.client_nonce.fill(0x42);
    uint8_t buf[wire::kHsMaxMessage];
    size_t len = wire::encode(hello, buf);
    ASSERT_EQ(::write(fd, buf, len), static_cast<ssize_t>(len));
    ASSERT_EQ(readSome(buf, wire::kRejoinAckBytes), static_cast<ssize_t>(wire::kRejoinAckBytes));
    wire::RejoinAck ack;
    ASSERT_TRUE(wire::decode({buf + wire::kHsHeaderBytes, 52}, &ack).isOk());
    ASSERT_EQ(ack.status, static_cast<uint32_t>(wire::RejoinStatus::kOk));
    wire::RejoinProof proof;
    proof.client_mac.fill(0xA5);
    len = wire::encode(proof, buf);
    ASSERT_EQ(::write(fd, buf, len), static_cast<ssize_t>(len));
    const ssize_t after = readSome(buf, 1);
    ::close(fd);
    EXPECT_TRUE(after == 0 || after == -1)
        << "the listener did not drop a rejoin that failed authentication (" << after << ")";
    EXPECT_EQ(get(rc().rejoins), 0u);
    EXPECT_EQ(get(sc().stream_resets), 0u);
    ASSERT_TRUE(transfer(p_, 4, 1 << 20, 52, 10000ms).isOk());
}

TEST_P(RecoveryTest, SealedHeaderAlteredOnTheWayFails) {
    Setup o;
    o.key = "s3al";
    o.encrypt = true;
    o.send_plan = "flip:stream=0,after=0,part=header";
    start(o);
    Status st = transfer(p_, 20, 100, 31, 10000ms);
    EXPECT_EQ(st.code(), Code::kRemote) << st.toString();
    EXPECT_EQ(get(rc().seal_failures), 1u);
    EXPECT_LT(get(rc().payload_bytes), 20u * 100u);  // what came before the altered frame
}

TEST_P(RecoveryTest, EncryptionSettingsMustMatch) {
    for (bool sender_encrypts : {true, false}) {
        auto c = testing::loopbackConfig(GetParam());
        c.auth_key = "k";
        c.encrypt = sender_encrypts;
        TransportConfig other = c;
        other.encrypt = !sender_encrypts;
        auto s = Transport::create(c);
        if (!s.isOk() && GetParam() == IoBackend::kUring) {
            GTEST_SKIP() << "io_uring unavailable";
        }
        auto r = Transport::create(other);
        ASSERT_TRUE(s.isOk() && r.isOk());
        Pair p;
        Status st = connectPair(**s, **r, &p, 3000ms);
        EXPECT_EQ(st.code(), Code::kInvalidUsage) << st.toString();
        EXPECT_NE(st.message().find("ATLAS_ENCRYPT"), std::string::npos) << st.toString();
    }
    auto c = testing::loopbackConfig(GetParam());
    c.encrypt = true;  // without a key
    auto t = Transport::create(c);
    ASSERT_FALSE(t.isOk());
    EXPECT_NE(t.status().message().find("ATLAS_AUTH_KEY"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Backends, RecoveryTest,
                         ::testing::Values(IoBackend::kUring, IoBackend::kEpoll),
                         [](const ::testing::TestParamInfo<IoBackend>& p) {
                             return std::string(p.param == IoBackend::kUring ? "uring" : "epoll");
                         });

}  // namespace
}  // namespace atlas::transport
