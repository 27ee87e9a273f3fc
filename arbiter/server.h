// ArbiterServer: the network half of atlas-arbiter (Boost.Asio, one io_context, one thread).
//
// One TCP port serves both the arbitration protocol (arbiter/protocol.h) and HTTP
// `GET /metrics` (Prometheus text): the first four bytes of a connection decide, "AtAr" for
// the protocol, "GET " for HTTP. Each plugin process holds one session; the server runs an
// ArbiterCore, sends its grants, and drops sessions that close or stay silent longer than
// the lease (their flows are cancelled, so a crashed or partitioned holder never blocks the
// link beyond the lease).
//
// Threads: run() drives everything on the calling thread until stop() (callable from any
// thread, also from a signal handler's thread) or a fatal error. Nothing blocks inside a
// handler. Boost stays out of this header, so tests and tools include it freely.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "arbiter/arbiter_core.h"
#include "arbiter/metrics.h"
#include "arbiter/protocol.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"

namespace atlas::arbiter {

struct ServerConfig {
    std::string host = "0.0.0.0";  // listen address (IPv4 or IPv6 literal)
    uint16_t port = 0;             // 0: ephemeral (see ArbiterServer::port())
    CoreConfig core;
    std::string auth_key;  // empty: sessions are not authenticated
    // A session silent this long is dropped and its flows cancelled. Clients ping every
    // heartbeat_ns, so lease_ns must leave room for a few lost pings.
    Nanos lease_ns = 500 * kNsPerMs;
    Nanos heartbeat_ns = 100 * kNsPerMs;
    Nanos handshake_timeout_ns = 2 * kNsPerSec;
    size_t max_sessions = 1024;
    bool handle_signals = false;  // SIGINT/SIGTERM stop run() (the daemon sets it)
    Logger logger;
    RandomFill random = systemRandomFill;  // server nonces; a test seam
};

Status validate(const ServerConfig& config);

class ArbiterServer {
  public:
    // Binds and listens; fails with a clear message when the address is unusable.
    static Result<std::unique_ptr<ArbiterServer>> create(const ServerConfig& config);
    ~ArbiterServer();
    ArbiterServer(const ArbiterServer&) = delete;
    ArbiterServer& operator=(const ArbiterServer&) = delete;

    uint16_t port() const;
    // Serves until stop(). Returns OK after stop(), an error if the acceptor fails.
    Status run();
    void stop();

    // Snapshot of the metrics page; safe from any thread (posts to the server thread and
    // waits, bounded by 2 s; empty on timeout or when run() is not active).
    std::string metricsText();

    struct Impl;

  private:
    explicit ArbiterServer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace atlas::arbiter
