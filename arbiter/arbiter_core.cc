#include "arbiter/arbiter_core.h"

#include <algorithm>

namespace atlas::arbiter {
namespace {

// The wire spells the scheduler's priority range without depending on it.
static_assert(kPriorityLevels == sched::kPriorityLevels);
static_assert(kDefaultPriority == sched::kDefaultPriority);

sched::FlowClass toClass(const WireClass& c) {
    sched::FlowClass out;
    out.pipeline = c.pipeline;
    out.stage = c.stage;
    out.direction = c.direction == 0 ? sched::Direction::kForward : sched::Direction::kBackward;
    out.priority = c.priority;  // < kPriorityLevels: checked by the decoder and open()
    return out;
}

Status badFlow(const std::string& what) {
    return {Code::kInvalidArgument, what};
}

}  // namespace

Result<std::unique_ptr<ArbiterCore>> ArbiterCore::create(const CoreConfig& config) {
    ATLAS_RETURN_IF_ERROR(sched::validate(config.policy_config));
    if (config.max_flows == 0 || config.max_links == 0) {
        return Status(Code::kInvalidArgument, "max_flows and max_links must be positive");
    }
    // Fail early on a policy that cannot be built, rather than at the first open.
    auto probe = sched::makePolicy(config.policy, config.policy_config);
    if (!probe) {
        return probe.status();
    }
    return std::unique_ptr<ArbiterCore>(new ArbiterCore(config));
}

ArbiterCore::Flow* ArbiterCore::find(SessionId session, uint32_t flow) {
    auto it = flows_.find({session, flow});
    return it == flows_.end() ? nullptr : &it->second;
}

Status ArbiterCore::open(SessionId session, uint32_t flow, const WireClass& cls,
                         const std::string& link, Nanos now_ns) {
    if (!validLinkName(link)) {
        return badFlow("invalid link name '" + link + "'");
    }
    if (cls.priority >= kPriorityLevels) {
        return badFlow("invalid priority " + std::to_string(cls.priority) + " (0.." +
                       std::to_string(kPriorityLevels - 1) + ")");
    }
    if (find(session, flow) != nullptr) {
        return badFlow("flow " + std::to_string(flow) + " is already open");
    }
    if (flows_.size() >= config_.max_flows) {
        return badFlow("too many flows (" + std::to_string(config_.max_flows) + ")");
    }
    auto lit = links_.find(link);
    if (lit == links_.end()) {
        if (links_.size() >= config_.max_links) {
            return badFlow("too many links (" + std::to_string(config_.max_links) + ")");
        }
        auto policy = sched::makePolicy(config_.policy, config_.policy_config);
        if (!policy) {
            return policy.status();
        }
        auto l = std::make_unique<Link>();
        l->name = link;
        l->policy = std::move(policy.value());
        l->created_ns = now_ns;
        lit = links_.emplace(link, std::move(l)).first;
    }
    Flow f;
    f.session = session;
    f.flow = flow;
    f.id = next_id_++;
    f.link = lit->second.get();
    f.cls = cls;
    auto [it, inserted] = flows_.emplace(Key{session, flow}, f);
    by_id_[it->second.id] = &it->second;
    return Status::ok();
}

Status ArbiterCore::request(SessionId session, uint32_t flow, uint64_t bytes, Nanos now_ns) {
    Flow* f = find(session, flow);
    if (f == nullptr) {
        return badFlow("request for unknown flow " + std::to_string(flow));
    }
    if (f->pending) {
        return Status::ok();  // already requested or granted: the client re-asks after slots
    }
    Link& l = *f->link;
    ATLAS_RETURN_IF_ERROR(
        l.policy->onRequest(f->id, toClass(f->cls), std::max<uint64_t>(bytes, 1), now_ns));
    setPending(l, f, true, now_ns);
    f->served = false;
    f->requested_ns = now_ns;
    l.dirty = true;
    ++l.stats.requests;
    return Status::ok();
}

void ArbiterCore::dropHolder(Link& link, Flow* f, Nanos now_ns) {
    if (!f->holding) {
        return;
    }
    f->holding = false;
    link.holders.erase(std::remove(link.holders.begin(), link.holders.end(), f),
                       link.holders.end());
    if (link.holders.empty() && link.busy_since >= 0) {
        link.stats.busy_ns += now_ns - link.busy_since;
        link.busy_since = -1;
    }
}

Status ArbiterCore::release(SessionId session, uint32_t flow, uint64_t seq, uint64_t bytes,
                            Nanos now_ns) {
    Flow* f = find(session, flow);
    if (f == nullptr) {
        return badFlow("release for unknown flow " + std::to_string(flow));
    }
    Link& l = *f->link;
    f->bytes += bytes;
    l.stats.bytes += bytes;
    if (!f->holding || seq != f->grant_seq) {
        ++l.stats.stale_releases;
        return Status::ok();
    }
    ATLAS_RETURN_IF_ERROR(l.policy->onComplete(f->id, now_ns));
    setPending(l, f, false, now_ns);
    dropHolder(l, f, now_ns);
    l.dirty = true;
    return Status::ok();
}

void ArbiterCore::setPending(Link& link, Flow* f, bool pending, Nanos now_ns) {
    if (f->pending == pending) {
        return;
    }
    f->pending = pending;
    link.pending_flows += pending ? 1 : -1;
    if (pending && link.pending_flows == 1) {
        link.demand_since = now_ns;
    } else if (!pending && link.pending_flows == 0 && link.demand_since >= 0) {
        link.stats.demand_ns += now_ns - link.demand_since;
        link.demand_since = -1;
    }
}

void ArbiterCore::removeFlow(std::map<Key, Flow>::iterator it, Nanos now_ns) {
    Flow& f = it->second;
    Link& l = *f.link;
    if (f.pending) {
        // Cannot fail: the flow is known to the policy and time does not go backwards.
        (void)l.policy->onCancel(f.id, now_ns);
        ++l.stats.cancels;
        l.dirty = true;
        setPending(l, &f, false, now_ns);
    }
    dropHolder(l, &f, now_ns);
    by_id_.erase(f.id);
    flows_.erase(it);
}

Status ArbiterCore::close(SessionId session, uint32_t flow, Nanos now_ns) {
    auto it = flows_.find({session, flow});
    if (it == flows_.end()) {
        return badFlow("close of unknown flow " + std::to_string(flow));
    }
    removeFlow(it, now_ns);
    return Status::ok();
}

bool ArbiterCore::train(const std::string& link, uint64_t bytes, Nanos dispersion_ns,
                        Nanos now_ns) {
    auto it = links_.find(link);
    // addMessage applies the sample filter (PathRateConfig::admits: a positive dispersion).
    if (it == links_.end() || !it->second->rate.addMessage(bytes, now_ns - dispersion_ns, now_ns)) {
        return false;
    }
    ++it->second->stats.trains;
    return true;
}

void ArbiterCore::dropSession(SessionId session, Nanos now_ns) {
    auto it = flows_.lower_bound({session, 0});
    while (it != flows_.end() && it->first.first == session) {
        auto next = std::next(it);
        removeFlow(it, now_ns);
        it = next;
    }
}

void ArbiterCore::decide(Nanos now_ns, std::vector<GrantOut>* out) {
    for (auto& [name, lp] : links_) {
        Link& l = *lp;
        if (!l.dirty && l.policy->nextDecisionNs(now_ns) > now_ns) {
            continue;
        }
        l.dirty = false;
        std::span<const sched::Grant> grants = l.policy->decide(now_ns);
        std::vector<Flow*> now_holding;
        now_holding.reserve(grants.size());
        for (const sched::Grant& g : grants) {
            auto it = by_id_.find(g.flow);
            if (it == by_id_.end()) {
                continue;  // cannot happen: every policy flow is in by_id_
            }
            Flow* f = it->second;
            now_holding.push_back(f);
            if (f->holding && f->until_ns == g.until_ns) {
                continue;  // unchanged grant
            }
            f->holding = true;
            f->until_ns = g.until_ns;
            f->grant_seq = ++next_seq_;
            ++f->grants;
            ++l.stats.grants;
            if (!f->served) {
                f->served = true;
                ++l.stats.first_grants;
                const Nanos waited = now_ns - f->requested_ns;
                l.stats.wait_ns_sum += waited;
                l.stats.wait_ns_max = std::max(l.stats.wait_ns_max, waited);
                if (waited > 0) {
                    ++l.stats.waited;
                }
            }
            GrantOut g_out;
            g_out.session = f->session;
            g_out.flow = f->flow;
            g_out.seq = f->grant_seq;
            g_out.slot_ns =
                g.until_ns == sched::kNever ? 0 : std::max<Nanos>(g.until_ns - now_ns, 1);
            g_out.rate_bps = l.rate.bitsPerSec(now_ns);
            out->push_back(g_out);
        }
        // Holders the policy no longer lists were preempted at their lease end; the client's
        // own slot ended at the same moment, so nothing is sent to them.
        for (Flow* f : std::vector<Flow*>(l.holders)) {
            if (std::find(now_holding.begin(), now_holding.end(), f) == now_holding.end()) {
                dropHolder(l, f, now_ns);
            }
        }
        for (Flow* f : now_holding) {
            if (std::find(l.holders.begin(), l.holders.end(), f) == l.holders.end()) {
                l.holders.push_back(f);
            }
        }
        if (!l.holders.empty() && l.busy_since < 0) {
            l.busy_since = now_ns;
        }
    }
}

Nanos ArbiterCore::nextDecisionNs(Nanos now_ns) const {
    Nanos next = sched::kNever;
    for (const auto& [name, l] : links_) {
        if (l->dirty) {
            return now_ns;
        }
        next = std::min(next, l->policy->nextDecisionNs(now_ns));
    }
    return next;
}

std::vector<std::string> ArbiterCore::links() const {
    std::vector<std::string> out;
    for (const auto& [name, l] : links_) {
        out.push_back(name);
    }
    return out;
}

const LinkStats* ArbiterCore::linkStats(const std::string& link) const {
    const Link* l = findLink(link);
    return l == nullptr ? nullptr : &l->stats;
}

std::vector<std::pair<SessionId, uint32_t>> ArbiterCore::holders(const std::string& link) const {
    std::vector<std::pair<SessionId, uint32_t>> out;
    auto it = links_.find(link);
    if (it != links_.end()) {
        for (const Flow* f : it->second->holders) {
            out.emplace_back(f->session, f->flow);
        }
    }
    return out;
}

std::vector<FlowView> ArbiterCore::flows() const {
    std::vector<FlowView> out;
    out.reserve(flows_.size());
    for (const auto& [key, f] : flows_) {
        FlowView v;
        v.session = f.session;
        v.flow = f.flow;
        v.link = f.link->name;
        v.cls = f.cls;
        v.pending = f.pending;
        v.holding = f.holding;
        v.bytes = f.bytes;
        v.grants = f.grants;
        out.push_back(std::move(v));
    }
    return out;
}

const ArbiterCore::Link* ArbiterCore::findLink(const std::string& name) const {
    auto it = links_.find(name);
    return it == links_.end() ? nullptr : it->second.get();
}

Nanos ArbiterCore::busyNs(const std::string& link, Nanos now_ns) const {
    const Link* l = findLink(link);
    return l == nullptr ? 0 : l->stats.busy_ns + (l->busy_since >= 0 ? now_ns - l->busy_since : 0);
}

Nanos ArbiterCore::demandNs(const std::string& link, Nanos now_ns) const {
    const Link* l = findLink(link);
    return l == nullptr
               ? 0
               : l->stats.demand_ns + (l->demand_since >= 0 ? now_ns - l->demand_since : 0);
}

std::optional<sched::WorkloadAware::Counters> ArbiterCore::workloadCounters(
    const std::string& link) const {
    const Link* l = findLink(link);
    const auto* w =
        l == nullptr ? nullptr : dynamic_cast<const sched::WorkloadAware*>(l->policy.get());
    if (w == nullptr) {
        return std::nullopt;
    }
    return w->counters();
}

Nanos ArbiterCore::createdNs(const std::string& link) const {
    const Link* l = findLink(link);
    return l == nullptr ? 0 : l->created_ns;
}

uint64_t ArbiterCore::rateBps(const std::string& link, Nanos now_ns) const {
    const Link* l = findLink(link);
    return l == nullptr ? 0 : l->rate.bitsPerSec(now_ns);
}

}  // namespace atlas::arbiter
