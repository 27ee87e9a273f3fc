// transport/seal.h, sealed frames: round trips in every piece split, tampering, replay,
// reordering, drops, truncation, splicing, direction/stream/epoch separation, rekeying,
// counter exhaustion, nonce uniqueness, misuse, and reopen() for resends.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/transport/seal_test_util.h"
#include "transport/seal.h"
#include "transport/wire.h"

namespace atlas::transport::seal {
namespace {

using testing::openFromWire;
using testing::sealToWire;
using testing::testSecrets;

constexpr Direction kC2L = Direction::kConnectorToListener;
constexpr Direction kL2C = Direction::kListenerToConnector;
constexpr size_t kH = wire::kFrameHeaderBytes;

std::vector<uint8_t> pattern(size_t n, uint32_t seed) {
    std::vector<uint8_t> v(n);
    std::mt19937 rng(seed);
    for (auto& b : v) {
        b = static_cast<uint8_t>(rng());
    }
    return v;
}

// A real data-frame header for `len` payload bytes.
std::array<uint8_t, kH> header(uint32_t seq, uint64_t len) {
    std::array<uint8_t, kH> h{};
    wire::encodeFrame({wire::FrameType::kData, seq, static_cast<uint32_t>(len), len, 0}, h.data());
    return h;
}

struct Ends {
    StreamSealer tx;
    StreamOpener rx;
};

Ends ends(const SessionSecrets& s, Direction d = kC2L, uint16_t stream = 1, Limits tx_l = {},
          std::optional<Limits> rx_l = std::nullopt) {
    auto tx = StreamSealer::create(s, d, stream, kH, tx_l);
    auto rx = StreamOpener::create(s, d, stream, kH, rx_l.value_or(tx_l));
    EXPECT_TRUE(tx.isOk() && rx.isOk());
    return {std::move(tx).value(), std::move(rx).value()};
}

// Opens one whole frame from `w` (payload length known), in one piece.
Status openWhole(StreamOpener& rx, std::vector<uint8_t> w, uint64_t len,
                 std::vector<uint8_t>* plain = nullptr) {
    size_t used = 0;
    Status st = openFromWire(rx, w, len, {}, &used);
    if (st.isOk() && plain != nullptr) {
        plain->assign(w.begin() + static_cast<long>(rx.prefixBytes()), w.end());
    }
    return st;
}

// ---------------------------------------------------------------- round trips

TEST(SealFrame, RoundTripsInEveryTwoAndThreePieceSplitInAndOutOfPlace) {
    const SessionSecrets s = testSecrets();
    for (bool in_place : {false, true}) {
        SCOPED_TRACE(in_place ? "in place" : "out of place");
        Ends e = ends(s);
        const size_t len = 100;  // not a multiple of the AES block
        for (size_t k = 0; k <= len; ++k) {
            const auto p = pattern(len, static_cast<uint32_t>(k));
            const auto h = header(static_cast<uint32_t>(k), len);
            auto w = sealToWire(e.tx, h, p, in_place);
            ASSERT_EQ(w.size(), kH + 32 + len);
            // Sealed bytes hide the plaintext (a chance match of a 16-byte run is ~2^-128).
            ASSERT_EQ(std::search(w.begin(), w.end(), p.begin(), p.begin() + 16), w.end());
            const std::vector<size_t> pieces = {k, len - k};
            size_t used = 0;
            ASSERT_TRUE(
                openFromWire(e.rx, w, len, k == 0 ? std::vector<size_t>{} : pieces, &used).isOk())
                << "split at " << k;
            EXPECT_EQ(used, w.size());
            EXPECT_EQ(0, std::memcmp(w.data(), h.data(), kH)) << "header decrypted in place";
            EXPECT_TRUE(std::equal(p.begin(), p.end(), w.begin() + kH + 32));
        }
        const size_t len3 = 40;
        for (size_t i = 1; i < len3; ++i) {
            for (size_t j = 1; i + j < len3; ++j) {
                const auto p = pattern(len3, static_cast<uint32_t>(i * 100 + j));
                auto w = sealToWire(e.tx, header(1, len3), p, in_place);
                const std::vector<size_t> pieces = {i, j, len3 - i - j};
                size_t used = 0;
                ASSERT_TRUE(openFromWire(e.rx, w, len3, pieces, &used).isOk()) << i << "," << j;
                EXPECT_TRUE(std::equal(p.begin(), p.end(), w.begin() + kH + 32));
            }
        }
    }
}

TEST(SealFrame, EmptyOddAndLargePayloadsRoundTripOneByteAndRandomPieces) {
    const SessionSecrets s = testSecrets();
    Ends e = ends(s);
    std::mt19937 rng(5);
    for (size_t len : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{4096},
                       size_t{(3 << 20) + 7}}) {
        const auto p = pattern(len, static_cast<uint32_t>(len));
        auto w = sealToWire(e.tx, header(9, len), p);
        std::vector<size_t> pieces;
        if (len < 5000) {
            pieces = {1};
        } else {
            for (int i = 0; i < 64; ++i) {
                pieces.push_back(1 + rng() % 200000);
            }
        }
        size_t used = 0;
        ASSERT_TRUE(openFromWire(e.rx, w, std::nullopt, pieces, &used).isOk()) << len;
        EXPECT_EQ(used, w.size());
        EXPECT_TRUE(std::equal(p.begin(), p.end(), w.begin() + kH + 32)) << len;
    }
}

TEST(SealFrame, HeaderMayBeEncodedInThePrefixItself) {
    const SessionSecrets s = testSecrets();
    Ends e = ends(s);
    const auto p = pattern(64, 1);
    std::vector<uint8_t> w(e.tx.prefixBytes() + p.size());
    const auto h = header(3, p.size());
    std::memcpy(w.data(), h.data(), kH);
    std::span<uint8_t> prefix(w.data(), e.tx.prefixBytes());
    std::span<uint8_t> body(w.data() + e.tx.prefixBytes(), p.size());
    ASSERT_TRUE(e.tx.seal(prefix.first(kH), p, body, prefix).isOk());
    std::vector<uint8_t> plain;
    ASSERT_TRUE(openWhole(e.rx, w, p.size(), &plain).isOk());
    EXPECT_EQ(plain, p);
}

// ---------------------------------------------------------------- tampering

TEST(SealFrame, FlippingAnyBitOfAnyByteFailsWithTheRegionsError) {
    const SessionSecrets s = testSecrets();
    const auto p = pattern(48, 2);
    const auto h = header(4, p.size());
    const size_t total = kH + 32 + p.size();
    for (size_t pos = 0; pos < total; ++pos) {
        for (uint8_t bit : {uint8_t{0x01}, uint8_t{0x80}}) {
            Ends e = ends(s);
            auto w = sealToWire(e.tx, h, p);
            w[pos] ^= bit;
            size_t used = 0;
            Status st = openFromWire(e.rx, w, p.size(), {}, &used);
            ASSERT_FALSE(st.isOk()) << "byte " << pos << " bit " << int(bit);
            EXPECT_EQ(st.code(), Code::kRemote);
            // [0, H+16): header ciphertext and tag; [H+16, end): payload tag and ciphertext.
            const SealError want = pos < kH + 16 ? SealError::kHeaderTag : SealError::kPayloadTag;
            EXPECT_EQ(e.rx.error(), want) << "byte " << pos;
            EXPECT_NE(st.message().find(want == SealError::kHeaderTag ? "header" : "payload"),
                      std::string::npos)
                << st.message();
            if (want == SealError::kHeaderTag) {
                EXPECT_EQ(w[0] | w[1] | w[kH - 1], 0) << "a failed header is wiped";
            }
        }
    }
}

TEST(SealFrame, FailureIsStickyUntilANewEpoch) {
    const SessionSecrets s = testSecrets();
    Ends e = ends(s);
    const auto good = sealToWire(e.tx, header(1, 8), pattern(8, 1));
    auto bad = good;
    bad[3] ^= 4;
    const Status first = openWhole(e.rx, bad, 8);
    ASSERT_EQ(e.rx.error(), SealError::kHeaderTag);
    // Even the genuine frame is refused now: the stream's sequence is broken.
    Status again = openWhole(e.rx, good, 8);
    EXPECT_FALSE(again.isOk());
    EXPECT_EQ(again.message(), first.message());
    ASSERT_TRUE(e.tx.restart(1).isOk());
    ASSERT_TRUE(e.rx.restart(1).isOk());
    EXPECT_EQ(e.rx.error(), SealError::kNone);
    EXPECT_TRUE(openWhole(e.rx, sealToWire(e.tx, header(3, 8), pattern(8, 3)), 8).isOk());
}

// ---------------------------------------------------------------- sequence attacks

TEST(SealFrame, ReplayReorderDropAndTruncationFail) {
    const SessionSecrets s = testSecrets();
    auto frames = [&](Ends& e) {
        std::vector<std::vector<uint8_t>> f;
        for (uint32_t i = 0; i < 3; ++i) {
            f.push_back(sealToWire(e.tx, header(i, 32), pattern(32, i)));
        }
        return f;
    };
    // {frames opened first, the frame then offered}: each offered frame is genuine but out of
    // sequence, so it is opened under the wrong nonce.
    const struct {
        const char* name;
        std::vector<int> before;
        int offered;
    } cases[] = {{"replay", {0}, 0}, {"reorder", {}, 1}, {"drop", {0}, 2}};
    for (const auto& c : cases) {
        SCOPED_TRACE(c.name);
        Ends e = ends(s);
        auto f = frames(e);
        for (int i : c.before) {
            ASSERT_TRUE(openWhole(e.rx, f[static_cast<size_t>(i)], 32).isOk());
        }
        EXPECT_FALSE(openWhole(e.rx, f[static_cast<size_t>(c.offered)], 32).isOk());
        EXPECT_EQ(e.rx.error(), SealError::kHeaderTag);
    }
    {  // truncation: frame 0 loses its last 3 bytes; the reader takes them from frame 1
        Ends e = ends(s);
        auto f = frames(e);
        std::vector<uint8_t> w(f[0].begin(), f[0].end() - 3);
        w.insert(w.end(), f[1].begin(), f[1].end());
        size_t used = 0;
        EXPECT_FALSE(openFromWire(e.rx, w, 32, {}, &used).isOk());
        EXPECT_EQ(e.rx.error(), SealError::kPayloadTag);
    }
}

// Two frames sealed at the same position under the same keys (what a splicer could hope to
// mix): the payload's AAD binds it to its own header.
TEST(SealFrame, AHeaderCannotBeSplicedOntoAnotherFramesPayload) {
    const SessionSecrets s = testSecrets();
    Ends a = ends(s);
    Ends b = ends(s);
    auto wa = sealToWire(a.tx, header(1, 16), pattern(16, 1));
    auto wb = sealToWire(b.tx, header(2, 16), pattern(16, 2));
    std::vector<uint8_t> spliced(wa.begin(), wa.begin() + kH + 16);  // a's header + tag
    spliced.insert(spliced.end(), wb.begin() + kH + 16, wb.end());   // b's payload tag + ct
    EXPECT_FALSE(openWhole(a.rx, spliced, 16).isOk());
    EXPECT_EQ(a.rx.error(), SealError::kPayloadTag);
    EXPECT_TRUE(openWhole(b.rx, wb, 16).isOk());
}

TEST(SealFrame, OtherDirectionStreamEpochOrSessionCannotOpen) {
    const SessionSecrets s = testSecrets(1);
    const auto h = header(1, 8);
    const auto p = pattern(8, 1);
    auto sealed = [&](Direction d, uint16_t stream, uint32_t epoch) {
        auto tx = StreamSealer::create(s, d, stream, kH);
        if (epoch > 0) {
            EXPECT_TRUE(tx->restart(epoch).isOk());
        }
        return sealToWire(*tx, h, p);
    };
    auto opens = [&](const SessionSecrets& rs, Direction d, uint16_t stream, uint32_t epoch,
                     std::vector<uint8_t> w) {
        auto rx = StreamOpener::create(rs, d, stream, kH);
        if (epoch > 0) {
            EXPECT_TRUE(rx->restart(epoch).isOk());
        }
        return openWhole(*rx, w, 8).isOk();
    };
    EXPECT_TRUE(opens(s, kC2L, 1, 0, sealed(kC2L, 1, 0)));
    EXPECT_FALSE(opens(s, kL2C, 1, 0, sealed(kC2L, 1, 0))) << "direction";
    EXPECT_FALSE(opens(s, kC2L, 2, 0, sealed(kC2L, 1, 0))) << "stream";
    EXPECT_FALSE(opens(s, kC2L, 1, 0, sealed(kC2L, 1, 1))) << "epoch";
    EXPECT_TRUE(opens(s, kC2L, 1, 1, sealed(kC2L, 1, 1)));
    EXPECT_FALSE(opens(testSecrets(2), kC2L, 1, 0, sealed(kC2L, 1, 0))) << "session";
    EXPECT_FALSE(opens(testSecrets(1, "other key"), kC2L, 1, 0, sealed(kC2L, 1, 0))) << "key";
    EXPECT_NE(sealed(kC2L, 1, 0), sealed(kL2C, 1, 0));
    EXPECT_NE(sealed(kC2L, 1, 0), sealed(kC2L, 1, 1));
}

// ---------------------------------------------------------------- rekeying and limits

TEST(SealRekey, FrameLimitStartsANewKeyBothEndsFollow) {
    const SessionSecrets s = testSecrets();
    Limits l;
    l.frames_per_key = 3;
    Ends e = ends(s, kC2L, 1, l);
    Ends stale = ends(s, kC2L, 1, {});  // never rekeys within these frames
    Limits four = l;
    four.frames_per_key = 4;
    auto late = StreamOpener::create(s, kC2L, 1, kH, four);
    for (uint32_t i = 0; i < 8; ++i) {
        const auto p = pattern(20, i);
        SealPosition pos;
        auto w = sealToWire(e.tx, header(i, 20), p, false, &pos);
        EXPECT_EQ(pos.generation, i / 3) << i;
        EXPECT_EQ(pos.frame, i % 3) << i;
        EXPECT_EQ(e.tx.generation(), i / 3);
        auto ws = sealToWire(stale.tx, header(i, 20), p);
        EXPECT_EQ(w == ws, i < 3) << "frame " << i << " must be under key " << i / 3;
        // White box: the header is sealed under key(generation i/3) at frame i%3.
        auto key = s.trafficKey(kC2L, 1, 0, i / 3);
        auto gcm = Gcm::create(false);
        ASSERT_TRUE(key.isOk() && gcm.isOk());
        ASSERT_TRUE(gcm->setKey(*key).isOk());
        ASSERT_TRUE(gcm->begin(makeIv(1, 0, i % 3, 0), {}).isOk());
        std::vector<uint8_t> hdr(w.begin(), w.begin() + kH);
        ASSERT_TRUE(gcm->update(hdr.data(), hdr.data(), kH).isOk());
        Tag tag;
        std::memcpy(tag.data(), w.data() + kH, kTagBytes);
        EXPECT_TRUE(*gcm->finishOpen(tag)) << "frame " << i;
        const auto want = header(i, 20);
        EXPECT_EQ(0, std::memcmp(hdr.data(), want.data(), kH)) << "frame " << i;
        ASSERT_TRUE(openWhole(e.rx, w, 20).isOk()) << i;
        if (i <= 3) {
            EXPECT_EQ(openWhole(*late, w, 20).isOk(), i < 3) << i;
        }
    }
    EXPECT_EQ(late->error(), SealError::kHeaderTag);
}

TEST(SealRekey, ByteLimitRekeysAtTheNextFrameBoundary) {
    const SessionSecrets s = testSecrets();
    Limits l;
    l.bytes_per_key = 100;
    Ends e = ends(s, kC2L, 1, l);
    std::vector<uint32_t> gens;
    for (uint32_t i = 0; i < 7; ++i) {
        SealPosition pos;
        auto w = sealToWire(e.tx, header(i, 40), pattern(40, i), false, &pos);
        gens.push_back(pos.generation);
        ASSERT_TRUE(openWhole(e.rx, w, 40).isOk()) << i;
    }
    // 40-byte frames: 120 >= 100 after three, so every fourth frame starts a key.
    EXPECT_EQ(gens, (std::vector<uint32_t>{0, 0, 0, 1, 1, 1, 2}));
}

TEST(SealRekey, CounterExhaustsAfterTheLastKeyAndANewEpochRecovers) {
    const SessionSecrets s = testSecrets();
    Limits l;
    l.frames_per_key = 2;
    l.max_generations = 2;
    Ends e = ends(s, kC2L, 1, l);
    std::vector<std::vector<uint8_t>> sent;
    for (uint32_t i = 0; i < 4; ++i) {
        sent.push_back(sealToWire(e.tx, header(i, 8), pattern(8, i)));
        ASSERT_TRUE(openWhole(e.rx, sent.back(), 8).isOk());
    }
    Status st;
    sealToWire(e.tx, header(4, 8), pattern(8, 4), false, nullptr, &st);
    EXPECT_EQ(st.code(), Code::kInternal);
    EXPECT_EQ(e.tx.error(), SealError::kCounterExhausted);
    EXPECT_NE(st.message().find("exhausted"), std::string::npos) << st.message();
    // The receiver refuses a fifth frame under the same epoch whatever its bytes.
    EXPECT_FALSE(openWhole(e.rx, sent[3], 8).isOk());
    EXPECT_EQ(e.rx.error(), SealError::kCounterExhausted);
    ASSERT_TRUE(e.tx.restart(1).isOk());
    ASSERT_TRUE(e.rx.restart(1).isOk());
    EXPECT_TRUE(openWhole(e.rx, sealToWire(e.tx, header(5, 8), pattern(8, 5)), 8).isOk());
}

TEST(SealRekey, EpochsOnlyMoveForwardAndLimitsAreValidated) {
    const SessionSecrets s = testSecrets();
    Ends e = ends(s);
    EXPECT_FALSE(e.tx.restart(0).isOk());
    EXPECT_EQ(e.tx.error(), SealError::kMisuse);
    ASSERT_TRUE(e.rx.restart(5).isOk());
    EXPECT_FALSE(e.rx.restart(3).isOk());
    EXPECT_EQ(e.rx.error(), SealError::kMisuse);
    Limits bad;
    bad.frames_per_key = kMaxFramesPerKey + 1;
    EXPECT_EQ(StreamSealer::create(s, kC2L, 1, kH, bad).status().code(), Code::kInvalidArgument);
    bad = {};
    bad.max_generations = 0;
    EXPECT_EQ(StreamOpener::create(s, kC2L, 1, kH, bad).status().code(), Code::kInvalidArgument);
    EXPECT_FALSE(StreamSealer::create(s, kC2L, 1, 0).isOk());
    EXPECT_FALSE(StreamSealer::create(s, kC2L, 1, kMaxHeaderBytes + 1).isOk());
}

// Black-box: with all-zero plaintext, each ciphertext block is the keystream block of its
// {key, nonce}, so a repeated pair (for any reason: a stuck counter, a lost part bit, a key
// reused across generations, streams or epochs) shows as a repeated block.
TEST(SealNonce, NoKeystreamBlockRepeatsOverManyFramesStreamsEpochsAndKeys) {
    const SessionSecrets s = testSecrets();
    Limits l;
    l.frames_per_key = 500;
    std::set<std::array<uint8_t, 16>> blocks;
    std::set<std::tuple<uint16_t, uint32_t, uint32_t, uint64_t>> positions;
    const std::array<uint8_t, kH> zero_header{};
    const std::array<uint8_t, 16> zero{};
    size_t n = 0;
    for (Direction d : {kC2L, kL2C}) {
        for (uint16_t stream = 0; stream < 4; ++stream) {
            auto tx = StreamSealer::create(s, d, stream, kH, l);
            ASSERT_TRUE(tx.isOk());
            for (uint32_t epoch = 0; epoch < 2; ++epoch) {
                if (epoch > 0) {
                    ASSERT_TRUE(tx->restart(epoch).isOk());
                }
                for (int i = 0; i < 2500; ++i) {
                    SealPosition pos;
                    auto w = sealToWire(*tx, zero_header, zero, false, &pos);
                    std::array<uint8_t, 16> hb, pb;
                    std::memcpy(hb.data(), w.data(), 16);
                    std::memcpy(pb.data(), w.data() + kH + 32, 16);
                    blocks.insert(hb);
                    blocks.insert(pb);
                    if (d == kC2L) {
                        positions.insert({pos.stream, pos.epoch, pos.generation, pos.frame});
                    }
                    n += 2;
                }
            }
        }
    }
    EXPECT_EQ(blocks.size(), n);
    EXPECT_EQ(positions.size(), n / 4);
}

// ---------------------------------------------------------------- misuse

TEST(SealFrame, MisuseIsRefusedWithAClearError) {
    const SessionSecrets s = testSecrets();
    auto expectMisuse = [](const Status& st, const StreamCipherBase& c, const char* what) {
        EXPECT_EQ(st.code(), Code::kInternal) << what;
        EXPECT_EQ(c.error(), SealError::kMisuse) << what;
        EXPECT_NE(st.message().find("misuse"), std::string::npos) << st.message();
    };
    std::vector<uint8_t> buf(200);
    std::span<uint8_t> all(buf);
    {
        Ends e = ends(s);
        expectMisuse(e.tx.seal(all.first(kH - 1), all.subspan(100, 8), all.subspan(110, 8),
                               all.subspan(0, kH + 32)),
                     e.tx, "short header");
    }
    {
        Ends e = ends(s);
        expectMisuse(e.tx.seal(all.first(kH), all.subspan(100, 8), all.subspan(104, 8),
                               all.subspan(0, kH + 32)),
                     e.tx, "partial overlap");
    }
    {
        Ends e = ends(s);
        expectMisuse(e.rx.openPrefix(all.first(kH + 31)), e.rx, "short prefix");
    }
    {
        Ends e = ends(s);
        expectMisuse(e.rx.beginPayload(1), e.rx, "payload without header");
    }
    {
        Ends e = ends(s);
        auto w = sealToWire(e.tx, header(1, 10), pattern(10, 1));
        ASSERT_TRUE(e.rx.openPrefix({w.data(), kH + 32}).isOk());
        ASSERT_TRUE(e.rx.beginPayload(10).isOk());
        ASSERT_TRUE(e.rx.decrypt({w.data() + kH + 32, 4}).isOk());
        expectMisuse(e.rx.finish(), e.rx, "finish before all bytes");
    }
    {
        Ends e = ends(s);
        auto w = sealToWire(e.tx, header(1, 10), pattern(10, 1));
        ASSERT_TRUE(e.rx.openPrefix({w.data(), kH + 32}).isOk());
        ASSERT_TRUE(e.rx.beginPayload(10).isOk());
        expectMisuse(e.rx.decrypt({w.data() + kH + 32, 11}), e.rx, "piece past the payload");
    }
}

// ---------------------------------------------------------------- resend path

TEST(SealResend, ReopenRecoversAStoredFrameForResealingOnAnotherStream) {
    const SessionSecrets s = testSecrets();
    auto a = StreamSealer::create(s, kC2L, 1, kH);
    Ends b = ends(s, kC2L, 2);
    std::vector<std::vector<uint8_t>> store;
    std::vector<SealPosition> where;
    for (uint32_t i = 0; i < 3; ++i) {
        SealPosition pos;
        store.push_back(sealToWire(*a, header(i, 24), pattern(24, i), false, &pos));
        where.push_back(pos);
    }
    // Stream 1 is lost; frame 1 was never confirmed: recover it and reseal it on stream 2.
    std::vector<uint8_t>& f = store[1];
    std::span<uint8_t> prefix(f.data(), kH + 32);
    std::span<uint8_t> body(f.data() + kH + 32, 24);
    ASSERT_TRUE(reopen(s, kC2L, kH, where[1], prefix, body).isOk());
    const auto h = header(1, 24);
    EXPECT_EQ(0, std::memcmp(f.data(), h.data(), kH));
    EXPECT_TRUE(std::equal(body.begin(), body.end(), pattern(24, 1).begin()));
    ASSERT_TRUE(b.tx.sealInPlace(prefix.first(kH), body, prefix).isOk());
    std::vector<uint8_t> plain;
    ASSERT_TRUE(openWhole(b.rx, f, 24, &plain).isOk());
    EXPECT_EQ(plain, pattern(24, 1));
    // A corrupted store is an internal error, not silently resent garbage.
    store[2][kH + 40] ^= 1;
    Status st =
        reopen(s, kC2L, kH, where[2], {store[2].data(), kH + 32}, {store[2].data() + kH + 32, 24});
    EXPECT_EQ(st.code(), Code::kInternal);
    EXPECT_NE(st.message().find("corrupted"), std::string::npos);
}

// ---------------------------------------------------------------- fuzz seeds

// The fuzz target's stream-mode seeds were sealed once and committed: that they still open is a
// known-answer test of the whole schedule (labels, nonce layout, frame layout), and keeps the
// seeds useful. If the wire format changes on purpose, regenerate them.
TEST(SealFuzzSeeds, CommittedSealedStreamsStillOpenWholly) {
    for (const char* name : {"stream_whole", "stream_pieces_rekey"}) {
        SCOPED_TRACE(name);
        std::ifstream f(
            std::string(ATLAS_SOURCE_DIR) + "/tests/fuzz/corpus/fuzz_transport_seal/" + name,
            std::ios::binary);
        ASSERT_TRUE(f.good());
        std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)),
                                   std::istreambuf_iterator<char>());
        const testing::StreamDecode d = testing::openStreamInput(bytes);
        EXPECT_TRUE(d.status.isOk()) << d.status.toString();
        EXPECT_EQ(d.consumed, bytes.size() - testing::kStreamPreamble);
        EXPECT_GE(d.frames, 3u);
    }
}

}  // namespace
}  // namespace atlas::transport::seal
