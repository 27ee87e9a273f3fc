#include <cuda_bf16.h>

#include <cfloat>
#include <cmath>

#include "bubbletea/engine/cuda_kernels.h"

namespace atlas::bubbletea::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kAttentionWarps = 4;
constexpr int kMaxHeadDim = 256;  // validateConfig's limit
constexpr int kMaxDimsPerLane = kMaxHeadDim / 32;

__device__ __forceinline__ float toFloat(float v) {
    return v;
}
__device__ __forceinline__ float toFloat(__nv_bfloat16 v) {
    return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v) {
    return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

// Two consecutive elements (head_dim is even and rows start at even offsets, so the pair
// is aligned to twice the element size).
__device__ __forceinline__ float2 load2(const float* p) {
    return *reinterpret_cast<const float2*>(p);
}
__device__ __forceinline__ float2 load2(const __nv_bfloat16* p) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p));
}

__device__ __forceinline__ float warpSum(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_xor_sync(0xffffffffu, v, offset);
    }
    return v;
}

__device__ __forceinline__ float warpMax(float v) {
    for (int offset = 16; offset > 0; offset >>= 1) {
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
__device__ float blockSum(float v) {
    __shared__ float partial[32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    v = warpSum(v);
    if (lane == 0) {
        partial[warp] = v;
    }
    __syncthreads();
    const int warps = blockDim.x >> 5;
    v = lane < warps ? partial[lane] : 0.0f;
    v = warpSum(v);
    return v;
}

template <typename T>
__global__ void embedKernel(const T* table, const int32_t* tokens, int hidden, float* x) {
    const int r = blockIdx.x;
    const T* row = table + static_cast<size_t>(tokens[r]) * hidden;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
        x[static_cast<size_t>(r) * hidden + i] = toFloat(row[i]);
    }
}

template <typename T>
__global__ void rmsNormKernel(const float* x, int n, const float* weight, float eps, T* out) {
    const int r = blockIdx.x;
    const float* xr = x + static_cast<size_t>(r) * n;
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        ss += xr[i] * xr[i];
    }
    const float inv = rsqrtf(blockSum(ss) / static_cast<float>(n) + eps);
    T* o = out + static_cast<size_t>(r) * n;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        o[i] = fromFloat<T>((xr[i] * inv) * weight[i]);
    }
}

template <typename T>
__global__ void ropeAppendKernel(float* qkv, RopeShape s, const double* inv_freq, T* k_cache,
                                 T* v_cache) {
    const int r = blockIdx.x;
    const int half = s.head_dim / 2;
    const int q_dim = s.heads * s.head_dim;
    const int kv_dim = s.kv_heads * s.head_dim;
    float* row = qkv + static_cast<size_t>(r) * (q_dim + 2 * kv_dim);
    const size_t pos = static_cast<size_t>(s.pos0) + r;
    const double p = static_cast<double>(pos);
    for (int idx = threadIdx.x; idx < (s.heads + s.kv_heads) * half; idx += blockDim.x) {
        const int head = idx / half;
        const int i = idx % half;
        double sn;
        double cs;
        sincos(p * inv_freq[i], &sn, &cs);
        const float c = static_cast<float>(cs);
        const float sf = static_cast<float>(sn);
        float* x = row + head * s.head_dim;  // k heads follow the q heads in the row
        const float x1 = x[i];
        const float x2 = x[i + half];
        const float y1 = x1 * c - x2 * sf;
        const float y2 = x2 * c + x1 * sf;
        if (head < s.heads) {
            x[i] = y1;
            x[i + half] = y2;
        } else {
            T* k = k_cache + pos * kv_dim + (head - s.heads) * s.head_dim;
            k[i] = fromFloat<T>(y1);
            k[i + half] = fromFloat<T>(y2);
        }
    }
    const float* v = row + q_dim + kv_dim;
    for (int idx = threadIdx.x; idx < kv_dim; idx += blockDim.x) {
        v_cache[pos * kv_dim + idx] = fromFloat<T>(v[idx]);
    }
}

// One block per (query row, query head). Each warp walks its share of the keys 32 at a time:
// lane j scores key base + j against the (pre-scaled) query held in shared memory, the warp
// folds the 32 scores into its running max / sum (online softmax), then accumulates V with
// each lane owning head dims lane, lane + 32, ... The warps' partial results are merged at
// the end. Exact softmax (expf, not __expf), fp32 throughout.
template <typename T>
__global__ void attentionKernel(const float* qkv, int ld_qkv, RopeShape s, const T* k_cache,
                                const T* v_cache, T* out) {
    __shared__ float q_s[kMaxHeadDim];
    __shared__ float m_s[kAttentionWarps];
    __shared__ float l_s[kAttentionWarps];
    __shared__ float acc_s[kAttentionWarps][kMaxHeadDim];

    const int r = blockIdx.x;
    const int head = blockIdx.y;
    const int d = s.head_dim;
    const int kv_dim = s.kv_heads * d;
    const int kv_off = (head / (s.heads / s.kv_heads)) * d;
    const int ctx = s.pos0 + r + 1;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const float scale = 1.0f / sqrtf(static_cast<float>(d));

    const float* q = qkv + static_cast<size_t>(r) * ld_qkv + head * d;
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        q_s[i] = q[i];
    }
    __syncthreads();

    float m = -INFINITY;
    float l = 0.0f;
    float acc[kMaxDimsPerLane];
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
        acc[i] = 0.0f;
    }
    for (int base = warp * 32; base < ctx; base += kAttentionWarps * 32) {
        const int j = base + lane;
        float score = -INFINITY;
        if (j < ctx) {
            const T* k = k_cache + static_cast<size_t>(j) * kv_dim + kv_off;
            float dot = 0.0f;
            for (int i = 0; i < d; i += 2) {
                const float2 kk = load2(k + i);
                dot += q_s[i] * kk.x + q_s[i + 1] * kk.y;
            }
            score = dot * scale;
        }
        const float m_new = fmaxf(m, warpMax(score));
        const float correction = expf(m - m_new);  // 0 on the first tile (m = -inf)
        const float p = j < ctx ? expf(score - m_new) : 0.0f;
        l = l * correction + warpSum(p);
#pragma unroll
        for (int i = 0; i < kMaxDimsPerLane; ++i) {
            acc[i] *= correction;
        }
        const int keys = min(32, ctx - base);
        for (int t = 0; t < keys; ++t) {
            const float pt = __shfl_sync(0xffffffffu, p, t);
            const T* v = v_cache + static_cast<size_t>(base + t) * kv_dim + kv_off;
#pragma unroll
            for (int i = 0; i < kMaxDimsPerLane; ++i) {
                const int dim = lane + 32 * i;
                if (dim < d) {
                    acc[i] += pt * toFloat(v[dim]);
                }
            }
        }
        m = m_new;
    }
    if (lane == 0) {
        m_s[warp] = m;
        l_s[warp] = l;
    }
#pragma unroll
    for (int i = 0; i < kMaxDimsPerLane; ++i) {
        const int dim = lane + 32 * i;
        if (dim < d) {
            acc_s[warp][dim] = acc[i];
        }
    }
    __syncthreads();
    // Warp 0 always saw key 0, so the merged max is finite; warps without keys weigh 0.
    float m_all = -INFINITY;
    for (int w = 0; w < kAttentionWarps; ++w) {
        m_all = fmaxf(m_all, m_s[w]);
    }
    float l_all = 0.0f;
    for (int w = 0; w < kAttentionWarps; ++w) {
        l_all += l_s[w] * expf(m_s[w] - m_all);
    }
    T* o = out + static_cast<size_t>(r) * (s.heads * d) + head * d;
    for (int dim = threadIdx.x; dim < d; dim += blockDim.x) {
        float sum = 0.0f;
        for (int w = 0; w < kAttentionWarps; ++w) {
            sum += acc_s[w][dim] * expf(m_s[w] - m_all);
        }
        o[dim] = fromFloat<T>(sum / l_all);
    }
}

template <typename T>
__global__ void siluMulKernel(const float* gate_up, int inter, T* out) {
    const int r = blockIdx.y;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= inter) {
        return;
    }
    const float* row = gate_up + static_cast<size_t>(r) * 2 * inter;
    const float g = row[i];
    out[static_cast<size_t>(r) * inter + i] = fromFloat<T>(g / (1.0f + expf(-g)) * row[inter + i]);
}

}  // namespace

cudaError_t embedRows(const void* table, ActType type, const int32_t* tokens, int rows, int hidden,
                      float* x, cudaStream_t stream) {
    if (type == ActType::kBF16) {
        embedKernel<<<rows, kThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(table), tokens,
                                                   hidden, x);
    } else {
        embedKernel<<<rows, kThreads, 0, stream>>>(static_cast<const float*>(table), tokens, hidden,
                                                   x);
    }
    return cudaGetLastError();
}

cudaError_t rmsNorm(const float* x, int rows, int n, const float* weight, float eps, void* out,
                    ActType type, cudaStream_t stream) {
    if (type == ActType::kBF16) {
        rmsNormKernel<<<rows, kThreads, 0, stream>>>(x, n, weight, eps,
                                                     static_cast<__nv_bfloat16*>(out));
    } else {
        rmsNormKernel<<<rows, kThreads, 0, stream>>>(x, n, weight, eps, static_cast<float*>(out));
    }
    return cudaGetLastError();
}

cudaError_t ropeAndAppend(float* qkv, const RopeShape& shape, const double* inv_freq, void* k_cache,
                          void* v_cache, ActType type, cudaStream_t stream) {
    if (type == ActType::kBF16) {
        ropeAppendKernel<<<shape.rows, kThreads, 0, stream>>>(qkv, shape, inv_freq,
                                                              static_cast<__nv_bfloat16*>(k_cache),
                                                              static_cast<__nv_bfloat16*>(v_cache));
    } else {
        ropeAppendKernel<<<shape.rows, kThreads, 0, stream>>>(
            qkv, shape, inv_freq, static_cast<float*>(k_cache), static_cast<float*>(v_cache));
    }
    return cudaGetLastError();
}

cudaError_t attention(const float* qkv, int ld_qkv, const RopeShape& shape, const void* k_cache,
                      const void* v_cache, void* out, ActType type, cudaStream_t stream) {
    if (shape.head_dim > kMaxHeadDim || shape.head_dim % 2 != 0) {
        return cudaErrorInvalidValue;
    }
    const dim3 grid(static_cast<unsigned>(shape.rows), static_cast<unsigned>(shape.heads));
    if (type == ActType::kBF16) {
        attentionKernel<<<grid, kAttentionWarps * 32, 0, stream>>>(
            qkv, ld_qkv, shape, static_cast<const __nv_bfloat16*>(k_cache),
            static_cast<const __nv_bfloat16*>(v_cache), static_cast<__nv_bfloat16*>(out));
    } else {
        attentionKernel<<<grid, kAttentionWarps * 32, 0, stream>>>(
            qkv, ld_qkv, shape, static_cast<const float*>(k_cache),
            static_cast<const float*>(v_cache), static_cast<float*>(out));
    }
    return cudaGetLastError();
}

cudaError_t siluMul(const float* gate_up, int rows, int inter, void* out, ActType type,
                    cudaStream_t stream) {
    const dim3 grid(static_cast<unsigned>((inter + kThreads - 1) / kThreads),
                    static_cast<unsigned>(rows));
    if (type == ActType::kBF16) {
        siluMulKernel<<<grid, kThreads, 0, stream>>>(gate_up, inter,
                                                     static_cast<__nv_bfloat16*>(out));
    } else {
        siluMulKernel<<<grid, kThreads, 0, stream>>>(gate_up, inter, static_cast<float*>(out));
    }
    return cudaGetLastError();
}

}  // namespace atlas::bubbletea::cuda
