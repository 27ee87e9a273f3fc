// ArbiterClient::Impl: the state of the plugin's session with atlas-arbiter, shared by the
// client's I/O thread (arbiter_client.cc) and the gates of its flows (client_gate.cc).
// Internal to plugin/wan; arbiter_client.h is the interface.
//
// Ownership: the ArbiterClient and every ClientGate hold a shared_ptr, so a gate that
// outlives the client (a comm closed after finalize) still finds valid state (mode kStopped).
// Locks: reg_mu (the gate registry), then a gate's mutex, then out_mu (the send queue).
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

    std::mutex out_mu;
    std::vector<uint8_t> out;  // messages for the established session
    // Protocol version of the session (set before it is up; relaxed: out is cleared when a
    // session comes up, so nothing encoded at an older session's version is ever sent).
    std::atomic<uint8_t> version{arbiter::kProtocolVersion};

    std::atomic<uint64_t> n_sessions{0}, n_outages{0}, n_requests{0}, n_grants{0}, n_releases{0},
        n_unwanted{0}, n_resumed{0};

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
    bool fallback_noted = false;  // the INFO about an older arbiter was logged
};

}  // namespace atlas::plugin::wan
