// KV hand-off wire format: round trips, known checksum vectors, and rejection of every kind
// of inconsistent header (the decoder reads untrusted bytes).
#include <gtest/gtest.h>
#include <algorithm>

#include <cstring>

#include "bubbletea/daemon/kv_store.h"
#include "bubbletea/daemon/kv_wire.h"

namespace atlas::bubbletea::kv {
namespace {

KvHeader sampleHeader() {
    KvHeader h;
    h.transfer_id = 77;
    h.num_tokens = 5;
    h.num_layers = 2;
    h.num_kv_heads = 2;
    h.head_dim = 16;
    h.dtype = DType::kBF16;
    h.first_token = 123;
    h.payload_bytes = 2ull * 2 * 5 * 2 * 16 * 2;
    h.checksum_kind = ChecksumKind::kCrc32c;
    h.checksum[0] = 0xAB;
    h.model_id = "tiny";
    h.request_id = "cmpl-1";
    h.engine_id = "bubbletea-host-1";
    return h;
}

TEST(DaemonKvWire, HeaderRoundTrip) {
    const KvHeader h = sampleHeader();
    const auto bytes = encodeHeader(h);
    EXPECT_EQ(bytes.size(), kHeaderFixedBytes + 4 + 6 + 16);
    auto d = decodeHeader(bytes, 1 << 20);
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    EXPECT_EQ(d.value().transfer_id, 77u);
    EXPECT_EQ(d.value().num_tokens, 5u);
    EXPECT_EQ(d.value().num_layers, 2u);
    EXPECT_EQ(d.value().head_dim, 16u);
    EXPECT_EQ(d.value().first_token, 123);
    EXPECT_EQ(d.value().dtype, DType::kBF16);
    EXPECT_EQ(d.value().checksum, h.checksum);
    EXPECT_EQ(d.value().model_id, "tiny");
    EXPECT_EQ(d.value().request_id, "cmpl-1");
    EXPECT_EQ(d.value().engine_id, "bubbletea-host-1");
}

TEST(DaemonKvWire, RejectsInconsistentHeaders) {
    const auto good = encodeHeader(sampleHeader());
    auto mutate = [&](size_t offset, uint8_t value) {
        auto b = good;
        b[offset] = value;
        return decodeHeader(b, 1 << 20);
    };
    EXPECT_FALSE(mutate(0, 'X').isOk());  // magic
    EXPECT_FALSE(mutate(4, 9).isOk());    // version
    EXPECT_FALSE(mutate(6, 0).isOk());    // header_bytes
    EXPECT_FALSE(mutate(16, 6).isOk());   // num_tokens no longer matches payload_bytes
    EXPECT_FALSE(mutate(24, 1).isOk());   // payload_bytes
    EXPECT_FALSE(mutate(48, 9).isOk());   // dtype code
    EXPECT_FALSE(mutate(49, 7).isOk());   // checksum kind
    EXPECT_FALSE(mutate(56, 1).isOk());   // flags
    EXPECT_FALSE(mutate(60, 2).isOk());   // layout
    EXPECT_FALSE(mutate(100, 1).isOk());  // reserved
    EXPECT_FALSE(mutate(kHeaderFixedBytes, 0x01).isOk());  // non-printable model id
    auto truncated = good;
    truncated.pop_back();
    EXPECT_FALSE(decodeHeader(truncated, 1 << 20).isOk());
    EXPECT_FALSE(decodeHeader(std::span<const uint8_t>(good.data(), 10), 1 << 20).isOk());
    // Larger than the receiver accepts: kInvalidArgument (so it can answer "too large").
    auto big = decodeHeader(good, 100);
    ASSERT_FALSE(big.isOk());
    EXPECT_EQ(big.status().code(), Code::kInvalidArgument);
    // A shape whose size overflows 64 bits.
    KvHeader h = sampleHeader();
    h.num_tokens = 1ull << 62;
    h.payload_bytes = 0;
    EXPECT_FALSE(decodeHeader(encodeHeader(h), UINT64_MAX).isOk());
}

TEST(DaemonKvWire, Crc32cKnownAnswers) {
    // RFC 3720 / iSCSI test vectors.
    const char* digits = "123456789";
    EXPECT_EQ(crc32c(0, digits, 9), 0xE3069283u);
    std::vector<uint8_t> zeros(32, 0);
    EXPECT_EQ(crc32c(0, zeros.data(), zeros.size()), 0x8A9136AAu);
    std::vector<uint8_t> ones(32, 0xff);
    EXPECT_EQ(crc32c(0, ones.data(), ones.size()), 0x62A8AB43u);
    // Incremental == one shot, across the 8-byte fast path and the tail.
    std::vector<uint8_t> data(1000);
    for (size_t i = 0; i < data.size(); ++i) {
        data[i] = static_cast<uint8_t>(i * 7 + 3);
    }
    const uint32_t whole = crc32c(0, data.data(), data.size());
    EXPECT_EQ(crc32c(crc32c(0, data.data(), 333), data.data() + 333, 667), whole);
}

TEST(DaemonKvWire, Sha256AndChecksumText) {
    const std::string abc = "abc";
    const auto sum = computeChecksum(
        ChecksumKind::kSha256,
        std::span<const std::byte>(reinterpret_cast<const std::byte*>(abc.data()), abc.size()));
    EXPECT_EQ(checksumText(ChecksumKind::kSha256, sum),
              "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const auto crc = computeChecksum(
        ChecksumKind::kCrc32c,
        std::span<const std::byte>(reinterpret_cast<const std::byte*>("123456789"), 9));
    EXPECT_EQ(checksumText(ChecksumKind::kCrc32c, crc), "crc32c:e3069283");
}

TEST(DaemonKvWire, ControlMessagesRoundTrip) {
    HelloReply reply;
    reply.handle[0] = 9;
    reply.handle[127] = 7;
    auto r = decodeReply(encodeReply(reply));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().handle, reply.handle);
    EXPECT_TRUE(decodeHello(encodeHello({})).isOk());
    auto hello = encodeHello({});
    hello[0] ^= 1;
    EXPECT_FALSE(decodeHello(hello).isOk());

    Ack ack;
    ack.status = AckStatus::kChecksumMismatch;
    ack.transfer_id = 5;
    ack.bytes = 1234;
    ack.message = "payload checksum differs\n";
    auto a = decodeAck(encodeAck(ack));
    ASSERT_TRUE(a.isOk());
    EXPECT_EQ(a.value().status, AckStatus::kChecksumMismatch);
    EXPECT_EQ(a.value().transfer_id, 5u);
    EXPECT_EQ(a.value().bytes, 1234u);
    EXPECT_EQ(a.value().message, "payload checksum differs?");  // control bytes replaced
    auto bad = encodeAck(ack);
    bad[6] = 200;
    EXPECT_FALSE(decodeAck(bad).isOk());
    // A peer that fills the whole message field (no terminator) still yields a message of
    // at most kAckMessageBytes - 1 characters (found by fuzz_bubbletea_kv).
    auto unterminated = encodeAck(ack);
    std::fill(unterminated.begin() + 32, unterminated.begin() + 32 + kAckMessageBytes, 'x');
    auto u = decodeAck(unterminated);
    ASSERT_TRUE(u.isOk());
    EXPECT_EQ(u.value().message, std::string(kAckMessageBytes - 1, 'x'));
}

TEST(DaemonKvStore, OneShotTtlAndEviction) {
    KvStore store(100, 50);
    EXPECT_TRUE(store.put("a", std::string(40, 'a'), 0));
    EXPECT_TRUE(store.put("b", std::string(40, 'b'), 10));
    EXPECT_FALSE(store.put("b", "dup", 10));
    EXPECT_FALSE(store.put("huge", std::string(101, 'x'), 10));
    // A third entry evicts the oldest.
    EXPECT_TRUE(store.put("c", std::string(40, 'c'), 20));
    EXPECT_EQ(store.evicted(), 1u);
    EXPECT_FALSE(store.take("a", 20).has_value());
    auto b = store.take("b", 30);
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(*b, std::string(40, 'b'));
    EXPECT_FALSE(store.take("b", 30).has_value());  // one-shot
    // "c" expires at 70.
    EXPECT_EQ(store.sweep(69), 0u);
    EXPECT_EQ(store.sweep(70), 1u);
    EXPECT_EQ(store.entries(), 0u);
    EXPECT_EQ(store.bytes(), 0u);
}

}  // namespace
}  // namespace atlas::bubbletea::kv
