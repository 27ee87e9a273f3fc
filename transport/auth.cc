#include "transport/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>
#include <vector>

namespace atlas::transport {
namespace {

// Appends fixed-width fields into one message buffer for the MAC.
class MacInput {
  public:
    explicit MacInput(const char* label) { add(label, std::strlen(label) + 1); }
    void add(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        bytes_.insert(bytes_.end(), b, b + n);
    }
    template <typename T>
    void addValue(T v) {
        add(&v, sizeof(v));
    }
    void addContext(const AuthContext& ctx) {
        addValue(ctx.listen_id);
        addValue(ctx.session_id);
        add(ctx.client_nonce.data(), ctx.client_nonce.size());
        add(ctx.server_nonce.data(), ctx.server_nonce.size());
    }
    wire::Mac mac(const std::string& key) const {
        wire::Mac out{};
        unsigned int len = 0;
        HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), bytes_.data(), bytes_.size(),
             out.data(), &len);
        return out;
    }

  private:
    std::vector<uint8_t> bytes_;
};

}  // namespace

Status randomBytes(void* out, size_t len) {
    if (RAND_bytes(static_cast<unsigned char*>(out), static_cast<int>(len)) != 1) {
        return {Code::kSystem, "RAND_bytes failed: no entropy for connection nonces"};
    }
    return Status::ok();
}

Result<uint64_t> randomU64() {
    uint64_t v = 0;
    ATLAS_RETURN_IF_ERROR(randomBytes(&v, sizeof(v)));
    return v;
}

wire::Mac serverMac(const std::string& key, const AuthContext& ctx, uint16_t rejoin_port,
                    uint8_t modes) {
    MacInput in("atlas-server-v2");
    in.addContext(ctx);
    in.addValue(rejoin_port);
    in.addValue(modes);
    return in.mac(key);
}

wire::Mac clientMac(const std::string& key, const AuthContext& ctx, const wire::Config& plan,
                    uint8_t modes) {
    MacInput in("atlas-client-v2");
    in.addContext(ctx);
    in.addValue(plan.nstreams);
    in.addValue(plan.chunk_bytes);
    in.addValue(plan.inline_bytes);
    in.addValue(plan.rtt_ns);
    in.addValue(modes);
    return in.mac(key);
}

wire::Mac dataMac(const std::string& key, const AuthContext& ctx, uint32_t index) {
    MacInput in("atlas-data-v1");
    in.addContext(ctx);
    in.addValue(index);
    return in.mac(key);
}

namespace {
wire::Mac rejoinMac(const char* label, const std::string& key, const AuthContext& ctx,
                    uint32_t index, uint32_t epoch, const RejoinNonces& n) {
    MacInput in(label);
    in.addContext(ctx);
    in.addValue(index);
    in.addValue(epoch);
    in.add(n.client.data(), n.client.size());
    in.add(n.server.data(), n.server.size());
    return in.mac(key);
}
}  // namespace

wire::Mac rejoinServerMac(const std::string& key, const AuthContext& ctx, uint32_t index,
                          uint32_t epoch, const RejoinNonces& n) {
    return rejoinMac("atlas-rejoin-server-v1", key, ctx, index, epoch, n);
}

wire::Mac rejoinClientMac(const std::string& key, const AuthContext& ctx, uint32_t index,
                          uint32_t epoch, const RejoinNonces& n) {
    return rejoinMac("atlas-rejoin-client-v1", key, ctx, index, epoch, n);
}

bool macEqual(const wire::Mac& a, const wire::Mac& b) {
    return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace atlas::transport
