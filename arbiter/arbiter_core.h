// ArbiterCore: the decision half of atlas-arbiter, with no sockets and no clock of its own.
//
// It keeps one scheduler/ LinkPolicy per link name (one bottleneck: typically "dcA->dcB", one
// direction of one inter-DC link), maps the flows that plugin sessions open onto policy
// FlowIds, feeds the policy their requests/releases/cancellations, and turns the policy's
// decisions into Grant messages (with a fresh sequence number each) for the server to send.
//
// Protocol semantics enforced here (docs/arbitration.md):
//  - Request from a flow that already has a transfer pending or granted is ignored (the
//    client re-requests after every slot; the policy already knows).
//  - Release(seq) completes the transfer only when seq is the flow's current grant; a stale
//    release (the server already renewed or preempted) only counts the bytes. A client that
//    receives a grant it no longer wants releases it at once, so a drained flow never sits on
//    the link.
//  - A holder still sending at its lease end is preempted or renewed by the policy; the client
//    enforces the same slot locally (grant slot_ns).
//  - Dropping a session (EOF, liveness timeout) cancels its flows: a crashed holder loses the
//    link immediately, a partitioned one after the server's liveness lease.
//  - Train (protocol 3): every session's trains of a link feed that link's one estimate
//    (sched::PathRate, the estimator the plugin runs), and every grant carries it, so each
//    process of the DC holds its grants by what all of them measured. A train for a link
//    no flow opened is ignored (not an error: the client may have closed its last flow of
//    the link while the train was on its way).
//
// Threads: one owner (the server's io_context thread). All times are the caller's monotonic
// nanoseconds and must not decrease.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "arbiter/protocol.h"
#include "atlas/common/status.h"
#include "scheduler/link_policy.h"
#include "scheduler/path_rate.h"
#include "scheduler/workload_aware.h"

namespace atlas::arbiter {

using SessionId = uint64_t;

struct CoreConfig {
    sched::PolicyKind policy = sched::kDefaultSharing;
    sched::PolicyConfig policy_config;  // max_slot_ns: longest slot one grant carries
    size_t max_flows = 4096;            // across all sessions and links
    size_t max_links = 256;
};

// A grant for the server to send.
struct GrantOut {
    SessionId session = 0;
    uint32_t flow = 0;
    uint64_t seq = 0;
    Nanos slot_ns = 0;      // 0: until released
    uint64_t rate_bps = 0;  // the link's estimate over every session's trains; 0 = unknown
    friend bool operator==(const GrantOut&, const GrantOut&) = default;
};

struct LinkStats {
    uint64_t requests = 0;
    uint64_t grants = 0;          // every grant message, renewals included
    uint64_t first_grants = 0;    // grants that ended a wait (one per served request)
    uint64_t waited = 0;          // requests not granted in the decision right after them
    uint64_t stale_releases = 0;  // releases of a grant that was no longer current
    uint64_t cancels = 0;         // transfers dropped by close or a lost session
    uint64_t bytes = 0;           // reported by releases
    Nanos wait_ns_sum = 0;        // request -> first grant, summed over first_grants
    Nanos wait_ns_max = 0;
    Nanos busy_ns = 0;    // time with at least one holder
    Nanos demand_ns = 0;  // time with at least one flow waiting for the link or holding it
    uint64_t trains = 0;  // trains that were samples of the link's rate
};

struct FlowView {
    SessionId session = 0;
    uint32_t flow = 0;
    std::string link;
    WireClass cls;
    bool pending = false;  // a transfer is requested or granted
    bool holding = false;
    uint64_t bytes = 0;
    uint64_t grants = 0;
};

class ArbiterCore {
  public:
    static Result<std::unique_ptr<ArbiterCore>> create(const CoreConfig& config);

    // Events. Errors (kInvalidArgument) name what was wrong and leave the state unchanged;
    // the server answers them with an Error message.
    Status open(SessionId session, uint32_t flow, const WireClass& cls, const std::string& link,
                Nanos now_ns);
    Status request(SessionId session, uint32_t flow, uint64_t bytes, Nanos now_ns);
    Status release(SessionId session, uint32_t flow, uint64_t seq, uint64_t bytes, Nanos now_ns);
    Status close(SessionId session, uint32_t flow, Nanos now_ns);
    // A train of `bytes` over `dispersion_ns` measured on `link`, ending now_ns (the
    // server's receipt). False when ignored: no such link, or too small or too short to be
    // a sample (sched::PathRateConfig).
    bool train(const std::string& link, uint64_t bytes, Nanos dispersion_ns, Nanos now_ns);
    // Cancels and forgets every flow of the session.
    void dropSession(SessionId session, Nanos now_ns);

    // Runs the policies of links with pending events or a due decision; appends the grants
    // to send. Call after events and whenever now_ns reaches nextDecisionNs().
    void decide(Nanos now_ns, std::vector<GrantOut>* out);
    // Earliest time a decision is due (sched::kNever when nothing can change by itself).
    Nanos nextDecisionNs(Nanos now_ns) const;

    sched::PolicyKind policy() const { return config_.policy; }
    const CoreConfig& config() const { return config_; }
    size_t flowCount() const { return flows_.size(); }
    std::vector<std::string> links() const;
    // nullptr when the link does not exist.
    const LinkStats* linkStats(const std::string& link) const;
    // Current holders of a link (session, flow), in grant order.
    std::vector<std::pair<SessionId, uint32_t>> holders(const std::string& link) const;
    std::vector<FlowView> flows() const;
    // Busy time up to now_ns included (LinkStats::busy_ns only counts closed busy periods).
    Nanos busyNs(const std::string& link, Nanos now_ns) const;
    // Demand time up to now_ns: time with a flow waiting for the link or holding it (the
    // time the link had work; the bytes it carried over this time are its utilization while
    // flows are queued).
    Nanos demandNs(const std::string& link, Nanos now_ns) const;
    Nanos createdNs(const std::string& link) const;
    // The link's rate estimate at now_ns (0: unknown, or no such link).
    uint64_t rateBps(const std::string& link, Nanos now_ns) const;
    // The workload-aware policy's pick counters (planned / fallback / aged), or nullopt when
    // the link runs another policy.
    std::optional<sched::WorkloadAware::Counters> workloadCounters(const std::string& link) const;

  private:
    struct Link;
    struct Flow {
        SessionId session = 0;
        uint32_t flow = 0;
        sched::FlowId id = 0;
        Link* link = nullptr;
        WireClass cls;
        bool pending = false;
        bool holding = false;
        bool served = false;  // the pending transfer had its first grant
        Nanos requested_ns = 0;
        Nanos until_ns = 0;  // policy lease end of the current grant
        uint64_t grant_seq = 0;
        uint64_t bytes = 0;
        uint64_t grants = 0;
    };
    struct Link {
        std::string name;
        std::unique_ptr<sched::LinkPolicy> policy;
        std::vector<Flow*> holders;
        bool dirty = false;
        Nanos created_ns = 0;
        Nanos busy_since = -1;    // -1: idle
        int pending_flows = 0;    // flows requesting or holding (Flow::pending)
        Nanos demand_since = -1;  // -1: no flow pending
        sched::PathRate rate;     // over every session's trains of this link
        LinkStats stats;
    };
    using Key = std::pair<SessionId, uint32_t>;

    explicit ArbiterCore(const CoreConfig& config) : config_(config) {}
    Flow* find(SessionId session, uint32_t flow);
    const Link* findLink(const std::string& name) const;
    void dropHolder(Link& link, Flow* f, Nanos now_ns);
    // Flow::pending changes only here: it keeps the link's demand time.
    void setPending(Link& link, Flow* f, bool pending, Nanos now_ns);
    void removeFlow(std::map<Key, Flow>::iterator it, Nanos now_ns);

    CoreConfig config_;
    std::map<Key, Flow> flows_;  // node-based: Flow* stay valid
    std::unordered_map<sched::FlowId, Flow*> by_id_;
    std::map<std::string, std::unique_ptr<Link>> links_;
    sched::FlowId next_id_ = 1;
    uint64_t next_seq_ = 0;
};

}  // namespace atlas::arbiter
