// CostModel: predicts how long one prefill chunk takes on this daemon's engine, so the
// scheduler can size chunks to fit a predicted GPU idle window.
//
// Model (nanoseconds):  time(t, p) = a + b * t + c * t * (p + t / 2)
//   t = tokens in the chunk, p = tokens already in the KV cache when the chunk starts
//   (its context). t * (p + t / 2) is the number of (query, key) pairs causal attention
//   touches, so `c` is the attention cost and `b` the GEMM/MLP cost per token; `a` is the
//   fixed cost of a launch (layer loop, synchronisation).
// Fitting: non-negative least squares over the start-up profiling samples gives the shape
// (fit()). Online calibration then scales that shape by an EWMA (in log space) of
// measured / predicted chunk times (observe()), so the model follows an engine that gets
// slower or faster (clocks, contention from training kernels). Each sample counts at most
// max_step x away from the current estimate (a preempted chunk is an outlier, not a new
// speed), and without samples the scale relaxes back to the profile (relax()).
// Why not re-fit the shape online: the scheduler sizes every chunk so that its predicted time
// fills the rest of a window, so measured times cluster near the window length whatever the
// chunk size; such closed-loop data cannot tell a fixed cost from a per-token one, and an
// online least-squares fit (tried: RLS with forgetting) drifts towards "all fixed cost" until
// no chunk fits a window any more, after which no new sample can correct it.
// Coefficients are >= 0, so predictions are monotone in t and p and never negative.
//
// Threads: a plain value type with no locking; the daemon's scheduler owns one and calls it
// under the scheduler's lock.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"

namespace atlas::bubbletea {

struct CostSample {
    int64_t tokens = 0;   // t
    int64_t context = 0;  // p: cache length before the chunk
    Nanos time_ns = 0;    // measured wall time of the chunk
};

struct CostCoefficients {
    double a_ns = 0;               // per chunk
    double b_ns_per_token = 0;     // per token
    double c_ns_per_pair = 0;      // per (query, key) pair of attention
    std::string toString() const;  // "a=..ns b=..ns/tok c=..ns/pair"
};

struct CostModelConfig {
    // EWMA weight of each measured chunk in the speed scale (log space).
    double scale_alpha = 0.1;
    // A sample moves the scale as if it were at most this factor from the current estimate.
    double max_step = 2.0;
    // Without samples the scale's logarithm halves this often (back towards the profile).
    Nanos relax_half_life_ns = 30 * kNsPerSec;
    // EWMA weight of each new sample in the error statistics.
    double error_alpha = 0.05;
};

class CostModel {
  public:
    explicit CostModel(CostCoefficients initial = {}, CostModelConfig config = {});

    // Non-negative least-squares fit of (a, b, c) to `samples`, with a small ridge term so
    // that two chunk sizes at one context still give a usable (b, a) fit. kInvalidArgument without
    // samples or with a sample whose tokens <= 0 or time < 0.
    static Result<CostCoefficients> fit(std::span<const CostSample> samples);

    // Restarts from `baseline` (e.g. a fresh profiling fit) with scale 1.
    void reset(const CostCoefficients& baseline);

    // Predicted wall time of a chunk of `tokens` tokens at context `context`.
    Nanos predict(int64_t tokens, int64_t context) const;

    // The largest t in [1, max_tokens] with predict(t, context) <= budget_ns, or 0 when not
    // even one token fits (or max_tokens <= 0). O(log max_tokens).
    int64_t largestFitting(int64_t context, int64_t max_tokens, Nanos budget_ns) const;

    // Folds one measured chunk into the speed scale and into the error statistics (computed
    // against the prediction made before the update).
    void observe(const CostSample& sample);
    // Lets `elapsed_ns` of time pass: the scale relaxes towards 1 (the profiled shape).
    void relax(Nanos elapsed_ns);

    // The effective coefficients (baseline x scale).
    CostCoefficients coefficients() const;
    const CostCoefficients& baseline() const { return baseline_; }
    double scale() const { return std::exp(log_scale_); }
    uint64_t observed() const { return observed_; }
    // EWMA of |measured - predicted| / measured over observed chunks (0 before any).
    double relativeErrorEwma() const { return rel_error_ewma_; }
    // EWMA of (measured - predicted) / measured: > 0 means the model predicts too little.
    double biasEwma() const { return bias_ewma_; }

  private:
    // Feature vector in scaled units so fit()'s 3x3 systems stay well conditioned:
    // x = (1, t / 1e3, t * (p + t/2) / 1e6), mapped to microseconds.
    static void features(int64_t tokens, int64_t context, double x[3]);
    double baselineNs(int64_t tokens, int64_t context) const;

    CostModelConfig config_;
    CostCoefficients baseline_;
    double log_scale_ = 0;
    uint64_t observed_ = 0;
    double rel_error_ewma_ = 0;
    double bias_ewma_ = 0;
};

}  // namespace atlas::bubbletea
