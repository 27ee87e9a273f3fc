// How many cuBLAS GEMMs make a compute period of a given length (atlas-pipeline-bench
// --compute cuda; docs/arbitration.md, "Pipeline benchmark"). Pure: the GEMMs are timed by
// an injected function, so the rule is unit-tested on the CPU (tests/gpu/) and the CUDA
// backend (cuda_compute.h) only supplies a timer of real GEMMs.
//
// The count is fixed once per run and never adapted to the measured period: a stage slowed
// down by another user of the GPU (bubbletea) must take longer, since that slowdown is what
// the non-interference experiment measures.
#pragma once

#include <cstdint>
#include <functional>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"

namespace atlas::pipebench {

struct CalibrationConfig {
    int warmup_gemms = 16;               // first, untimed (cuBLAS heuristics, clocks up)
    Nanos min_batch_ns = 20 * kNsPerMs;  // a timed batch must last this long
    int max_batch = 1 << 16;             // ... or hold this many GEMMs
    int samples = 5;                     // batches of that size; the median counts
    Nanos max_total_ns = 5 * kNsPerSec;  // stop sampling early past this
};

struct Calibration {
    double ns_per_gemm = 0;
    int batch = 0;       // GEMMs per timed batch
    int samples = 0;     // batches timed at that size
    double spread = 0;   // (slowest - fastest) / median over the samples
    Nanos spent_ns = 0;  // device time the calibration took
};

// time_batch(n) runs n GEMMs back to back and returns how long they took (device time).
// Doubles the batch from 1 until a batch lasts min_batch_ns (or reaches max_batch), then
// times `samples` batches of that size and takes the median time per GEMM. Errors: a timer
// error (passed on), or a non-positive duration.
Result<Calibration> calibrateGemms(const std::function<Result<Nanos>(int)>& time_batch,
                                   const CalibrationConfig& cfg = {});

// GEMMs for one compute period: round(period / ns_per_gemm); at least 1 for a positive
// period, 0 for 0.
int64_t gemmsFor(Nanos period_ns, double ns_per_gemm);

}  // namespace atlas::pipebench
