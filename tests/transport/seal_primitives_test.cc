// transport/seal.h, bottom layers: HKDF against RFC 5869, AES-256-GCM against the McGrew-Viega
// (GCM specification / NIST) vectors through Gcm, the key schedule and the nonce layout.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "tests/transport/seal_test_util.h"
#include "transport/seal.h"

namespace atlas::transport::seal {
namespace {

std::vector<uint8_t> unhex(std::string_view s) {
    std::vector<uint8_t> out;
    for (size_t i = 0; i + 1 < s.size(); i += 2) {
        out.push_back(static_cast<uint8_t>(std::stoul(std::string(s.substr(i, 2)), nullptr, 16)));
    }
    return out;
}

std::vector<uint8_t> range(uint8_t from, size_t n) {
    std::vector<uint8_t> v(n);
    for (size_t i = 0; i < n; ++i) {
        v[i] = static_cast<uint8_t>(from + i);
    }
    return v;
}

template <typename C>
std::vector<uint8_t> bytesOf(const C& c) {
    return {c.begin(), c.end()};
}

// ---------------------------------------------------------------- HKDF (RFC 5869 A.1-A.3)

struct HkdfCase {
    std::vector<uint8_t> ikm, salt, info;
    const char* prk;
    const char* okm;
};

TEST(SealHkdf, Rfc5869Sha256Vectors) {
    const std::vector<HkdfCase> cases = {
        {std::vector<uint8_t>(22, 0x0b), range(0x00, 13), range(0xf0, 10),
         "077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5",
         "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"},
        {range(0x00, 80), range(0x60, 80), range(0xb0, 80),
         "06a6b88c5853361a06104c9ceb35b45cef760014904671014a193f40c15fc244",
         "b11e398dc80327a1c8e7f78c596a49344f012eda2d4efad8a050cc4c19afa97c59045a99cac7827271cb41c6"
         "5e590e09da3275600c2f09b8367793a9aca3db71cc30c58179ec3e87c14c01d5c1f3434f1d87"},
        {std::vector<uint8_t>(22, 0x0b),
         {},
         {},
         "19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04",
         "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE("RFC 5869 A." + std::to_string(i + 1));
        const HkdfCase& c = cases[i];
        Key prk{};
        ASSERT_TRUE(hkdfExtract(c.salt, c.ikm, &prk).isOk());
        EXPECT_EQ(bytesOf(prk), unhex(c.prk));
        const std::vector<uint8_t> want = unhex(c.okm);
        std::vector<uint8_t> okm(want.size());
        ASSERT_TRUE(hkdfExpand(prk, c.info, okm).isOk());
        EXPECT_EQ(okm, want);
        std::vector<uint8_t> okm2(want.size());
        ASSERT_TRUE(hkdf(c.salt, c.ikm, c.info, okm2).isOk());
        EXPECT_EQ(okm2, want);
    }
    Key prk{};
    std::vector<uint8_t> too_long(255 * 32 + 1);
    EXPECT_EQ(hkdfExpand(prk, {}, too_long).code(), Code::kInvalidArgument);
}

// ---------------------------------------------------------------- AES-256-GCM vectors

struct GcmCase {
    const char *key, *iv, *pt, *aad, *ct, *tag;
};

// McGrew & Viega, "The Galois/Counter Mode of Operation", test cases 13-16 (the 256-bit keys
// with 96-bit IVs; 17 and 18 use other IV lengths, which this API never does).
const GcmCase kGcmCases[] = {
    {"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000",
     "", "", "", "530f8afbc74536b9a963b4f1c4cb738b"},
    {"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000",
     "00000000000000000000000000000000", "", "cea7403d4d606b6e074ec5d3baf39d18",
     "d0d1c8a799996bf0265b98b5d48ab919"},
    {"feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e24"
     "49a6b525b16aedf5aa0de657ba637b391aafd255",
     "",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b10"
     "56828838c5f61e6393ba7a0abcc9f662898015ad",
     "b094dac5d93471bdec1a502270e3cc6c"},
    {"feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e24"
     "49a6b525b16aedf5aa0de657ba637b39",
     "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b10"
     "56828838c5f61e6393ba7a0abcc9f662",
     "76fc6ece0f4e1768cddf8853bb2d551b"},
};

TEST(SealGcm, McGrewViegaVectorsSealAndOpenInEveryTwoPieceSplit) {
    auto enc = Gcm::create(true);
    auto dec = Gcm::create(false);
    ASSERT_TRUE(enc.isOk() && dec.isOk());
    int tc = 13;
    for (const GcmCase& c : kGcmCases) {
        SCOPED_TRACE("test case " + std::to_string(tc++));
        Key key{};
        Iv iv{};
        const auto kb = unhex(c.key);
        const auto ivb = unhex(c.iv);
        std::copy(kb.begin(), kb.end(), key.begin());
        std::copy(ivb.begin(), ivb.end(), iv.begin());
        const auto pt = unhex(c.pt);
        const auto aad = unhex(c.aad);
        const auto want_ct = unhex(c.ct);
        const auto want_tag = unhex(c.tag);

        ASSERT_TRUE(enc->setKey(key).isOk());
        ASSERT_TRUE(enc->begin(iv, aad).isOk());
        std::vector<uint8_t> ct(pt.size());
        ASSERT_TRUE(enc->update(pt.data(), ct.data(), pt.size()).isOk());
        Tag tag{};
        ASSERT_TRUE(enc->finishSeal(&tag).isOk());
        EXPECT_EQ(ct, want_ct);
        EXPECT_EQ(bytesOf(tag), want_tag);

        ASSERT_TRUE(dec->setKey(key).isOk());
        for (size_t split = 0; split <= ct.size(); ++split) {
            std::vector<uint8_t> buf = want_ct;
            ASSERT_TRUE(dec->begin(iv, aad).isOk());
            ASSERT_TRUE(dec->update(buf.data(), buf.data(), split).isOk());
            ASSERT_TRUE(
                dec->update(buf.data() + split, buf.data() + split, buf.size() - split).isOk());
            auto ok = dec->finishOpen(tag);
            ASSERT_TRUE(ok.isOk());
            EXPECT_TRUE(*ok) << "split at " << split;
            EXPECT_EQ(buf, pt);
        }
        Tag bad = tag;
        bad[15] ^= 1;
        std::vector<uint8_t> buf = want_ct;
        ASSERT_TRUE(dec->begin(iv, aad).isOk());
        ASSERT_TRUE(dec->update(buf.data(), buf.data(), buf.size()).isOk());
        auto ok = dec->finishOpen(bad);
        ASSERT_TRUE(ok.isOk());
        EXPECT_FALSE(*ok);
    }
}

// ---------------------------------------------------------------- key schedule

TEST(SealKeys, DirectionsStreamsEpochsAndGenerationsGiveDistinctKeys) {
    const SessionSecrets s = testing::testSecrets(1);
    std::set<std::vector<uint8_t>> seen;
    size_t n = 0;
    for (Direction d : {Direction::kConnectorToListener, Direction::kListenerToConnector}) {
        for (uint16_t stream : {0, 1, 2, 63, 256}) {
            for (uint32_t epoch : {0u, 1u, 2u, 0x10000u}) {
                for (uint32_t gen : {0u, 1u, 2u, 0x10000u}) {
                    auto k = s.trafficKey(d, stream, epoch, gen);
                    ASSERT_TRUE(k.isOk());
                    seen.insert(bytesOf(*k));
                    ++n;
                    auto again = s.trafficKey(d, stream, epoch, gen);
                    EXPECT_EQ(bytesOf(*again), bytesOf(*k)) << "derivation must be deterministic";
                }
            }
        }
    }
    EXPECT_EQ(seen.size(), n);
}

TEST(SealKeys, EveryHandshakeInputChangesTheKeys) {
    auto keyOf = [](std::string_view auth, const AuthContext& c) {
        auto s = SessionSecrets::derive(auth, c);
        EXPECT_TRUE(s.isOk());
        return bytesOf(*s->trafficKey(Direction::kConnectorToListener, 1, 0, 0));
    };
    const AuthContext base = testing::testContext(7);
    std::set<std::vector<uint8_t>> seen{keyOf("k", base)};
    AuthContext c = base;
    c.session_id ^= 1;
    seen.insert(keyOf("k", c));
    c = base;
    c.listen_id ^= 1;
    seen.insert(keyOf("k", c));
    c = base;
    c.client_nonce[15] ^= 1;
    seen.insert(keyOf("k", c));
    c = base;
    c.server_nonce[0] ^= 1;
    seen.insert(keyOf("k", c));
    c = base;
    std::swap(c.client_nonce, c.server_nonce);  // roles matter, not just the set of nonces
    seen.insert(keyOf("k", c));
    seen.insert(keyOf("K", base));
    EXPECT_EQ(seen.size(), 7u);
}

// The documented schedule (transport/seal.h, docs/protocol.md), recomputed from the RFC-tested
// HKDF primitives: pins the labels and encodings so that both ends of a mixed-version pair
// agree, or the change is deliberate (and the labels' version bumped).
TEST(SealKeys, MatchesTheDocumentedSchedule) {
    const AuthContext c = testing::testContext(3);
    const std::string auth = "a shared key";
    std::vector<uint8_t> salt(c.client_nonce.begin(), c.client_nonce.end());
    salt.insert(salt.end(), c.server_nonce.begin(), c.server_nonce.end());
    Key prk{};
    ASSERT_TRUE(
        hkdfExtract(salt, {reinterpret_cast<const uint8_t*>(auth.data()), auth.size()}, &prk)
            .isOk());
    auto le = [](std::vector<uint8_t>* v, uint64_t x, int n) {
        for (int i = 0; i < n; ++i) {
            v->push_back(static_cast<uint8_t>(x >> (8 * i)));
        }
    };
    const std::string c2l = "atlas-seal-v1 c2l";
    std::vector<uint8_t> info(c2l.begin(), c2l.end());
    le(&info, c.session_id, 8);
    le(&info, c.listen_id, 8);
    Key secret{};
    ASSERT_TRUE(hkdfExpand(prk, info, secret).isOk());
    const std::string label = "atlas-seal-v1 key";
    std::vector<uint8_t> kinfo(label.begin(), label.end());
    le(&kinfo, 5, 2);           // stream
    le(&kinfo, 0x0a0b0c0d, 4);  // epoch
    le(&kinfo, 2, 4);           // generation
    Key want{};
    ASSERT_TRUE(hkdfExpand(secret, kinfo, want).isOk());

    auto s = SessionSecrets::derive(auth, c);
    ASSERT_TRUE(s.isOk());
    auto got = s->trafficKey(Direction::kConnectorToListener, 5, 0x0a0b0c0d, 2);
    ASSERT_TRUE(got.isOk());
    EXPECT_EQ(bytesOf(*got), bytesOf(want));
}

TEST(SealKeys, EmptyKeyIsABadKeyAndMissingNoncesAreRefused) {
    auto s = SessionSecrets::derive("", testing::testContext(1));
    ASSERT_FALSE(s.isOk());
    EXPECT_EQ(s.status().code(), Code::kInvalidUsage);
    EXPECT_NE(s.status().message().find("bad key"), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find("ATLAS_AUTH_KEY"), std::string::npos);

    AuthContext zero = testing::testContext(1);
    zero.client_nonce = {};
    zero.server_nonce = {};
    auto z = SessionSecrets::derive("k", zero);
    ASSERT_FALSE(z.isOk());
    EXPECT_EQ(z.status().code(), Code::kInternal);
}

// ---------------------------------------------------------------- nonce layout

TEST(SealNonce, LayoutIsStreamEpochAndCounterBigEndian) {
    const Iv iv = makeIv(0x0102, 0x03040506, 0x0000123456789abcull, 1);
    // counter = frame * 2 + part = 0x2468acf13579 (48 bits)
    const Iv want = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x24, 0x68, 0xac, 0xf1, 0x35, 0x79};
    EXPECT_EQ(iv, want);
    EXPECT_NE(makeIv(1, 0, 7, 0), makeIv(1, 0, 7, 1)) << "header and payload nonces differ";
    EXPECT_NE(makeIv(1, 0, 7, 0), makeIv(2, 0, 7, 0));
    EXPECT_NE(makeIv(1, 0, 7, 0), makeIv(1, 1, 7, 0));
    EXPECT_EQ(makeIv(0, 0, kMaxFramesPerKey - 1, 1),
              (Iv{0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}));
}

}  // namespace
}  // namespace atlas::transport::seal
