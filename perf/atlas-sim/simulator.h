// The discrete-event simulation of synchronous pipeline-parallel training across DCs.
//
// Entities: dp x pp stage groups (tp GPUs each, which always act together), one WAN
// bottleneck per directed DC pair (wan.h), optionally BubbleTea (bubbletea.h).
// One iteration: every group runs its schedule (schedule.h); a task starts when the group is
// free and its input has arrived; outputs go to the neighbour stage, inside the DC over a
// dedicated path (bytes / (tp * per-GPU bandwidth) + latency) or over the WAN link. When all
// replicas of a stage finished their backwards, the stage's DP all-reduce runs (ring, closed
// form inside a DC; over the WAN links as flows when the replicas straddle DCs). When every
// stage's all-reduce is done the iteration ends (a global barrier, as gradient clipping's
// global norm imposes) and the next starts.
//
// What is simulated individually: every group and every transfer. Replicas are not merged:
// their WAN transfers share links, and link sharing is the effect under study.
//
// Determinism: events at equal times run in insertion order; all randomness is seeded (jitter
// is a hash of (seed, iteration, group, task), so it does not depend on event order).
#pragma once

#include <cstdint>
#include <vector>

#include "atlas/common/status.h"
#include "perf/atlas-sim/bubbletea.h"
#include "perf/atlas-sim/config.h"
#include "perf/atlas-sim/model.h"
#include "perf/atlas-sim/placement.h"
#include "perf/atlas-sim/wan.h"
#include "scheduler/types.h"

namespace atlas::sim {

enum class ActivityKind : uint8_t { kForward, kBackward, kAllReduce, kPrefill };
const char* activityName(ActivityKind kind);

struct Activity {
    Nanos start_ns = 0;
    Nanos end_ns = 0;
    int32_t iteration = 0;
    int32_t index = 0;  // micro-batch (F/B), stage (all-reduce) or request id (prefill)
    ActivityKind kind = ActivityKind::kForward;
};

// Busy time of one group inside the measured window [measure_start_ns, end_ns).
struct GroupTotals {
    Nanos compute_ns = 0;
    Nanos allreduce_ns = 0;
    Nanos prefill_ns = 0;
};

struct RunOptions {
    bool bubbletea = false;          // run BubbleTea in this pass
    bool record_timeline = false;    // Activity lists (traces, plots, invariant tests)
    int record_from_iteration = 0;   // ... only from this iteration on
    bool record_idle = false;        // exact idle intervals (the oracle for a later pass)
    bool record_link_rates = false;  // RateSegments per link (capacity invariant, plots)
    // Oracle windows (exact idle intervals of a pass without BubbleTea), per group.
    const std::vector<std::vector<sched::Interval>>* oracle = nullptr;
};

struct RunResult {
    std::vector<Nanos> iteration_end_ns;  // barrier time of each iteration
    Nanos measure_start_ns = 0;           // end of the warm-up iterations
    Nanos end_ns = 0;                     // end of the last iteration
    std::vector<GroupTotals> groups;      // [pipeline * pp + stage]
    std::vector<LinkStats> links;
    std::vector<std::vector<Activity>> timeline;     // per group, when recorded
    std::vector<std::vector<sched::Interval>> idle;  // per group, when recorded
    PrefillStats prefill;
    Nanos training_delay_ns = 0;  // sum over tasks of (start - ready) caused by prefill
    uint64_t delayed_starts = 0;  // training activities that had to wait for a chunk
    uint64_t events = 0;
};

// Runs one pass. Fails on an invalid layout or an internal inconsistency (e.g. a deadlock).
Result<RunResult> simulate(const SimConfig& config, const Layout& layout, const RunOptions& opts);

}  // namespace atlas::sim
