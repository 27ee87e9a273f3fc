// The ATLAS_* configuration registry: every environment variable the plugin reads is declared
// exactly once, in ATLAS_PARAM_LIST below, with its type, default, accepted range and a doc
// string. docs/env.md documents each one (a unit test checks that it mentions every key).
//
// Adding a variable is one line in ATLAS_PARAM_LIST: it creates the Params field, the parser,
// the range check, the INFO logging and a compile-time guard that rejects a duplicate key.
//
// Parsing happens once, at the first init, from getenv (NCCL has already setenv()ed the
// values of /etc/nccl.conf and NCCL_CONF_FILE by then). An empty value counts as unset. Any
// invalid value fails init with a message that names the variable, the bad value and what is
// accepted. Libraries never read the environment: they get the plain structs built here.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/status.h"
#include "plugin/devices.h"
#include "scheduler/bubble_predictor.h"
#include "transport/net.h"

namespace atlas::plugin {

constexpr uint64_t kKiB = 1024;
constexpr uint64_t kMiB = 1024 * kKiB;
constexpr uint64_t kGiB = 1024 * kMiB;

// The bubble pipeline's guard band (one definition: scheduler/bubble_predictor.h).
constexpr uint64_t kDefaultBubbleGuardUs =
    static_cast<uint64_t>(sched::kDefaultBubbleGuardNs / kNsPerUs);

// Value kinds. `Value` is the Params field type; `Bound` the type of the range limits.
namespace param_kinds {
struct String {  // any text
    using Value = std::string;
    using Bound = int;
};
struct Secret {  // any text, never logged (only its length)
    using Value = std::string;
    using Bound = int;
};
struct Bool {  // true/false/1/0/yes/no, case-insensitive
    using Value = bool;
    using Bound = int;
};
struct Uint {  // decimal digits only: a leading '-' or '+' is rejected
    using Value = uint64_t;
    using Bound = uint64_t;
};
struct Int {  // optional '-', decimal digits
    using Value = int64_t;
    using Bound = int64_t;
};
struct Size {  // bytes: digits with an optional K/M/G suffix (binary: 1K = 1024)
    using Value = uint64_t;
    using Bound = uint64_t;
};
struct Double {  // finite decimal number
    using Value = double;
    using Bound = double;
};
template <typename E>
struct Enum {  // one of EnumChoices<E>::kValues, case-insensitive
    using Value = E;
    using Bound = int;
};
}  // namespace param_kinds

template <typename E>
struct EnumChoice {
    const char* name;
    E value;
};
template <typename E>
struct EnumChoices;  // specialize with `static constexpr EnumChoice<E> kValues[]`

template <>
struct EnumChoices<AddressFamily> {
    static constexpr EnumChoice<AddressFamily> kValues[] = {
        {"any", AddressFamily::kAny},
        {"AF_INET", AddressFamily::kInet},
        {"AF_INET6", AddressFamily::kInet6},
    };
};
template <>
struct EnumChoices<transport::IoBackend> {
    static constexpr EnumChoice<transport::IoBackend> kValues[] = {
        {"auto", transport::IoBackend::kAuto},
        {"uring", transport::IoBackend::kUring},
        {"epoll", transport::IoBackend::kEpoll},
    };
};
template <>
struct EnumChoices<transport::StripeMode> {
    static constexpr EnumChoice<transport::StripeMode> kValues[] = {
        {"load", transport::StripeMode::kLoadAware},
        {"even", transport::StripeMode::kEven},
    };
};

// X(KEY, field, Kind, default, min, max, doc). min/max are ignored for String, Secret, Bool
// and Enum. Keep docs/env.md in step (the docs test fails otherwise).
#define ATLAS_PARAM_LIST(X)                                                                       \
    X(ATLAS_SOCKET_IFNAME, socket_ifname, String, "", 0, 0,                                       \
      "Interfaces to use: comma-separated name prefixes; leading ^ excludes, leading = "          \
      "matches exactly (NCCL_SOCKET_IFNAME syntax). Unset: every up non-loopback interface "      \
      "except docker*/virbr*, else loopback")                                                     \
    X(ATLAS_SOCKET_FAMILY, socket_family, Enum<AddressFamily>, AddressFamily::kAny, 0, 0,         \
      "Address family of the device addresses")                                                   \
    X(ATLAS_NSTREAMS, nstreams, Uint, 0, 0, 64,                                                   \
      "Data streams per connection; 0 = automatic from the measured RTT and the link rate")       \
    X(ATLAS_MAX_STREAMS, max_streams, Uint, 64, 1, 64,                                            \
      "Upper bound for the automatic stream count")                                               \
    X(ATLAS_SOCKBUF_BYTES, sockbuf_bytes, Size, 0, 0, 1 * kGiB,                                   \
      "SO_SNDBUF/SO_RCVBUF of every stream; 0 = kernel autotuning")                               \
    X(ATLAS_CHUNK_BYTES, chunk_bytes, Size, 512 * kKiB, 4 * kKiB, 64 * kMiB,                      \
      "Striping unit: messages are cut into chunks of this size across the data streams")         \
    X(ATLAS_INLINE_BYTES, inline_bytes, Size, 4 * kKiB, 0, 64 * kKiB,                             \
      "Messages up to this size travel inline on the control stream")                             \
    X(ATLAS_STRIPE, stripe, Enum<transport::StripeMode>, transport::StripeMode::kLoadAware, 0, 0, \
      "Chunk placement: load = least-queued stream, even = NCCL-socket-like even split")          \
    X(ATLAS_ENGINE_THREADS, engine_threads, Uint, 2, 1, 16,                                       \
      "Engine threads per process; they own every socket")                                        \
    X(ATLAS_IO, io, Enum<transport::IoBackend>, transport::IoBackend::kAuto, 0, 0,                \
      "I/O backend: auto = io_uring when the kernel supports it, else epoll")                     \
    X(ATLAS_TIMEOUT_MS, timeout_ms, Uint, 30000, 100, 3600000,                                    \
      "Dead-peer bound in ms (connection setup, keepalive, TCP_USER_TIMEOUT)")                    \
    X(ATLAS_RESEND_BYTES, resend_bytes, Size, 64 * kMiB, 1 * kMiB, 16 * kGiB,                      \
      "Retransmit store per send comm: copies of sent, unconfirmed data kept for resends; "        \
      "full = sends wait for confirmations")                                                      \
    X(ATLAS_AUTH_KEY, auth_key, Secret, "", 0, 0,                                                 \
      "Shared key that authenticates connections; unset = no authentication")                     \
    X(ATLAS_AUTH_KEY_FILE, auth_key_file, String, "", 0, 0,                                       \
      "File holding the shared key (trailing newline stripped); exclusive with ATLAS_AUTH_KEY")   \
    X(ATLAS_ENCRYPT, encrypt, Bool, false, 0, 0,                                                  \
      "Seal every frame with AES-256-GCM (needs ATLAS_AUTH_KEY/_FILE; both sides must agree)")   \
    X(ATLAS_LINK_GBPS, link_gbps, Double, 0.0, 0.0, 100000.0,                                     \
      "Assumed path rate in Gbit/s for the automatic stream rule; 0 = the device speed (10 if below 1)")          \
    X(ATLAS_FAULTS, faults, String, "", 0, 0,                                                     \
      "TEST ONLY: transport fault plan (reset/stall/drop/flip, docs/protocol.md); refused "       \
      "unless ATLAS_TEST_MODE=1")                                                                 \
    X(ATLAS_TEST_MODE, test_mode, Bool, false, 0, 0,                                              \
      "TEST ONLY: declares the process a test, which allows ATLAS_FAULTS")                       \
    X(ATLAS_ABORT_ON_ERROR, abort_on_error, Bool, false, 0, 0,                                    \
      "Debug: abort() on the first error any plugin call returns")                                \
    X(ATLAS_DEBUG_STDERR, debug_stderr, Bool, false, 0, 0,                                        \
      "Mirror plugin log lines to stderr when NCCL provides no logger")                           \
    X(ATLAS_DC_MAP, dc_map, String, "", 0, 0,                                                     \
      "WAN classifier: address prefixes to DC names, e.g. 10.1.0.0/16=east,10.2.0.0/16=west")     \
    X(ATLAS_WAN_RTT_US, wan_rtt_us, Uint, 2000, 0, 10000000,                                      \
      "Without ATLAS_DC_MAP: a send comm whose handshake RTT is at least this is WAN; 0 = all")   \
    X(ATLAS_FLOW_CLASS, flow_class, String, "", 0, 0,                                             \
      "Flow class PIPELINE:STAGE[:fwd|bwd] when NCCL gives no trafficClass; unset = automatic")   \
    X(ATLAS_SHARING, sharing, String, "fair", 0, 0,                                               \
      "WAN link sharing without an arbiter: fair (no gating), temporal, workload (= temporal)")   \
    X(ATLAS_ARBITER, arbiter, String, "", 0, 0,                                                   \
      "atlas-arbiter HOST:PORT for DC-wide arbitration; unset = node-local shared memory")        \
    X(ATLAS_ARBITER_TIMEOUT_MS, arbiter_timeout_ms, Uint, 1000, 10, 600000,                       \
      "Bound on one arbiter connection attempt; WAN flows wait at most this at startup")          \
    X(ATLAS_SLOT_MS, slot_ms, Uint, 250, 0, 3600000,                                              \
      "Node-local arbitration: longest slot of one grant in ms; 0 = until the flow drains")       \
    X(ATLAS_LEASE_MS, lease_ms, Uint, 200, 10, 600000,                                            \
      "Node-local arbitration: a holder process silent this long loses the link")                 \
    X(ATLAS_NODE_SHM, node_shm, String, "atlas-wan", 0, 0,                                        \
      "Name prefix of the node-local arbitration segments in /dev/shm (one per link)")            \
    X(ATLAS_BUBBLES, bubbles, Bool, true, 0, 0,                                                   \
      "Measure GPU-idle intervals on WAN receives, predict the next ones, publish them")          \
    X(ATLAS_BUBBLE_GUARD_US, bubble_guard_us, Uint, kDefaultBubbleGuardUs, 0, 1000000,            \
      "Guard band in us removed from both ends of every predicted idle window")                   \
    X(ATLAS_BUBBLE_CHANNEL, bubble_channel, String, "", 0, 0,                                     \
      "Bubble channel shm name ({local_rank} is substituted); default per local rank")            \
    X(ATLAS_LOCAL_RANK, local_rank, Int, -1, -1, 1023,                                            \
      "This process's GPU index on the node; -1 = LOCAL_RANK / OMPI / SLURM variables, else 0")   \
    X(ATLAS_TRAFFIC_PRIORITY, traffic_priority, String, "pipeline", 0, 0,                         \
      "Which WAN traffic goes first on a shared link: pipeline (send/recv), collective, or "      \
      "equal (arrival order); the kind comes from NCCL's setNetAttr hints")                       \
    X(ATLAS_NETSTAT, netstat, Bool, true, 0, 0,                                                   \
      "Publish per comm and per stream counters in a shared-memory segment for atlas-netstat")    \
    X(ATLAS_NETSTAT_DIR, netstat_dir, String, "/dev/shm", 0, 0,                                   \
      "Directory of the stats segment atlas-netstat-<uid>-<pid>")                                 \
    X(ATLAS_NETSTAT_COMMS, netstat_comms, Uint, 256, 1, 65536,                                    \
      "Comm records in the stats segment; comms beyond it run without stats")                     \
    X(ATLAS_NETSTAT_INTERVAL_MS, netstat_interval_ms, Uint, 200, 10, 60000,                       \
      "How often each comm's engine samples its streams' TCP_INFO for the stats segment")

// Duplicate keys fail to compile: each key defines one empty struct in this namespace.
namespace param_key_guards {
#define ATLAS_PARAM_KEY_GUARD(KEY, ...) \
    struct KEY {};
ATLAS_PARAM_LIST(ATLAS_PARAM_KEY_GUARD)
#undef ATLAS_PARAM_KEY_GUARD
}  // namespace param_key_guards

// The parsed values; a default-constructed Params holds every default.
struct Params {
#define ATLAS_PARAM_FIELD(KEY, field, Kind, def, lo, hi, doc) param_kinds::Kind::Value field = def;
    ATLAS_PARAM_LIST(ATLAS_PARAM_FIELD)
#undef ATLAS_PARAM_FIELD

    // Not a variable: ATLAS_AUTH_KEY, or the contents of ATLAS_AUTH_KEY_FILE.
    std::string resolved_auth_key;
    // Not a variable: ATLAS_FAULTS parsed (only with ATLAS_TEST_MODE=1).
    std::vector<transport::FaultSpec> resolved_faults;
};

// One registry entry, for parsing, logging and documentation.
struct ParamSpec {
    const char* key;    // "ATLAS_NSTREAMS"
    const char* field;  // "nstreams"
    const char* type;   // "string", "secret", "bool", "unsigned", "integer", "size",
                        // "number", "enum"
    const char* doc;
    std::string default_text;  // the default, formatted like a value
    std::string accepted;      // e.g. "an unsigned integer in 0..64", "one of auto|uring|epoll"
    // Parses `text` (non-empty) into its field; the error names key, value and `accepted`.
    std::function<Status(std::string_view text, Params& out)> parse;
    // The field's value for logs (secrets are masked).
    std::function<std::string(const Params&)> format;
    std::function<bool(const Params&)> is_default;
};

// Every registered variable, in declaration order. Built once; thread-safe.
const std::vector<ParamSpec>& paramSpecs();
const ParamSpec* findParam(std::string_view key);

// Returns the value of an environment variable or nullptr. processEnv() wraps getenv.
using EnvLookup = std::function<const char*(const char* key)>;
EnvLookup processEnv();

struct ParamsParse {
    Params params;                    // defaults wherever a value was unset or invalid
    std::vector<std::string> errors;  // one complete message per problem
    // OK, or kInvalidUsage with every message joined by "; ".
    Status status() const;
};
// Parses every variable (so all problems are reported at once), then the cross-variable
// rules: ATLAS_AUTH_KEY and ATLAS_AUTH_KEY_FILE are exclusive; the key file must be readable
// and non-empty; an explicit ATLAS_NSTREAMS must not exceed ATLAS_MAX_STREAMS; ATLAS_FAULTS
// must parse and needs ATLAS_TEST_MODE=1; ATLAS_ENCRYPT needs a key.
ParamsParse parseParams(const EnvLookup& env);

// "KEY=value" for the variables that differ from their default (all of them when
// `include_defaults`), in declaration order; secrets are masked.
std::vector<std::string> describeParams(const Params& params, bool include_defaults);

// The transport settings implied by `params`. `device_speed_mbps` (the fastest selected
// device) is the path rate assumed when ATLAS_LINK_GBPS is 0. The caller sets logger/clock.
transport::TransportConfig makeTransportConfig(const Params& params, int device_speed_mbps);

// Value parsers shared by the registry (exposed for tests and fuzzing). All are strict: no
// surrounding whitespace, no trailing garbage, no overflow.
std::optional<bool> parseBoolText(std::string_view text);
std::optional<uint64_t> parseUnsignedText(std::string_view text);
std::optional<int64_t> parseSignedText(std::string_view text);
std::optional<uint64_t> parseSizeText(std::string_view text);
std::optional<double> parseDoubleText(std::string_view text);
// Bytes with the largest exact binary suffix: 524288 -> "512K", 1000 -> "1000".
std::string formatSize(uint64_t bytes);

}  // namespace atlas::plugin
