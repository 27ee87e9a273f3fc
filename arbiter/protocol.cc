#include "arbiter/protocol.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace atlas::arbiter {
namespace {

// Body sizes per type (kError is variable: 4 + text length).
constexpr size_t kHelloBody = 16 + 4 + 4 + kNameBytes;
constexpr size_t kChallengeBody = 16 + 32 + 1 + 1 + 2 + 4 + 8 + 8 + 8;
constexpr size_t kAuthBody = 32;
constexpr size_t kWelcomeBody = 8;
constexpr size_t kOpenBody = 4 + 4 + 4 + 1 + 3 + kNameBytes;
constexpr size_t kRequestBody = 4 + 4 + 8;
constexpr size_t kGrantBody = 4 + 4 + 8 + 8;
constexpr size_t kReleaseBody = 4 + 4 + 8 + 8;
constexpr size_t kCloseBody = 8;
constexpr size_t kPingBody = 8;
constexpr size_t kErrorMinBody = 4;
constexpr size_t kTrainBody = kNameBytes + 8 + 8;

bool printable(uint8_t c) {
    return c >= 0x20 && c < 0x7f;
}

bool linkChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == ':' || c == '>' || c == '/' || c == '-';
}

class Writer {
  public:
    explicit Writer(std::vector<uint8_t>* out) : out_(out) {}
    void u8(uint8_t v) { out_->push_back(v); }
    void u16(uint16_t v) { le(v); }
    void u32(uint32_t v) { le(v); }
    void u64(uint64_t v) { le(v); }
    void i32(int32_t v) { le(static_cast<uint32_t>(v)); }
    void i64(int64_t v) { le(static_cast<uint64_t>(v)); }
    void bytes(const uint8_t* p, size_t n) { out_->insert(out_->end(), p, p + n); }
    void zeros(size_t n) { out_->insert(out_->end(), n, 0); }
    // Fixed field: up to n bytes of text (non-printable -> '?'), NUL padded.
    void name(std::string_view s, size_t n) {
        size_t len = std::min(s.size(), n);
        for (size_t i = 0; i < len; ++i) {
            const auto c = static_cast<uint8_t>(s[i]);
            out_->push_back(printable(c) ? c : '?');
        }
        zeros(n - len);
    }

  private:
    template <typename T>
    void le(T v) {
        for (size_t i = 0; i < sizeof(T); ++i) {
            out_->push_back(static_cast<uint8_t>(v >> (8 * i)));
        }
    }
    std::vector<uint8_t>* out_;
};

class Reader {
  public:
    explicit Reader(const uint8_t* p) : p_(p) {}
    uint8_t u8() { return p_[take(1)]; }
    uint16_t u16() { return static_cast<uint16_t>(le(2)); }
    uint32_t u32() { return static_cast<uint32_t>(le(4)); }
    uint64_t u64() { return le(8); }
    int32_t i32() { return static_cast<int32_t>(u32()); }
    int64_t i64() { return static_cast<int64_t>(u64()); }
    void bytes(uint8_t* out, size_t n) { std::memcpy(out, p_ + take(n), n); }
    // Reserved bytes must be zero.
    bool zeros(size_t n) {
        size_t at = take(n);
        for (size_t i = 0; i < n; ++i) {
            if (p_[at + i] != 0) {
                return false;
            }
        }
        return true;
    }
    // Printable text then NUL padding only.
    bool name(size_t n, std::string* out) {
        size_t at = take(n);
        size_t len = 0;
        while (len < n && p_[at + len] != 0) {
            if (!printable(p_[at + len])) {
                return false;
            }
            ++len;
        }
        for (size_t i = len; i < n; ++i) {
            if (p_[at + i] != 0) {
                return false;
            }
        }
        out->assign(reinterpret_cast<const char*>(p_ + at), len);
        return true;
    }

  private:
    // Callers check the body size first, so reads never pass the end.
    size_t take(size_t n) {
        size_t at = pos_;
        pos_ += n;
        return at;
    }
    uint64_t le(size_t n) {
        size_t at = take(n);
        uint64_t v = 0;
        for (size_t i = 0; i < n; ++i) {
            v |= static_cast<uint64_t>(p_[at + i]) << (8 * i);
        }
        return v;
    }
    const uint8_t* p_;
    size_t pos_ = 0;
};

size_t bodySize(MsgType t) {
    switch (t) {
        case MsgType::kHello:
            return kHelloBody;
        case MsgType::kChallenge:
            return kChallengeBody;
        case MsgType::kAuth:
            return kAuthBody;
        case MsgType::kWelcome:
            return kWelcomeBody;
        case MsgType::kOpen:
            return kOpenBody;
        case MsgType::kRequest:
            return kRequestBody;
        case MsgType::kGrant:
            return kGrantBody;
        case MsgType::kRelease:
            return kReleaseBody;
        case MsgType::kClose:
            return kCloseBody;
        case MsgType::kPing:
        case MsgType::kPong:
            return kPingBody;
        case MsgType::kError:
            return 0;  // variable
        case MsgType::kTrain:
            return kTrainBody;
    }
    return 0;
}

bool knownType(uint8_t t) {
    return t >= static_cast<uint8_t>(MsgType::kHello) && t <= static_cast<uint8_t>(MsgType::kTrain);
}

// Grant's rate word (version 3): kbit/s, rounded to nearest, saturating.
uint32_t grantRateWord(uint64_t bps) {
    const uint64_t kbps = bps / 1000 + (bps % 1000 >= 500 ? 1 : 0);
    return kbps > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(kbps);
}

Status malformed(const std::string& what) {
    return {Code::kRemote, "malformed arbiter message: " + what};
}

void encodeBody(const Message& m, uint8_t version, Writer& w) {
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, Hello>) {
                w.bytes(v.client_nonce.data(), v.client_nonce.size());
                w.u32(v.pid);
                w.zeros(4);
                w.name(v.name, kNameBytes);
            } else if constexpr (std::is_same_v<T, Challenge>) {
                w.bytes(v.server_nonce.data(), v.server_nonce.size());
                w.bytes(v.server_mac.data(), v.server_mac.size());
                w.u8(static_cast<uint8_t>(v.policy));
                w.u8(v.auth_required ? 1 : 0);
                w.zeros(6);
                w.i64(v.lease_ns);
                w.i64(v.heartbeat_ns);
                w.u64(v.session_id);
            } else if constexpr (std::is_same_v<T, Auth>) {
                w.bytes(v.client_mac.data(), v.client_mac.size());
            } else if constexpr (std::is_same_v<T, Welcome>) {
                w.u64(v.session_id);
            } else if constexpr (std::is_same_v<T, Open>) {
                w.u32(v.flow);
                w.i32(v.cls.pipeline);
                w.i32(v.cls.stage);
                w.u8(v.cls.direction);
                if (version >= 2) {
                    w.u8(std::min<uint8_t>(v.cls.priority, kPriorityLevels - 1));
                    w.zeros(2);
                } else {
                    w.zeros(3);
                }
                w.name(v.link, kNameBytes);
            } else if constexpr (std::is_same_v<T, Request>) {
                w.u32(v.flow);
                w.zeros(4);
                w.u64(v.bytes);
            } else if constexpr (std::is_same_v<T, Grant>) {
                w.u32(v.flow);
                w.u32(version >= 3 ? grantRateWord(v.rate_bps) : 0);
                w.u64(v.seq);
                w.i64(v.slot_ns);
            } else if constexpr (std::is_same_v<T, Release>) {
                w.u32(v.flow);
                w.zeros(4);
                w.u64(v.seq);
                w.u64(v.bytes);
            } else if constexpr (std::is_same_v<T, Close>) {
                w.u32(v.flow);
                w.zeros(4);
            } else if constexpr (std::is_same_v<T, Ping> || std::is_same_v<T, Pong>) {
                w.u64(v.token);
            } else if constexpr (std::is_same_v<T, Error>) {
                const size_t len = std::min(v.text.size(), kMaxErrorText);
                w.u16(v.code);
                w.u16(static_cast<uint16_t>(len));
                w.name(std::string_view(v.text).substr(0, len), len);
            } else if constexpr (std::is_same_v<T, Train>) {
                w.name(v.link, kNameBytes);
                w.u64(v.bytes);
                w.i64(v.dispersion_ns);
            }
        },
        m);
}

Result<Message> decodeBody(MsgType type, uint8_t version, const uint8_t* p, size_t n) {
    Reader r(p);
    switch (type) {
        case MsgType::kHello: {
            Hello h;
            r.bytes(h.client_nonce.data(), h.client_nonce.size());
            h.pid = r.u32();
            if (!r.zeros(4) || !r.name(kNameBytes, &h.name)) {
                return malformed("hello: bad reserved bytes or name");
            }
            return Message(h);
        }
        case MsgType::kChallenge: {
            Challenge c;
            r.bytes(c.server_nonce.data(), c.server_nonce.size());
            r.bytes(c.server_mac.data(), c.server_mac.size());
            const uint8_t policy = r.u8();
            const uint8_t flags = r.u8();
            if (policy > static_cast<uint8_t>(WirePolicy::kWorkload) || flags > 1 || !r.zeros(6)) {
                return malformed("challenge: bad policy, flags or reserved bytes");
            }
            c.policy = static_cast<WirePolicy>(policy);
            c.auth_required = flags == 1;
            c.lease_ns = r.i64();
            c.heartbeat_ns = r.i64();
            c.session_id = r.u64();
            if (c.lease_ns <= 0 || c.heartbeat_ns <= 0 || c.heartbeat_ns > c.lease_ns) {
                return malformed("challenge: lease and heartbeat must satisfy 0 < hb <= lease");
            }
            return Message(c);
        }
        case MsgType::kAuth: {
            Auth a;
            r.bytes(a.client_mac.data(), a.client_mac.size());
            return Message(a);
        }
        case MsgType::kWelcome:
            return Message(Welcome{r.u64()});
        case MsgType::kOpen: {
            Open o;
            o.flow = r.u32();
            o.cls.pipeline = r.i32();
            o.cls.stage = r.i32();
            o.cls.direction = r.u8();
            if (version >= 2) {
                o.cls.priority = r.u8();  // version 1: reserved, the default priority
            }
            if (o.cls.direction > 1 || o.cls.priority >= kPriorityLevels ||
                !r.zeros(version >= 2 ? 2 : 3) || !r.name(kNameBytes, &o.link) ||
                !validLinkName(o.link)) {
                return malformed("open: bad direction, priority, reserved bytes or link name");
            }
            return Message(o);
        }
        case MsgType::kRequest: {
            Request q;
            q.flow = r.u32();
            if (!r.zeros(4)) {
                return malformed("request: bad reserved bytes");
            }
            q.bytes = r.u64();
            return Message(q);
        }
        case MsgType::kGrant: {
            Grant g;
            g.flow = r.u32();
            if (version >= 3) {
                g.rate_bps = static_cast<uint64_t>(r.u32()) * 1000;
            } else if (!r.zeros(4)) {
                return malformed("grant: bad reserved bytes");
            }
            g.seq = r.u64();
            g.slot_ns = r.i64();
            if (g.slot_ns < 0) {
                return malformed("grant: negative slot");
            }
            return Message(g);
        }
        case MsgType::kRelease: {
            Release l;
            l.flow = r.u32();
            if (!r.zeros(4)) {
                return malformed("release: bad reserved bytes");
            }
            l.seq = r.u64();
            l.bytes = r.u64();
            return Message(l);
        }
        case MsgType::kClose: {
            Close c;
            c.flow = r.u32();
            if (!r.zeros(4)) {
                return malformed("close: bad reserved bytes");
            }
            return Message(c);
        }
        case MsgType::kPing:
            return Message(Ping{r.u64()});
        case MsgType::kPong:
            return Message(Pong{r.u64()});
        case MsgType::kError: {
            Error e;
            e.code = r.u16();
            const uint16_t len = r.u16();
            if (len != n - kErrorMinBody || !r.name(len, &e.text) || e.text.size() != len) {
                return malformed("error: text length or bytes");
            }
            return Message(e);
        }
        case MsgType::kTrain: {
            if (version < 3) {
                return malformed("train needs protocol version 3");
            }
            Train t;
            if (!r.name(kNameBytes, &t.link) || !validLinkName(t.link)) {
                return malformed("train: bad link name");
            }
            t.bytes = r.u64();
            t.dispersion_ns = r.i64();
            if (t.bytes == 0 || t.dispersion_ns <= 0) {
                return malformed("train: bytes and dispersion must be positive");
            }
            return Message(t);
        }
    }
    return malformed("unknown type");
}

}  // namespace

MsgType typeOf(const Message& m) {
    return static_cast<MsgType>(m.index() + 1);
}

const char* msgTypeName(MsgType t) {
    switch (t) {
        case MsgType::kHello:
            return "hello";
        case MsgType::kChallenge:
            return "challenge";
        case MsgType::kAuth:
            return "auth";
        case MsgType::kWelcome:
            return "welcome";
        case MsgType::kOpen:
            return "open";
        case MsgType::kRequest:
            return "request";
        case MsgType::kGrant:
            return "grant";
        case MsgType::kRelease:
            return "release";
        case MsgType::kClose:
            return "close";
        case MsgType::kPing:
            return "ping";
        case MsgType::kPong:
            return "pong";
        case MsgType::kError:
            return "error";
        case MsgType::kTrain:
            return "train";
    }
    return "unknown";
}

void encode(const Message& m, std::vector<uint8_t>* out, uint8_t version) {
    version = std::clamp(version, kMinProtocolVersion, kProtocolVersion);
    if (std::holds_alternative<Train>(m) && version < 3) {
        return;  // the peer cannot read it: trains are pooled from version 3 on
    }
    const size_t start = out->size();
    Writer w(out);
    w.bytes(kMagic, sizeof(kMagic));
    w.u8(version);
    w.u8(static_cast<uint8_t>(typeOf(m)));
    w.u16(0);
    w.u32(0);  // patched below
    encodeBody(m, version, w);
    const auto len = static_cast<uint32_t>(out->size() - start - kHeaderBytes);
    for (size_t i = 0; i < 4; ++i) {
        (*out)[start + 8 + i] = static_cast<uint8_t>(len >> (8 * i));
    }
}

std::vector<uint8_t> encode(const Message& m, uint8_t version) {
    std::vector<uint8_t> out;
    encode(m, &out, version);
    return out;
}

void Decoder::feed(const uint8_t* data, size_t size) {
    if (failed() || size == 0) {
        return;
    }
    // Compact before growing, so a long-lived connection's buffer stays small.
    if (pos_ > 0 && pos_ == buf_.size()) {
        buf_.clear();
        pos_ = 0;
    } else if (pos_ > 4096) {
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
        pos_ = 0;
    }
    buf_.insert(buf_.end(), data, data + size);
}

Result<std::optional<Message>> Decoder::next() {
    if (failed()) {
        return error_;
    }
    const size_t avail = buf_.size() - pos_;
    if (avail < kHeaderBytes) {
        // Reject a wrong magic as soon as its bytes are here, not after 12 bytes.
        for (size_t i = 0; i < std::min(avail, sizeof(kMagic)); ++i) {
            if (buf_[pos_ + i] != kMagic[i]) {
                error_ = malformed("bad magic (not an Atlas arbiter peer)");
                return error_;
            }
        }
        return std::optional<Message>();
    }
    const uint8_t* h = buf_.data() + pos_;
    if (std::memcmp(h, kMagic, sizeof(kMagic)) != 0) {
        error_ = malformed("bad magic (not an Atlas arbiter peer)");
        return error_;
    }
    if (h[4] < kMinProtocolVersion || h[4] > kProtocolVersion) {
        // "protocol version N" starts the text an older build's server sends too: a client
        // that offered more falls back on it (ArbiterClient).
        error_ = malformed("protocol version " + std::to_string(h[4]) + " (this side speaks " +
                           std::to_string(kMinProtocolVersion) + ".." +
                           std::to_string(kProtocolVersion) + ")");
        return error_;
    }
    const uint8_t version = h[4];
    if (!knownType(h[5]) || h[6] != 0 || h[7] != 0) {
        error_ = malformed("unknown type " + std::to_string(h[5]) + " or reserved bits set");
        return error_;
    }
    const auto type = static_cast<MsgType>(h[5]);
    const uint32_t len = static_cast<uint32_t>(h[8]) | (static_cast<uint32_t>(h[9]) << 8) |
                         (static_cast<uint32_t>(h[10]) << 16) |
                         (static_cast<uint32_t>(h[11]) << 24);
    const bool ok_len = type == MsgType::kError
                            ? (len >= kErrorMinBody && len <= kErrorMinBody + kMaxErrorText)
                            : len == bodySize(type);
    if (!ok_len) {
        error_ =
            malformed(std::string(msgTypeName(type)) + " with body length " + std::to_string(len));
        return error_;
    }
    if (avail < kHeaderBytes + len) {
        return std::optional<Message>();
    }
    auto msg = decodeBody(type, version, h + kHeaderBytes, len);
    if (!msg) {
        error_ = msg.status();
        return error_;
    }
    pos_ += kHeaderBytes + len;
    last_version_ = version;
    return std::optional<Message>(std::move(msg.value()));
}

bool validLinkName(std::string_view text) {
    if (text.empty() || text.size() > kNameBytes) {
        return false;
    }
    for (char c : text) {
        if (!linkChar(c)) {
            return false;
        }
    }
    return true;
}

bool systemRandomFill(uint8_t* out, size_t len) {
    return RAND_bytes(out, static_cast<int>(len)) == 1;
}

Result<Nonce> randomNonce(RandomFill fill) {
    Nonce n{};
    if (fill == nullptr || !fill(n.data(), n.size())) {
        return Status(Code::kSystem,
                      "the random number generator failed (RAND_bytes): no "
                      "nonce for the handshake");
    }
    return n;
}

namespace {
Mac proof(const char* label, const std::string& key, const Nonce& client, const Nonce& server,
          uint64_t session_id) {
    std::vector<uint8_t> in(label, label + std::strlen(label) + 1);
    in.insert(in.end(), client.begin(), client.end());
    in.insert(in.end(), server.begin(), server.end());
    for (size_t i = 0; i < 8; ++i) {
        in.push_back(static_cast<uint8_t>(session_id >> (8 * i)));
    }
    Mac out{};
    unsigned int len = 0;
    HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), in.data(), in.size(), out.data(),
         &len);
    return out;
}
}  // namespace

Mac serverProof(const std::string& key, const Nonce& client, const Nonce& server,
                uint64_t session_id) {
    return proof("atlas-arbiter-server-v1", key, client, server, session_id);
}

Mac clientProof(const std::string& key, const Nonce& client, const Nonce& server,
                uint64_t session_id) {
    return proof("atlas-arbiter-client-v1", key, client, server, session_id);
}

bool macEqual(const Mac& a, const Mac& b) {
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace atlas::arbiter
