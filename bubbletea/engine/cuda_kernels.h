// The CUDA engine's own kernels (everything that is not a GEMM). Internal to
// bubbletea/engine. Every launcher enqueues on `stream`, never synchronizes, and returns the
// launch error (cudaGetLastError).
//
// Element types: the residual stream, GEMM outputs and norm weights are fp32; "act" buffers
// (GEMM inputs: normalized activations, attention output, SiLU product) and the KV cache
// use the engine's compute type, fp32 or bf16 (ActType).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace atlas::bubbletea::cuda {

enum class ActType { kF32, kBF16 };

// x[r][:] = table[tokens[r]][:] widened to fp32. table: [vocab x hidden] of `type`.
cudaError_t embedRows(const void* table, ActType type, const int32_t* tokens, int rows, int hidden,
                      float* x, cudaStream_t stream);

// out[r][:] = x[r][:] * rsqrt(mean(x[r]^2) + eps) * weight[:], rows of `n`; out is `type`.
cudaError_t rmsNorm(const float* x, int rows, int n, const float* weight, float eps, void* out,
                    ActType type, cudaStream_t stream);

// qkv: [rows x (q_dim + 2 * kv_dim)] fp32, per row q | k | v. Rotates every q head in place
// (rotate_half convention, angle (pos0 + r) * inv_freq[i], computed in double) and writes the
// rotated k and the v of row r into the caches at position pos0 + r. Caches:
// [capacity x kv_heads * head_dim] of `type`.
struct RopeShape {
    int rows;
    int pos0;
    int heads;
    int kv_heads;
    int head_dim;
};
cudaError_t ropeAndAppend(float* qkv, const RopeShape& shape, const double* inv_freq, void* k_cache,
                          void* v_cache, ActType type, cudaStream_t stream);

// Causal GQA attention for `rows` query rows at positions pos0.. (q read from qkv rows with
// stride ld_qkv floats; q of head h at column h * head_dim), over cache positions
// [0, pos0 + r]. out: [rows x heads * head_dim] of `type`. One block per (row, head), four
// warps over the keys, online softmax.
cudaError_t attention(const float* qkv, int ld_qkv, const RopeShape& shape, const void* k_cache,
                      const void* v_cache, void* out, ActType type, cudaStream_t stream);

// out[r][i] = silu(gate_up[r][i]) * gate_up[r][inter + i]; out is [rows x inter] of `type`.
cudaError_t siluMul(const float* gate_up, int rows, int inter, void* out, ActType type,
                    cudaStream_t stream);

}  // namespace atlas::bubbletea::cuda
