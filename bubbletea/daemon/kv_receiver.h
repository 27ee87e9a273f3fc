// KvReceiver: the decode side of the KV hand-off (protocol in kv_wire.h), used by the
// reference receiver `kv-sink` and by tests. It validates each header, receives the
// payload over the Atlas transport, verifies the checksum and acks (or nacks).
//
// Threads: start() spawns an accept thread plus one thread per control connection (a
// reference tool: clarity over scale). The callback runs on a connection thread, possibly
// concurrently for different connections; it must be thread-safe. stop() (or the
// destructor) closes everything and joins all threads; it is bounded by timeout_ms.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "bubbletea/daemon/kv_net.h"
#include "bubbletea/daemon/kv_wire.h"
#include "transport/net.h"

namespace atlas::bubbletea {

struct KvReceiverConfig {
    std::string bind_host = "127.0.0.1";  // control listener; the transport listener binds
    uint16_t port = 0;                    // to the address each connection arrives on
    std::string auth_key;                 // transport HMAC key; empty: none
    std::string expected_model;           // non-empty: nack other model ids
    uint64_t max_payload_bytes = 64ull << 30;
    bool keep_payload = true;  // hand the payload bytes to the callback (tests)
    int timeout_ms = 10000;    // handshake and per-message bound once a transfer started
    int engine_threads = 1;
    Logger logger;
};

struct KvTransfer {
    kv::KvHeader header;
    std::vector<std::byte> payload;  // when keep_payload and the transfer was received
    kv::AckStatus status = kv::AckStatus::kOk;
    std::string error;
    std::string peer;
    Nanos receive_ns = 0;  // header arrival -> payload complete
    Nanos verify_ns = 0;   // checksum time
};

class KvReceiver {
  public:
    using Callback = std::function<void(const KvTransfer&)>;

    static Result<std::unique_ptr<KvReceiver>> start(const KvReceiverConfig& config,
                                                     Callback on_transfer);
    ~KvReceiver();
    KvReceiver(const KvReceiver&) = delete;
    KvReceiver& operator=(const KvReceiver&) = delete;

    uint16_t port() const { return port_; }
    void stop();

    uint64_t transfersOk() const { return ok_.load(std::memory_order_relaxed); }
    uint64_t transfersFailed() const { return failed_.load(std::memory_order_relaxed); }

  private:
    struct Conn {
        std::thread thread;
        std::atomic<bool> done{false};
    };

    KvReceiver(const KvReceiverConfig& config, Callback cb);
    void acceptLoop();
    void serve(kv::Socket control, std::atomic<bool>* done);
    // One transfer on an established pair; false ends the connection.
    bool serveOne(kv::Socket& control, transport::RecvComm& comm, const std::string& peer);
    Status receive(transport::RecvComm& comm, void* data, size_t capacity, size_t* size,
                   const kv::Socket& control, bool first_message);
    void reapFinished();

    KvReceiverConfig config_;
    Callback callback_;
    std::unique_ptr<transport::Transport> transport_;
    kv::Socket listener_;
    uint16_t port_ = 0;
    std::atomic<bool> stopping_{false};
    std::thread accept_thread_;
    std::mutex conns_mu_;
    std::list<std::unique_ptr<Conn>> conns_;  // guarded by conns_mu_
    std::atomic<uint64_t> ok_{0};
    std::atomic<uint64_t> failed_{0};
};

}  // namespace atlas::bubbletea
