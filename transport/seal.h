// Frame sealing for ATLAS_ENCRYPT=1: AES-256-GCM (OpenSSL 3 EVP) over every frame, header and
// payload, with per-direction keys from HKDF-SHA256 and implicit per-stream nonces
// (docs/protocol.md, "Sealed frames"). A pure library: no sockets, threads or clock reads; the
// transport drives it from the thread that owns each stream.
//
// Layering, bottom up:
// - hkdf*():         RFC 5869 HKDF-SHA256 (EVP_KDF "HKDF").
// - Gcm:             one reusable EVP_CIPHER_CTX; the key is set once per key, each frame part
//                    only sets its IV. Tests run the AES-GCM reference vectors through it.
// - SessionSecrets:  the two direction secrets of one session, from the auth key, both
//                    handshake nonces and the connection ids; trafficKey() derives the key of
//                    one {stream, epoch, generation}.
// - StreamSealer / StreamOpener: the two ends of one direction of one TCP stream. Both apply
//                    the same nonce and rekey schedule (StreamSchedule, one definition), so
//                    nothing about counters travels on the wire.
//
// Wire layout of one sealed frame (H = the integrator's fixed plaintext header size):
//
//   [0, H)          header ciphertext          nonce part 0, no AAD
//   [H, H+16)       header tag
//   [H+16, H+32)    payload tag                nonce part 1, AAD = the H plaintext header bytes
//   [H+32, H+32+L)  payload ciphertext         (L is read from the decrypted header)
//
// The payload tag comes before the payload so that the receiver reads one fixed-size prefix
// (prefixBytes(H)) and then the payload straight into the posted buffer: the same two reads
// per frame as in clear. The payload tag is present and checked even when L == 0.
#pragma once

#include <openssl/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "atlas/common/status.h"
#include "transport/auth.h"

namespace atlas::transport::seal {

constexpr size_t kKeyBytes = 32;  // AES-256, and every HKDF output here
constexpr size_t kIvBytes = 12;   // GCM's 96-bit nonce (no GHASH of the IV)
constexpr size_t kTagBytes = 16;
constexpr size_t kMaxHeaderBytes = 256;
// GCM's per-message plaintext limit (2^39 - 256 bits).
constexpr uint64_t kMaxPayloadBytes = (1ull << 36) - 32;
// The nonce's counter field is 48 bits: frame * 2 + part.
constexpr uint64_t kMaxFramesPerKey = 1ull << 47;

constexpr size_t prefixBytes(size_t header_bytes) {
    return header_bytes + 2 * kTagBytes;
}

using Key = std::array<uint8_t, kKeyBytes>;
using Iv = std::array<uint8_t, kIvBytes>;
using Tag = std::array<uint8_t, kTagBytes>;

// Which way the frames go. Each direction of a session has its own secret, so a frame can
// never be reflected back to its sender.
enum class Direction : uint8_t { kConnectorToListener = 0, kListenerToConnector = 1 };

// Why a seal operation failed. Every failing call of a stream object returns a non-OK Status
// and leaves this in its error(); the kind is also what the transport counts. (kBadKey comes
// only from SessionSecrets::derive(), as its Status.)
enum class SealError : uint8_t {
    kNone = 0,
    kBadKey,            // Code::kInvalidUsage: no key material (encryption needs ATLAS_AUTH_KEY)
    kHeaderTag,         // Code::kRemote: a frame prefix failed authentication
    kPayloadTag,        // Code::kRemote: a payload failed authentication
    kCounterExhausted,  // Code::kInternal: no nonce left in this epoch (re-establish the stream)
    kMisuse,            // Code::kInternal: the caller broke this API's contract
    kCrypto,            // Code::kSystem: OpenSSL failed (allocation, missing provider)
};
const char* sealErrorName(SealError e);

// ---------------------------------------------------------------- HKDF-SHA256 (RFC 5869)

// PRK = HMAC-SHA256(salt, ikm). An empty salt means 32 zero bytes (RFC 5869 2.2).
Status hkdfExtract(std::span<const uint8_t> salt, std::span<const uint8_t> ikm, Key* prk);
// OKM = T(1) | T(2) | ... truncated to out.size() (at most 255 * 32 bytes).
Status hkdfExpand(std::span<const uint8_t> prk, std::span<const uint8_t> info,
                  std::span<uint8_t> out);
Status hkdf(std::span<const uint8_t> salt, std::span<const uint8_t> ikm,
            std::span<const uint8_t> info, std::span<uint8_t> out);

// ---------------------------------------------------------------- AES-256-GCM context

// One EVP_CIPHER_CTX fixed to encryption or decryption. Not thread-safe; movable. The key
// schedule runs in setKey() only; begin() sets just the IV, so per-frame cost is the IV set-up
// plus the bytes. Streaming: begin(iv, aad), update() any number of times with any sizes
// (exact in-place allowed, partial overlap not), then finishSeal() or finishOpen().
class Gcm {
  public:
    static Result<Gcm> create(bool encrypt);
    Gcm(Gcm&&) noexcept = default;
    Gcm& operator=(Gcm&&) noexcept = default;

    Status setKey(const Key& key);
    Status begin(const Iv& iv, std::span<const uint8_t> aad);
    Status update(const uint8_t* in, uint8_t* out, uint64_t len);
    // Encryption: the tag of everything since begin().
    Status finishSeal(Tag* tag);
    // Decryption: false (and OK) when the tag does not match; the bytes already produced by
    // update() must then be treated as garbage.
    Result<bool> finishOpen(const Tag& tag);

    bool encrypting() const { return encrypt_; }

  private:
    struct CtxFree {
        void operator()(EVP_CIPHER_CTX* c) const;
    };
    Gcm(EVP_CIPHER_CTX* ctx, bool encrypt) : ctx_(ctx), encrypt_(encrypt) {}
    std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx_;
    bool encrypt_ = true;
};

// ---------------------------------------------------------------- key schedule

// Key schedule (labels are ASCII without a terminator; integers little-endian):
//   PRK           = HKDF-Extract(salt = client_nonce || server_nonce, IKM = auth key)
//   secret[dir]   = HKDF-Expand(PRK, "atlas-seal-v1 c2l" | "atlas-seal-v1 l2c"
//                               || session_id u64 || listen_id u64, 32)
//   key(dir, s, e, g) = HKDF-Expand(secret[dir], "atlas-seal-v1 key"
//                               || stream u16 || epoch u32 || generation u32, 32)
// Both nonces are fresh per session (RAND_bytes on each side), so no two sessions share a
// secret even when one side's nonce repeats. Immutable after derive(): may be shared by
// threads. The secrets are wiped when the object is destroyed.
class SessionSecrets {
  public:
    static Result<SessionSecrets> derive(std::string_view auth_key, const AuthContext& ctx);
    SessionSecrets(const SessionSecrets&) = default;
    SessionSecrets& operator=(const SessionSecrets&) = default;
    ~SessionSecrets();

    Result<Key> trafficKey(Direction dir, uint16_t stream, uint32_t epoch,
                           uint32_t generation) const;

  private:
    SessionSecrets() = default;
    std::array<Key, 2> secret_{};
};

// Nonce of one frame part: stream u16 || epoch u32 || (frame * 2 + part) u48, big-endian.
// `frame` counts frames since the current key (generation) started; part 0 seals the header,
// part 1 the payload. The generation is not in the nonce: each generation has its own key.
Iv makeIv(uint16_t stream, uint32_t epoch, uint64_t frame, int part);

// When each stream rekeys. Both ends must use the same values (the transport fixes them in
// code; a test may shrink them).
struct Limits {
    // Frames under one key, at most kMaxFramesPerKey.
    uint64_t frames_per_key = 1ull << 32;
    // Payload bytes under one key: the next frame starts a new key once this many have been
    // sealed. 2^36 bytes = 2^32 AES blocks keeps GCM's confidentiality bound below 2^-64.
    uint64_t bytes_per_key = 1ull << 36;
    // Keys per epoch; past the last one, sealing fails with kCounterExhausted.
    uint32_t max_generations = 0xFFFFFFFFu;
};

// Where one frame was sealed: enough to derive its key and nonces again (reopen()).
struct SealPosition {
    uint16_t stream = 0;
    uint32_t epoch = 0;
    uint32_t generation = 0;
    uint64_t frame = 0;  // within the generation
};

// The shared nonce/rekey rule of one stream direction (one definition for both ends).
class StreamSchedule {
  public:
    StreamSchedule(uint16_t stream, Limits limits) : stream_(stream), limits_(limits) {}
    static Status validate(const Limits& limits);

    // The position of the next frame; *rekey is set when it starts a new generation. Empty
    // past the last generation (the counter is exhausted). Does not advance.
    std::optional<SealPosition> next(bool* rekey) const;
    // Commits the frame at `pos` (as returned by next()) carrying `payload_bytes`.
    void advance(const SealPosition& pos, uint64_t payload_bytes);
    // Starts `epoch` (must be greater than the current one): generation and counter restart.
    void restart(uint32_t epoch);

    uint16_t stream() const { return stream_; }
    uint32_t epoch() const { return epoch_; }
    uint32_t generation() const { return generation_; }

  private:
    uint16_t stream_;
    Limits limits_;
    uint32_t epoch_ = 0;
    uint32_t generation_ = 0;
    uint64_t frames_ = 0;  // sealed under the current generation
    uint64_t bytes_ = 0;
};

// Shared state of both stream ends: secrets, schedule, cipher, sticky failure.
class StreamCipherBase {
  public:
    uint16_t stream() const { return schedule_.stream(); }
    uint32_t epoch() const { return schedule_.epoch(); }
    uint32_t generation() const { return schedule_.generation(); }
    size_t headerBytes() const { return header_bytes_; }
    size_t prefixBytes() const { return seal::prefixBytes(header_bytes_); }
    // The first failure since the last restart(); kNone while healthy.
    SealError error() const { return error_; }
    const Status& failure() const { return failure_; }

  protected:
    StreamCipherBase(const SessionSecrets& secrets, Direction dir, uint16_t stream,
                     size_t header_bytes, Limits limits, Gcm gcm);
    // create() of both ends: validates the shape, keys epoch 0.
    template <typename End>
    static Result<End> make(const SessionSecrets& secrets, Direction dir, uint16_t stream,
                            size_t header_bytes, Limits limits, bool encrypt);
    // Derives and installs the key of pos's generation.
    Status keyFor(const SealPosition& pos);
    // Positions the next frame and rekeys the cipher if the schedule says so.
    Result<SealPosition> startFrame();
    Status restartEpoch(uint32_t epoch);
    Status fail(SealError kind, Status st);
    Status failMisuse(const std::string& what);
    Status checkHealthy() const;
    std::string where(const SealPosition& pos) const;

    SessionSecrets secrets_;
    Direction dir_;
    size_t header_bytes_;
    StreamSchedule schedule_;
    Gcm gcm_;
    bool keyed_ = false;  // gcm_ holds the key of schedule_'s current generation
    SealError error_ = SealError::kNone;
    Status failure_;
};

// Sender end of one stream direction. Owned by the thread that writes the stream; not
// thread-safe; never blocks.
//
// Contract: frames must be written to the stream in exactly the order they were sealed, each
// whole. A frame sealed but not written whole (the stream was lost) ends the epoch: call
// restart() with the stream's next epoch before sealing for the re-established stream, and
// reseal what must be resent (reopen() recovers it).
class StreamSealer : public StreamCipherBase {
  public:
    static Result<StreamSealer> create(const SessionSecrets& secrets, Direction dir,
                                       uint16_t stream, size_t header_bytes, Limits limits = {});

    // Seals one frame: `prefix` (prefixBytes()) receives the sealed header and both tags;
    // `dst` receives the payload ciphertext (dst.size() == src.size(); dst may be src itself,
    // but not a partial overlap). `header` is headerBytes() plaintext bytes; it becomes the
    // payload's AAD. *where (optional) tells where the frame sits in the key schedule.
    Status seal(std::span<const uint8_t> header, std::span<const uint8_t> src,
                std::span<uint8_t> dst, std::span<uint8_t> prefix, SealPosition* where = nullptr);
    Status sealInPlace(std::span<const uint8_t> header, std::span<uint8_t> payload,
                       std::span<uint8_t> prefix, SealPosition* where = nullptr) {
        return seal(header, payload, payload, prefix, where);
    }
    // The stream was re-established as `epoch` (> epoch()): counters restart under a new key.
    Status restart(uint32_t epoch) { return restartEpoch(epoch); }

  private:
    friend class StreamCipherBase;
    StreamSealer(const SessionSecrets& secrets, Direction dir, uint16_t stream, size_t header_bytes,
                 Limits limits, Gcm gcm)
        : StreamCipherBase(secrets, dir, stream, header_bytes, limits, std::move(gcm)) {}
};

// Receiver end of one stream direction. Owned by the thread that reads the stream; not
// thread-safe; never blocks. Per frame, in this order:
//   openPrefix(prefix)      prefixBytes() read from the stream, decrypted in place: on OK its
//                           first headerBytes() bytes are the plaintext header. Decode it.
//   beginPayload(L)         L = the payload length that header announces (validated first).
//   decrypt(piece) ...      consecutive pieces of the payload, each decrypted in place as it
//                           arrives (e.g. each partial recv completion into the posted buffer);
//                           any sizes, summing to exactly L.
//   finish()                checks the payload tag.
//
// Contract: until finish() returns OK the decrypted bytes are unauthenticated. The caller must
// not complete the receive, count them as delivered, or act on them; on a failure it fails the
// comm. A header from a failed openPrefix() is garbage and must not be decoded. After any
// failure every call fails the same way until restart(). A stream lost mid-frame: call
// restart() with the re-established stream's epoch; the partial frame is abandoned (its bytes
// in the posted buffer are not delivered and will be overwritten by the resend).
class StreamOpener : public StreamCipherBase {
  public:
    static Result<StreamOpener> create(const SessionSecrets& secrets, Direction dir,
                                       uint16_t stream, size_t header_bytes, Limits limits = {});

    Status openPrefix(std::span<uint8_t> prefix);
    Status beginPayload(uint64_t length);
    Status decrypt(std::span<uint8_t> piece);
    Status finish();
    Status restart(uint32_t epoch);

    // Payload bytes still expected by decrypt() (after beginPayload()).
    uint64_t remaining() const { return remaining_; }
    bool midFrame() const { return phase_ != Phase::kIdle; }

  private:
    friend class StreamCipherBase;
    enum class Phase { kIdle, kHeaderOpen, kPayload };
    StreamOpener(const SessionSecrets& secrets, Direction dir, uint16_t stream, size_t header_bytes,
                 Limits limits, Gcm gcm)
        : StreamCipherBase(secrets, dir, stream, header_bytes, limits, std::move(gcm)) {}
    Phase phase_ = Phase::kIdle;
    SealPosition pos_;
    Tag payload_tag_{};
    uint64_t length_ = 0;
    uint64_t remaining_ = 0;
};

// Opens, in place, a frame this side sealed at `where` (its prefix and payload as seal()
// wrote them), verifying both tags: on OK the prefix starts with the plaintext header and the
// payload is plaintext again, ready to be sealed for another stream or epoch. For resends out
// of a retransmit store that holds ciphertext. Derives the key afresh (a few microseconds) and
// allocates a cipher context, so it is for the rare path only.
Status reopen(const SessionSecrets& secrets, Direction dir, size_t header_bytes,
              const SealPosition& where, std::span<uint8_t> prefix, std::span<uint8_t> payload);

}  // namespace atlas::transport::seal
