// Cost models of atlas-sim: compute time of a pipeline stage from FLOPs, sizes of the
// transfers, the rate a WAN transport can reach on one path, the GPU memory a layout needs,
// and the cost of an inference prefill. Pure functions of the configuration.
//
// Compute (per micro-batch, per transformer layer, Megatron-LM's count with b = micro-batch
// size, s = sequence length, h = hidden size):
//     forward  = 24*b*s*h^2 + 4*b*s^2*h   FLOPs   (QKV/out projections + MLP; attention)
//     backward = 2 * forward
// plus, when vocab V > 0, the LM head on the last stage (2*b*s*h*V forward). Time =
// FLOPs / (tp * peak * efficiency): tensor parallelism divides the work ideally; its
// communication is folded into `efficiency`.
//
// Transfers: a stage boundary moves b*s*h*dtype bytes per micro-batch (activations
// forward, the same size of gradients backward). A stage's gradients (12*h^2 parameters per
// layer, plus V*h for the embedding / LM head) are all-reduced across its DP replicas.
#pragma once

#include <cstdint>
#include <vector>

#include "perf/atlas-sim/config.h"

namespace atlas::sim {

struct StageCost {
    Nanos forward_ns = 0;           // one micro-batch
    Nanos backward_ns = 0;          // one micro-batch
    uint64_t activation_bytes = 0;  // to the next stage per micro-batch (0 for the last)
    uint64_t grad_bytes = 0;        // whole-stage gradients (all TP ranks together)
    double params = 0.0;            // parameters held by the stage (all TP ranks together)
    int layers = 0;
};

// Forward FLOPs of one transformer layer for one micro-batch (the formula above).
double layerForwardFlops(int micro_batch, int seq_len, int hidden);

// Per-stage costs for a layout. Layers are split as evenly as possible (the first
// layers % pp stages get one more).
std::vector<StageCost> stageCosts(const SimConfig& config);

// Bytes per second one transfer can reach on `path` with `net`'s transport:
//  single: min(link, window / RTT, Mathis 1.22 * MSS / (RTT * sqrt(loss)))
//  multi:  min(link, streams * single-stream bound)
//  ideal:  link
double streamBoundBytesPerSec(const WanPath& path, const NetworkSpec& net);
double transferRateBytesPerSec(const WanPath& path, const NetworkSpec& net);

// Ring all-reduce of `bytes` among n peers at `bytes_per_sec` each with per-step latency:
// 2(n-1)/n * bytes / bw + 2(n-1) * latency. Zero when n <= 1.
Nanos ringAllReduceNs(uint64_t bytes, int n, double bytes_per_sec, Nanos step_latency_ns);

// Peak memory per GPU of stage `stage` (bytes): 16 bytes per parameter (bf16 weights and
// gradients, fp32 master weights and Adam moments) over tp, plus the stored layer inputs of
// the micro-batches in flight (activation recomputation: 2*b*s*h bytes per layer and
// micro-batch; GPipe keeps all m in flight, 1F1B min(pp - stage, m)).
double stageMemoryBytes(const SimConfig& config, const StageCost& cost, int stage);

// Prefill cost model of one stage group. cost(p, c) = a*c + k*((p + c)^2 - p^2) seconds for
// tokens [p, p + c) of a prompt; summed over chunks it equals cost(0, L) = a*L + k*L^2.
class PrefillCost {
  public:
    PrefillCost() = default;
    PrefillCost(double sec_per_token, double sec_per_token2)
        : a_(sec_per_token), k_(sec_per_token2) {}
    // From the inference model (2*params FLOPs per token; attention 2*layers*hidden*L^2
    // FLOPs for a prompt of L tokens) on tp GPUs of `gpu` at the prefill efficiency, unless
    // the spec overrides the coefficients.
    static PrefillCost fromSpec(const BubbleTeaSpec& spec, const GpuSpec& gpu, int tp);

    // Nanoseconds for tokens [start, start + tokens), rounded up.
    Nanos chunkNs(int64_t start, int64_t tokens) const;
    // Largest c <= limit with chunkNs(start, c) <= budget_ns (0 if none).
    int64_t maxTokensWithin(int64_t start, Nanos budget_ns, int64_t limit) const;
    double secPerToken() const { return a_; }
    double secPerToken2() const { return k_; }

  private:
    double a_ = 1e-4;
    double k_ = 0.0;
};

}  // namespace atlas::sim
