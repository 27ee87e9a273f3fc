// The transport's public surface: multi-stream TCP connections with NCCL net semantics.
//
// Shape: one process-wide Transport (engine thread pool + settings) creates ListenComms and
// Connectors; these yield RecvComms and SendComms (unidirectional, like NCCL comms). Messages
// are posted with isend/irecv and completed through test(). Everything here maps 1:1 onto the
// ncclNet ABI, which plugin/ adapts; transport/ never sees NCCL types.
//
// Threads: the Transport may be used from any thread. A given comm (and its requests) must
// be used by one thread at a time (NCCL's service thread during setup, then its progress
// thread). Sockets are owned by engine threads; calls here only enqueue work and read
// completion state, so listen/connect/accept/isend/irecv/test never block. close() waits
// for the owner engine to drop the comm (bounded), because buffers may be freed right after.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "atlas/admission.h"
#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "atlas/recv_observer.h"
#include "atlas/stream_stats.h"
#include "atlas/told_rate_cc.h"
#include "transport/faults.h"
#include "transport/recovery.h"

namespace atlas::transport {

// The congestion control that sends at the rate SO_MAX_PACING_RATE tells it and learns no
// bandwidth of its own (tcpcc/atlas_rate.bpf.c; docs/tcp-cc.md): the only one the transport
// paces, and registered per host by `atlas-tcp-cc register`.
inline constexpr const char* kToldRateCongestionControl = ATLAS_TOLD_RATE_CC_NAME;

enum class IoBackend { kAuto, kUring, kEpoll };
enum class StripeMode {
    kLoadAware,  // each chunk to the data stream with the fewest unsent bytes (default)
    kEven,       // NCCL-socket-like: split each message evenly, round-robin, no feedback
};

const char* ioBackendName(IoBackend b);
const char* stripeModeName(StripeMode m);

struct CommInfo;

// Plain settings; the plugin fills them from the ATLAS_* registry. Libraries never getenv.
struct TransportConfig {
    int engine_threads = 2;
    int spin_us = 0;  // engine busy-poll window after activity (latency vs CPU), 0 = never spin
    IoBackend io = IoBackend::kAuto;
    int nstreams = 0;                 // data streams per comm; 0 = size from RTT (see docs/env.md)
    int max_streams = 64;             // ceiling for the automatic rule
    size_t sockbuf_bytes = 0;         // SO_SNDBUF/SO_RCVBUF; 0 = kernel autotuning
    size_t chunk_bytes = 512 * 1024;  // striping unit on data streams
    size_t inline_bytes = 4096;       // messages up to this size go inline on the control stream
    StripeMode stripe = StripeMode::kLoadAware;
    int timeout_ms = 30000;  // dead-peer and outage bound (keepalive, TCP_USER_TIMEOUT, setup,
                             // longest time without any live stream)
    // Retransmit store bound per send comm (ATLAS_RESEND_BYTES): copies of sent, unconfirmed
    // data whose send completed locally. Full: sends stay incomplete until confirmations free
    // room.
    uint64_t resend_bytes = 64ull << 20;
    ConfirmCadence confirm;  // receiver's confirmation cadence (docs/protocol.md)
    // TEST-ONLY fault plan (transport/faults.h); the plugin sets it only for ATLAS_TEST_MODE=1.
    std::vector<FaultSpec> faults;
    std::string auth_key;  // empty: no authentication
    // Seal every frame (AES-256-GCM, transport/seal.h); needs auth_key; both sides must agree.
    bool encrypt = false;
    uint64_t link_bps = 10'000'000'000ull;  // assumed path rate for the automatic stream rule
    // TCP congestion control of every stream (TCP_CONGESTION, ATLAS_TCP_CC): a comma list of
    // names, most wanted first; empty = the kernel's default. Transport::create tries them
    // once, in order, and keeps the first the kernel takes; a kernel that refuses them all
    // (module missing, not registered, not in tcp_allowed_congestion_control without
    // CAP_NET_ADMIN) gets a warning and the default, never a failed connection.
    std::string congestion_control;
    // congestion_control is the default, not the user's choice: a refusal is logged at INFO
    // (a host without bbr is ordinary), not WARN.
    bool congestion_control_is_default = false;
    // The measured rate of the path a comm is about to be planned for (the automatic stream
    // rule's B, transport/stream_plan.h), in bit/s; 0 = not known. Called once per connect,
    // on the connecting thread, with the comm's local and peer address and handshake RTT (the
    // rest of CommInfo unset). Must not block or throw. Empty: link_bps alone. The plugin
    // sets it from its per-link estimate unless ATLAS_LINK_GBPS is set (docs/env.md).
    std::function<uint64_t(const CommInfo&)> measured_path_bps;
    Logger logger;
    const Clock* clock = &MonotonicClock::instance();
};

// An IPv4/IPv6 socket address.
struct SocketAddress {
    sockaddr_storage storage{};
    socklen_t len = 0;

    static Result<SocketAddress> parse(const std::string& host, uint16_t port);
    std::string toString() const;
    int family() const { return storage.ss_family; }
    uint16_t port() const;
};

// The opaque connection handle NCCL ships from listener to connector (<= 128 bytes).
// Layout is defined in transport/wire.h ("Connection handle"); plugin/ treats it as bytes.
// Bytes [kHandleScratchOffset, kHandleSize) are the connector's scratch: the listener zeroes
// them and connect() keeps its in-progress state there.
constexpr size_t kHandleSize = 128;
constexpr size_t kHandleScratchOffset = 64;
// A scratch field: a magic word and a pointer-sized value at kHandleScratchOffset. Get returns
// the value stored under `magic`, nullptr when the field holds something else or nothing; Set
// with nullptr clears it. The transport keeps its connector there; the plugin a token.
void* handleScratchGet(const uint8_t handle[kHandleSize], uint32_t magic);
void handleScratchSet(uint8_t handle[kHandleSize], uint32_t magic, void* value);

class Request;
class SendComm;
class RecvComm;
class ListenComm;

// What a comm learned at connection setup; exposed for logs, the WAN classifier and tests.
struct CommInfo {
    uint64_t session_id = 0;
    int nstreams = 0;
    Nanos rtt_ns = 0;           // measured during the handshake (min of samples)
    uint64_t inline_bytes = 0;  // messages up to this size (and empty ones) travel inline
    SocketAddress local;
    SocketAddress peer;
    bool authenticated = false;
    bool encrypted = false;  // every frame sealed (ATLAS_ENCRYPT)
};

class Transport {
  public:
    // Probes io_uring (falls back to epoll unless io == kUring) and starts the engine threads.
    static Result<std::unique_ptr<Transport>> create(const TransportConfig& config);
    // Joins every engine thread. All comms must be closed first (checked).
    ~Transport();
    Transport(const Transport&) = delete;
    Transport& operator=(const Transport&) = delete;

    const TransportConfig& config() const { return config_; }
    IoBackend backend() const { return backend_; }

    // Binds an ephemeral port on `local` (port ignored) and fills `handle`.
    Result<std::unique_ptr<ListenComm>> listen(const SocketAddress& local,
                                               uint8_t handle[kHandleSize]);

    // Non-blocking connect. Call repeatedly with the same handle buffer until *out != nullptr;
    // progress state lives inside the handle, as NCCL expects. Fails with kRemote/kTimeout when
    // the listener stays unreachable past timeout_ms.
    Status connect(uint8_t handle[kHandleSize], std::unique_ptr<SendComm>* out);
    // Gives up a connect() that has not completed: frees the state it keeps in `handle`
    // (sockets included) and clears it. A no-op when none is in progress. Never blocks.
    void abandonConnect(uint8_t handle[kHandleSize]);

    int liveComms() const;
    // Connections a listener of this transport dropped because they failed authentication
    // (a wrong or missing ATLAS_AUTH_KEY on the connecting side). Monotonic, any thread.
    uint64_t authFailures() const;

    // transport/-internal state (engines, live comm count). Opaque to every other folder.
    struct Impl;
    Impl& impl() { return *impl_; }

  private:
    explicit Transport(const TransportConfig& config);

    TransportConfig config_;
    IoBackend backend_ = IoBackend::kEpoll;
    std::unique_ptr<Impl> impl_;
};

class ListenComm {
  public:
    ~ListenComm();
    // Non-blocking: *out stays nullptr until a connector has completed the handshake.
    // Strangers (bad magic, failed authentication, silence past the timeout) are dropped with
    // a warning and never affect a comm.
    Status accept(std::unique_ptr<RecvComm>* out);
    const SocketAddress& address() const;
    // The port of this process's rejoin listener for this address (advertised to connectors).
    uint16_t rejoinPort() const;

    struct Impl;
    explicit ListenComm(std::unique_ptr<Impl> impl);

  private:
    std::unique_ptr<Impl> impl_;
};

// NCCL_NET_MAX_REQUESTS: outstanding requests per comm.
constexpr int kMaxRequests = 32;

class SendComm {
  public:
    ~SendComm();  // closes (same as close())
    // Posts a send. *req == nullptr on success means "no free request; retry later"
    // (back-pressure). Returns the comm's sticky error if one was recorded.
    Status isend(const void* data, size_t size, Request** req);
    // Waits (bounded by timeout_ms) until the owner engine has dropped every socket and
    // in-flight operation, then frees the comm. Requests still pending are abandoned.
    Status close();
    const CommInfo& info() const;
    // Puts the comm's striped traffic under an admission gate (temporal link sharing).
    // Call before the first isend; the comm owns the gate. Inline messages bypass the gate.
    void setGate(std::unique_ptr<FlowGate> gate);
    // Rings this comm's engine; safe from any thread while the comm is open. For gates.
    std::function<void()> waker();
    // The owner engine reports this comm's streams (bytes, TCP_INFO) and gate counters to
    // `sink` every `interval_ns` and once when the comm closes (include/atlas/stream_stats.h).
    // Once per comm, from the comm's poster thread; the comm owns the sink.
    void setStatsSink(std::unique_ptr<CommStatsSink> sink, Nanos interval_ns);
    // What recovery did on this comm (resets, rejoins, resends...); readable from any thread.
    const RecoveryCounters& recovery() const;
    // Its stream lost/rejoined events; drain from the thread that posts on the comm.
    StreamEventLog& streamEvents();

    struct Impl;
    explicit SendComm(std::unique_ptr<Impl> impl);

  private:
    std::unique_ptr<Impl> impl_;
};

class RecvComm {
  public:
    ~RecvComm();
    // Posts a receive of up to `capacity` bytes. *req == nullptr means "retry later".
    Status irecv(void* data, size_t capacity, Request** req);
    Status close();
    const CommInfo& info() const;
    // Reports each receive's post and completion times (bubble measurement). Call before
    // the first irecv; the comm owns the observer.
    void setObserver(std::unique_ptr<RecvObserver> observer);
    // As SendComm::setStatsSink.
    void setStatsSink(std::unique_ptr<CommStatsSink> sink, Nanos interval_ns);
    const RecoveryCounters& recovery() const;
    StreamEventLog& streamEvents();

    struct Impl;
    explicit RecvComm(std::unique_ptr<Impl> impl);

  private:
    std::unique_ptr<Impl> impl_;
};

// Polls a request. On done, *size is the number of bytes sent/received and the request is
// recycled: it must not be tested again. Errors are the comm's sticky error (kRemote for a
// dead peer, kInvalidUsage for truncation, ...). Never blocks.
Status test(Request* req, bool* done, size_t* size);

}  // namespace atlas::transport
