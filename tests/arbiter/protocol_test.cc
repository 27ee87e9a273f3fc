// The arbitration protocol codec: round trips, incremental decoding, strict rejection, proofs.
#include <gtest/gtest.h>

#include <random>

#include "arbiter/protocol.h"

namespace atlas::arbiter {
namespace {

std::vector<Message> samples() {
    Hello h;
    h.client_nonce = randomNonce().value();
    h.pid = 4242;
    h.name = "host-a";
    Challenge c;
    c.server_nonce = randomNonce().value();
    c.server_mac = serverProof("k", h.client_nonce, c.server_nonce, 7);
    c.policy = WirePolicy::kWorkload;
    c.auth_required = true;
    c.lease_ns = 500 * kNsPerMs;
    c.heartbeat_ns = 100 * kNsPerMs;
    c.session_id = 7;
    Auth a;
    a.client_mac = clientProof("k", h.client_nonce, c.server_nonce, 7);
    Open o;
    o.flow = 3;
    o.cls = {12, 3, 1};
    o.link = "east->west";
    Error e;
    e.code = static_cast<uint16_t>(ErrorCode::kBadFlow);
    e.text = "flow 3 is already open";
    return {h,
            c,
            a,
            Welcome{7},
            o,
            Request{3, 12345678},
            Grant{3, 99, 250 * kNsPerMs, 958'000'000},
            Release{3, 99, 777},
            Close{3},
            Ping{5},
            Pong{5},
            e,
            Train{"east->west", 2621440, 21 * kNsPerMs}};
}

TEST(ArbiterProtocol, EveryMessageRoundTripsByteByByte) {
    std::vector<uint8_t> stream;
    const auto msgs = samples();
    for (const Message& m : msgs) {
        encode(m, &stream);
    }
    Decoder d;
    std::vector<Message> got;
    for (uint8_t b : stream) {
        d.feed(&b, 1);
        for (;;) {
            auto next = d.next();
            ASSERT_TRUE(next.isOk()) << next.status().toString();
            if (!next.value()) {
                break;
            }
            got.push_back(*next.value());
        }
    }
    ASSERT_EQ(got.size(), msgs.size());
    for (size_t i = 0; i < msgs.size(); ++i) {
        EXPECT_EQ(typeOf(got[i]), typeOf(msgs[i])) << i;
        EXPECT_EQ(encode(got[i]), encode(msgs[i]))
            << "message " << i << " (" << msgTypeName(typeOf(msgs[i])) << ")";
    }
    const auto& o = std::get<Open>(got[4]);
    EXPECT_EQ(o.link, "east->west");
    EXPECT_EQ(o.cls, (WireClass{12, 3, 1}));
    EXPECT_EQ(std::get<Grant>(got[6]).slot_ns, 250 * kNsPerMs);
    EXPECT_EQ(std::get<Grant>(got[6]).rate_bps, 958'000'000u);
    EXPECT_EQ(std::get<Error>(got[11]).text, "flow 3 is already open");
    const auto& t = std::get<Train>(got[12]);
    EXPECT_EQ(t.link, "east->west");
    EXPECT_EQ(t.bytes, 2621440u);
    EXPECT_EQ(t.dispersion_ns, 21 * kNsPerMs);
}

TEST(ArbiterProtocol, RejectsForeignBytesAtTheFirstWrongMagicByte) {
    Decoder d;
    const uint8_t get[] = {'G'};
    d.feed(get, 1);
    auto r = d.next();
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("magic"), std::string::npos);
    EXPECT_TRUE(d.failed());
    // Sticky: more (valid) bytes do not revive it.
    auto ok = encode(Ping{1});
    d.feed(ok.data(), ok.size());
    EXPECT_FALSE(d.next().isOk());
}

TEST(ArbiterProtocol, RejectsWrongVersionLengthTypeAndReservedBits) {
    auto base = encode(Request{1, 2});
    struct Case {
        size_t offset;
        uint8_t value;
        const char* what;
    } cases[] = {
        {4, kProtocolVersion + 1, "version"},
        {4, 0, "version"},
        {5, 0, "type"},
        {5, 99, "type"},
        {6, 1, "reserved"},
        {8, 15, "length"},
        {12 + 4, 1, "reserved body"},
    };
    for (const Case& c : cases) {
        auto bytes = base;
        bytes[c.offset] = c.value;
        Decoder d;
        d.feed(bytes.data(), bytes.size());
        EXPECT_FALSE(d.next().isOk()) << c.what;
    }
    // Semantic checks: a link name with a space, a direction of 2, a grant with negative slot.
    Open o;
    o.link = "a b";
    auto open = encode(o);
    Decoder d1;
    d1.feed(open.data(), open.size());
    EXPECT_FALSE(d1.next().isOk());  // the encoder keeps the space; the decoder refuses it
    o.link = "a->b";
    o.cls.direction = 2;
    auto open2 = encode(o);
    Decoder d2;
    d2.feed(open2.data(), open2.size());
    EXPECT_FALSE(d2.next().isOk());
    auto grant = encode(Grant{1, 1, -5});
    Decoder d3;
    d3.feed(grant.data(), grant.size());
    EXPECT_FALSE(d3.next().isOk());
}

// Version 2 carries Open's priority in a byte version 1 kept reserved; version 1 frames (an
// older peer) decode with the default priority, and each side answers at the peer's version.
TEST(ArbiterProtocol, VersionTwoCarriesThePriorityAndVersionOneDefaultsIt) {
    Open o;
    o.flow = 9;
    o.cls = {4, 2, 1, 0};
    o.link = "a->b";
    constexpr size_t kPriorityOffset = kHeaderBytes + 4 + 4 + 4 + 1;  // flow, pipeline, stage, dir
    auto decode = [](const std::vector<uint8_t>& bytes, uint8_t* version) -> Result<Open> {
        Decoder d;
        d.feed(bytes.data(), bytes.size());
        auto next = d.next();
        if (!next.isOk()) {
            return next.status();
        }
        *version = d.lastVersion();
        return std::get<Open>(*next.value());
    };
    uint8_t version = 0;
    const auto v2 = encode(o);
    EXPECT_EQ(v2[4], kProtocolVersion);
    EXPECT_EQ(v2[kPriorityOffset], 0);
    auto got = decode(v2, &version);
    ASSERT_TRUE(got.isOk()) << got.status().toString();
    EXPECT_EQ(got->cls.priority, 0);
    EXPECT_EQ(version, kProtocolVersion);
    o.cls.priority = 5;
    EXPECT_EQ(encode(o)[kPriorityOffset], 5);

    const auto v1 = encode(o, 1);
    EXPECT_EQ(v1[4], 1);
    EXPECT_EQ(v1.size(), v2.size()) << "same body size: the byte was reserved";
    EXPECT_EQ(v1[kPriorityOffset], 0) << "version 1 keeps the byte reserved";
    got = decode(v1, &version);
    ASSERT_TRUE(got.isOk()) << got.status().toString();
    EXPECT_EQ(got->cls.priority, kDefaultPriority);
    EXPECT_EQ(version, 1);
    auto v1_dirty = v1;
    v1_dirty[kPriorityOffset] = 1;
    EXPECT_FALSE(decode(v1_dirty, &version).isOk()) << "version 1: the byte must be zero";

    auto bad = v2;
    bad[kPriorityOffset] = kPriorityLevels;
    auto rejected = decode(bad, &version);
    ASSERT_FALSE(rejected.isOk());
    EXPECT_NE(rejected.status().message().find("priority"), std::string::npos);

    // A version this build does not speak: the text an older server sends too, which the
    // client recognises to fall back to version 1.
    auto future = encode(Ping{1});
    future[4] = kProtocolVersion + 1;
    Decoder d;
    d.feed(future.data(), future.size());
    auto err = d.next();
    ASSERT_FALSE(err.isOk());
    EXPECT_NE(err.status().message().find("protocol version 4 (this side speaks 1..3)"),
              std::string::npos)
        << err.status().message();
}

Result<Message> decodeOne(const std::vector<uint8_t>& bytes) {
    Decoder d;
    d.feed(bytes.data(), bytes.size());
    auto next = d.next();
    if (!next.isOk()) {
        return next.status();
    }
    if (!next.value()) {
        return Status(Code::kInvalidArgument, "incomplete");
    }
    return *next.value();
}

// Version 3: Grant's reserved word carries the link rate in kbit/s; below 3 it stays zero.
TEST(ArbiterProtocol, VersionThreeGrantCarriesTheRateInItsReservedWord) {
    constexpr size_t kWordOffset = kHeaderBytes + 4;  // after the flow
    Grant g{7, 11, 250 * kNsPerMs, 957'600'400};
    auto got = decodeOne(encode(g));
    ASSERT_TRUE(got.isOk()) << got.status().toString();
    EXPECT_EQ(std::get<Grant>(*got).rate_bps, 957'600'000u) << "kbit/s, rounded";
    g.rate_bps = 957'600'600;
    EXPECT_EQ(std::get<Grant>(*decodeOne(encode(g))).rate_bps, 957'601'000u);
    g.rate_bps = UINT64_MAX;
    EXPECT_EQ(std::get<Grant>(*decodeOne(encode(g))).rate_bps, uint64_t{UINT32_MAX} * 1000)
        << "saturates";

    for (uint8_t v : {uint8_t{1}, uint8_t{2}}) {
        auto old = encode(g, v);
        EXPECT_EQ(old[kWordOffset], 0) << "version " << int(v) << " keeps the word reserved";
        auto back = decodeOne(old);
        ASSERT_TRUE(back.isOk()) << back.status().toString();
        EXPECT_EQ(std::get<Grant>(*back).rate_bps, 0u);
        old[kWordOffset] = 1;
        EXPECT_FALSE(decodeOne(old).isOk()) << "version " << int(v) << ": the word must be zero";
    }
}

TEST(ArbiterProtocol, TrainNeedsVersionThreeAndPositiveValidFields) {
    const Train t{"dc0->dc1", 1 << 20, 9 * kNsPerMs};
    EXPECT_TRUE(encode(t, 2).empty()) << "nothing an older peer could not read is sent";
    EXPECT_TRUE(encode(t, 1).empty());
    auto v3 = encode(t);
    ASSERT_FALSE(v3.empty());
    ASSERT_TRUE(decodeOne(v3).isOk());

    auto as_v2 = v3;
    as_v2[4] = 2;  // a train inside a version-2 session
    auto err = decodeOne(as_v2);
    ASSERT_FALSE(err.isOk());
    EXPECT_NE(err.status().message().find("train needs protocol version 3"), std::string::npos)
        << err.status().message();

    for (const Train& bad : {Train{"dc0->dc1", 0, 9 * kNsPerMs}, Train{"dc0->dc1", 1 << 20, 0},
                             Train{"dc0->dc1", 1 << 20, -5}, Train{"dc0 dc1", 1 << 20, 5}}) {
        auto r = decodeOne(encode(bad));
        ASSERT_FALSE(r.isOk()) << bad.link << " " << bad.bytes << " " << bad.dispersion_ns;
        EXPECT_NE(r.status().message().find("train:"), std::string::npos) << r.status().message();
    }
}

TEST(ArbiterProtocol, TruncatedStreamsWaitAndNeverFail) {
    auto bytes = encode(samples()[1]);
    for (size_t n = 0; n < bytes.size(); ++n) {
        Decoder d;
        d.feed(bytes.data(), n);
        auto r = d.next();
        ASSERT_TRUE(r.isOk()) << n;
        EXPECT_FALSE(r.value().has_value()) << n;
    }
}

TEST(ArbiterProtocol, ProofsDependOnRoleKeyNoncesAndSession) {
    const Nonce a = randomNonce().value();
    const Nonce b = randomNonce().value();
    EXPECT_NE(a, b);  // 128 random bits
    const Mac s = serverProof("key", a, b, 1);
    EXPECT_TRUE(macEqual(s, serverProof("key", a, b, 1)));
    EXPECT_FALSE(macEqual(s, clientProof("key", a, b, 1)));  // no reflection
    EXPECT_FALSE(macEqual(s, serverProof("key2", a, b, 1)));
    EXPECT_FALSE(macEqual(s, serverProof("key", b, a, 1)));
    EXPECT_FALSE(macEqual(s, serverProof("key", a, b, 2)));
}

bool failingRandom(uint8_t*, size_t) {
    return false;
}

TEST(ArbiterProtocol, FailedRngIsAnErrorNotAZeroNonce) {
    const Result<Nonce> n = randomNonce(&failingRandom);
    ASSERT_FALSE(n.isOk());
    EXPECT_EQ(n.status().code(), Code::kSystem);
    EXPECT_NE(n.status().message().find("random number generator failed"), std::string::npos);
    EXPECT_FALSE(randomNonce(nullptr).isOk());
    ASSERT_TRUE(randomNonce(&systemRandomFill).isOk());
}

TEST(ArbiterProtocol, RandomGarbageNeverCrashesTheDecoder) {
    std::mt19937_64 rng(12345);
    for (int round = 0; round < 2000; ++round) {
        auto bytes = encode(samples()[static_cast<size_t>(round) % samples().size()]);
        const size_t flips = 1 + rng() % 3;
        for (size_t i = 0; i < flips; ++i) {
            bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
        }
        Decoder d;
        d.feed(bytes.data(), bytes.size());
        for (int i = 0; i < 4; ++i) {
            auto r = d.next();
            if (!r.isOk() || !r.value()) {
                break;
            }
            // Whatever decodes must re-encode to a frame that decodes to the same bytes.
            auto again = encode(*r.value());
            Decoder d2;
            d2.feed(again.data(), again.size());
            auto r2 = d2.next();
            ASSERT_TRUE(r2.isOk() && r2.value());
            EXPECT_EQ(encode(*r2.value()), again);
        }
    }
}

}  // namespace
}  // namespace atlas::arbiter
