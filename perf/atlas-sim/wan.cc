#include "perf/atlas-sim/wan.h"

#include <algorithm>

#include "perf/atlas-sim/model.h"
#include "scheduler/workload_aware.h"

namespace atlas::sim {

std::span<const sched::Grant> RateCappedPolicy::decide(Nanos now_ns) {
    std::span<const sched::Grant> g = inner_->decide(now_ns);
    capped_.assign(g.begin(), g.end());
    for (sched::Grant& x : capped_) {
        x.share = std::min(x.share, max_share_);
    }
    return capped_;
}

Result<std::unique_ptr<WanNetwork>> WanNetwork::create(const ClusterSpec& cluster,
                                                       const NetworkSpec& net, bool record) {
    const int n = static_cast<int>(cluster.dcs.size());
    std::unique_ptr<WanNetwork> w(new WanNetwork(n, record));
    w->links_.resize(static_cast<size_t>(n) * n);
    for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
            if (a == b) {
                continue;
            }
            Link& l = w->links_[static_cast<size_t>(w->linkIndex(a, b))];
            const WanPath& p = cluster.path(a, b);
            Result<std::unique_ptr<sched::LinkPolicy>> policy =
                sched::makePolicy(net.policy, net.policy_config);
            if (!policy.isOk()) {
                return policy.status();
            }
            // What the link carries as payload: its rate less the segments' headers.
            const double payload =
                p.bytes_per_sec * net.mss_bytes / (net.mss_bytes + net.header_bytes);
            const double cap = transferRateBytesPerSec(p, net);
            l.policy = std::make_unique<RateCappedPolicy>(std::move(policy.value()),
                                                          std::min(1.0, cap / payload));
            l.fluid = std::make_unique<sched::FluidLink>(*l.policy, payload, 0);
            l.one_way_ns = p.rtt_ns / 2;
            l.rtt_ns = p.rtt_ns;
            l.buffer_ns = p.buffer_ns;
            l.lossy =
                p.buffer_ns > 0 && static_cast<double>(p.buffer_ns) <
                                       net.contention_queue_bdp * static_cast<double>(p.rtt_ns);
            l.stats.from = a;
            l.stats.to = b;
            l.stats.capacity_bytes_per_sec = payload;
            l.stats.transfer_cap_bytes_per_sec = std::min(cap, payload);
        }
    }
    return w;
}

void WanNetwork::accountShared(Link& l, Nanos now_ns) {
    const std::span<const sched::Grant> g = l.fluid->grants();
    if (g.size() >= 2 && now_ns > l.shared_from) {
        for (const sched::Grant& x : g) {
            l.transfers[static_cast<uint32_t>(x.flow)].shared_ns += now_ns - l.shared_from;
        }
    }
    l.shared_from = std::max(l.shared_from, now_ns);
}

Status WanNetwork::submit(Link& l, uint32_t index, Nanos now_ns) {
    const Transfer& t = l.transfers[index];
    return l.fluid->submit(index, t.cls, t.bytes, now_ns, &l.completed);
}

Status WanNetwork::drain(Link& l, std::vector<WanDelivery>* out) {
    std::vector<sched::Completion> batch;
    while (!l.completed.empty()) {
        batch.clear();
        batch.swap(l.completed);
        for (const sched::Completion& c : batch) {
            const auto index = static_cast<uint32_t>(c.flow);
            const Transfer t = l.transfers[index];
            // Contention loss (wan.h): a transfer that shared an overflowing bottleneck for
            // an RTT or more recovers a lost segment, an RTT and the full buffer later.
            const bool lost = l.lossy && t.shared_ns >= l.rtt_ns;
            l.stats.loss_recoveries += lost ? 1 : 0;
            out->push_back({t.tag, c.time_ns + l.one_way_ns + (lost ? l.rtt_ns + l.buffer_ns : 0)});
            l.stats.bytes += t.bytes;
            ++l.stats.transfers;
            auto it = l.conns.find(t.conn);
            if (it == l.conns.end() || it->second.empty() || it->second.front() != index) {
                return Status(Code::kInternal, "wan: completion out of connection order");
            }
            it->second.pop_front();
            l.free.push_back(index);
            if (it->second.empty()) {
                l.conns.erase(it);
            } else {
                // The next message of this connection starts the instant the previous drained.
                ATLAS_RETURN_IF_ERROR(submit(l, it->second.front(), c.time_ns));
            }
        }
    }
    return Status::ok();
}

void WanNetwork::observe(Link& l) {
    double shares = 0.0;
    for (const sched::Grant& g : l.fluid->grants()) {
        shares += g.share;
    }
    l.stats.max_share_sum = std::max(l.stats.max_share_sum, shares);
    l.stats.max_active = std::max(l.stats.max_active, l.policy->activeFlows());
    if (record_) {
        const double rate = shares * l.stats.capacity_bytes_per_sec;
        const Nanos now = l.fluid->nowNs();
        std::vector<RateSegment>& seg = l.stats.rate;
        if (!seg.empty() && seg.back().start_ns == now) {
            seg.back().bytes_per_sec = rate;
        } else if (seg.empty() || seg.back().bytes_per_sec != rate) {
            seg.push_back({now, rate});
        }
    }
}

Status WanNetwork::advance(int link, Nanos now_ns, std::vector<WanDelivery>* out) {
    Link& l = links_[static_cast<size_t>(link)];
    if (!l.fluid) {
        return Status(Code::kInternal, "wan: no link from a DC to itself");
    }
    // One instant at a time, so that a connection's next message starts exactly when the
    // previous one drained.
    for (;;) {
        const Nanos next = l.fluid->nextEventNs();
        if (next > now_ns) {
            break;
        }
        accountShared(l, next);  // the grants held until this event
        ATLAS_RETURN_IF_ERROR(l.fluid->advanceTo(next, &l.completed));
        ATLAS_RETURN_IF_ERROR(drain(l, out));
        observe(l);
    }
    return Status::ok();
}

Status WanNetwork::send(int link, uint64_t conn, const sched::FlowClass& cls, uint64_t bytes,
                        uint64_t tag, Nanos now_ns, std::vector<WanDelivery>* out) {
    ATLAS_RETURN_IF_ERROR(advance(link, now_ns, out));
    Link& l = links_[static_cast<size_t>(link)];
    uint32_t index;
    if (!l.free.empty()) {
        index = l.free.back();
        l.free.pop_back();
    } else {
        index = static_cast<uint32_t>(l.transfers.size());
        l.transfers.emplace_back();
    }
    l.transfers[index] = Transfer{conn, cls, bytes, tag, 0};
    std::deque<uint32_t>& q = l.conns[conn];
    q.push_back(index);
    if (q.size() == 1) {
        accountShared(l, now_ns);  // the grants held until this submit
        ATLAS_RETURN_IF_ERROR(submit(l, index, now_ns));
        ATLAS_RETURN_IF_ERROR(drain(l, out));
    }
    observe(l);
    return Status::ok();
}

Nanos WanNetwork::nextEventNs(int link) const {
    const Link& l = links_[static_cast<size_t>(link)];
    return l.fluid ? l.fluid->nextEventNs() : sched::kNever;
}

std::vector<LinkStats> WanNetwork::stats(bool all) const {
    std::vector<LinkStats> out;
    for (const Link& l : links_) {
        if (!l.fluid || (!all && l.stats.transfers == 0 && l.policy->activeFlows() == 0)) {
            continue;
        }
        LinkStats s = l.stats;
        s.busy_ns = l.fluid->busyNs();
        if (const auto* wa = dynamic_cast<const sched::WorkloadAware*>(&l.policy->inner())) {
            s.planned_picks = wa->counters().planned_picks;
            s.fallback_picks = wa->counters().fallback_picks;
            s.aged_picks = wa->counters().aged_picks;
            s.shaped_leases = wa->counters().shaped_leases;
            s.workload_plan =
                std::string(sched::planName(wa->activePlan())) + (wa->planChosen() ? "" : "*");
        }
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace atlas::sim
