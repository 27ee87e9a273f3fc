#include "perf/atlas-sim/placement.h"

#include <algorithm>
#include <numeric>
#include <sstream>

namespace atlas::sim {

int Layout::dcsUsed() const {
    return static_cast<int>(
        std::count_if(gpus_per_dc.begin(), gpus_per_dc.end(), [](int g) { return g > 0; }));
}

namespace {

Status noFit(const std::string& why) {
    return Status(Code::kInvalidUsage, "placement: " + why);
}

// Stage blocks (dc, count) in pipeline order -> stage_dc.
std::vector<int> expand(const std::vector<std::pair<int, int>>& blocks) {
    std::vector<int> out;
    for (const auto& [dc, count] : blocks) {
        out.insert(out.end(), static_cast<size_t>(count), dc);
    }
    return out;
}

Nanos chainRtt(const ClusterSpec& cl, const std::vector<std::pair<int, int>>& blocks) {
    Nanos sum = 0;
    for (size_t i = 1; i < blocks.size(); ++i) {
        sum += cl.path(blocks[i - 1].first, blocks[i].first).rtt_ns;
    }
    return sum;
}

Result<std::vector<int>> atlasStages(const SimConfig& c) {
    const ClusterSpec& cl = c.cluster;
    const int64_t need = static_cast<int64_t>(c.par.dp) * c.par.tp;
    std::vector<int> order(cl.dcs.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return cl.dcs[a].gpus > cl.dcs[b].gpus; });
    std::vector<std::pair<int, int>> blocks;
    int remaining = c.par.pp;
    for (int dc : order) {
        if (remaining == 0) {
            break;
        }
        const auto fit = static_cast<int>(std::min<int64_t>(cl.dcs[dc].gpus / need, remaining));
        if (fit > 0) {
            blocks.emplace_back(dc, fit);
            remaining -= fit;
        }
    }
    if (remaining > 0) {
        return noFit("atlas: " + std::to_string(remaining) + " of " + std::to_string(c.par.pp) +
                     " stages (dp*tp = " + std::to_string(need) +
                     " GPUs each) do not fit in any DC");
    }
    if (c.placement.order_chain && blocks.size() > 1 && blocks.size() <= 7) {
        std::vector<size_t> perm(blocks.size());
        std::iota(perm.begin(), perm.end(), 0);
        std::vector<std::pair<int, int>> best = blocks;
        Nanos best_rtt = chainRtt(cl, blocks);
        while (std::next_permutation(perm.begin(), perm.end())) {
            std::vector<std::pair<int, int>> cand;
            for (size_t i : perm) {
                cand.push_back(blocks[i]);
            }
            const Nanos rtt = chainRtt(cl, cand);
            if (rtt < best_rtt) {
                best_rtt = rtt;
                best = cand;
            }
        }
        blocks = best;
    }
    return expand(blocks);
}

// The DC of each place for a TP group (one per tp GPUs), in DC listing order (a TP group never
// straddles DCs).
std::vector<int> tpGroupDcs(const SimConfig& c) {
    std::vector<int> dcs;
    for (size_t dc = 0; dc < c.cluster.dcs.size(); ++dc) {
        const int n = c.cluster.dcs[dc].gpus / c.par.tp;
        dcs.insert(dcs.end(), static_cast<size_t>(n), static_cast<int>(dc));
    }
    return dcs;
}

}  // namespace

Result<Layout> placeStages(const SimConfig& c) {
    Layout l;
    l.dp = c.par.dp;
    l.pp = c.par.pp;
    l.tp = c.par.tp;
    const size_t groups = static_cast<size_t>(l.dp) * l.pp;
    l.group_dc.assign(groups, 0);
    switch (c.placement.kind) {
        case PlacementKind::kAtlas:
        case PlacementKind::kManual: {
            std::vector<int> stage_dc = c.placement.stage_dcs;
            if (c.placement.kind == PlacementKind::kAtlas) {
                Result<std::vector<int>> r = atlasStages(c);
                if (!r.isOk()) {
                    return r.status();
                }
                stage_dc = r.value();
            }
            for (int d = 0; d < l.dp; ++d) {
                for (int s = 0; s < l.pp; ++s) {
                    l.group_dc[static_cast<size_t>(d) * l.pp + s] =
                        stage_dc[static_cast<size_t>(s)];
                }
            }
            break;
        }
        case PlacementKind::kSequential:
        case PlacementKind::kPipelineMajor: {
            const std::vector<int> dcs = tpGroupDcs(c);
            if (dcs.size() < groups) {
                return noFit(std::string(placementName(c.placement.kind)) + ": needs " +
                             std::to_string(groups) + " groups of " + std::to_string(l.tp) +
                             " GPUs, the cluster has " + std::to_string(dcs.size()));
            }
            size_t next = 0;
            const bool stage_major = c.placement.kind == PlacementKind::kSequential;
            const int outer = stage_major ? l.pp : l.dp;
            const int inner = stage_major ? l.dp : l.pp;
            for (int o = 0; o < outer; ++o) {
                for (int i = 0; i < inner; ++i) {
                    const int d = stage_major ? i : o;
                    const int s = stage_major ? o : i;
                    l.group_dc[static_cast<size_t>(d) * l.pp + s] = dcs[next++];
                }
            }
            break;
        }
    }
    l.gpus_per_dc.assign(c.cluster.dcs.size(), 0);
    for (int dc : l.group_dc) {
        l.gpus_per_dc[static_cast<size_t>(dc)] += l.tp;
    }
    for (size_t dc = 0; dc < c.cluster.dcs.size(); ++dc) {
        if (l.gpus_per_dc[dc] > c.cluster.dcs[dc].gpus) {
            return noFit("DC " + c.cluster.dcs[dc].name + " needs " +
                         std::to_string(l.gpus_per_dc[dc]) + " GPUs, has " +
                         std::to_string(c.cluster.dcs[dc].gpus));
        }
    }
    // Summary: stage ranges per DC along pipeline 0.
    std::ostringstream os;
    int start = 0;
    for (int s = 1; s <= l.pp; ++s) {
        if (s == l.pp || l.dcOf(0, s) != l.dcOf(0, start)) {
            os << (start == 0 ? "" : " ")
               << c.cluster.dcs[static_cast<size_t>(l.dcOf(0, start))].name << ":" << start;
            if (s - 1 > start) {
                os << "-" << s - 1;
            }
            start = s;
        }
    }
    bool uniform = true;
    for (int d = 1; d < l.dp && uniform; ++d) {
        for (int s = 0; s < l.pp; ++s) {
            uniform = uniform && l.dcOf(d, s) == l.dcOf(0, s);
        }
    }
    if (!uniform) {
        os << " (pipelines differ)";
    }
    l.summary = os.str();
    return l;
}

}  // namespace atlas::sim
