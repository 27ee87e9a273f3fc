// The arbitration protocol between the plugin (arbiter client) and atlas-arbiter: a small
// binary request/grant/release protocol over one TCP connection per plugin process.
//
// Framing: every message is a 12-byte header followed by a body of a fixed size per type
// (kError alone carries variable text). All integers are little-endian.
//
//   offset 0  4 bytes  magic "AtAr" (the ASCII bytes, so the server can tell it from "GET ")
//   offset 4  u8       version (kMinProtocolVersion .. kProtocolVersion; see "Versions")
//   offset 5  u8       type (MsgType)
//   offset 6  u16      reserved, must be 0
//   offset 8  u32      body length (must equal the type's size; kError: 4..kMaxErrorBody)
//
// Conversation (docs/arbitration.md has the diagrams):
//   C: Hello{client nonce, pid, name}
//   S: Challenge{server nonce, server MAC, policy, lease, heartbeat, session id}
//   C: Auth{client MAC}                 (zeros when the client has no key)
//   S: Welcome{session id}  or  Error{...} and close
//   then, in any order:  C: Open / Request / Release / Close / Ping / Train
//                        S: Grant / Pong / Error
//
// Authentication (when the server has a key): HMAC-SHA256 over a role label, both nonces and
// the session id, with the same shared key as the data path (ATLAS_AUTH_KEY). The labels
// differ from the transport's, so a MAC seen on one protocol is useless on the other.
//
// Versions: 1 is the original protocol; 2 adds the flow's admission priority to Open (a byte
// that was reserved). The client offers its highest version in Hello's header; the server
// answers, and encodes the whole session, at that version when it speaks it. A version-1
// server refuses a version-2 Hello with a protocol Error; the client then reconnects at once
// offering 1 (ArbiterClient), and its flows' priorities are not sent (the server gives them
// sched::kDefaultPriority). A version-2 server serves version-1 clients the same way.
// 3 pools the measured link rate across the DC: a client reports the message trains its
// receivers measured (Train, a type that needs version 3), the server keeps one estimate per
// link over every session's trains (sched::PathRate), and every Grant carries that link's
// estimate in what was its reserved word. A refused Hello is retried one version lower, so
// a version-3 client reaches a version-2 server at 2 and a version-1 server at 1; below 3
// no trains are sent and each process learns the rate on its own.
//
// Untrusted input: Decoder accepts arbitrary bytes (fuzzed by fuzz_arbiter_protocol); a
// malformed frame is a protocol error that ends the connection, never undefined behaviour.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"

namespace atlas::arbiter {

inline constexpr uint8_t kMagic[4] = {'A', 't', 'A', 'r'};
inline constexpr uint8_t kProtocolVersion = 3;     // the highest this build speaks
inline constexpr uint8_t kMinProtocolVersion = 1;  // the lowest it still speaks
inline constexpr uint8_t kPriorityLevels = 8;      // = sched::kPriorityLevels
inline constexpr uint8_t kDefaultPriority = 1;     // = sched::kDefaultPriority
inline constexpr size_t kHeaderBytes = 12;
inline constexpr size_t kNameBytes = 32;  // client name, link name: NUL-padded
inline constexpr size_t kMaxErrorText = 200;

using Nonce = std::array<uint8_t, 16>;
using Mac = std::array<uint8_t, 32>;

enum class MsgType : uint8_t {
    kHello = 1,
    kChallenge = 2,
    kAuth = 3,
    kWelcome = 4,
    kOpen = 5,
    kRequest = 6,
    kGrant = 7,
    kRelease = 8,
    kClose = 9,
    kPing = 10,
    kPong = 11,
    kError = 12,
    kTrain = 13,  // version 3
};

// The policy the server runs, announced in the Challenge. Values match sched::PolicyKind.
enum class WirePolicy : uint8_t { kFair = 0, kTemporal = 1, kWorkload = 2 };

// Flow class on the wire (sched::FlowClass without the scheduler dependency).
struct WireClass {
    int32_t pipeline = 0;
    int32_t stage = 0;
    uint8_t direction = 0;                // 0 forward, 1 backward
    uint8_t priority = kDefaultPriority;  // < kPriorityLevels, 0 first; version 2 only
    friend bool operator==(const WireClass&, const WireClass&) = default;
};

struct Hello {
    Nonce client_nonce{};
    uint32_t pid = 0;
    std::string name;  // <= kNameBytes, printable; for logs and metrics
};
struct Challenge {
    Nonce server_nonce{};
    Mac server_mac{};  // zeros when the server has no key
    WirePolicy policy = WirePolicy::kTemporal;
    bool auth_required = false;
    Nanos lease_ns = 0;      // a session silent this long is dropped (its grants revoked)
    Nanos heartbeat_ns = 0;  // the client pings at least this often
    uint64_t session_id = 0;
};
struct Auth {
    Mac client_mac{};
};
struct Welcome {
    uint64_t session_id = 0;
};
// Declares a flow of this session (flow ids are chosen by the client, unique per session).
struct Open {
    uint32_t flow = 0;
    WireClass cls;
    std::string link;  // which bottleneck: 1..kNameBytes printable bytes
};
// The flow has `bytes` queued and asks for the link.
struct Request {
    uint32_t flow = 0;
    uint64_t bytes = 0;
};
// The flow may send for slot_ns from receipt (0 = until it releases). seq identifies the grant.
// rate_bps (version 3; 0 before): the server's estimate of the flow's link rate over every
// session's trains, 0 = unknown. On the wire in kbit/s (a u32: up to 4.29 Tbit/s, larger
// values saturate), so it decodes as a multiple of 1000.
struct Grant {
    uint32_t flow = 0;
    uint64_t seq = 0;
    Nanos slot_ns = 0;
    uint64_t rate_bps = 0;
};
// The flow is done with grant `seq` (its queue drained or its slot ended); `bytes` were sent.
struct Release {
    uint32_t flow = 0;
    uint64_t seq = 0;
    uint64_t bytes = 0;
};
struct Close {
    uint32_t flow = 0;
};
struct Ping {
    uint64_t token = 0;
};
struct Pong {
    uint64_t token = 0;
};
struct Error {
    uint16_t code = 0;  // ErrorCode
    std::string text;   // <= kMaxErrorText, printable
};
// Version 3. One message train a receiver of this client measured on `link` (docs/
// protocol.md "Confirmation"): `bytes` arrived over `dispersion_ns`, ending about when the
// client sends this. Both are positive.
struct Train {
    std::string link;  // validLinkName
    uint64_t bytes = 0;
    Nanos dispersion_ns = 0;
};

enum class ErrorCode : uint16_t {
    kProtocol = 1,       // malformed or unexpected message
    kAuthFailed = 2,     // missing or wrong MAC
    kBadFlow = 3,        // unknown flow, duplicate open, invalid class or link
    kOverloaded = 4,     // too many sessions or flows
    kServerFailure = 5,  // the arbiter cannot serve the session (its RNG failed); retry later
};

// In MsgType order (typeOf is the index + 1).
using Message = std::variant<Hello, Challenge, Auth, Welcome, Open, Request, Grant, Release, Close,
                             Ping, Pong, Error, Train>;

MsgType typeOf(const Message& m);
const char* msgTypeName(MsgType t);

// Appends the framed message to `out`, at protocol `version` (kMinProtocolVersion ..
// kProtocolVersion; version 1 leaves Open's priority out, versions below 3 Grant's rate; a
// Train needs version 3: below it nothing is appended). Strings longer than their field
// are truncated; non-printable bytes are replaced by '?', a priority out of range by the
// last level, so whatever is encoded also decodes.
void encode(const Message& m, std::vector<uint8_t>* out, uint8_t version = kProtocolVersion);
std::vector<uint8_t> encode(const Message& m, uint8_t version = kProtocolVersion);

// Incremental decoder for one byte stream. Feed bytes as they arrive; next() yields complete
// messages. After an error the decoder stays failed (the connection must be closed).
class Decoder {
  public:
    void feed(const uint8_t* data, size_t size);
    // A message, std::nullopt when more bytes are needed, or an error (kRemote) describing the
    // first malformed frame.
    Result<std::optional<Message>> next();
    bool failed() const { return !error_.isOk(); }
    size_t buffered() const { return buf_.size() - pos_; }
    // The header version of the last message next() returned (0 before the first): a
    // server answers a Hello at this version.
    uint8_t lastVersion() const { return last_version_; }

  private:
    std::vector<uint8_t> buf_;
    size_t pos_ = 0;
    Status error_;
    uint8_t last_version_ = 0;
};

// Whether `text` is a valid link name (1..kNameBytes bytes of [A-Za-z0-9._:>/-]).
bool validLinkName(std::string_view text);

// ---------------------------------------------------------------------------------------------
// Authentication helpers (OpenSSL HMAC-SHA256; constant-time comparison).

// Fills `out` with `len` cryptographically random bytes; false when the generator fails.
using RandomFill = bool (*)(uint8_t* out, size_t len);
bool systemRandomFill(uint8_t* out, size_t len);  // OpenSSL's RAND_bytes
// A fresh nonce from `fill` (the configs carry it: the seam tests use), or kSystem when the
// RNG fails. A zero or repeated nonce would let a recorded handshake be replayed, so the
// caller fails the connection with this error; it never sends a made-up nonce.
Result<Nonce> randomNonce(RandomFill fill = systemRandomFill);
Mac serverProof(const std::string& key, const Nonce& client, const Nonce& server,
                uint64_t session_id);
Mac clientProof(const std::string& key, const Nonce& client, const Nonce& server,
                uint64_t session_id);
bool macEqual(const Mac& a, const Mac& b);

}  // namespace atlas::arbiter
