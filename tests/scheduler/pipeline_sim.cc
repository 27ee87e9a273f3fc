#include "tests/scheduler/pipeline_sim.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "scheduler/link_model.h"
#include "tests/scheduler/trace_gen.h"

namespace atlas::sched::testing {

namespace {

struct Op {
    bool forward = true;
    int mb = 0;
};

std::vector<Op> opsFor(const PipelineConfig& c, int stage) {
    std::vector<Op> ops;
    const int m = c.micro_batches;
    if (c.schedule == Schedule::kGPipe) {
        for (int i = 0; i < m; ++i) {
            ops.push_back({true, i});
        }
        for (int i = m - 1; i >= 0; --i) {
            ops.push_back({false, i});
        }
        return ops;
    }
    // 1F1B: warm-up forwards, then one forward / one backward, then the remaining backwards.
    const int warmup = std::min(c.stages - stage - 1, m);
    for (int i = 0; i < warmup; ++i) {
        ops.push_back({true, i});
    }
    for (int i = 0; i < m - warmup; ++i) {
        ops.push_back({true, warmup + i});
        ops.push_back({false, i});
    }
    for (int i = m - warmup; i < m; ++i) {
        ops.push_back({false, i});
    }
    return ops;
}

class Sim {
  public:
    Sim(const PipelineConfig& c, PolicyKind kind, const PolicyConfig& pc)
        : c_(c),
          fwd_policy_(std::move(makePolicy(kind, pc).value())),
          bwd_policy_(std::move(makePolicy(kind, pc).value())),
          fwd_(*fwd_policy_, c.link_bytes_per_sec),
          bwd_(*bwd_policy_, c.link_bytes_per_sec) {
        workers_.resize(static_cast<size_t>(c.pipelines));
        for (auto& row : workers_) {
            row.resize(static_cast<size_t>(c.stages));
            for (int s = 0; s < c.stages; ++s) {
                row[static_cast<size_t>(s)].ops = opsFor(c, s);
            }
        }
    }

    PipelineResult run() {
        startIteration(0);
        while (static_cast<int>(result_.iteration_end_ns.size()) < c_.iterations) {
            const Nanos tc = compute_.empty() ? kNever : compute_.top().t;
            const Nanos t = std::min({tc, fwd_.nextEventNs(), bwd_.nextEventNs(), next_start_});
            if (t == kNever) {
                break;  // deadlock: the caller sees fewer iterations than asked for
            }
            drain(fwd_.advanceTo(t, &completions_), t);
            drain(bwd_.advanceTo(t, &completions_), t);
            if (t == next_start_) {
                startIteration(t);
            }
            while (!compute_.empty() && compute_.top().t == t) {
                const Event e = compute_.top();
                compute_.pop();
                finishOp(e.p, e.s, t);
            }
            noteGrants(fwd_, *fwd_policy_, t);
            noteGrants(bwd_, *bwd_policy_, t);
        }
        const auto& ends = result_.iteration_end_ns;
        const size_t half = ends.size() / 2;
        if (ends.size() >= 2 && half >= 1) {
            result_.steady_iteration_ns = static_cast<double>(ends.back() - ends[half - 1]) /
                                          static_cast<double>(ends.size() - half);
        }
        return result_;
    }

    std::vector<std::unique_ptr<LinkPolicy>> takePolicies() {
        std::vector<std::unique_ptr<LinkPolicy>> out;
        out.push_back(std::move(fwd_policy_));
        out.push_back(std::move(bwd_policy_));
        return out;
    }

  private:
    struct Worker {
        std::vector<Op> ops;
        size_t next = 0;
        bool busy = false;
    };
    struct Event {
        Nanos t;
        uint64_t seq;
        int p;
        int s;
        bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
    };
    struct Transfer {
        int p;
        int dst;
        int mb;
        bool forward;
        Nanos requested_ns;
        bool granted;
    };

    void noteGrants(const FluidLink& link, const LinkPolicy& policy, Nanos t) {
        result_.max_active_flows = std::max(result_.max_active_flows, policy.activeFlows());
        for (const Grant& g : link.grants()) {
            auto it = transfers_.find(g.flow);
            if (it != transfers_.end() && !it->second.granted) {
                it->second.granted = true;
                result_.max_first_grant_wait_ns =
                    std::max(result_.max_first_grant_wait_ns, t - it->second.requested_ns);
            }
        }
    }

    void drain(const Status& st, Nanos t) {
        if (!st.isOk()) {
            next_start_ = kNever;
            compute_ = {};
            return;
        }
        for (const Completion& done : completions_) {
            const Transfer tr = transfers_.at(done.flow);
            transfers_.erase(done.flow);
            if (!tr.granted) {
                // Granted and drained between two polls: it sent alone at full rate at
                // least from (completion - size / rate), so that bounds its first grant.
                const uint64_t bytes = tr.forward ? c_.activation_bytes : c_.gradient_bytes;
                const auto service =
                    static_cast<Nanos>(static_cast<double>(bytes) * 1e9 / c_.link_bytes_per_sec);
                result_.max_first_grant_wait_ns = std::max(
                    result_.max_first_grant_wait_ns, done.time_ns - service - tr.requested_ns);
            }
            auto& ready = tr.forward ? act_ready_ : grad_ready_;
            ready[index(tr.p, tr.dst, tr.mb)] = 1;
            tryStart(tr.p, tr.dst, t);
        }
        completions_.clear();
    }

    size_t index(int p, int s, int m) const {
        return (static_cast<size_t>(p) * static_cast<size_t>(c_.stages) + static_cast<size_t>(s)) *
                   static_cast<size_t>(c_.micro_batches) +
               static_cast<size_t>(m);
    }

    void startIteration(Nanos t) {
        next_start_ = kNever;
        done_workers_ = 0;
        const size_t cells = static_cast<size_t>(c_.pipelines * c_.stages * c_.micro_batches);
        act_ready_.assign(cells, 0);
        grad_ready_.assign(cells, 0);
        for (int p = 0; p < c_.pipelines; ++p) {
            for (int s = 0; s < c_.stages; ++s) {
                Worker& w = workers_[static_cast<size_t>(p)][static_cast<size_t>(s)];
                w.next = 0;
                w.busy = false;
                tryStart(p, s, t);
            }
        }
    }

    // Compute time of one op: the same for every policy (seeded by the op's identity).
    Nanos duration(int p, int s, size_t op, bool forward) const {
        const Nanos base = forward ? c_.fwd_ns : c_.bwd_ns;
        if (c_.jitter <= 0.0) {
            return base;
        }
        const auto iter = static_cast<uint64_t>(result_.iteration_end_ns.size());
        Rng rng(
            c_.seed * 0x9e3779b97f4a7c15ULL ^
            (((iter * 64 + static_cast<uint64_t>(p)) * 64 + static_cast<uint64_t>(s)) * 256 + op));
        return static_cast<Nanos>(static_cast<double>(base) *
                                  (1.0 + rng.uniform(-c_.jitter, c_.jitter)));
    }

    void tryStart(int p, int s, Nanos t) {
        Worker& w = workers_[static_cast<size_t>(p)][static_cast<size_t>(s)];
        if (w.busy || w.next >= w.ops.size()) {
            return;
        }
        const Op op = w.ops[w.next];
        const bool ready = op.forward
                               ? (s == 0 || act_ready_[index(p, s, op.mb)] != 0)
                               : (s == c_.stages - 1 || grad_ready_[index(p, s, op.mb)] != 0);
        if (!ready) {
            return;
        }
        w.busy = true;
        compute_.push({t + duration(p, s, w.next, op.forward), seq_++, p, s});
    }

    void send(int p, int s, int mb, bool forward, Nanos t) {
        const int dst = forward ? s + 1 : s - 1;
        const bool wan = forward ? s == c_.boundary : s == c_.boundary + 1;
        if (!wan) {
            auto& ready = forward ? act_ready_ : grad_ready_;
            ready[index(p, dst, mb)] = 1;
            tryStart(p, dst, t);
            return;
        }
        const FlowId flow = next_flow_++;
        transfers_[flow] = {p, dst, mb, forward, t, false};
        FluidLink& link = forward ? fwd_ : bwd_;
        const FlowClass cls{p, s, forward ? Direction::kForward : Direction::kBackward};
        drain(link.submit(flow, cls, forward ? c_.activation_bytes : c_.gradient_bytes, t,
                          &completions_),
              t);
    }

    void finishOp(int p, int s, Nanos t) {
        Worker& w = workers_[static_cast<size_t>(p)][static_cast<size_t>(s)];
        const Op op = w.ops[w.next];
        w.busy = false;
        ++w.next;
        if (op.forward && s < c_.stages - 1) {
            send(p, s, op.mb, true, t);
        } else if (!op.forward && s > 0) {
            send(p, s, op.mb, false, t);
        }
        if (w.next == w.ops.size() && ++done_workers_ == c_.pipelines * c_.stages) {
            result_.iteration_end_ns.push_back(t);
            next_start_ = t + c_.allreduce_ns;
        }
        tryStart(p, s, t);
    }

    PipelineConfig c_;
    std::unique_ptr<LinkPolicy> fwd_policy_;
    std::unique_ptr<LinkPolicy> bwd_policy_;
    FluidLink fwd_;
    FluidLink bwd_;
    std::vector<std::vector<Worker>> workers_;
    std::vector<uint8_t> act_ready_;
    std::vector<uint8_t> grad_ready_;
    std::priority_queue<Event, std::vector<Event>, std::greater<>> compute_;
    std::unordered_map<FlowId, Transfer> transfers_;
    std::vector<Completion> completions_;
    FlowId next_flow_ = 1;
    uint64_t seq_ = 0;
    int done_workers_ = 0;
    Nanos next_start_ = kNever;
    PipelineResult result_;
};

}  // namespace

PipelineResult runPipeline(const PipelineConfig& config, PolicyKind kind,
                           const PolicyConfig& policy_config,
                           std::vector<std::unique_ptr<LinkPolicy>>* policies_out) {
    Sim sim(config, kind, policy_config);
    PipelineResult r = sim.run();
    if (policies_out != nullptr) {
        *policies_out = sim.takePolicies();
    }
    return r;
}

}  // namespace atlas::sched::testing
