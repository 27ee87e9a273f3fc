// Atlas wire formats: the connection handle, the handshake messages and the data frame
// header. Everything a peer sends is untrusted: every decode*() validates and returns a
// Status naming what was wrong, and never reads past the given bytes (fuzzed in
// tests/fuzz/fuzz_transport_wire.cc).
//
// Encoding: little-endian, fixed-size fields, no padding on the wire (encoded field by
// field). Protocol version kProtocolVersion is checked on every connection.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "atlas/common/status.h"

namespace atlas::transport::wire {

// 2: confirmations, stream rejoin (HelloAck carries the rejoin port), goodbye/abort, sealed
// frames (ATLAS_ENCRYPT, negotiated in Hello/HelloAck). 3: confirmations carry the latest
// message train (the path-rate sample).
constexpr uint16_t kProtocolVersion = 3;
constexpr uint32_t kHandleMagic = 0x31485441;  // "ATH1"
constexpr uint32_t kHsMagic = 0x31535441;      // "ATS1": handshake messages
constexpr uint32_t kFrameMagic = 0x31465441;   // "ATF1": data frames
constexpr int kMaxStreams = 64;
constexpr size_t kNonceBytes = 16;
constexpr size_t kMacBytes = 32;  // HMAC-SHA256

using Nonce = std::array<uint8_t, kNonceBytes>;
using Mac = std::array<uint8_t, kMacBytes>;

// ---- Connection handle (the 128 bytes NCCL ships from listener to connector) ----
// Bytes [0, kHandlePublicBytes) are written by the listener; the rest is connector-local
// scratch (NCCL calls connect again with the same buffer, so the connector keeps its
// in-progress state there). The listener zeroes the scratch part.
constexpr size_t kHandlePublicBytes = 64;
struct HandleInfo {
    uint16_t family = 0;  // AF_INET or AF_INET6
    uint16_t port = 0;
    std::array<uint8_t, 16> addr{};  // IPv4 in the first 4 bytes
    uint64_t listen_id = 0;          // random; every connection must quote it
};
void encodeHandle(const HandleInfo& info, uint8_t* handle128);
Status decodeHandle(const uint8_t* handle128, HandleInfo* info);

// ---- Handshake messages (control stream before the comm is up, and data stream hellos) ----
enum class HsType : uint16_t {
    kHello = 1,      // connector -> listener, first bytes on the control stream
    kHelloAck = 2,   // listener -> connector
    kConfig = 3,     // connector -> listener: auth proof + stream plan
    kDataHello = 4,  // connector -> listener, first bytes on each data stream
    kReady = 5,      // listener -> connector: all streams joined, comm is up
    // Rejoin of one stream of a live comm, on a connection to the receiving process's rejoin
    // listener (docs/protocol.md, "Rejoin"): connector -> listener -> connector.
    kRejoinHello = 6,
    kRejoinAck = 7,
    kRejoinProof = 8,
};

constexpr size_t kHsHeaderBytes = 12;  // magic u32, version u16, type u16, body length u32
constexpr size_t kHsMaxBody = 256;

struct HsHeader {
    HsType type{};
    uint32_t body_len = 0;
};

struct Hello {
    uint64_t listen_id = 0;
    uint64_t session_id = 0;
    Nonce client_nonce{};
    uint8_t wants_auth = 0;  // connector has a key and requires the listener to prove it
    uint8_t encrypt = 0;     // connector seals its frames (ATLAS_ENCRYPT=1); must match
};

struct HelloAck {
    uint8_t auth = 0;  // listener has a key: mac below is valid and the connector must prove too
    Nonce server_nonce{};
    Mac server_mac{};  // binds rejoin_port and both encryption settings too
    // The listening process's rejoin listener, same address as the handle.
    uint16_t rejoin_port = 0;
    uint8_t encrypt = 0;  // listener seals its frames; a connector that differs refuses
};

struct Config {
    Mac client_mac{};
    uint32_t nstreams = 0;
    uint32_t chunk_bytes = 0;
    uint32_t inline_bytes = 0;
    uint64_t rtt_ns = 0;  // the connector's measurement, shared so both ends agree
};

struct DataHello {
    uint64_t listen_id = 0;
    uint64_t session_id = 0;
    uint32_t index = 0;  // 0 .. nstreams-1
    Mac mac{};           // zero when unauthenticated
};

struct Ready {
    uint32_t status = 0;  // 0 = OK
};

// Rejoin: `index` is the comm's stream index (0 = control, 1..nstreams = data streams) and
// `epoch` its incarnation (0 = the stream opened at setup; each rejoin takes a higher one).
struct RejoinHello {
    uint64_t session_id = 0;
    uint32_t index = 0;
    uint32_t epoch = 0;
    Nonce client_nonce{};
};

enum class RejoinStatus : uint32_t {
    kOk = 0,
    kUnknownSession = 1,  // the receiving comm is closed (or never existed): fail, do not retry
    kStale = 2,           // a higher epoch of this stream already joined: this attempt is moot
    kBadIndex = 3,        // index beyond the comm's streams
};

struct RejoinAck {
    uint32_t status = 0;  // RejoinStatus
    Nonce server_nonce{};
    Mac server_mac{};  // zero unless status is kOk and the listener has a key
};

struct RejoinProof {
    Mac client_mac{};  // zero when unauthenticated
};

// Encoders write header + body into `out` and return the total length.
size_t encode(const Hello& m, uint8_t* out);
size_t encode(const HelloAck& m, uint8_t* out);
size_t encode(const Config& m, uint8_t* out);
size_t encode(const DataHello& m, uint8_t* out);
size_t encode(const Ready& m, uint8_t* out);
size_t encode(const RejoinHello& m, uint8_t* out);
size_t encode(const RejoinAck& m, uint8_t* out);
size_t encode(const RejoinProof& m, uint8_t* out);
// Exact sizes of the messages that stream bytes may follow (header included): their reader
// takes exactly these, never the bytes behind them.
constexpr size_t kReadyBytes = kHsHeaderBytes + 4;
constexpr size_t kRejoinHelloBytes = kHsHeaderBytes + 32;
constexpr size_t kRejoinAckBytes = kHsHeaderBytes + 52;
constexpr size_t kRejoinProofBytes = kHsHeaderBytes + 32;
constexpr size_t kHsMaxMessage = kHsHeaderBytes + kHsMaxBody;

// Parses a header; `bytes` must hold at least kHsHeaderBytes.
Status decodeHsHeader(std::span<const uint8_t> bytes, HsHeader* out);
// Parse bodies; `body` is exactly header.body_len bytes.
Status decode(std::span<const uint8_t> body, Hello* out);
Status decode(std::span<const uint8_t> body, HelloAck* out);
Status decode(std::span<const uint8_t> body, Config* out);
Status decode(std::span<const uint8_t> body, DataHello* out);
Status decode(std::span<const uint8_t> body, Ready* out);
Status decode(std::span<const uint8_t> body, RejoinHello* out);
Status decode(std::span<const uint8_t> body, RejoinAck* out);
Status decode(std::span<const uint8_t> body, RejoinProof* out);

// ---- Frames (after setup) ----
// Every stream, in both directions, carries a sequence of frames, each one FrameHeader plus
// `length` bytes. Sender -> receiver: kData and kGoodbye. Receiver -> sender: kConfirm and
// kGoodbye. Any stream may carry any frame of its direction (a resend or an inline message
// goes wherever a live stream is); the control stream is only preferred for small ones.
enum class FrameType : uint16_t {
    kData = 1,     // payload of message `seq` at [offset, offset+length); total = message size
    kConfirm = 2,  // body: ConfirmBody (which frames of which stream were consumed)
    kGoodbye = 3,  // the peer closed the comm in order: no more frames, no rejoin
    kAbort = 4,    // the peer's comm failed (its log says why): fail too, do not rejoin
};
// Largest payload one frame may carry (pieces are cut to fit).
constexpr uint64_t kMaxFrameLength = 1ull << 30;
constexpr size_t kFrameHeaderBytes = 32;

struct FrameHeader {
    FrameType type = FrameType::kData;
    uint32_t seq = 0;     // low 32 bits of the message sequence number
    uint32_t length = 0;  // payload bytes after the header
    uint64_t total = 0;   // message size
    uint64_t offset = 0;
};

void encodeFrame(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]);
// Validates magic, type, flags, and per type: kData: offset + length <= total, no overflow,
// length <= max_length; kConfirm: a body length ConfirmBody can have, other fields 0;
// kGoodbye, kAbort: every field 0.
Status decodeFrame(const uint8_t in[kFrameHeaderBytes], uint64_t max_length, FrameHeader* out);

// ---- Confirmation body (kConfirm) ----
// The receiver's running totals: for each listed stream incarnation {index, epoch}, how many
// frames it has consumed from it since that incarnation began (written into the posted buffer
// or dropped as a duplicate). The sender forgets every frame the totals cover. `posted` is
// the number of receives the receiver has posted: frames of messages below it never park.
struct ConfirmEntry {
    uint32_t index = 0;
    uint32_t epoch = 0;
    uint64_t frames = 0;
};
constexpr size_t kConfirmFixedBytes = 32;
// Longest message train a confirmation reports (one hour): anything longer is not a sample.
constexpr uint64_t kMaxTrainNs = 3600ull * 1000 * 1000 * 1000;
constexpr size_t kConfirmEntryBytes = 16;
// At most two incarnations per stream index: the live one and the last lost one.
constexpr size_t kMaxConfirmEntries = 2 * (kMaxStreams + 1);
constexpr size_t kMaxConfirmBody = kConfirmFixedBytes + kMaxConfirmEntries * kConfirmEntryBytes;

// `train_bytes`/`train_ns` (both 0 = none): the latest train (transport/train.h): while the
// receiver waited for a message, the kernel received `train_bytes` on the data streams over
// `train_ns`: the sample of the path's rate the sender's grant hold learns from
// (scheduler/path_rate.h; docs/protocol.md "Confirmation").
struct ConfirmBody {
    uint64_t posted = 0;
    uint64_t train_bytes = 0;
    uint64_t train_ns = 0;
    uint32_t count = 0;
    std::array<ConfirmEntry, kMaxConfirmEntries> entries{};
};
// Writes the body; returns its length (kConfirmFixedBytes + count * kConfirmEntryBytes).
size_t encodeConfirm(const ConfirmBody& b, uint8_t* out);
// `body` is exactly the frame's payload. Rejects a count that disagrees with the length,
// reserved bits, stream indices beyond kMaxStreams, an {index, epoch} listed twice, more
// than two incarnations of one index, and a train with only one of its fields, or longer than
// kMaxTrainNs.
Status decodeConfirm(std::span<const uint8_t> body, ConfirmBody* out);

}  // namespace atlas::transport::wire
