#include "bubbletea/daemon/kv_wire.h"

#include <openssl/sha.h>

#include <cstring>

namespace atlas::bubbletea::kv {
namespace {

// Header field offsets (docs/bubbletea.md, "KV hand-off").
constexpr size_t kOffMagic = 0;
constexpr size_t kOffVersion = 4;
constexpr size_t kOffHeaderBytes = 6;
constexpr size_t kOffTransferId = 8;
constexpr size_t kOffTokens = 16;
constexpr size_t kOffPayload = 24;
constexpr size_t kOffLayers = 32;
constexpr size_t kOffKvHeads = 36;
constexpr size_t kOffHeadDim = 40;
constexpr size_t kOffFirstToken = 44;
constexpr size_t kOffDtype = 48;
constexpr size_t kOffChecksumKind = 49;
constexpr size_t kOffModelLen = 50;
constexpr size_t kOffRequestLen = 52;
constexpr size_t kOffEngineLen = 54;
constexpr size_t kOffFlags = 56;
constexpr size_t kOffLayout = 60;
constexpr size_t kOffChecksum = 64;
constexpr size_t kOffReserved = 96;  // 32 zero bytes up to kHeaderFixedBytes

void put16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v);
    p[1] = static_cast<uint8_t>(v >> 8);
}
void put32(uint8_t* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) {
        p[i] = static_cast<uint8_t>(v >> (8 * i));
    }
}
void put64(uint8_t* p, uint64_t v) {
    for (int i = 0; i < 8; ++i) {
        p[i] = static_cast<uint8_t>(v >> (8 * i));
    }
}
uint16_t get16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t get32(const uint8_t* p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; --i) {
        v = (v << 8) | p[i];
    }
    return v;
}
uint64_t get64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) {
        v = (v << 8) | p[i];
    }
    return v;
}

// Wire codes for dtypes (stable, independent of the enum's values).
uint8_t dtypeCode(DType d) {
    switch (d) {
        case DType::kF32:
            return 1;
        case DType::kBF16:
            return 2;
        case DType::kF16:
            return 3;
    }
    return 0;
}
bool dtypeFromCode(uint8_t code, DType* out) {
    switch (code) {
        case 1:
            *out = DType::kF32;
            return true;
        case 2:
            *out = DType::kBF16;
            return true;
        case 3:
            *out = DType::kF16;
            return true;
        default:
            return false;
    }
}

bool printable(std::span<const uint8_t> s) {
    for (uint8_t c : s) {
        if (c < 0x20 || c > 0x7e) {
            return false;
        }
    }
    return true;
}

Status bad(const std::string& what) {
    return {Code::kRemote, "KV header: " + what};
}

// Castagnoli polynomial, reflected.
constexpr uint32_t kCrc32cPoly = 0x82F63B78u;

struct Crc32cTables {
    uint32_t t[8][256];
    Crc32cTables() {
        for (uint32_t i = 0; i < 256; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k) {
                c = (c & 1) ? (c >> 1) ^ kCrc32cPoly : c >> 1;
            }
            t[0][i] = c;
        }
        for (uint32_t i = 0; i < 256; ++i) {
            for (int s = 1; s < 8; ++s) {
                t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xff];
            }
        }
    }
};

// Portable slicing-by-8.
uint32_t crc32cSoftware(uint32_t crc, const uint8_t* p, size_t n) {
    static const Crc32cTables tables;
    const auto& t = tables.t;
    while (n >= 8) {
        uint64_t word;
        std::memcpy(&word, p, 8);
        word ^= crc;  // little-endian host assumed (x86-64, aarch64)
        crc = t[7][word & 0xff] ^ t[6][(word >> 8) & 0xff] ^ t[5][(word >> 16) & 0xff] ^
              t[4][(word >> 24) & 0xff] ^ t[3][(word >> 32) & 0xff] ^ t[2][(word >> 40) & 0xff] ^
              t[1][(word >> 48) & 0xff] ^ t[0][word >> 56];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) {
        crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
    }
    return crc;
}

#if defined(__x86_64__)
// SSE4.2 crc32 instruction: ~8 bytes per cycle on recent cores, so a 256 MiB KV cache
// costs tens of milliseconds instead of a second.
__attribute__((target("sse4.2"))) uint32_t crc32cHardware(uint32_t crc, const uint8_t* p,
                                                          size_t n) {
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t word;
        std::memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = static_cast<uint32_t>(c);
    while (n-- > 0) {
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    }
    return c32;
}
#endif

}  // namespace

bool expectedPayloadBytes(const KvHeader& h, uint64_t* out) {
    const uint64_t factors[] = {h.num_layers,   2,          h.num_tokens,
                                h.num_kv_heads, h.head_dim, dtypeSize(h.dtype)};
    uint64_t total = 1;
    for (uint64_t f : factors) {
        if (f != 0 && total > UINT64_MAX / f) {
            return false;
        }
        total *= f;
    }
    *out = total;
    return true;
}

uint32_t crc32c(uint32_t crc, const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    crc = ~crc;
#if defined(__x86_64__)
    static const bool hw = __builtin_cpu_supports("sse4.2");
    crc = hw ? crc32cHardware(crc, p, size) : crc32cSoftware(crc, p, size);
#else
    crc = crc32cSoftware(crc, p, size);
#endif
    return ~crc;
}

std::array<uint8_t, 32> computeChecksum(ChecksumKind kind, std::span<const std::byte> payload) {
    std::array<uint8_t, 32> out{};
    if (kind == ChecksumKind::kSha256) {
        SHA256(reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), out.data());
    } else {
        put32(out.data(), crc32c(0, payload.data(), payload.size()));
    }
    return out;
}

std::string checksumText(ChecksumKind kind, const std::array<uint8_t, 32>& sum) {
    static const char* hex = "0123456789abcdef";
    std::string out = kind == ChecksumKind::kSha256 ? "sha256:" : "crc32c:";
    if (kind == ChecksumKind::kSha256) {
        for (uint8_t b : sum) {
            out += hex[b >> 4];
            out += hex[b & 15];
        }
    } else {
        const uint32_t v = get32(sum.data());
        for (int i = 7; i >= 0; --i) {
            out += hex[(v >> (4 * i)) & 15];
        }
    }
    return out;
}

std::vector<uint8_t> encodeHeader(const KvHeader& h) {
    const size_t ml = std::min(h.model_id.size(), kMaxStringBytes);
    const size_t rl = std::min(h.request_id.size(), kMaxStringBytes);
    const size_t el = std::min(h.engine_id.size(), kMaxStringBytes);
    std::vector<uint8_t> out(kHeaderFixedBytes + ml + rl + el, 0);
    uint8_t* p = out.data();
    put32(p + kOffMagic, kHeaderMagic);
    put16(p + kOffVersion, kVersion);
    put16(p + kOffHeaderBytes, static_cast<uint16_t>(out.size()));
    put64(p + kOffTransferId, h.transfer_id);
    put64(p + kOffTokens, h.num_tokens);
    put64(p + kOffPayload, h.payload_bytes);
    put32(p + kOffLayers, h.num_layers);
    put32(p + kOffKvHeads, h.num_kv_heads);
    put32(p + kOffHeadDim, h.head_dim);
    put32(p + kOffFirstToken, static_cast<uint32_t>(h.first_token));
    p[kOffDtype] = dtypeCode(h.dtype);
    p[kOffChecksumKind] = static_cast<uint8_t>(h.checksum_kind);
    put16(p + kOffModelLen, static_cast<uint16_t>(ml));
    put16(p + kOffRequestLen, static_cast<uint16_t>(rl));
    put16(p + kOffEngineLen, static_cast<uint16_t>(el));
    put32(p + kOffFlags, 0);
    put32(p + kOffLayout, h.layout);
    std::memcpy(p + kOffChecksum, h.checksum.data(), h.checksum.size());
    size_t off = kHeaderFixedBytes;
    std::memcpy(p + off, h.model_id.data(), ml);
    off += ml;
    std::memcpy(p + off, h.request_id.data(), rl);
    off += rl;
    std::memcpy(p + off, h.engine_id.data(), el);
    return out;
}

Result<KvHeader> decodeHeader(std::span<const uint8_t> bytes, uint64_t max_payload_bytes) {
    if (bytes.size() < kHeaderFixedBytes) {
        return bad(std::to_string(bytes.size()) + " bytes is shorter than the fixed part");
    }
    const uint8_t* p = bytes.data();
    if (get32(p + kOffMagic) != kHeaderMagic) {
        return bad("bad magic (not a bubbletea KV transfer)");
    }
    if (get16(p + kOffVersion) != kVersion) {
        return bad("unsupported version " + std::to_string(get16(p + kOffVersion)));
    }
    KvHeader h;
    const size_t ml = get16(p + kOffModelLen);
    const size_t rl = get16(p + kOffRequestLen);
    const size_t el = get16(p + kOffEngineLen);
    if (ml > kMaxStringBytes || rl > kMaxStringBytes || el > kMaxStringBytes) {
        return bad("string field longer than " + std::to_string(kMaxStringBytes) + " bytes");
    }
    const size_t total = kHeaderFixedBytes + ml + rl + el;
    if (get16(p + kOffHeaderBytes) != total || bytes.size() != total) {
        return bad("header_bytes does not match the string lengths and message size");
    }
    if (get32(p + kOffFlags) != 0) {
        return bad("unknown flags");
    }
    for (size_t i = kOffReserved; i < kHeaderFixedBytes; ++i) {
        if (p[i] != 0) {
            return bad("reserved bytes are not zero");
        }
    }
    h.transfer_id = get64(p + kOffTransferId);
    h.num_tokens = get64(p + kOffTokens);
    h.payload_bytes = get64(p + kOffPayload);
    h.num_layers = get32(p + kOffLayers);
    h.num_kv_heads = get32(p + kOffKvHeads);
    h.head_dim = get32(p + kOffHeadDim);
    h.first_token = static_cast<int32_t>(get32(p + kOffFirstToken));
    h.layout = get32(p + kOffLayout);
    if (!dtypeFromCode(p[kOffDtype], &h.dtype)) {
        return bad("unknown dtype code " + std::to_string(p[kOffDtype]));
    }
    const uint8_t ck = p[kOffChecksumKind];
    if (ck != static_cast<uint8_t>(ChecksumKind::kCrc32c) &&
        ck != static_cast<uint8_t>(ChecksumKind::kSha256)) {
        return bad("unknown checksum kind " + std::to_string(ck));
    }
    h.checksum_kind = static_cast<ChecksumKind>(ck);
    if (h.layout != kLayoutLayerMajorKV) {
        return bad("unknown layout " + std::to_string(h.layout));
    }
    if (h.num_layers == 0 || h.num_tokens == 0 || h.num_kv_heads == 0 || h.head_dim == 0) {
        return bad("zero dimension in the KV shape");
    }
    uint64_t expected = 0;
    if (!expectedPayloadBytes(h, &expected)) {
        return bad("KV shape overflows 64 bits");
    }
    if (expected != h.payload_bytes) {
        return bad("payload_bytes " + std::to_string(h.payload_bytes) +
                   " does not match the shape (" + std::to_string(expected) + ")");
    }
    if (h.payload_bytes > max_payload_bytes) {
        return Status{Code::kInvalidArgument,
                      "KV header: payload of " + std::to_string(h.payload_bytes) +
                          " bytes exceeds the limit of " + std::to_string(max_payload_bytes)};
    }
    std::memcpy(h.checksum.data(), p + kOffChecksum, h.checksum.size());
    const auto strings = bytes.subspan(kHeaderFixedBytes);
    if (!printable(strings)) {
        return bad("string fields must be printable ASCII");
    }
    h.model_id.assign(reinterpret_cast<const char*>(strings.data()), ml);
    h.request_id.assign(reinterpret_cast<const char*>(strings.data()) + ml, rl);
    h.engine_id.assign(reinterpret_cast<const char*>(strings.data()) + ml + rl, el);
    return h;
}

std::array<uint8_t, kHelloBytes> encodeHello(const Hello& hello) {
    std::array<uint8_t, kHelloBytes> out{};
    put32(out.data(), kHelloMagic);
    put16(out.data() + 4, kVersion);
    put16(out.data() + 6, hello.flags);
    return out;
}

Result<Hello> decodeHello(std::span<const uint8_t> bytes) {
    if (bytes.size() != kHelloBytes || get32(bytes.data()) != kHelloMagic) {
        return Status{Code::kRemote, "KV hello: bad magic or size"};
    }
    if (get16(bytes.data() + 4) != kVersion) {
        return Status{Code::kRemote, "KV hello: unsupported version"};
    }
    Hello h;
    h.flags = get16(bytes.data() + 6);
    if (h.flags != 0) {
        return Status{Code::kRemote, "KV hello: unknown flags"};
    }
    return h;
}

std::array<uint8_t, kReplyBytes> encodeReply(const HelloReply& reply) {
    std::array<uint8_t, kReplyBytes> out{};
    put32(out.data(), kReplyMagic);
    put16(out.data() + 4, kVersion);
    put16(out.data() + 6, static_cast<uint16_t>(reply.status));
    std::memcpy(out.data() + 16, reply.handle.data(), kHandleBytes);
    return out;
}

Result<HelloReply> decodeReply(std::span<const uint8_t> bytes) {
    if (bytes.size() != kReplyBytes || get32(bytes.data()) != kReplyMagic) {
        return Status{Code::kRemote, "KV hello reply: bad magic or size (not a KV endpoint?)"};
    }
    if (get16(bytes.data() + 4) != kVersion) {
        return Status{Code::kRemote, "KV hello reply: unsupported version"};
    }
    HelloReply r;
    const uint16_t st = get16(bytes.data() + 6);
    if (st > static_cast<uint16_t>(ReplyStatus::kError)) {
        return Status{Code::kRemote, "KV hello reply: unknown status"};
    }
    r.status = static_cast<ReplyStatus>(st);
    std::memcpy(r.handle.data(), bytes.data() + 16, kHandleBytes);
    return r;
}

const char* ackStatusName(AckStatus status) {
    switch (status) {
        case AckStatus::kOk:
            return "ok";
        case AckStatus::kBadHeader:
            return "bad header";
        case AckStatus::kChecksumMismatch:
            return "checksum mismatch";
        case AckStatus::kModelMismatch:
            return "model mismatch";
        case AckStatus::kTooLarge:
            return "too large";
        case AckStatus::kReceiveFailed:
            return "receive failed";
        case AckStatus::kInternal:
            return "internal error";
    }
    return "unknown";
}

std::array<uint8_t, kAckBytes> encodeAck(const Ack& ack) {
    std::array<uint8_t, kAckBytes> out{};
    put32(out.data(), kAckMagic);
    put16(out.data() + 4, kVersion);
    put16(out.data() + 6, static_cast<uint16_t>(ack.status));
    put64(out.data() + 8, ack.transfer_id);
    put64(out.data() + 16, ack.bytes);
    const size_t n = std::min(ack.message.size(), kAckMessageBytes - 1);
    for (size_t i = 0; i < n; ++i) {
        const char c = ack.message[i];
        out[32 + i] = static_cast<uint8_t>(c >= 0x20 && c <= 0x7e ? c : '?');
    }
    return out;
}

Result<Ack> decodeAck(std::span<const uint8_t> bytes) {
    if (bytes.size() != kAckBytes || get32(bytes.data()) != kAckMagic) {
        return Status{Code::kRemote, "KV ack: bad magic or size"};
    }
    if (get16(bytes.data() + 4) != kVersion) {
        return Status{Code::kRemote, "KV ack: unsupported version"};
    }
    Ack a;
    const uint16_t st = get16(bytes.data() + 6);
    if (st > static_cast<uint16_t>(AckStatus::kInternal)) {
        return Status{Code::kRemote, "KV ack: unknown status " + std::to_string(st)};
    }
    a.status = static_cast<AckStatus>(st);
    a.transfer_id = get64(bytes.data() + 8);
    a.bytes = get64(bytes.data() + 16);
    // The last byte of the field is the terminator's: a peer that fills all of it (no NUL)
    // still yields at most kAckMessageBytes - 1 characters, as Ack::message promises.
    const auto msg = bytes.subspan(32, kAckMessageBytes - 1);
    for (uint8_t c : msg) {
        if (c == 0) {
            break;
        }
        a.message += (c >= 0x20 && c <= 0x7e) ? static_cast<char>(c) : '?';
    }
    return a;
}

}  // namespace atlas::bubbletea::kv
