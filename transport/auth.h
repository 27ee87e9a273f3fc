// Connection authentication: HMAC-SHA256 challenge/response over a pre-shared key
// (ATLAS_AUTH_KEY / ATLAS_AUTH_KEY_FILE), via OpenSSL's libcrypto.
//
// Protocol (docs/protocol.md): the connector sends a fresh client nonce; the listener answers
// with a fresh server nonce and proves the key with server_mac over both nonces and the
// connection ids; the connector verifies it and proves the key with client_mac (which also
// binds the stream plan it sends). Each data stream proves the key with a MAC bound to its
// index and the session's nonces, so streams cannot be replayed into another session or
// stream index. Labels differ per role so one MAC can never be reflected as another.
#pragma once

#include <cstdint>
#include <string>

#include "transport/wire.h"

namespace atlas::transport {

// Cryptographically random bytes (RAND_bytes); aborts the connection attempt on failure.
Status randomBytes(void* out, size_t len);
Result<uint64_t> randomU64();

struct AuthContext {
    uint64_t listen_id = 0;
    uint64_t session_id = 0;
    wire::Nonce client_nonce{};
    wire::Nonce server_nonce{};
};

// `modes` binds both sides' settings the handshake negotiates: bit 0 the connector encrypts
// (Hello.encrypt), bit 1 the listener does (HelloAck.encrypt), so a man in the middle cannot
// strip encryption from one side unnoticed.
wire::Mac serverMac(const std::string& key, const AuthContext& ctx, uint16_t rejoin_port,
                    uint8_t modes);
wire::Mac clientMac(const std::string& key, const AuthContext& ctx, const wire::Config& plan,
                    uint8_t modes);
wire::Mac dataMac(const std::string& key, const AuthContext& ctx, uint32_t index);

// Rejoin of stream `index` at `epoch` (docs/protocol.md, "Rejoin"): both MACs bind the
// session's setup nonces, the stream and epoch, and the two fresh rejoin nonces, so a
// recorded rejoin cannot be replayed (the listener's nonce is new each time) nor moved to
// another stream, epoch or session.
struct RejoinNonces {
    wire::Nonce client{};
    wire::Nonce server{};
};
wire::Mac rejoinServerMac(const std::string& key, const AuthContext& ctx, uint32_t index,
                          uint32_t epoch, const RejoinNonces& n);
wire::Mac rejoinClientMac(const std::string& key, const AuthContext& ctx, uint32_t index,
                          uint32_t epoch, const RejoinNonces& n);

// Constant-time comparison.
bool macEqual(const wire::Mac& a, const wire::Mac& b);

}  // namespace atlas::transport
