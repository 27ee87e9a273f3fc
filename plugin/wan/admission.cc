#include "plugin/wan/admission.h"

#include <unistd.h>

#include <algorithm>

#include "plugin/params.h"

namespace atlas::plugin::wan {
namespace {

Status bad(const std::string& what) {
    return {Code::kInvalidUsage, what};
}

Status parseArbiter(const std::string& text, std::string* host, uint16_t* port) {
    std::string h;
    std::string p;
    if (!text.empty() && text[0] == '[') {
        const size_t close = text.find(']');
        if (close == std::string::npos || close + 2 > text.size() || text[close + 1] != ':') {
            return bad("ATLAS_ARBITER_CONNECT='" + text + "': expected HOST:PORT or [IPV6]:PORT");
        }
        h = text.substr(1, close - 1);
        p = text.substr(close + 2);
    } else {
        const size_t colon = text.rfind(':');
        if (colon == std::string::npos || colon == 0) {
            return bad("ATLAS_ARBITER_CONNECT='" + text + "': expected HOST:PORT");
        }
        h = text.substr(0, colon);
        p = text.substr(colon + 1);
    }
    auto v = parseUnsignedText(p);
    if (!v || *v == 0 || *v > 65535) {
        return bad("ATLAS_ARBITER_CONNECT='" + text + "': PORT must be 1..65535");
    }
    *host = h;
    *port = static_cast<uint16_t>(*v);
    return Status::ok();
}

}  // namespace

const char* sharingName(Sharing s) {
    switch (s) {
        case Sharing::kFair:
            return "fair";
        case Sharing::kTemporal:
            return "temporal";
        case Sharing::kWorkload:
            return "workload";
    }
    return "?";
}

Result<WanConfig> configFromParams(const Params& p) {
    WanConfig c;
    auto map = DcMap::parse(p.dc_map);
    if (!map) {
        return map.status();
    }
    c.dc_map = std::move(map.value());
    c.wan_rtt_ns = static_cast<Nanos>(p.wan_rtt_us) * kNsPerUs;
    auto cls = parseFlowClass(p.flow_class);
    if (!cls) {
        return cls.status();
    }
    c.flow_class = cls.value();
    if (p.sharing.empty() || p.sharing == "fair") {
        c.sharing = Sharing::kFair;
    } else if (p.sharing == "temporal") {
        c.sharing = Sharing::kTemporal;
    } else if (p.sharing == "workload") {
        c.sharing = Sharing::kWorkload;
    } else {
        return bad("ATLAS_SHARING='" + p.sharing + "': expected fair, temporal or workload");
    }
    if (!p.arbiter.empty()) {
        ATLAS_RETURN_IF_ERROR(parseArbiter(p.arbiter, &c.arbiter_host, &c.arbiter_port));
    }
    c.arbiter_timeout_ns = static_cast<Nanos>(p.arbiter_timeout_ms) * kNsPerMs;
    c.slot_ns = static_cast<Nanos>(p.slot_ms) * kNsPerMs;
    c.lease_ns = static_cast<Nanos>(p.lease_ms) * kNsPerMs;
    c.max_wait_ns = static_cast<Nanos>(p.max_wait_ms) * kNsPerMs;
    c.handoff_lead_ns = static_cast<Nanos>(p.handoff_lead_us) * kNsPerUs;
    c.shm_prefix = p.node_shm;
    for (char ch : c.shm_prefix) {
        const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                        (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
        if (!ok) {
            return bad("ATLAS_NODE_SHM='" + p.node_shm + "': use [A-Za-z0-9._-] only");
        }
    }
    if (c.shm_prefix.empty() || c.shm_prefix.size() > 100 || c.shm_prefix[0] == '.') {
        return bad("ATLAS_NODE_SHM='" + p.node_shm + "': 1..100 characters, not starting with '.'");
    }
    c.auth_key = p.resolved_auth_key;
    if (p.link_gbps > 0) {
        c.link_bps = static_cast<uint64_t>(p.link_gbps * 1e9);
    }
    if (p.link_rate == "measured") {
        c.measure_rate = true;
    } else if (p.link_rate == "fixed") {
        c.measure_rate = false;
    } else {
        return bad("ATLAS_LINK_RATE='" + p.link_rate + "': expected measured or fixed");
    }
    char host[256] = {};
    if (::gethostname(host, sizeof(host) - 1) == 0) {
        c.client_name = host;
    }
    return c;
}

WanAdmission::WanAdmission(WanConfig config, Logger logger)
    : config_(std::move(config)), logger_(logger) {}

WanAdmission::~WanAdmission() {
    std::lock_guard<std::mutex> lock(mu_);
    if (client_) {
        client_->shutdown();
    }
    for (auto& [name, s] : shm_) {
        s->shutdown();
    }
}

std::shared_ptr<ArbiterClient> WanAdmission::arbiterClient() {
    std::lock_guard<std::mutex> lock(mu_);
    return client_;
}

std::shared_ptr<LinkRate> WanAdmission::rateForLocked(const std::string& link,
                                                      std::shared_ptr<RatePool> pool) {
    auto& rate = rates_[link];
    if (!rate) {
        if (config_.measure_rate) {
            rate = std::make_shared<MeasuredLinkRate>(config_.link_bps, link, logger_,
                                                      std::move(pool), config_.handoff_lead_ns);
        } else {
            rate = std::make_shared<FixedLinkRate>(config_.link_bps, config_.handoff_lead_ns);
        }
    }
    return rate;
}

uint64_t WanAdmission::measuredPathBps(const transport::CommInfo& info) {
    if (config_.link_bps > 0 || !config_.measure_rate) {
        return 0;
    }
    const WanVerdict v = classify(config_.dc_map, config_.wan_rtt_ns, info);
    if (!v.wan) {
        return 0;
    }
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = rates_.find(v.link);
    return it == rates_.end() ? 0 : it->second->measuredBps();
}

WanVerdict WanAdmission::classifyRecv(const transport::CommInfo& info) const {
    return classify(config_.dc_map, config_.wan_rtt_ns, info);
}

AttachResult WanAdmission::attach(transport::SendComm& comm, uint64_t comm_id, int traffic_class,
                                  const TrafficHint& hint) {
    AttachResult r;
    r.hint = hint;
    const transport::CommInfo& info = comm.info();
    r.verdict = classify(config_.dc_map, config_.wan_rtt_ns, info);
    ClassInputs in;
    in.traffic_class = traffic_class;
    in.comm_id = comm_id;
    in.env = config_.flow_class;
    in.local_dc = r.verdict.local_dc;
    in.peer_dc = r.verdict.peer_dc;
    in.peer = &info.peer;
    r.cls = deriveClass(in, &r.class_rule);
    r.cls.priority = static_cast<uint8_t>(
        std::clamp<int>(hint.priority, 0, static_cast<int>(arbiter::kPriorityLevels) - 1));
    const bool arbiter_mode = !config_.arbiter_host.empty();
    // With an arbiter, its policy decides (fair there turns gating off); without one,
    // ATLAS_SHARING=fair means no gating at all.
    if (!r.verdict.wan || !config_.gatesWanFlows()) {
        r.mode = "none";
        return r;
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (arbiter_mode) {
        if (!client_ && !client_failed_) {
            ArbiterClientConfig cc;
            cc.host = config_.arbiter_host;
            cc.port = config_.arbiter_port;
            cc.auth_key = config_.auth_key;
            cc.connect_timeout_ns = config_.arbiter_timeout_ns;
            cc.name = config_.client_name;
            cc.logger = logger_;
            auto started = ArbiterClient::start(cc);
            if (!started) {
                client_failed_ = true;
                ATLAS_LOG_WARN(logger_,
                               "cannot start the arbiter client (%s): WAN flows send "
                               "unarbitrated",
                               started.status().message().c_str());
            } else {
                client_ = std::move(started.value());
            }
        }
        if (!client_) {
            r.mode = "fail-open";
            return r;
        }
        // The DC's processes pool their trains of this link at the arbiter (protocol 3).
        comm.setGate(
            client_->makeGate(r.verdict.link, r.cls, comm.waker(),
                              rateForLocked(r.verdict.link, client_->ratePool(r.verdict.link))));
        r.gated = true;
        r.mode = "arbiter";
        return r;
    }
    if (config_.sharing == Sharing::kWorkload && !workload_note_) {
        workload_note_ = true;
        ATLAS_LOG_INFO(logger_,
                       "ATLAS_SHARING=workload needs atlas-arbiter (ATLAS_ARBITER_CONNECT); "
                       "node-local arbitration serves the link first come first served "
                       "(temporal)");
    }
    const std::string name = shmNameForLink(config_.shm_prefix, r.verdict.link);
    auto it = shm_.find(name);
    if (it == shm_.end()) {
        if (shm_failed_.count(name) != 0) {
            r.mode = "fail-open";
            return r;
        }
        ShmConfig sc;
        sc.name = name;
        sc.dir = config_.shm_dir;
        sc.slot_ns = config_.slot_ns;
        sc.lease_ns = config_.lease_ns;
        sc.max_wait_ns = config_.max_wait_ns;
        sc.logger = logger_;
        auto opened = ShmArbiter::open(sc);
        if (!opened) {
            shm_failed_[name] = true;
            ATLAS_LOG_WARN(logger_,
                           "node-local arbitration for link %s unavailable (%s): its "
                           "WAN flows send unarbitrated",
                           r.verdict.link.c_str(), opened.status().message().c_str());
            r.mode = "fail-open";
            return r;
        }
        it = shm_.emplace(name, std::move(opened.value())).first;
    }
    // The node's processes pool their trains of this link in its segment.
    auto gate = it->second->makeGate(r.cls, comm.waker(),
                                     rateForLocked(r.verdict.link, it->second->ratePool()));
    if (!gate) {
        ATLAS_LOG_WARN(logger_,
                       "node-local arbitration for link %s: %s; this flow sends "
                       "unarbitrated",
                       r.verdict.link.c_str(), gate.status().message().c_str());
        r.mode = "fail-open";
        return r;
    }
    comm.setGate(std::move(gate.value()));
    r.gated = true;
    r.mode = "node-local";
    return r;
}

}  // namespace atlas::plugin::wan
