// ArbiterClient::Impl: the state of the plugin's session with atlas-arbiter, shared by the
// client's I/O thread (arbiter_client.cc) and the gates of its flows (client_gate.cc).
// Internal to plugin/wan; arbiter_client.h is the interface.
//
// Ownership: the ArbiterClient and every ClientGate hold a shared_ptr, so a gate that
// outlives the client (a comm closed after finalize) still finds valid state (mode kStopped).
// Locks: reg_mu (the gate registry), then a gate's mutex, then out_mu (the send queue);
// pool_mu (the rate pools) after reg_mu, never with a gate's mutex or out_mu.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "arbiter/protocol.h"
#include "plugin/wan/arbiter_client.h"

namespace atlas::plugin::wan {

class ClientGate;

// The RatePool of one link under atlas-arbiter (ArbiterClient::ratePool): the DC's estimate.
// add() keeps the train in a LocalRatePool of this process and, on a protocol-3 session,
// reports it to the arbiter (Train); every Grant of a flow on the link brings back the
// arbiter's estimate over every session's trains (setDcRate). estimate() is that DC estimate
// once the arbiter has one, else this process's own (an older arbiter, or before the
// arbiter's min_samples trains): a process whose own trains were shared ones (its first
// grants) holds by what the whole DC measured, as the node segment's pool does per node.
class ArbiterRatePool final : public RatePool {
  public:
    ArbiterRatePool(std::weak_ptr<ArbiterClient::Impl> client, std::string link)
        : client_(std::move(client)), link_(std::move(link)) {}
    uint64_t add(uint64_t bytes, Nanos first_ns, Nanos last_ns, size_t* live) override;
    uint64_t estimate() const override;
    const sched::PathRateConfig& config() const override { return local_.config(); }
    // I/O thread: a Grant of a flow on this link carried the arbiter's estimate (0: unknown).
    void setDcRate(uint64_t bps) { dc_bps_.store(bps, std::memory_order_relaxed); }

  private:
    const std::weak_ptr<ArbiterClient::Impl> client_;  // weak: the client holds its pools
    const std::string link_;
    LocalRatePool local_;
    std::atomic<uint64_t> dc_bps_{0};
};

struct ArbiterClient::Impl : std::enable_shared_from_this<ArbiterClient::Impl> {
    explicit Impl(const ArbiterClientConfig& c) : cfg(c) {}
    ~Impl() {
        if (event_fd >= 0) {
            ::close(event_fd);
        }
    }

    // Any thread: queue a message for the current session and wake the I/O thread.
    void post(const arbiter::Message& m) {
        {
            std::lock_guard<std::mutex> lock(out_mu);
            arbiter::encode(m, &out, version.load(std::memory_order_relaxed));
        }
        wake();
    }
    void wake() {
        const uint64_t one = 1;
        ssize_t n = ::write(event_fd, &one, sizeof(one));
        (void)n;  // EAGAIN means a wakeup is already pending
    }

    void run();
    // I/O thread helpers.
    void beginAttempt(Nanos now);
    void fail(const std::string& why, Nanos now);
    // Closes the socket and forgets the connection's state (decoder, unsent bytes).
    void dropConnection();
    // The arbiter refused our Hello's version (an older build): reconnect at once offering
    // the lowest version. True if that is what happened.
    bool fallBack(const arbiter::Error& e, Nanos now);
    void onMessage(const arbiter::Message& m, Nanos now);
    void sessionUp(Nanos now);
    void failOpenAll();
    bool flushWrites();
    // Gives back drained grants whose time has come; returns the next drain end (or max).
    Nanos runDrains(Nanos now);

    ArbiterClientConfig cfg;
    std::atomic<Mode> mode{Mode::kConnecting};
    std::atomic<uint64_t> epoch{0};  // session number, bumped at every Welcome
    std::atomic<bool> stop{false};
    int event_fd = -1;
    std::thread thread;
    std::mutex join_mu;

    std::mutex reg_mu;  // order: reg_mu, then a gate's mutex, then out_mu
    std::map<uint32_t, ClientGate*> gates;
    uint32_t next_flow = 1;

    std::mutex pool_mu;  // after reg_mu; see the lock order above
    std::map<std::string, std::shared_ptr<ArbiterRatePool>> pools;  // by link

    std::mutex out_mu;
    std::vector<uint8_t> out;  // messages for the established session
    // Protocol version of the session (set before it is up; relaxed: out is cleared when a
    // session comes up, so nothing encoded at an older session's version is ever sent).
    std::atomic<uint8_t> version{arbiter::kProtocolVersion};

    std::atomic<uint64_t> n_sessions{0}, n_outages{0}, n_requests{0}, n_grants{0}, n_releases{0},
        n_unwanted{0}, n_resumed{0}, n_trains{0};

    // ---- I/O thread only
    enum class Conn { kDown, kConnecting, kChallenge, kWelcome, kUp };
    Conn conn = Conn::kDown;
    int fd = -1;
    arbiter::Decoder decoder;
    std::vector<uint8_t> wbuf;  // bytes being written
    Nanos next_attempt_ns = 0;
    Nanos attempt_deadline_ns = 0;
    Nanos backoff_ns = 0;
    Nanos last_rx_ns = 0;
    Nanos next_ping_ns = 0;
    Nanos lease_ns = 0;
    Nanos heartbeat_ns = 0;
    arbiter::WirePolicy policy = arbiter::WirePolicy::kTemporal;
    arbiter::Nonce client_nonce{};
    uint64_t session_id = 0;
    uint64_t ping_token = 0;
    bool in_outage = false;  // a WARN was logged for the current outage
    // The version the next Hello offers: the highest, until an arbiter refuses it; offered
    // again after every outage (the arbiter may have been upgraded meanwhile).
    uint8_t offer = arbiter::kProtocolVersion;
    // The lowest version an INFO about an older arbiter named: each step down is logged
    // once per process, not again after every outage.
    uint8_t fallback_noted_at = arbiter::kProtocolVersion;
};

}  // namespace atlas::plugin::wan
