#include "transport/seal.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>

namespace atlas::transport::seal {
namespace {

constexpr char kLabelC2L[] = "atlas-seal-v1 c2l";
constexpr char kLabelL2C[] = "atlas-seal-v1 l2c";
constexpr char kLabelKey[] = "atlas-seal-v1 key";
// EVP's update() takes an int; larger payloads go through in slices of this size.
constexpr uint64_t kMaxUpdate = 1ull << 30;

Status cryptoError(const char* what) {
    return {Code::kSystem, std::string("OpenSSL ") + what + " failed (AES-256-GCM / HKDF)"};
}

const char* dirName(Direction d) {
    return d == Direction::kConnectorToListener ? "connector->listener" : "listener->connector";
}

template <typename T>
void putLe(uint8_t* p, T v) {
    for (size_t i = 0; i < sizeof(T); ++i) {
        p[i] = static_cast<uint8_t>(v >> (8 * i));
    }
}

// One HKDF call in the given mode (EVP_KDF_HKDF_MODE_*). Fetches the KDF per call: HKDF runs
// once per session and once per rekey, never per frame.
Status kdf(int mode, std::span<const uint8_t> salt, std::span<const uint8_t> key,
           std::span<const uint8_t> info, std::span<uint8_t> out) {
    EVP_KDF* k = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
    if (k == nullptr) {
        return cryptoError("EVP_KDF_fetch(HKDF)");
    }
    EVP_KDF_CTX* ctx = EVP_KDF_CTX_new(k);
    EVP_KDF_free(k);
    if (ctx == nullptr) {
        return cryptoError("EVP_KDF_CTX_new");
    }
    char digest[] = "SHA256";
    // OSSL_PARAM wants non-const pointers but only reads octet inputs.
    auto octets = [](const char* name, std::span<const uint8_t> s) {
        return OSSL_PARAM_construct_octet_string(name, const_cast<uint8_t*>(s.data()), s.size());
    };
    OSSL_PARAM params[6];
    size_t n = 0;
    params[n++] = OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode);
    params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
    params[n++] = octets(OSSL_KDF_PARAM_KEY, key);
    if (!salt.empty()) {
        params[n++] = octets(OSSL_KDF_PARAM_SALT, salt);
    }
    if (!info.empty()) {
        params[n++] = octets(OSSL_KDF_PARAM_INFO, info);
    }
    params[n] = OSSL_PARAM_construct_end();
    const int rc = EVP_KDF_derive(ctx, out.data(), out.size(), params);
    EVP_KDF_CTX_free(ctx);
    return rc == 1 ? Status::ok() : cryptoError("EVP_KDF_derive(HKDF)");
}

Result<Key> deriveTrafficKey(const Key& secret, uint16_t stream, uint32_t epoch,
                             uint32_t generation) {
    uint8_t info[sizeof(kLabelKey) - 1 + 2 + 4 + 4];
    std::memcpy(info, kLabelKey, sizeof(kLabelKey) - 1);
    uint8_t* p = info + sizeof(kLabelKey) - 1;
    putLe(p, stream);
    putLe(p + 2, epoch);
    putLe(p + 6, generation);
    Key key{};
    ATLAS_RETURN_IF_ERROR(hkdfExpand(secret, info, key));
    return key;
}

}  // namespace

const char* sealErrorName(SealError e) {
    switch (e) {
        case SealError::kNone:
            return "none";
        case SealError::kBadKey:
            return "bad key";
        case SealError::kHeaderTag:
            return "header tag mismatch";
        case SealError::kPayloadTag:
            return "payload tag mismatch";
        case SealError::kCounterExhausted:
            return "nonce counter exhausted";
        case SealError::kMisuse:
            return "API misuse";
        case SealError::kCrypto:
            return "OpenSSL failure";
    }
    return "unknown";
}

// ---------------------------------------------------------------- HKDF

Status hkdfExtract(std::span<const uint8_t> salt, std::span<const uint8_t> ikm, Key* prk) {
    return kdf(EVP_KDF_HKDF_MODE_EXTRACT_ONLY, salt, ikm, {}, *prk);
}

Status hkdfExpand(std::span<const uint8_t> prk, std::span<const uint8_t> info,
                  std::span<uint8_t> out) {
    if (out.empty() || out.size() > 255 * kKeyBytes) {
        return {Code::kInvalidArgument, "HKDF-Expand output must be 1..8160 bytes"};
    }
    return kdf(EVP_KDF_HKDF_MODE_EXPAND_ONLY, {}, prk, info, out);
}

Status hkdf(std::span<const uint8_t> salt, std::span<const uint8_t> ikm,
            std::span<const uint8_t> info, std::span<uint8_t> out) {
    Key prk{};
    Status st = hkdfExtract(salt, ikm, &prk);
    if (st.isOk()) {
        st = hkdfExpand(prk, info, out);
    }
    OPENSSL_cleanse(prk.data(), prk.size());
    return st;
}

// ---------------------------------------------------------------- Gcm

void Gcm::CtxFree::operator()(EVP_CIPHER_CTX* c) const {
    EVP_CIPHER_CTX_free(c);
}

Result<Gcm> Gcm::create(bool encrypt) {
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    if (ctx == nullptr) {
        return cryptoError("EVP_CIPHER_CTX_new");
    }
    Gcm g(ctx, encrypt);
    // Fix the cipher now (its provider fetch happens here, once); keys and IVs come later.
    if (EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr, encrypt ? 1 : 0) !=
        1) {
        return cryptoError("EVP_CipherInit_ex(aes-256-gcm)");
    }
    return g;
}

Status Gcm::setKey(const Key& key) {
    if (EVP_CipherInit_ex(ctx_.get(), nullptr, nullptr, key.data(), nullptr, -1) != 1) {
        return cryptoError("EVP_CipherInit_ex(key)");
    }
    return Status::ok();
}

Status Gcm::begin(const Iv& iv, std::span<const uint8_t> aad) {
    // The cipher's default IV length is 12 bytes; only the IV changes, the key schedule stays.
    if (EVP_CipherInit_ex(ctx_.get(), nullptr, nullptr, nullptr, iv.data(), -1) != 1) {
        return cryptoError("EVP_CipherInit_ex(iv)");
    }
    if (!aad.empty()) {
        int len = 0;
        if (EVP_CipherUpdate(ctx_.get(), nullptr, &len, aad.data(), static_cast<int>(aad.size())) !=
            1) {
            return cryptoError("EVP_CipherUpdate(aad)");
        }
    }
    return Status::ok();
}

Status Gcm::update(const uint8_t* in, uint8_t* out, uint64_t len) {
    while (len > 0) {
        const int n = static_cast<int>(std::min(len, kMaxUpdate));
        int produced = 0;
        if (EVP_CipherUpdate(ctx_.get(), out, &produced, in, n) != 1 || produced != n) {
            return cryptoError("EVP_CipherUpdate");
        }
        in += n;
        out += n;
        len -= static_cast<uint64_t>(n);
    }
    return Status::ok();
}

Status Gcm::finishSeal(Tag* tag) {
    int len = 0;
    uint8_t none[16];
    if (EVP_CipherFinal_ex(ctx_.get(), none, &len) != 1 ||
        EVP_CIPHER_CTX_ctrl(ctx_.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(kTagBytes),
                            tag->data()) != 1) {
        return cryptoError("EVP_CipherFinal_ex(seal)");
    }
    return Status::ok();
}

Result<bool> Gcm::finishOpen(const Tag& tag) {
    if (EVP_CIPHER_CTX_ctrl(ctx_.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(kTagBytes),
                            const_cast<uint8_t*>(tag.data())) != 1) {
        return cryptoError("EVP_CIPHER_CTX_ctrl(SET_TAG)");
    }
    int len = 0;
    uint8_t none[16];
    // GCM's final step only compares tags: <= 0 means they differ.
    return EVP_CipherFinal_ex(ctx_.get(), none, &len) == 1;
}

// ---------------------------------------------------------------- SessionSecrets

Result<SessionSecrets> SessionSecrets::derive(std::string_view auth_key, const AuthContext& ctx) {
    if (auth_key.empty()) {
        return Status(Code::kInvalidUsage,
                      "bad key: encryption needs key material (ATLAS_ENCRYPT=1 requires "
                      "ATLAS_AUTH_KEY or ATLAS_AUTH_KEY_FILE)");
    }
    wire::Nonce zero{};
    if (ctx.client_nonce == zero && ctx.server_nonce == zero) {
        return Status(Code::kInternal, "seal: session keys derived before the handshake nonces");
    }
    uint8_t salt[2 * wire::kNonceBytes];
    std::memcpy(salt, ctx.client_nonce.data(), wire::kNonceBytes);
    std::memcpy(salt + wire::kNonceBytes, ctx.server_nonce.data(), wire::kNonceBytes);
    Key prk{};
    ATLAS_RETURN_IF_ERROR(hkdfExtract(
        salt, {reinterpret_cast<const uint8_t*>(auth_key.data()), auth_key.size()}, &prk));
    SessionSecrets s;
    Status st;
    for (Direction d : {Direction::kConnectorToListener, Direction::kListenerToConnector}) {
        const char* label = d == Direction::kConnectorToListener ? kLabelC2L : kLabelL2C;
        uint8_t info[sizeof(kLabelC2L) - 1 + 8 + 8];
        std::memcpy(info, label, sizeof(kLabelC2L) - 1);
        putLe(info + sizeof(kLabelC2L) - 1, ctx.session_id);
        putLe(info + sizeof(kLabelC2L) - 1 + 8, ctx.listen_id);
        st = hkdfExpand(prk, info, s.secret_[static_cast<size_t>(d)]);
        if (!st.isOk()) {
            break;
        }
    }
    OPENSSL_cleanse(prk.data(), prk.size());
    if (!st.isOk()) {
        return st;
    }
    return s;
}

SessionSecrets::~SessionSecrets() {
    OPENSSL_cleanse(secret_.data(), sizeof(secret_));
}

Result<Key> SessionSecrets::trafficKey(Direction dir, uint16_t stream, uint32_t epoch,
                                       uint32_t generation) const {
    return deriveTrafficKey(secret_[static_cast<size_t>(dir)], stream, epoch, generation);
}

Iv makeIv(uint16_t stream, uint32_t epoch, uint64_t frame, int part) {
    Iv iv{};
    const uint64_t counter = (frame << 1) | static_cast<uint64_t>(part & 1);
    iv[0] = static_cast<uint8_t>(stream >> 8);
    iv[1] = static_cast<uint8_t>(stream);
    for (int i = 0; i < 4; ++i) {
        iv[2 + i] = static_cast<uint8_t>(epoch >> (24 - 8 * i));
    }
    for (int i = 0; i < 6; ++i) {
        iv[6 + i] = static_cast<uint8_t>(counter >> (40 - 8 * i));
    }
    return iv;
}

// ---------------------------------------------------------------- StreamSchedule

Status StreamSchedule::validate(const Limits& l) {
    if (l.frames_per_key == 0 || l.frames_per_key > kMaxFramesPerKey) {
        return {Code::kInvalidArgument, "seal limits: frames_per_key must be 1..2^47"};
    }
    if (l.bytes_per_key == 0 || l.max_generations == 0) {
        return {Code::kInvalidArgument,
                "seal limits: bytes_per_key and max_generations must be > 0"};
    }
    return Status::ok();
}

std::optional<SealPosition> StreamSchedule::next(bool* rekey) const {
    SealPosition pos{stream_, epoch_, generation_, frames_};
    *rekey = frames_ >= limits_.frames_per_key || bytes_ >= limits_.bytes_per_key;
    if (*rekey) {
        if (generation_ + 1 >= limits_.max_generations) {
            return std::nullopt;
        }
        pos.generation = generation_ + 1;
        pos.frame = 0;
    }
    return pos;
}

void StreamSchedule::advance(const SealPosition& pos, uint64_t payload_bytes) {
    if (pos.generation != generation_) {
        generation_ = pos.generation;
        frames_ = 0;
        bytes_ = 0;
    }
    ++frames_;
    bytes_ += payload_bytes;
}

void StreamSchedule::restart(uint32_t epoch) {
    epoch_ = epoch;
    generation_ = 0;
    frames_ = 0;
    bytes_ = 0;
}

// ---------------------------------------------------------------- StreamCipherBase

StreamCipherBase::StreamCipherBase(const SessionSecrets& secrets, Direction dir, uint16_t stream,
                                   size_t header_bytes, Limits limits, Gcm gcm)
    : secrets_(secrets),
      dir_(dir),
      header_bytes_(header_bytes),
      schedule_(stream, limits),
      gcm_(std::move(gcm)) {}

Status StreamCipherBase::keyFor(const SealPosition& pos) {
    keyed_ = false;
    auto key = secrets_.trafficKey(dir_, pos.stream, pos.epoch, pos.generation);
    if (!key) {
        return fail(SealError::kCrypto, key.status());
    }
    Status st = gcm_.setKey(*key);
    OPENSSL_cleanse(key->data(), key->size());
    if (!st.isOk()) {
        return fail(SealError::kCrypto, st);
    }
    keyed_ = true;
    return Status::ok();
}

Result<SealPosition> StreamCipherBase::startFrame() {
    bool rekey = false;
    std::optional<SealPosition> pos = schedule_.next(&rekey);
    if (!pos) {
        return fail(SealError::kCounterExhausted,
                    {Code::kInternal,
                     "nonce counter exhausted on stream " + std::to_string(stream()) + " (" +
                         dirName(dir_) + ", epoch " + std::to_string(epoch()) + ", " +
                         std::to_string(generation() + 1) +
                         " keys used): the stream must be re-established with a new epoch"});
    }
    if (rekey || !keyed_) {
        ATLAS_RETURN_IF_ERROR(keyFor(*pos));
    }
    return *pos;
}

Status StreamCipherBase::restartEpoch(uint32_t epoch) {
    if (epoch <= schedule_.epoch()) {
        // Reusing an epoch would reuse {key, nonce} pairs: never allowed, even after a failure.
        return fail(SealError::kMisuse,
                    {Code::kInternal, "seal API misuse on stream " + std::to_string(stream()) +
                                          ": restart(epoch " + std::to_string(epoch) +
                                          ") does not move past epoch " +
                                          std::to_string(schedule_.epoch())});
    }
    schedule_.restart(epoch);
    error_ = SealError::kNone;
    failure_ = Status::ok();
    return keyFor({stream(), epoch, 0, 0});
}

Status StreamCipherBase::fail(SealError kind, Status st) {
    if (error_ == SealError::kNone) {
        error_ = kind;
        failure_ = st;
    }
    return failure_;
}

Status StreamCipherBase::failMisuse(const std::string& what) {
    return fail(SealError::kMisuse,
                {Code::kInternal, "seal API misuse on stream " + std::to_string(stream()) + " (" +
                                      dirName(dir_) + "): " + what});
}

Status StreamCipherBase::checkHealthy() const {
    return error_ == SealError::kNone ? Status::ok() : failure_;
}

std::string StreamCipherBase::where(const SealPosition& pos) const {
    return "stream " + std::to_string(pos.stream) + " (" + dirName(dir_) + ", epoch " +
           std::to_string(pos.epoch) + ", key " + std::to_string(pos.generation) + ", frame " +
           std::to_string(pos.frame) + ")";
}

}  // namespace atlas::transport::seal
