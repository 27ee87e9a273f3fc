// fp32 compute kernels of the CPU engine. Internal to bubbletea/engine (not a public API).
//
// Every kernel computes each output element with a fixed sequence of floating-point
// operations that depends only on that element's inputs, never on how many rows are
// processed together or on the thread count. That is what makes chunked prefill bit-identical
// to one-shot prefill. AVX2+FMA paths are chosen at run time when the CPU has them; the
// portable paths give the same results up to FMA rounding.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "bubbletea/engine/thread_pool.h"
#include "bubbletea/engine/weights.h"

namespace atlas::bubbletea::cpu {

// True when the AVX2+FMA kernels are in use.
bool usingAvx2();

// One output of a GEMM that shares its input X with the others: Y = X * W^T, where W is a
// [N x K] weight view (any dtype) and Y is [rows x N] with row stride `ldy` floats.
struct GemmOutput {
    const TensorView* w;
    float* y;
    size_t ldy;
};

// Per-worker packing buffers for gemm(); reuse one across calls to avoid allocation.
// prepare() runs on the calling thread before a parallel loop; data() is then called by
// each worker for its own buffer only.
class GemmScratch {
  public:
    void prepare(int workers, size_t floats_per_worker);
    float* data(int worker) { return buffers_[static_cast<size_t>(worker)].data(); }

  private:
    std::vector<std::vector<float>> buffers_;
};

// For every output: Y (+)= X * W^T with X [rows x K] (row stride ldx). `accumulate` adds to
// Y's current contents (used for the residual adds), otherwise overwrites. Parallel over
// column blocks of all outputs together. All W must have K == cols.
void gemm(const float* x, size_t rows, size_t ldx, std::span<const GemmOutput> outputs,
          bool accumulate, ThreadPool& pool, GemmScratch& scratch);

// y[N] = W[N x K] * x[K] for a single row (the lm_head on the last position). Parallel over N.
void gemv(const float* x, const TensorView& w, float* y, ThreadPool& pool);

// out[r] = x[r] * rsqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of `n` values.
void rmsNorm(const float* x, size_t rows, size_t ldx, size_t n, const float* weight, float eps,
             float* out, size_t ldout);

// Rotates `heads` heads of `head_dim` in each of `rows` rows in place: pairs (i, i + d/2)
// by the angle whose cos/sin are cos_sin[r * d + i] / cos_sin[r * d + d/2 + i].
void applyRope(float* x, size_t rows, size_t ldx, size_t heads, size_t head_dim,
               const float* cos_sin);

// Causal grouped-query attention for query rows at positions pos0 .. pos0 + rows - 1.
// q: [rows x heads*head_dim] (row stride ldq); k, v: the cache, [>= pos0+rows x kv_heads*
// head_dim]; out: [rows x heads*head_dim] (row stride ldo). Query head h reads KV head
// h / (heads / kv_heads). Parallel over (head, row block); `scores` holds per-worker
// scratch.
struct AttentionShape {
    size_t rows;
    size_t pos0;
    size_t heads;
    size_t kv_heads;
    size_t head_dim;
};
void attention(const float* q, size_t ldq, const float* k, const float* v, float* out, size_t ldo,
               const AttentionShape& shape, ThreadPool& pool,
               std::vector<std::vector<float>>& scores);

// out[r][i] = silu(gate[r][i]) * up[r][i] for `n` columns. Parallel over rows.
void siluMul(const float* gate, const float* up, size_t rows, size_t ld, size_t n, float* out,
             size_t ldout, ThreadPool& pool);

}  // namespace atlas::bubbletea::cpu
