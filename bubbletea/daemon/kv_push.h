// KvPusher: the daemon's side of the KV hand-off (protocol in kv_wire.h). Pushes exported
// KV caches to decode endpoints over the Atlas transport and waits for each endpoint's ack.
//
// Ownership and threads: owns one Transport and one pusher thread, which owns every socket
// and comm; push() only enqueues (any thread, never blocks). Transfers run one at a time in
// submission order; connections are cached per endpoint (host:port) and dropped on any
// error, so the next push reconnects. A push whose cached connection turns out dead is
// retried once on a fresh connection before it is reported as failed.
// Bounds: every transfer (connect + send + ack) is bounded by timeout_ns, so a dead or
// silent decode endpoint yields an error instead of a hang. stop() fails queued pushes
// with kUnavailable and joins the thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
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

struct KvPushConfig {
    Nanos timeout_ns = 10 * kNsPerSec;
    std::string auth_key;  // transport HMAC key; must match the endpoint's
    int transport_streams = 0;
    int engine_threads = 1;
    Logger logger;
};

struct KvPushReceipt {
    std::string endpoint;  // host:port
    uint64_t transfer_id = 0;
    uint64_t bytes = 0;
    Nanos elapsed_ns = 0;  // connect (if needed) + send + ack
};

struct KvPushJob {
    std::string host;
    uint16_t port = 0;
    kv::KvHeader header;  // checksum computed by the pusher
    std::vector<std::byte> payload;
    // Called exactly once, on the pusher thread (or in stop()).
    std::function<void(Result<KvPushReceipt>)> done;
};

class KvPusher {
  public:
    static Result<std::unique_ptr<KvPusher>> create(const KvPushConfig& config);
    ~KvPusher();  // stop()
    KvPusher(const KvPusher&) = delete;
    KvPusher& operator=(const KvPusher&) = delete;

    void push(KvPushJob job);
    void stop();
    size_t queued() const;

  private:
    struct Endpoint {
        kv::Socket control;
        std::unique_ptr<transport::SendComm> comm;
    };

    explicit KvPusher(const KvPushConfig& config);
    void run();
    Result<KvPushReceipt> transfer(KvPushJob& job);
    Status connect(const std::string& host, uint16_t port, Nanos deadline_ns, Endpoint* ep);
    Status send(Endpoint& ep, const void* data, size_t size, Nanos deadline_ns);
    void dropEndpoint(const std::string& key);

    KvPushConfig config_;
    std::unique_ptr<transport::Transport> transport_;
    std::map<std::string, Endpoint> endpoints_;  // pusher thread only

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<KvPushJob> queue_;  // guarded by mu_
    bool stopping_ = false;        // guarded by mu_
    std::thread thread_;
};

}  // namespace atlas::bubbletea
