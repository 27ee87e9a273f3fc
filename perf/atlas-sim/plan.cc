#include "perf/atlas-sim/plan.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <map>

#include "perf/atlas-sim/model.h"
#include "perf/atlas-sim/placement.h"
#include "perf/atlas-sim/simulator.h"

namespace atlas::sim {

namespace {

constexpr int kMaxSubsetDcs = 12;  // 4095 subsets; beyond, only largest-first prefixes

std::vector<uint32_t> dcSubsets(const ClusterSpec& cl) {
    const int n = static_cast<int>(cl.dcs.size());
    std::vector<uint32_t> out;
    if (n <= kMaxSubsetDcs) {
        for (uint32_t m = 1; m < (1u << n); ++m) {
            out.push_back(m);
        }
        return out;
    }
    std::vector<int> order(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        order[static_cast<size_t>(i)] = i;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return cl.dcs[a].gpus > cl.dcs[b].gpus; });
    uint32_t mask = 0;
    for (int i = 0; i < std::min(n, 32); ++i) {
        mask |= 1u << order[static_cast<size_t>(i)];
        out.push_back(mask);
    }
    return out;
}

// Lower bound on one iteration (see plan.h).
double lowerBoundMs(const SimConfig& c, const Layout& l, const std::vector<StageCost>& cost) {
    Nanos busiest = 0;
    Nanos chain = 0;
    for (int s = 0; s < l.pp; ++s) {
        const StageCost& sc = cost[static_cast<size_t>(s)];
        busiest = std::max(busiest, c.job.micro_batches * (sc.forward_ns + sc.backward_ns));
        chain += sc.forward_ns + sc.backward_ns;
        if (s + 1 < l.pp && l.dcOf(0, s) != l.dcOf(0, s + 1)) {
            chain += c.cluster.path(l.dcOf(0, s), l.dcOf(0, s + 1)).rtt_ns;  // there and back
        }
    }
    return static_cast<double>(std::max(busiest, chain)) / 1e6;
}

std::string dcNames(const SimConfig& c, const Layout& l) {
    std::string out;
    for (size_t i = 0; i < l.gpus_per_dc.size(); ++i) {
        if (l.gpus_per_dc[i] > 0) {
            out += (out.empty() ? "" : "+") + c.cluster.dcs[i].name;
        }
    }
    return out;
}

}  // namespace

Result<PlanResult> plan(const SimConfig& base) {
    if (!base.job.has_model) {
        return Status(Code::kInvalidUsage, "plan: needs job.model (not per-stage times)");
    }
    const PlanSpec& ps = base.plan;
    PlanResult res;
    res.global_batch = ps.global_batch > 0
                           ? ps.global_batch
                           : base.par.dp * base.job.micro_batches * base.job.micro_batch_size;
    const int layers = base.job.model.layers;
    struct Pending {
        SimConfig config;
        PlanCandidate cand;
    };
    std::vector<Pending> pending;
    for (uint32_t mask : dcSubsets(base.cluster)) {
        SimConfig sub = base;
        for (size_t i = 0; i < sub.cluster.dcs.size(); ++i) {
            if ((mask & (1u << i)) == 0) {
                sub.cluster.dcs[i].gpus = 0;
            }
        }
        int total = 0;
        for (const DcSpec& dc : sub.cluster.dcs) {
            total += dc.gpus;
        }
        for (int tp : ps.tp) {
            for (int pp = 1; pp <= std::min(layers, ps.max_pp); ++pp) {
                if (layers % pp != 0) {
                    continue;
                }
                for (int mbs : ps.micro_batch_sizes) {
                    for (int dp = 1; static_cast<int64_t>(dp) * pp * tp <= total; ++dp) {
                        if (res.global_batch % (dp * mbs) != 0) {
                            continue;
                        }
                        ++res.enumerated;
                        if (res.enumerated > ps.max_candidates) {
                            return Status(Code::kInvalidUsage,
                                          "plan: more than plan.max_candidates candidates; "
                                          "narrow plan.tp / max_pp / micro_batch_sizes");
                        }
                        SimConfig c = sub;
                        c.par = ParallelSpec{dp, pp, tp};
                        c.job.micro_batch_size = mbs;
                        c.job.micro_batches = res.global_batch / (dp * mbs);
                        c.placement.kind = PlacementKind::kAtlas;
                        c.bubbletea.enabled = false;
                        c.iterations = ps.iterations;
                        c.warmup_iterations = ps.iterations - 1;
                        if (c.job.micro_batches > kMaxMicroBatches) {
                            ++res.no_fit;
                            continue;
                        }
                        Result<Layout> l = placeStages(c);
                        if (!l.isOk() || l.value().dcsUsed() != std::popcount(mask)) {
                            ++res.no_fit;
                            continue;
                        }
                        const std::vector<StageCost> cost = stageCosts(c);
                        double mem = 0.0;
                        for (int s = 0; s < pp; ++s) {
                            mem =
                                std::max(mem, stageMemoryBytes(c, cost[static_cast<size_t>(s)], s));
                        }
                        if (ps.memory_check && mem > 0.95 * c.gpu.memory_bytes) {
                            ++res.over_memory;
                            continue;
                        }
                        PlanCandidate cand;
                        cand.dp = dp;
                        cand.pp = pp;
                        cand.tp = tp;
                        cand.micro_batch_size = mbs;
                        cand.micro_batches = c.job.micro_batches;
                        cand.dc_mask = mask;
                        cand.gpus = dp * pp * tp;
                        cand.memory_gb = mem / 1e9;
                        cand.lower_bound_ms = lowerBoundMs(c, l.value(), cost);
                        cand.placement = l.value().summary;
                        cand.dcs = dcNames(c, l.value());
                        pending.push_back({std::move(c), cand});
                    }
                }
            }
        }
    }
    std::stable_sort(pending.begin(), pending.end(), [](const Pending& a, const Pending& b) {
        return a.cand.lower_bound_ms < b.cand.lower_bound_ms;
    });
    std::vector<PlanCandidate> done;
    std::map<uint32_t, PlanCandidate> per_subset;
    for (Pending& p : pending) {
        // Skipped only when it can enter neither the top list nor its subset's best: the
        // per-subset table (which DCs to use) stays exact too.
        const auto sub = per_subset.find(p.cand.dc_mask);
        const bool subset_known =
            sub != per_subset.end() && p.cand.lower_bound_ms >= sub->second.iteration_ms;
        if (subset_known && static_cast<int>(done.size()) >= ps.top) {
            const double kth = done[static_cast<size_t>(ps.top) - 1].iteration_ms;
            if (p.cand.lower_bound_ms >= kth) {
                ++res.pruned;
                continue;
            }
        }
        Result<Layout> l = placeStages(p.config);
        Result<RunResult> r = simulate(p.config, l.value(), RunOptions{});
        if (!r.isOk()) {
            return r.status();
        }
        ++res.simulated;
        const RunResult& rr = r.value();
        PlanCandidate cand = p.cand;
        cand.iteration_ms = static_cast<double>(rr.end_ns - rr.measure_start_ns) / 1e6;
        cand.tokens_per_s = static_cast<double>(res.global_batch) * p.config.job.model.seq_len /
                            (cand.iteration_ms / 1e3);
        Nanos idle = 0;
        for (const GroupTotals& t : rr.groups) {
            idle += (rr.end_ns - rr.measure_start_ns) - t.compute_ns - t.allreduce_ns;
        }
        cand.bubble_fraction = static_cast<double>(idle) / static_cast<double>(rr.groups.size()) /
                               static_cast<double>(rr.end_ns - rr.measure_start_ns);
        auto it = per_subset.find(cand.dc_mask);
        if (it == per_subset.end() || cand.iteration_ms < it->second.iteration_ms) {
            per_subset[cand.dc_mask] = cand;
        }
        done.push_back(cand);
        std::stable_sort(done.begin(), done.end(),
                         [](const PlanCandidate& a, const PlanCandidate& b) {
                             return a.iteration_ms < b.iteration_ms;
                         });
        if (static_cast<int>(done.size()) > ps.top) {
            done.pop_back();
        }
    }
    res.top = done;
    for (const auto& [mask, cand] : per_subset) {
        res.best_per_subset.push_back(cand);
    }
    std::stable_sort(res.best_per_subset.begin(), res.best_per_subset.end(),
                     [](const PlanCandidate& a, const PlanCandidate& b) {
                         return a.iteration_ms < b.iteration_ms;
                     });
    return res;
}

namespace {

void printRows(std::ostream& os, const std::vector<PlanCandidate>& rows) {
    os << " #   iter ms      tokens/s     dp   pp  tp  mbs    m   GPUs  mem GB  bubble%  DCs"
          "          placement\n";
    int rank = 1;
    for (const PlanCandidate& p : rows) {
        char line[320];
        std::snprintf(line, sizeof(line),
                      " %-2d %9.2f  %12.0f  %5d %4d %3d %4d %4d %6d %7.1f %8.1f  %-12s %s\n",
                      rank++, p.iteration_ms, p.tokens_per_s, p.dp, p.pp, p.tp, p.micro_batch_size,
                      p.micro_batches, p.gpus, p.memory_gb, 100 * p.bubble_fraction, p.dcs.c_str(),
                      p.placement.c_str());
        os << line;
    }
}

}  // namespace

void printPlan(std::ostream& os, const SimConfig& c, const PlanResult& r) {
    os << "== plan: " << c.name << " ==\nglobal batch " << r.global_batch << " sequences of "
       << c.job.model.seq_len << " tokens; " << r.enumerated << " candidates, " << r.no_fit
       << " do not fit, " << r.over_memory << " over memory, " << r.simulated << " simulated, "
       << r.pruned << " pruned by the bound\n\nTop plans (predicted iteration time):\n";
    printRows(os, r.top);
    os << "\nBest plan per DC subset:\n";
    printRows(os, r.best_per_subset);
}

nlohmann::json toJson(const PlanResult& r) {
    using nlohmann::json;
    auto rows = [](const std::vector<PlanCandidate>& v) {
        json a = json::array();
        for (const PlanCandidate& p : v) {
            a.push_back({{"iteration_ms", p.iteration_ms},
                         {"tokens_per_s", p.tokens_per_s},
                         {"dp", p.dp},
                         {"pp", p.pp},
                         {"tp", p.tp},
                         {"micro_batch_size", p.micro_batch_size},
                         {"micro_batches", p.micro_batches},
                         {"gpus", p.gpus},
                         {"memory_gb", p.memory_gb},
                         {"bubble_fraction", p.bubble_fraction},
                         {"lower_bound_ms", p.lower_bound_ms},
                         {"dcs", p.dcs},
                         {"placement", p.placement}});
        }
        return a;
    };
    return {{"global_batch", r.global_batch},
            {"enumerated", r.enumerated},
            {"no_fit", r.no_fit},
            {"over_memory", r.over_memory},
            {"simulated", r.simulated},
            {"pruned", r.pruned},
            {"top", rows(r.top)},
            {"best_per_subset", rows(r.best_per_subset)}};
}

}  // namespace atlas::sim
