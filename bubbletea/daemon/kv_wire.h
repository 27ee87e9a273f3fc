// The KV hand-off wire format: how a prefill server (bubbletea) pushes a KV cache to a
// decode endpoint (kv-sink, or a decode server that speaks this protocol).
//
// Two connections per (prefill daemon, decode endpoint) pair, both opened by the daemon:
//   1. Control: plain TCP to the endpoint's KV port (kv_transfer_params.remote_port or
//      --decode-url). The daemon sends Hello (16 bytes); the endpoint answers HelloReply
//      (16 bytes + the 128-byte Atlas transport listen handle of a listener it opened for
//      this connection, bound to the address the control connection arrived on). Later the
//      endpoint sends one Ack (128 bytes) per transfer on this connection.
//   2. Data: an Atlas transport SendComm (multi-stream TCP, optional HMAC authentication)
//      connected with that handle. Each transfer is two messages in order: the KvHeader
//      (128 fixed bytes + three strings, at most kMaxHeaderBytes), then the payload (the
//      engine's exportKv bytes, exactly payload_bytes).
// The endpoint validates the header (magic, version, sizes consistent with the shape, model
// id when it expects one, payload within its limit), receives the payload, verifies the
// checksum, and acks or nacks. Both connections are reused for later transfers; either side
// closes them on any error, and the daemon reconnects on the next push.
//
// All integers are little-endian. Every decoder here treats its input as untrusted
// (tests/fuzz: fuzz_bubbletea_kv).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "atlas/common/status.h"
#include "bubbletea/daemon/config.h"
#include "bubbletea/engine/dtype.h"

namespace atlas::bubbletea::kv {

constexpr uint32_t kHeaderMagic = 0x564B5442;  // "BTKV"
constexpr uint32_t kHelloMagic = 0x484B5442;   // "BTKH"
constexpr uint32_t kReplyMagic = 0x524B5442;   // "BTKR"
constexpr uint32_t kAckMagic = 0x414B5442;     // "BTKA"
constexpr uint16_t kVersion = 1;

constexpr size_t kHeaderFixedBytes = 128;
constexpr size_t kMaxStringBytes = 256;
constexpr size_t kMaxHeaderBytes = kHeaderFixedBytes + 3 * kMaxStringBytes;
constexpr size_t kHelloBytes = 16;
constexpr size_t kHandleBytes = 128;  // == transport::kHandleSize
constexpr size_t kReplyBytes = 16 + kHandleBytes;
constexpr size_t kAckBytes = 128;
constexpr size_t kAckMessageBytes = 96;

// Payload layout code: the engine's KvLayout (layer-major; K then V per layer; each
// [tokens x kv_heads x head_dim], row-major).
constexpr uint32_t kLayoutLayerMajorKV = 1;

struct KvHeader {
    uint64_t transfer_id = 0;  // unique per pushing daemon; echoed in the Ack
    uint64_t num_tokens = 0;
    uint64_t payload_bytes = 0;
    uint32_t num_layers = 0;
    uint32_t num_kv_heads = 0;
    uint32_t head_dim = 0;
    int32_t first_token = -1;  // the prefill's first generated token
    DType dtype = DType::kBF16;
    ChecksumKind checksum_kind = ChecksumKind::kCrc32c;
    uint32_t layout = kLayoutLayerMajorKV;
    std::array<uint8_t, 32> checksum{};  // crc32c: 4 bytes LE then zeros; sha256: 32 bytes
    std::string model_id;                // served model name
    std::string request_id;              // the completion's id
    std::string engine_id;               // the pushing daemon's engine id
};

// payload bytes implied by the shape; false on overflow.
bool expectedPayloadBytes(const KvHeader& h, uint64_t* out);

std::vector<uint8_t> encodeHeader(const KvHeader& header);
// Validates everything but the checksum. `max_payload_bytes` bounds what the receiver will
// allocate. Errors are kRemote with a message naming the field.
Result<KvHeader> decodeHeader(std::span<const uint8_t> bytes, uint64_t max_payload_bytes);

// Checksums.
uint32_t crc32c(uint32_t crc, const void* data, size_t size);
std::array<uint8_t, 32> computeChecksum(ChecksumKind kind, std::span<const std::byte> payload);
// "crc32c:1a2b3c4d" / "sha256:<64 hex>".
std::string checksumText(ChecksumKind kind, const std::array<uint8_t, 32>& sum);

// Control messages.
struct Hello {
    uint16_t flags = 0;
};
std::array<uint8_t, kHelloBytes> encodeHello(const Hello& hello);
Result<Hello> decodeHello(std::span<const uint8_t> bytes);

enum class ReplyStatus : uint16_t { kOk = 0, kBusy = 1, kError = 2 };
struct HelloReply {
    ReplyStatus status = ReplyStatus::kOk;
    std::array<uint8_t, kHandleBytes> handle{};
};
std::array<uint8_t, kReplyBytes> encodeReply(const HelloReply& reply);
Result<HelloReply> decodeReply(std::span<const uint8_t> bytes);

enum class AckStatus : uint16_t {
    kOk = 0,
    kBadHeader = 1,
    kChecksumMismatch = 2,
    kModelMismatch = 3,
    kTooLarge = 4,
    kReceiveFailed = 5,
    kInternal = 6,
};
const char* ackStatusName(AckStatus status);
struct Ack {
    AckStatus status = AckStatus::kOk;
    uint64_t transfer_id = 0;
    uint64_t bytes = 0;   // payload bytes received
    std::string message;  // at most kAckMessageBytes - 1 bytes, for the error text
};
std::array<uint8_t, kAckBytes> encodeAck(const Ack& ack);
Result<Ack> decodeAck(std::span<const uint8_t> bytes);

}  // namespace atlas::bubbletea::kv
