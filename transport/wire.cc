#include "transport/wire.h"

#include <sys/socket.h>

#include <bit>
#include <cstring>
#include <string>

namespace atlas::transport::wire {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the wire encoding below copies integers as little-endian host values");

// Sequential little-endian writer/reader over a byte buffer. The reader never reads past
// its span; a short read marks it failed and yields zeros.
class Writer {
  public:
    explicit Writer(uint8_t* p) : p_(p) {}
    template <typename T>
    void put(T v) {
        std::memcpy(p_ + n_, &v, sizeof(T));
        n_ += sizeof(T);
    }
    void putBytes(const uint8_t* b, size_t len) {
        std::memcpy(p_ + n_, b, len);
        n_ += len;
    }
    size_t size() const { return n_; }
    uint8_t* data() { return p_; }

  private:
    uint8_t* p_;
    size_t n_ = 0;
};

class Reader {
  public:
    explicit Reader(std::span<const uint8_t> b) : b_(b) {}
    template <typename T>
    T get() {
        T v{};
        if (n_ + sizeof(T) > b_.size()) {
            ok_ = false;
            return v;
        }
        std::memcpy(&v, b_.data() + n_, sizeof(T));
        n_ += sizeof(T);
        return v;
    }
    template <size_t N>
    void getBytes(std::array<uint8_t, N>* out) {
        if (n_ + N > b_.size()) {
            ok_ = false;
            return;
        }
        std::memcpy(out->data(), b_.data() + n_, N);
        n_ += N;
    }
    // True when every read succeeded and the span was consumed exactly.
    bool exact() const { return ok_ && n_ == b_.size(); }

  private:
    std::span<const uint8_t> b_;
    size_t n_ = 0;
    bool ok_ = true;
};

Status bad(const char* what, const std::string& detail) {
    return {Code::kRemote, std::string("malformed ") + what + ": " + detail};
}

// Writes the handshake header in front of a body already written at out + kHsHeaderBytes.
size_t finishHs(uint8_t* out, HsType type, size_t body_len) {
    Writer w(out);
    w.put<uint32_t>(kHsMagic);
    w.put<uint16_t>(kProtocolVersion);
    w.put<uint16_t>(static_cast<uint16_t>(type));
    w.put<uint32_t>(static_cast<uint32_t>(body_len));
    return kHsHeaderBytes + body_len;
}

}  // namespace

void encodeHandle(const HandleInfo& info, uint8_t* handle128) {
    std::memset(handle128, 0, 128);
    Writer w(handle128);
    w.put<uint32_t>(kHandleMagic);
    w.put<uint16_t>(kProtocolVersion);
    w.put<uint16_t>(info.family);
    w.put<uint16_t>(info.port);
    w.put<uint16_t>(0);
    w.putBytes(info.addr.data(), info.addr.size());
    w.put<uint64_t>(info.listen_id);
}

Status decodeHandle(const uint8_t* handle128, HandleInfo* info) {
    Reader r(std::span<const uint8_t>(handle128, kHandlePublicBytes));
    const auto magic = r.get<uint32_t>();
    const auto version = r.get<uint16_t>();
    info->family = r.get<uint16_t>();
    info->port = r.get<uint16_t>();
    (void)r.get<uint16_t>();
    r.getBytes(&info->addr);
    info->listen_id = r.get<uint64_t>();
    if (magic != kHandleMagic) {
        return {Code::kInvalidUsage,
                "connection handle has a foreign magic (not an Atlas listen handle)"};
    }
    if (version != kProtocolVersion) {
        return {Code::kInvalidUsage, "connection handle from Atlas protocol version " +
                                         std::to_string(version) + ", this library speaks " +
                                         std::to_string(kProtocolVersion)};
    }
    if (info->family != AF_INET && info->family != AF_INET6) {
        return {Code::kInvalidUsage,
                "connection handle has address family " + std::to_string(info->family)};
    }
    if (info->port == 0) {
        return {Code::kInvalidUsage, "connection handle has port 0"};
    }
    return Status::ok();
}

size_t encode(const Hello& m, uint8_t* out) {
    Writer w(out + kHsHeaderBytes);
    w.put<uint64_t>(m.listen_id);
    w.put<uint64_t>(m.session_id);
    w.putBytes(m.client_nonce.data(), kNonceBytes);
    w.put<uint8_t>(m.wants_auth);
    w.put<uint8_t>(m.encrypt);
    return finishHs(out, HsType::kHello, w.size());
}

size_t encode(const HelloAck& m, uint8_t* out) {
    Writer w(out + kHsHeaderBytes);
    w.put<uint8_t>(m.auth);
    w.putBytes(m.server_nonce.data(), kNonceBytes);
    w.putBytes(m.server_mac.data(), kMacBytes);
    w.put<uint16_t>(m.rejoin_port);
    w.put<uint8_t>(m.encrypt);
    return finishHs(out, HsType::kHelloAck, w.size());
}

size_t encode(const Config& m, uint8_t* out) {
    Writer w(out + kHsHeaderBytes);
    w.putBytes(m.client_mac.data(), kMacBytes);
    w.put<uint32_t>(m.nstreams);
    w.put<uint32_t>(m.chunk_bytes);
    w.put<uint32_t>(m.inline_bytes);
    w.put<uint64_t>(m.rtt_ns);
    return finishHs(out, HsType::kConfig, w.size());
}

size_t encode(const DataHello& m, uint8_t* out) {
    Writer w(out + kHsHeaderBytes);
    w.put<uint64_t>(m.listen_id);
    w.put<uint64_t>(m.session_id);
    w.put<uint32_t>(m.index);
    w.putBytes(m.mac.data(), kMacBytes);
    return finishHs(out, HsType::kDataHello, w.size());
}

size_t encode(const Ready& m, uint8_t* out) {
    Writer w(out + kHsHeaderBytes);
    w.put<uint32_t>(m.status);
    return finishHs(out, HsType::kReady, w.size());
}

size_t encode(const RejoinHello& m, uint8_t* out) {
    Writer w(out + kHsHeaderBytes);
    w.put<uint64_t>(m.session_id);
    w.put<uint32_t>(m.index);
    w.put<uint32_t>(m.epoch);
    w.putBytes(m.client_nonce.data(), kNonceBytes);
    return finishHs(out, HsType::kRejoinHello, w.size());
}

size_t encode(const RejoinAck& m, uint8_t* out) {
    Writer w(out + kHsHeaderBytes);
    w.put<uint32_t>(m.status);
    w.putBytes(m.server_nonce.data(), kNonceBytes);
    w.putBytes(m.server_mac.data(), kMacBytes);
    return finishHs(out, HsType::kRejoinAck, w.size());
}

size_t encode(const RejoinProof& m, uint8_t* out) {
    Writer w(out + kHsHeaderBytes);
    w.putBytes(m.client_mac.data(), kMacBytes);
    return finishHs(out, HsType::kRejoinProof, w.size());
}

Status decodeHsHeader(std::span<const uint8_t> bytes, HsHeader* out) {
    if (bytes.size() < kHsHeaderBytes) {
        return bad("handshake header", "short (" + std::to_string(bytes.size()) + " bytes)");
    }
    Reader r(bytes.first(kHsHeaderBytes));
    const auto magic = r.get<uint32_t>();
    const auto version = r.get<uint16_t>();
    const auto type = r.get<uint16_t>();
    out->body_len = r.get<uint32_t>();
    if (magic != kHsMagic) {
        return bad("handshake header", "foreign magic (not an Atlas peer)");
    }
    if (version != kProtocolVersion) {
        return bad("handshake header", "protocol version " + std::to_string(version) +
                                           ", expected " + std::to_string(kProtocolVersion));
    }
    if (type < static_cast<uint16_t>(HsType::kHello) ||
        type > static_cast<uint16_t>(HsType::kRejoinProof)) {
        return bad("handshake header", "unknown message type " + std::to_string(type));
    }
    if (out->body_len > kHsMaxBody) {
        return bad("handshake header", "body of " + std::to_string(out->body_len) + " bytes");
    }
    out->type = static_cast<HsType>(type);
    return Status::ok();
}

Status decode(std::span<const uint8_t> body, Hello* out) {
    Reader r(body);
    out->listen_id = r.get<uint64_t>();
    out->session_id = r.get<uint64_t>();
    r.getBytes(&out->client_nonce);
    out->wants_auth = r.get<uint8_t>();
    out->encrypt = r.get<uint8_t>();
    if (!r.exact() || out->wants_auth > 1 || out->encrypt > 1) {
        return bad("hello", "wrong length or flag");
    }
    return Status::ok();
}

Status decode(std::span<const uint8_t> body, HelloAck* out) {
    Reader r(body);
    out->auth = r.get<uint8_t>();
    r.getBytes(&out->server_nonce);
    r.getBytes(&out->server_mac);
    out->rejoin_port = r.get<uint16_t>();
    out->encrypt = r.get<uint8_t>();
    if (!r.exact() || out->auth > 1 || out->encrypt > 1) {
        return bad("hello-ack", "wrong length or flag");
    }
    if (out->rejoin_port == 0) {
        return bad("hello-ack", "rejoin port 0");
    }
    return Status::ok();
}

Status decode(std::span<const uint8_t> body, Config* out) {
    Reader r(body);
    r.getBytes(&out->client_mac);
    out->nstreams = r.get<uint32_t>();
    out->chunk_bytes = r.get<uint32_t>();
    out->inline_bytes = r.get<uint32_t>();
    out->rtt_ns = r.get<uint64_t>();
    if (!r.exact()) {
        return bad("config", "wrong length");
    }
    if (out->nstreams < 1 || out->nstreams > static_cast<uint32_t>(kMaxStreams)) {
        return bad("config", "stream count " + std::to_string(out->nstreams));
    }
    if (out->chunk_bytes < 4096 || out->chunk_bytes > (64u << 20)) {
        return bad("config", "chunk size " + std::to_string(out->chunk_bytes));
    }
    if (out->inline_bytes > (64u << 10)) {
        return bad("config", "inline size " + std::to_string(out->inline_bytes));
    }
    return Status::ok();
}

Status decode(std::span<const uint8_t> body, DataHello* out) {
    Reader r(body);
    out->listen_id = r.get<uint64_t>();
    out->session_id = r.get<uint64_t>();
    out->index = r.get<uint32_t>();
    r.getBytes(&out->mac);
    if (!r.exact()) {
        return bad("data hello", "wrong length");
    }
    if (out->index >= static_cast<uint32_t>(kMaxStreams)) {
        return bad("data hello", "stream index " + std::to_string(out->index));
    }
    return Status::ok();
}

Status decode(std::span<const uint8_t> body, Ready* out) {
    Reader r(body);
    out->status = r.get<uint32_t>();
    if (!r.exact()) {
        return bad("ready", "wrong length");
    }
    return Status::ok();
}

Status decode(std::span<const uint8_t> body, RejoinHello* out) {
    Reader r(body);
    out->session_id = r.get<uint64_t>();
    out->index = r.get<uint32_t>();
    out->epoch = r.get<uint32_t>();
    r.getBytes(&out->client_nonce);
    if (!r.exact()) {
        return bad("rejoin hello", "wrong length");
    }
    if (out->index > static_cast<uint32_t>(kMaxStreams)) {
        return bad("rejoin hello", "stream index " + std::to_string(out->index));
    }
    if (out->epoch == 0) {
        return bad("rejoin hello", "epoch 0 (the setup incarnation cannot rejoin)");
    }
    return Status::ok();
}

Status decode(std::span<const uint8_t> body, RejoinAck* out) {
    Reader r(body);
    out->status = r.get<uint32_t>();
    r.getBytes(&out->server_nonce);
    r.getBytes(&out->server_mac);
    if (!r.exact()) {
        return bad("rejoin ack", "wrong length");
    }
    if (out->status > static_cast<uint32_t>(RejoinStatus::kBadIndex)) {
        return bad("rejoin ack", "unknown status " + std::to_string(out->status));
    }
    return Status::ok();
}

Status decode(std::span<const uint8_t> body, RejoinProof* out) {
    Reader r(body);
    r.getBytes(&out->client_mac);
    if (!r.exact()) {
        return bad("rejoin proof", "wrong length");
    }
    return Status::ok();
}

void encodeFrame(const FrameHeader& h, uint8_t out[kFrameHeaderBytes]) {
    Writer w(out);
    w.put<uint32_t>(kFrameMagic);
    w.put<uint16_t>(static_cast<uint16_t>(h.type));
    w.put<uint16_t>(0);  // flags, reserved
    w.put<uint32_t>(h.seq);
    w.put<uint32_t>(h.length);
    w.put<uint64_t>(h.total);
    w.put<uint64_t>(h.offset);
}

Status decodeFrame(const uint8_t in[kFrameHeaderBytes], uint64_t max_length, FrameHeader* out) {
    Reader r(std::span<const uint8_t>(in, kFrameHeaderBytes));
    const auto magic = r.get<uint32_t>();
    const auto type = r.get<uint16_t>();
    const auto flags = r.get<uint16_t>();
    out->seq = r.get<uint32_t>();
    out->length = r.get<uint32_t>();
    out->total = r.get<uint64_t>();
    out->offset = r.get<uint64_t>();
    if (magic != kFrameMagic) {
        return bad("frame", "foreign magic (stream desynchronised or not an Atlas peer)");
    }
    if (flags != 0) {
        return bad("frame", "unknown flags " + std::to_string(flags));
    }
    if (type == static_cast<uint16_t>(FrameType::kConfirm)) {
        out->type = FrameType::kConfirm;
        const uint64_t entries = (out->length - kConfirmFixedBytes) / kConfirmEntryBytes;
        if (out->seq != 0 || out->total != 0 || out->offset != 0 ||
            out->length < kConfirmFixedBytes || out->length > kMaxConfirmBody ||
            kConfirmFixedBytes + entries * kConfirmEntryBytes != out->length) {
            return bad("frame", "confirmation with a body of " + std::to_string(out->length) +
                                    " bytes or non-zero fields");
        }
        return Status::ok();
    }
    if (type == static_cast<uint16_t>(FrameType::kGoodbye) ||
        type == static_cast<uint16_t>(FrameType::kAbort)) {
        out->type = static_cast<FrameType>(type);
        if (out->seq != 0 || out->length != 0 || out->total != 0 || out->offset != 0) {
            return bad("frame", "goodbye/abort with non-zero fields");
        }
        return Status::ok();
    }
    if (type != static_cast<uint16_t>(FrameType::kData)) {
        return bad("frame", "unknown type " + std::to_string(type));
    }
    out->type = FrameType::kData;
    if (out->length > max_length) {
        return bad("frame", "payload of " + std::to_string(out->length) +
                                " bytes exceeds the negotiated maximum " +
                                std::to_string(max_length));
    }
    if (out->offset > out->total || out->length > out->total - out->offset) {
        return bad("frame", "range [" + std::to_string(out->offset) + ", +" +
                                std::to_string(out->length) + ") outside a message of " +
                                std::to_string(out->total) + " bytes");
    }
    if (out->length == 0 && out->total != 0) {
        return bad("frame", "empty piece of a " + std::to_string(out->total) + "-byte message");
    }
    return Status::ok();
}

size_t encodeConfirm(const ConfirmBody& b, uint8_t* out) {
    Writer w(out);
    w.put<uint64_t>(b.posted);
    w.put<uint32_t>(b.count);
    w.put<uint32_t>(0);
    w.put<uint64_t>(b.train_bytes);
    w.put<uint64_t>(b.train_ns);
    for (uint32_t i = 0; i < b.count; ++i) {
        w.put<uint32_t>(b.entries[i].index);
        w.put<uint32_t>(b.entries[i].epoch);
        w.put<uint64_t>(b.entries[i].frames);
    }
    return w.size();
}

Status decodeConfirm(std::span<const uint8_t> body, ConfirmBody* out) {
    Reader r(body);
    out->posted = r.get<uint64_t>();
    out->count = r.get<uint32_t>();
    const auto reserved = r.get<uint32_t>();
    out->train_bytes = r.get<uint64_t>();
    out->train_ns = r.get<uint64_t>();
    if (out->count > kMaxConfirmEntries ||
        body.size() != kConfirmFixedBytes + out->count * kConfirmEntryBytes) {
        return bad("confirmation", std::to_string(out->count) + " entries in a body of " +
                                       std::to_string(body.size()) + " bytes");
    }
    if (reserved != 0) {
        return bad("confirmation", "reserved field " + std::to_string(reserved));
    }
    if ((out->train_bytes == 0) != (out->train_ns == 0) || out->train_ns > kMaxTrainNs) {
        return bad("confirmation", "train of " + std::to_string(out->train_bytes) + " bytes in " +
                                       std::to_string(out->train_ns) + " ns");
    }
    std::array<uint8_t, kMaxStreams + 1> seen{};
    std::array<uint32_t, kMaxStreams + 1> first_epoch{};
    for (uint32_t i = 0; i < out->count; ++i) {
        ConfirmEntry& e = out->entries[i];
        e.index = r.get<uint32_t>();
        e.epoch = r.get<uint32_t>();
        e.frames = r.get<uint64_t>();
        if (e.index > static_cast<uint32_t>(kMaxStreams)) {
            return bad("confirmation", "stream index " + std::to_string(e.index));
        }
        const bool twice =
            seen[e.index] == 2 || (seen[e.index] == 1 && first_epoch[e.index] == e.epoch);
        if (twice) {
            return bad("confirmation", "stream " + std::to_string(e.index) + " epoch " +
                                           std::to_string(e.epoch) +
                                           " listed twice, or a third incarnation");
        }
        first_epoch[e.index] = e.epoch;
        ++seen[e.index];
    }
    if (!r.exact()) {
        return bad("confirmation", "wrong length");
    }
    return Status::ok();
}

}  // namespace atlas::transport::wire
