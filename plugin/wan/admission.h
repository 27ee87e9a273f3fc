// WanAdmission: the plugin's WAN admission layer. At connect time it classifies each send
// comm (WAN or not, which link, which flow class) and, for WAN comms under a temporal policy,
// puts a FlowGate on it: DC-wide through atlas-arbiter (ATLAS_ARBITER_CONNECT) or node-local
// through shared memory. Everything else passes untouched.
//
// Built once per plugin state from the ATLAS_* registry (configFromParams), owned by the
// plugin's global state, destroyed (threads joined) at the last finalize. The arbiter client
// and the node-local segments are created lazily by the first WAN comm that needs them, so a
// process without WAN traffic never connects or maps anything.
//
// Threads: attach() may run on several NCCL service threads at once (internal mutex).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "plugin/net_hints.h"
#include "plugin/wan/arbiter_client.h"
#include "plugin/wan/dc_map.h"
#include "plugin/wan/flow_class.h"
#include "plugin/wan/link_rate.h"
#include "plugin/wan/shm_arbiter.h"
#include "scheduler/grant_hold.h"
#include "transport/net.h"

namespace atlas::plugin {
struct Params;
}

namespace atlas::plugin::wan {

enum class Sharing : uint8_t { kFair, kTemporal, kWorkload };
const char* sharingName(Sharing s);

struct WanConfig {
    DcMap dc_map;
    Nanos wan_rtt_ns = 2 * kNsPerMs;  // RTT rule threshold when dc_map is empty; 0 = every comm
    std::optional<FlowClassSpec> flow_class;
    Sharing sharing = Sharing::kFair;
    std::string arbiter_host;  // empty: node-local arbitration
    uint16_t arbiter_port = 0;
    Nanos arbiter_timeout_ns = kNsPerSec;
    Nanos slot_ns = 250 * kNsPerMs;
    Nanos lease_ns = 200 * kNsPerMs;
    Nanos max_wait_ns = 0;  // ATLAS_MAX_WAIT_MS: the priority rule's aging bound; 0 = 20 slots
    std::string shm_prefix = "atlas-wan";
    std::string shm_dir = "/dev/shm";
    std::string auth_key;
    std::string client_name;  // host name, for the arbiter's logs
    // ATLAS_LINK_GBPS: gates hold a grant until its bytes could have crossed the link.
    uint64_t link_bps = 0;
    // ATLAS_LINK_RATE=measured: the rate is learned per link (MeasuredLinkRate), link_bps
    // caps it; fixed: link_bps as typed.
    bool measure_rate = true;
    // ATLAS_HANDOFF_LEAD_US: a drained grant goes to the next waiter this long before its
    // bytes are through (sched::GrantHold's lead; the pipelined hand-off).
    Nanos handoff_lead_ns = sched::kDefaultHandoffLeadNs;

    // Whether WAN flows are gated at all: by an arbiter (its policy decides), or node-local
    // with a sharing other than fair. The one rule, for admission and for the streams'
    // congestion control (ATLAS_TCP_CC=auto).
    bool gatesWanFlows() const { return !arbiter_host.empty() || sharing != Sharing::kFair; }
};

// Parses ATLAS_DC_MAP, ATLAS_WAN_RTT_US, ATLAS_FLOW_CLASS, ATLAS_SHARING, ATLAS_ARBITER_CONNECT,
// ATLAS_ARBITER_TIMEOUT_MS, ATLAS_SLOT_MS, ATLAS_LEASE_MS, ATLAS_MAX_WAIT_MS, ATLAS_NODE_SHM,
// ATLAS_LINK_GBPS, ATLAS_LINK_RATE, ATLAS_HANDOFF_LEAD_US.
// Errors are kInvalidUsage naming the variable (init fails, like any invalid ATLAS_* value).
Result<WanConfig> configFromParams(const Params& params);

// What NCCL's setNetAttr hints say about a send comm (plugin/net_hints.h): its traffic kind
// and the admission priority ATLAS_TRAFFIC_PRIORITY gives it (0 first). attach() puts the
// priority in the flow's class (WireClass::priority), which the segment entry and the
// arbiter's Open carry; the link policy orders waiting flows by it (docs/arbitration.md).
struct TrafficHint {
    TrafficKind kind = TrafficKind::kUnknown;
    int priority = 1;
};

// What attach() decided, for logs and tests.
struct AttachResult {
    WanVerdict verdict;
    bool gated = false;
    std::string mode;  // "none", "arbiter", "node-local", "fail-open"
    arbiter::WireClass cls;
    const char* class_rule = "";
    TrafficHint hint;
};

class WanAdmission {
  public:
    WanAdmission(WanConfig config, Logger logger);
    ~WanAdmission();  // joins the arbiter client's and the watchers' threads
    WanAdmission(const WanAdmission&) = delete;
    WanAdmission& operator=(const WanAdmission&) = delete;

    // Classifies `comm` and gates it when it is a WAN flow under a temporal policy. Must run
    // before the comm's first isend. Never fails: problems with the arbiter or the segment
    // make the comm send unarbitrated (one WARN per cause).
    AttachResult attach(transport::SendComm& comm, uint64_t comm_id, int traffic_class,
                        const TrafficHint& hint = {});

    // The receive side of the same WAN rule, for callers that treat WAN receives specially
    // (the plugin's bubble measurement): ATLAS_DC_MAP on the comm's local and peer
    // addresses, else the handshake RTT the connector measured and sent in its plan (the
    // same figure its send side was classified by) against ATLAS_WAN_RTT_US. Gates nothing,
    // needs no arbiter, ignores ATLAS_SHARING. Const and lock-free (config_ never changes):
    // any thread, any time after accept() returned the comm.
    WanVerdict classifyRecv(const transport::CommInfo& info) const;
    bool isWanRecv(const transport::RecvComm& comm) const { return classifyRecv(comm.info()).wan; }

    // The measured rate of the WAN link `info` (local, peer, handshake RTT) would use, for
    // its stream plan (TransportConfig::measured_path_bps): the estimate of the link's
    // LinkRate when a comm of this process already gated that link and it has trains (under
    // node-local arbitration the node's, under an arbiter the DC's pooled estimate), else 0.
    // 0 too for a comm that is not WAN, with ATLAS_LINK_GBPS set (an override) or
    // ATLAS_LINK_RATE=fixed. Any thread.
    uint64_t measuredPathBps(const transport::CommInfo& info);

    const WanConfig& config() const { return config_; }
    // nullptr until the first arbitrated WAN comm (ATLAS_ARBITER_CONNECT mode).
    std::shared_ptr<ArbiterClient> arbiterClient();

  private:
    // The rate the gates of `link` hold grants by (HoldingGate): one object per link, shared
    // by its gates, measured or fixed (link_rate.h).
    // The link's rate, made at the first use (`pool`: where its samples go, null: this
    // process's own).
    std::shared_ptr<LinkRate> rateForLocked(const std::string& link,
                                            std::shared_ptr<RatePool> pool = nullptr);

    WanConfig config_;
    Logger logger_;
    std::mutex mu_;
    std::shared_ptr<ArbiterClient> client_;
    bool client_failed_ = false;
    std::map<std::string, std::shared_ptr<ShmArbiter>> shm_;
    std::map<std::string, bool> shm_failed_;
    std::map<std::string, std::shared_ptr<LinkRate>> rates_;
    bool workload_note_ = false;
};

}  // namespace atlas::plugin::wan
