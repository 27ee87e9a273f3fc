// ArbiterClient: the plugin's side of DC-wide arbitration (ATLAS_ARBITER_CONNECT=host:port).
//
// One per process. It owns one TCP session to atlas-arbiter and one I/O thread (poll on the
// socket and an eventfd), started by start() and joined by shutdown(). Each arbitrated WAN
// send comm gets a ClientGate from makeGate() (client_gate.h): acquire() sends Request, the
// thread turns a Grant into a local slot (holds() = one atomic load and a compare) and rings
// the comm's waker; release() keeps the grant while its bytes cross the link (the hold/drain
// rule of HoldingGate, whose drain ends this thread times) and then sends Release. Nothing
// here blocks the engine threads: messages are queued and written by the I/O thread.
// The session state (Impl) is in arbiter_session.h.
//
// Fail-open: while the arbiter is unreachable (connect refused or timed out, handshake or
// authentication failure, connection lost, silence longer than the lease) every gate lets
// its flow send unarbitrated. One WARN is logged per outage; the thread keeps reconnecting in
// the background (exponential backoff) and arbitration resumes, with INFO, once a session
// is up again. Before the first attempt has finished (bounded by connect_timeout_ns), flows
// wait, so the first transfers are arbitrated when the arbiter is there. An arbiter running
// the `fair` policy turns gating off entirely (the baseline costs nothing).
//
// Threads: makeGate/mode/stats from any thread; gates as FlowGate requires (engine thread);
// wakers are called from the I/O thread, never after the gate's destructor returned.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "arbiter/protocol.h"
#include "atlas/admission.h"
#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "plugin/wan/link_rate.h"

namespace atlas::plugin::wan {

struct ArbiterClientConfig {
    std::string host;  // IPv4/IPv6 literal or a name resolved once per attempt
    uint16_t port = 0;
    std::string auth_key;  // empty: no proof is sent (a keyed arbiter rejects the session)
    Nanos connect_timeout_ns = kNsPerSec;  // one attempt: TCP connect + handshake
    Nanos retry_min_ns = 100 * kNsPerMs;   // background reconnect backoff, doubling
    Nanos retry_max_ns = 5 * kNsPerSec;
    std::string name;  // shown in the arbiter's logs and metrics (e.g. the host name)
    Logger logger;
    // The I/O thread's time (timers, grant receipt, drain ends). Gates take `now` from their
    // FlowGate caller, which must use the same timeline.
    const Clock* clock = &MonotonicClock::instance();
    arbiter::RandomFill random = arbiter::systemRandomFill;  // client nonces; a test seam
};

class ArbiterClient {
  public:
    enum class Mode : uint8_t {
        kConnecting,  // first attempt in progress: gates wait (bounded)
        kArbitrated,  // session up, policy temporal/workload
        kFair,        // session up, policy fair: no gating
        kFailOpen,    // arbiter unreachable: no gating, reconnecting
        kStopped,     // shut down: no gating
    };
    struct Stats {
        uint64_t sessions = 0;  // successful handshakes
        uint64_t outages = 0;   // transitions into fail-open (one WARN each)
        uint64_t requests = 0;
        uint64_t grants = 0;
        uint64_t releases = 0;
        uint64_t unwanted_grants = 0;  // grants released at once (the flow had drained)
        uint64_t resumed = 0;          // acquires that resumed a grant still draining
        uint64_t trains = 0;           // trains reported to the arbiter (protocol 3)
    };

    static Result<std::shared_ptr<ArbiterClient>> start(const ArbiterClientConfig& config);
    ~ArbiterClient();
    ArbiterClient(const ArbiterClient&) = delete;
    ArbiterClient& operator=(const ArbiterClient&) = delete;

    // Joins the I/O thread (closing the session) and fails every gate open. Idempotent.
    void shutdown();

    // A gate for one flow on `link` (arbiter/protocol.h link name). `waker` must be callable
    // from any thread until the gate is destroyed. `rate`: the link's rate for the grant
    // hold/drain rule (HoldingGate; null or 0 = give a grant back as soon as the queue drains).
    std::unique_ptr<FlowGate> makeGate(const std::string& link, const arbiter::WireClass& cls,
                                       std::function<void()> waker,
                                       std::shared_ptr<LinkRate> rate = nullptr);

    // The DC-wide rate pool of `link` (one per link; ArbiterRatePool in arbiter_session.h): a
    // MeasuredLinkRate over it holds grants by the arbiter's estimate over every process's
    // trains, and by this process's own until the arbiter has one.
    std::shared_ptr<RatePool> ratePool(const std::string& link);

    Mode mode() const;
    Stats stats() const;
    std::string target() const;  // "host:port"

    struct Impl;

  private:
    explicit ArbiterClient(std::shared_ptr<Impl> impl);
    std::shared_ptr<Impl> impl_;
};

const char* clientModeName(ArbiterClient::Mode m);

}  // namespace atlas::plugin::wan
