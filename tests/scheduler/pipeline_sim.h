// A small closed-loop simulator of data-parallel pipeline training across two datacenters,
// for testing link policies on the traffic they were designed for: D pipelines of S stages,
// stages 0..boundary in DC A and the rest in DC B, M micro-batches per iteration under GPipe
// or 1F1B, an all-reduce barrier between iterations. Activations cross the forward WAN link
// and gradients the backward one; each direction is one FluidLink with its own policy.
// Deterministic for a given config (seeded jitter).
#pragma once

#include <cstdint>
#include <vector>

#include "scheduler/link_policy.h"

namespace atlas::sched::testing {

enum class Schedule : uint8_t { kGPipe, k1F1B };

struct PipelineConfig {
    Schedule schedule = Schedule::kGPipe;
    int pipelines = 4;
    int stages = 4;
    int boundary = 1;  // the WAN lies between stage `boundary` and `boundary + 1`
    int micro_batches = 4;
    Nanos fwd_ns = 4 * kNsPerMs;  // per stage and micro-batch
    Nanos bwd_ns = 8 * kNsPerMs;
    uint64_t activation_bytes = 10'000'000;
    uint64_t gradient_bytes = 10'000'000;
    double link_bytes_per_sec = 1e9;  // per direction
    Nanos allreduce_ns = 20 * kNsPerMs;
    double jitter = 0.0;  // compute times scaled by 1 + U(-jitter, +jitter)
    int iterations = 60;
    uint64_t seed = 1;
};

struct PipelineResult {
    std::vector<Nanos> iteration_end_ns;
    // Mean iteration time over the second half of the run (the workload-aware policy has
    // learned the pattern by then).
    double steady_iteration_ns = 0.0;
    // Longest time a transfer waited from its request to its first grant, and the most
    // transfers active on one link direction at once (for starvation bounds).
    Nanos max_first_grant_wait_ns = 0;
    size_t max_active_flows = 0;
};

// Runs the training loop with `kind` on both link directions. `policies_out`, if given,
// receives the two policies (forward, backward) for inspection after the run.
PipelineResult runPipeline(const PipelineConfig& config, PolicyKind kind,
                           const PolicyConfig& policy_config,
                           std::vector<std::unique_ptr<LinkPolicy>>* policies_out = nullptr);

}  // namespace atlas::sched::testing
