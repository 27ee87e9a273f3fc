// The two ends of one sealed stream direction (transport/seal.h), and reopen() for resends.
#include <openssl/crypto.h>

#include <cstring>

#include "transport/seal.h"

namespace atlas::transport::seal {
namespace {

Status checkShape(size_t header_bytes, const Limits& limits) {
    if (header_bytes == 0 || header_bytes > kMaxHeaderBytes) {
        return {Code::kInvalidArgument, "seal: header size must be 1.." +
                                            std::to_string(kMaxHeaderBytes) + " bytes, not " +
                                            std::to_string(header_bytes)};
    }
    return StreamSchedule::validate(limits);
}

bool overlaps(const void* a, size_t na, const void* b, size_t nb) {
    const auto x = reinterpret_cast<uintptr_t>(a);
    const auto y = reinterpret_cast<uintptr_t>(b);
    return na > 0 && nb > 0 && x < y + nb && y < x + na;
}

Iv ivOf(const SealPosition& p, int part) {
    return makeIv(p.stream, p.epoch, p.frame, part);
}

Tag tagAt(const uint8_t* p) {
    Tag t;
    std::memcpy(t.data(), p, kTagBytes);
    return t;
}

}  // namespace

template <typename End>
Result<End> StreamCipherBase::make(const SessionSecrets& secrets, Direction dir, uint16_t stream,
                                   size_t header_bytes, Limits limits, bool encrypt) {
    ATLAS_RETURN_IF_ERROR(checkShape(header_bytes, limits));
    auto gcm = Gcm::create(encrypt);
    if (!gcm) {
        return gcm.status();
    }
    End end(secrets, dir, stream, header_bytes, limits, std::move(*gcm));
    ATLAS_RETURN_IF_ERROR(end.keyFor({stream, 0, 0, 0}));
    return end;
}

// ---------------------------------------------------------------- StreamSealer

Result<StreamSealer> StreamSealer::create(const SessionSecrets& secrets, Direction dir,
                                          uint16_t stream, size_t header_bytes, Limits limits) {
    return make<StreamSealer>(secrets, dir, stream, header_bytes, limits, true);
}

Status StreamSealer::seal(std::span<const uint8_t> header, std::span<const uint8_t> src,
                          std::span<uint8_t> dst, std::span<uint8_t> prefix, SealPosition* where) {
    ATLAS_RETURN_IF_ERROR(checkHealthy());
    const size_t h = header_bytes_;
    if (header.size() != h || prefix.size() != prefixBytes()) {
        return failMisuse("seal() takes a " + std::to_string(h) + "-byte header and a " +
                          std::to_string(prefixBytes()) + "-byte prefix, not " +
                          std::to_string(header.size()) + " and " + std::to_string(prefix.size()));
    }
    if (dst.size() != src.size() || src.size() > kMaxPayloadBytes) {
        return failMisuse("seal() needs dst.size() == src.size() <= 2^36 - 32, not " +
                          std::to_string(dst.size()) + " and " + std::to_string(src.size()));
    }
    // In place means exactly in place (EVP's rule); the header may be the prefix's own first
    // bytes (it is encrypted last, after serving as the payload's AAD).
    if ((src.data() != dst.data() && overlaps(src.data(), src.size(), dst.data(), dst.size())) ||
        overlaps(dst.data(), dst.size(), prefix.data(), prefix.size()) ||
        overlaps(src.data(), src.size(), prefix.data(), prefix.size()) ||
        (header.data() != prefix.data() && overlaps(header.data(), h, prefix.data(), h))) {
        return failMisuse("seal() buffers overlap partially");
    }
    auto pos = startFrame();
    if (!pos) {
        return pos.status();
    }
    uint8_t* out = prefix.data();
    Tag tag;
    Status st = gcm_.begin(ivOf(*pos, 1), header);
    if (st.isOk()) {
        st = gcm_.update(src.data(), dst.data(), src.size());
    }
    if (st.isOk()) {
        st = gcm_.finishSeal(&tag);
    }
    if (st.isOk()) {
        std::memcpy(out + h + kTagBytes, tag.data(), kTagBytes);
        st = gcm_.begin(ivOf(*pos, 0), {});
    }
    if (st.isOk()) {
        st = gcm_.update(header.data(), out, h);
    }
    if (st.isOk()) {
        st = gcm_.finishSeal(&tag);
    }
    if (!st.isOk()) {
        return fail(SealError::kCrypto, st);
    }
    std::memcpy(out + h, tag.data(), kTagBytes);
    schedule_.advance(*pos, src.size());
    if (where != nullptr) {
        *where = *pos;
    }
    return Status::ok();
}

// ---------------------------------------------------------------- StreamOpener

Result<StreamOpener> StreamOpener::create(const SessionSecrets& secrets, Direction dir,
                                          uint16_t stream, size_t header_bytes, Limits limits) {
    return make<StreamOpener>(secrets, dir, stream, header_bytes, limits, false);
}

Status StreamOpener::openPrefix(std::span<uint8_t> prefix) {
    ATLAS_RETURN_IF_ERROR(checkHealthy());
    if (phase_ != Phase::kIdle) {
        return failMisuse("openPrefix() before the previous frame's finish()");
    }
    if (prefix.size() != prefixBytes()) {
        return failMisuse("openPrefix() takes " + std::to_string(prefixBytes()) + " bytes, not " +
                          std::to_string(prefix.size()));
    }
    auto pos = startFrame();
    if (!pos) {
        return pos.status();
    }
    const size_t h = header_bytes_;
    uint8_t* p = prefix.data();
    Status st = gcm_.begin(ivOf(*pos, 0), {});
    if (st.isOk()) {
        st = gcm_.update(p, p, h);
    }
    if (!st.isOk()) {
        return fail(SealError::kCrypto, st);
    }
    auto ok = gcm_.finishOpen(tagAt(p + h));
    if (!ok) {
        return fail(SealError::kCrypto, ok.status());
    }
    if (!*ok) {
        // Leave nothing decodable behind for a caller that ignores the status.
        std::memset(p, 0, h);
        return fail(SealError::kHeaderTag,
                    {Code::kRemote, "sealed frame header failed authentication on " + where(*pos) +
                                        ": the frame was altered, replayed, reordered or "
                                        "dropped, or the peer seals with another key"});
    }
    payload_tag_ = tagAt(p + h + kTagBytes);
    // The payload's AAD is the plaintext header: feed it now, while the caller's buffer holds it.
    st = gcm_.begin(ivOf(*pos, 1), {p, h});
    if (!st.isOk()) {
        return fail(SealError::kCrypto, st);
    }
    pos_ = *pos;
    phase_ = Phase::kHeaderOpen;
    return Status::ok();
}

Status StreamOpener::beginPayload(uint64_t length) {
    ATLAS_RETURN_IF_ERROR(checkHealthy());
    if (phase_ != Phase::kHeaderOpen) {
        return failMisuse("beginPayload() without an open header");
    }
    if (length > kMaxPayloadBytes) {
        return failMisuse("payload of " + std::to_string(length) + " bytes exceeds 2^36 - 32");
    }
    length_ = length;
    remaining_ = length;
    phase_ = Phase::kPayload;
    return Status::ok();
}

Status StreamOpener::decrypt(std::span<uint8_t> piece) {
    ATLAS_RETURN_IF_ERROR(checkHealthy());
    if (phase_ != Phase::kPayload) {
        return failMisuse("decrypt() outside a payload");
    }
    if (piece.size() > remaining_) {
        return failMisuse("decrypt() piece of " + std::to_string(piece.size()) +
                          " bytes runs past the payload (" + std::to_string(remaining_) + " left)");
    }
    Status st = gcm_.update(piece.data(), piece.data(), piece.size());
    if (!st.isOk()) {
        return fail(SealError::kCrypto, st);
    }
    remaining_ -= piece.size();
    return Status::ok();
}

Status StreamOpener::finish() {
    ATLAS_RETURN_IF_ERROR(checkHealthy());
    if (phase_ != Phase::kPayload || remaining_ != 0) {
        return failMisuse(phase_ != Phase::kPayload
                              ? std::string("finish() outside a payload")
                              : "finish() with " + std::to_string(remaining_) +
                                    " payload bytes not yet decrypted");
    }
    auto ok = gcm_.finishOpen(payload_tag_);
    if (!ok) {
        return fail(SealError::kCrypto, ok.status());
    }
    if (!*ok) {
        return fail(SealError::kPayloadTag,
                    {Code::kRemote, "sealed frame payload failed authentication on " + where(pos_) +
                                        ": the payload was altered or truncated, or spliced "
                                        "onto another frame's header"});
    }
    schedule_.advance(pos_, length_);
    phase_ = Phase::kIdle;
    return Status::ok();
}

Status StreamOpener::restart(uint32_t epoch) {
    ATLAS_RETURN_IF_ERROR(restartEpoch(epoch));
    phase_ = Phase::kIdle;
    length_ = 0;
    remaining_ = 0;
    return Status::ok();
}

// ---------------------------------------------------------------- reopen

Status reopen(const SessionSecrets& secrets, Direction dir, size_t header_bytes,
              const SealPosition& where, std::span<uint8_t> prefix, std::span<uint8_t> payload) {
    ATLAS_RETURN_IF_ERROR(checkShape(header_bytes, Limits{}));
    if (prefix.size() != prefixBytes(header_bytes) || payload.size() > kMaxPayloadBytes ||
        overlaps(prefix.data(), prefix.size(), payload.data(), payload.size())) {
        return {Code::kInternal, "seal API misuse: reopen() needs a " +
                                     std::to_string(prefixBytes(header_bytes)) +
                                     "-byte prefix apart from the payload"};
    }
    auto gcm = Gcm::create(false);
    if (!gcm) {
        return gcm.status();
    }
    auto key = secrets.trafficKey(dir, where.stream, where.epoch, where.generation);
    if (!key) {
        return key.status();
    }
    Status st = gcm->setKey(*key);
    OPENSSL_cleanse(key->data(), key->size());
    ATLAS_RETURN_IF_ERROR(st);
    uint8_t* p = prefix.data();
    const size_t h = header_bytes;
    ATLAS_RETURN_IF_ERROR(gcm->begin(ivOf(where, 0), {}));
    ATLAS_RETURN_IF_ERROR(gcm->update(p, p, h));
    auto ok = gcm->finishOpen(tagAt(p + h));
    if (ok && *ok) {
        ATLAS_RETURN_IF_ERROR(gcm->begin(ivOf(where, 1), {p, h}));
        ATLAS_RETURN_IF_ERROR(gcm->update(payload.data(), payload.data(), payload.size()));
        ok = gcm->finishOpen(tagAt(p + h + kTagBytes));
    }
    if (!ok) {
        return ok.status();
    }
    if (!*ok) {
        return {Code::kInternal, "retransmit store corrupted: a frame sealed on stream " +
                                     std::to_string(where.stream) + " epoch " +
                                     std::to_string(where.epoch) + " frame " +
                                     std::to_string(where.frame) + " no longer authenticates"};
    }
    return Status::ok();
}

}  // namespace atlas::transport::seal
