#include "bubbletea/engine/cpu_kernels.h"

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

namespace atlas::bubbletea::cpu {

namespace {

// GEMM blocking. A 6x16 micro-tile keeps 12 ymm accumulators plus 2 B vectors and one
// broadcast in the 16 AVX2 registers. A packed B panel of kKc x kNc floats (128 KiB) stays
// in a Zen/Skylake L2; the 6 x kKc slice of X (6 KiB) stays in L1 across the panel.
constexpr size_t kMr = 6;
constexpr size_t kNr = 16;
constexpr size_t kKc = 256;
constexpr size_t kNc = 128;
// Attention work unit: one query head over this many consecutive rows.
constexpr size_t kAttentionRows = 16;

bool detectAvx2() {
    __builtin_cpu_init();
    // clang 14's __builtin_cpu_supports does not know "f16c": read CPUID leaf 1 directly.
    unsigned eax = 0;
    unsigned ebx = 0;
    unsigned ecx = 0;
    unsigned edx = 0;
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
}

const bool kHaveAvx2 = detectAvx2();

// ---- weight row conversion --------------------------------------------------------------

__attribute__((target("avx2,f16c"))) void rowToFloatAvx2(const std::byte* src, DType dtype,
                                                         size_t n, float* out) {
    size_t i = 0;
    if (dtype == DType::kBF16) {
        for (; i + 8 <= n; i += 8) {
            const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
            const __m256i w = _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16);
            _mm256_storeu_ps(out + i, _mm256_castsi256_ps(w));
        }
    } else if (dtype == DType::kF16) {
        for (; i + 8 <= n; i += 8) {
            const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i));
            _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
        }
    }
    if (i < n) {
        convertToFloat(src, dtype, i, n - i, out + i);
    }
}

// Converts elements [first, first + n) of `w` (flat index) to fp32.
void loadRow(const TensorView& w, size_t first, size_t n, float* out) {
    if (w.dtype == DType::kF32) {
        std::memcpy(out, w.data + first * 4, n * 4);
    } else if (kHaveAvx2) {
        rowToFloatAvx2(w.data + first * 2, w.dtype, n, out);
    } else {
        convertToFloat(w.data, w.dtype, first, n, out);
    }
}

// Packs rows [n0, n0 + nb) x cols [k0, k0 + kc) of W into strips of kNr rows:
// dst[(s * kc + k) * kNr + c] = W[n0 + s * kNr + c][k0 + k], zero past nb.
void packPanel(const TensorView& w, size_t n0, size_t nb, size_t k0, size_t kc, float* dst,
               float* row_buf) {
    const size_t cols = static_cast<size_t>(w.cols);
    const size_t strips = (nb + kNr - 1) / kNr;
    for (size_t s = 0; s < strips; ++s) {
        float* strip = dst + s * kc * kNr;
        for (size_t c = 0; c < kNr; ++c) {
            const size_t r = s * kNr + c;
            if (r < nb) {
                loadRow(w, (n0 + r) * cols + k0, kc, row_buf);
                for (size_t k = 0; k < kc; ++k) {
                    strip[k * kNr + c] = row_buf[k];
                }
            } else {
                for (size_t k = 0; k < kc; ++k) {
                    strip[k * kNr + c] = 0.0f;
                }
            }
        }
    }
}

// ---- micro-kernels: C[MR x 16] (+)= A[MR x kc] * Bpacked[kc x 16] ------------------------

template <size_t MR>
__attribute__((target("avx2,fma"))) void microAvx2(const float* a, size_t lda, const float* b,
                                                   size_t kc, float* c, size_t ldc, bool acc) {
    __m256 c0[MR];
    __m256 c1[MR];
#pragma GCC unroll 6
    for (size_t r = 0; r < MR; ++r) {
        c0[r] = acc ? _mm256_loadu_ps(c + r * ldc) : _mm256_setzero_ps();
        c1[r] = acc ? _mm256_loadu_ps(c + r * ldc + 8) : _mm256_setzero_ps();
    }
    for (size_t k = 0; k < kc; ++k) {
        const __m256 b0 = _mm256_loadu_ps(b + k * kNr);
        const __m256 b1 = _mm256_loadu_ps(b + k * kNr + 8);
#pragma GCC unroll 6
        for (size_t r = 0; r < MR; ++r) {
            const __m256 av = _mm256_broadcast_ss(a + r * lda + k);
            c0[r] = _mm256_fmadd_ps(av, b0, c0[r]);
            c1[r] = _mm256_fmadd_ps(av, b1, c1[r]);
        }
    }
#pragma GCC unroll 6
    for (size_t r = 0; r < MR; ++r) {
        _mm256_storeu_ps(c + r * ldc, c0[r]);
        _mm256_storeu_ps(c + r * ldc + 8, c1[r]);
    }
}

void microPortable(size_t mr, const float* a, size_t lda, const float* b, size_t kc, float* c,
                   size_t ldc, bool acc) {
    float tile[kMr][kNr];
    for (size_t r = 0; r < mr; ++r) {
        for (size_t j = 0; j < kNr; ++j) {
            tile[r][j] = acc ? c[r * ldc + j] : 0.0f;
        }
    }
    for (size_t k = 0; k < kc; ++k) {
        for (size_t r = 0; r < mr; ++r) {
            const float av = a[r * lda + k];
            for (size_t j = 0; j < kNr; ++j) {
                tile[r][j] += av * b[k * kNr + j];
            }
        }
    }
    for (size_t r = 0; r < mr; ++r) {
        std::memcpy(c + r * ldc, tile[r], sizeof(tile[r]));
    }
}

void microDispatch(size_t mr, const float* a, size_t lda, const float* b, size_t kc, float* c,
                   size_t ldc, bool acc) {
    if (!kHaveAvx2) {
        microPortable(mr, a, lda, b, kc, c, ldc, acc);
        return;
    }
    switch (mr) {
        case 6:
            microAvx2<6>(a, lda, b, kc, c, ldc, acc);
            break;
        case 5:
            microAvx2<5>(a, lda, b, kc, c, ldc, acc);
            break;
        case 4:
            microAvx2<4>(a, lda, b, kc, c, ldc, acc);
            break;
        case 3:
            microAvx2<3>(a, lda, b, kc, c, ldc, acc);
            break;
        case 2:
            microAvx2<2>(a, lda, b, kc, c, ldc, acc);
            break;
        default:
            microAvx2<1>(a, lda, b, kc, c, ldc, acc);
            break;
    }
}

// A micro-tile whose last strip has fewer than 16 valid columns goes through a local tile
// so the kernel never touches memory past the output's columns.
void microTile(size_t mr, size_t cols, const float* a, size_t lda, const float* b, size_t kc,
               float* c, size_t ldc, bool acc) {
    if (cols == kNr) {
        microDispatch(mr, a, lda, b, kc, c, ldc, acc);
        return;
    }
    float tile[kMr * kNr] = {};
    if (acc) {
        for (size_t r = 0; r < mr; ++r) {
            std::memcpy(tile + r * kNr, c + r * ldc, cols * sizeof(float));
        }
    }
    microDispatch(mr, a, lda, b, kc, tile, kNr, acc);
    for (size_t r = 0; r < mr; ++r) {
        std::memcpy(c + r * ldc, tile + r * kNr, cols * sizeof(float));
    }
}

// ---- vector helpers for gemv and attention ---------------------------------------------

__attribute__((target("avx2,fma"))) inline float hsum(__m256 v) {
    const __m128 lo = _mm256_castps256_ps128(v);
    const __m128 hi = _mm256_extractf128_ps(v, 1);
    __m128 s = _mm_add_ps(lo, hi);
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 0x55));
    return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) inline float dotAvx2(const float* a, const float* b, size_t n) {
    __m256 acc0 = _mm256_setzero_ps();
    __m256 acc1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    }
    float s = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) {
        s += a[i] * b[i];
    }
    return s;
}

// y += alpha * x
__attribute__((target("avx2,fma"))) inline void axpyAvx2(float alpha, const float* x, float* y,
                                                         size_t n) {
    const __m256 va = _mm256_set1_ps(alpha);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i,
                         _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    }
    for (; i < n; ++i) {
        y[i] += alpha * x[i];
    }
}

float dotPortable(const float* a, const float* b, size_t n) {
    float s = 0.0f;
    for (size_t i = 0; i < n; ++i) {
        s += a[i] * b[i];
    }
    return s;
}

// gemv row dot: x (fp32) against one weight row of any dtype, converting 8 at a time.
__attribute__((target("avx2,fma,f16c"))) float dotRowAvx2(const float* x, const std::byte* row,
                                                          DType dtype, size_t n) {
    if (dtype == DType::kF32) {
        return dotAvx2(x, reinterpret_cast<const float*>(row), n);  // unaligned loads only
    }
    __m256 acc0 = _mm256_setzero_ps();
    __m256 acc1 = _mm256_setzero_ps();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i));
        const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * i + 16));
        __m256 w0;
        __m256 w1;
        if (dtype == DType::kBF16) {
            w0 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h0), 16));
            w1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h1), 16));
        } else {
            w0 = _mm256_cvtph_ps(h0);
            w1 = _mm256_cvtph_ps(h1);
        }
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), w0, acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), w1, acc1);
    }
    float s = hsum(_mm256_add_ps(acc0, acc1));
    for (; i < n; ++i) {
        s += x[i] * loadAsFloat(row, dtype, i);
    }
    return s;
}

// ---- attention ---------------------------------------------------------------------------

// One (head, row block) unit. Scores live in `scores` (>= pos0 + rows floats).
__attribute__((target("avx2,fma"))) void attentionBlockAvx2(const float* q, size_t ldq,
                                                            const float* k, const float* v,
                                                            float* out, size_t ldo,
                                                            const AttentionShape& s, size_t head,
                                                            size_t r0, size_t r1, float* scores) {
    const size_t d = s.head_dim;
    const size_t kv_ld = s.kv_heads * d;
    const size_t kv_off = (head / (s.heads / s.kv_heads)) * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (size_t r = r0; r < r1; ++r) {
        const float* qr = q + r * ldq + head * d;
        const size_t ctx = s.pos0 + r + 1;
        float max_score = -INFINITY;
        for (size_t j = 0; j < ctx; ++j) {
            scores[j] = dotAvx2(qr, k + j * kv_ld + kv_off, d) * scale;
            max_score = std::max(max_score, scores[j]);
        }
        float sum = 0.0f;
        for (size_t j = 0; j < ctx; ++j) {
            scores[j] = std::exp(scores[j] - max_score);
            sum += scores[j];
        }
        const float inv = 1.0f / sum;
        float* o = out + r * ldo + head * d;
        std::fill(o, o + d, 0.0f);
        for (size_t j = 0; j < ctx; ++j) {
            axpyAvx2(scores[j] * inv, v + j * kv_ld + kv_off, o, d);
        }
    }
}

void attentionBlockPortable(const float* q, size_t ldq, const float* k, const float* v, float* out,
                            size_t ldo, const AttentionShape& s, size_t head, size_t r0, size_t r1,
                            float* scores) {
    const size_t d = s.head_dim;
    const size_t kv_ld = s.kv_heads * d;
    const size_t kv_off = (head / (s.heads / s.kv_heads)) * d;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    for (size_t r = r0; r < r1; ++r) {
        const float* qr = q + r * ldq + head * d;
        const size_t ctx = s.pos0 + r + 1;
        float max_score = -INFINITY;
        for (size_t j = 0; j < ctx; ++j) {
            scores[j] = dotPortable(qr, k + j * kv_ld + kv_off, d) * scale;
            max_score = std::max(max_score, scores[j]);
        }
        float sum = 0.0f;
        for (size_t j = 0; j < ctx; ++j) {
            scores[j] = std::exp(scores[j] - max_score);
            sum += scores[j];
        }
        const float inv = 1.0f / sum;
        float* o = out + r * ldo + head * d;
        std::fill(o, o + d, 0.0f);
        for (size_t j = 0; j < ctx; ++j) {
            const float p = scores[j] * inv;
            const float* vr = v + j * kv_ld + kv_off;
            for (size_t i = 0; i < d; ++i) {
                o[i] += p * vr[i];
            }
        }
    }
}

}  // namespace

bool usingAvx2() {
    return kHaveAvx2;
}

void GemmScratch::prepare(int workers, size_t floats_per_worker) {
    if (buffers_.size() < static_cast<size_t>(workers)) {
        buffers_.resize(static_cast<size_t>(workers));
    }
    for (auto& b : buffers_) {
        if (b.size() < floats_per_worker) {
            b.resize(floats_per_worker);
        }
    }
}

void gemm(const float* x, size_t rows, size_t ldx, std::span<const GemmOutput> outputs,
          bool accumulate, ThreadPool& pool, GemmScratch& scratch) {
    if (rows == 0 || outputs.empty()) {
        return;
    }
    struct Block {
        const GemmOutput* out;
        size_t n0;
        size_t nb;
    };
    std::vector<Block> blocks;
    for (const GemmOutput& o : outputs) {
        const size_t n = static_cast<size_t>(o.w->rows);
        for (size_t n0 = 0; n0 < n; n0 += kNc) {
            blocks.push_back({&o, n0, std::min(kNc, n - n0)});
        }
    }
    const size_t k_total = static_cast<size_t>(outputs.front().w->cols);
    scratch.prepare(pool.size(), kKc * kNc + kKc);
    pool.parallelFor(blocks.size(), [&](size_t task, int worker) {
        const Block& blk = blocks[task];
        float* packed = scratch.data(worker);
        float* row_buf = packed + kKc * kNc;
        const size_t strips = (blk.nb + kNr - 1) / kNr;
        for (size_t k0 = 0; k0 < k_total; k0 += kKc) {
            const size_t kc = std::min(kKc, k_total - k0);
            packPanel(*blk.out->w, blk.n0, blk.nb, k0, kc, packed, row_buf);
            const bool acc = accumulate || k0 > 0;
            for (size_t i = 0; i < rows; i += kMr) {
                const size_t mr = std::min(kMr, rows - i);
                const float* a = x + i * ldx + k0;
                for (size_t s = 0; s < strips; ++s) {
                    const size_t cols = std::min(kNr, blk.nb - s * kNr);
                    float* c = blk.out->y + i * blk.out->ldy + blk.n0 + s * kNr;
                    microTile(mr, cols, a, ldx, packed + s * kc * kNr, kc, c, blk.out->ldy, acc);
                }
            }
        }
    });
}

void gemv(const float* x, const TensorView& w, float* y, ThreadPool& pool) {
    const size_t n = static_cast<size_t>(w.rows);
    const size_t k = static_cast<size_t>(w.cols);
    const size_t esize = dtypeSize(w.dtype);
    constexpr size_t kRowsPerTask = 256;
    pool.parallelFor((n + kRowsPerTask - 1) / kRowsPerTask, [&](size_t task, int) {
        const size_t end = std::min(n, (task + 1) * kRowsPerTask);
        for (size_t j = task * kRowsPerTask; j < end; ++j) {
            const std::byte* row = w.data + j * k * esize;
            if (kHaveAvx2) {
                y[j] = dotRowAvx2(x, row, w.dtype, k);
            } else {
                float s = 0.0f;
                for (size_t i = 0; i < k; ++i) {
                    s += x[i] * loadAsFloat(row, w.dtype, i);
                }
                y[j] = s;
            }
        }
    });
}

void rmsNorm(const float* x, size_t rows, size_t ldx, size_t n, const float* weight, float eps,
             float* out, size_t ldout) {
    for (size_t r = 0; r < rows; ++r) {
        const float* xr = x + r * ldx;
        float ss = 0.0f;
        for (size_t i = 0; i < n; ++i) {
            ss += xr[i] * xr[i];
        }
        const float inv = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
        float* o = out + r * ldout;
        for (size_t i = 0; i < n; ++i) {
            o[i] = (xr[i] * inv) * weight[i];
        }
    }
}

void applyRope(float* x, size_t rows, size_t ldx, size_t heads, size_t head_dim,
               const float* cos_sin) {
    const size_t half = head_dim / 2;
    for (size_t r = 0; r < rows; ++r) {
        const float* cs = cos_sin + r * head_dim;
        for (size_t h = 0; h < heads; ++h) {
            float* xh = x + r * ldx + h * head_dim;
            for (size_t i = 0; i < half; ++i) {
                const float x1 = xh[i];
                const float x2 = xh[i + half];
                xh[i] = x1 * cs[i] - x2 * cs[half + i];
                xh[i + half] = x2 * cs[i] + x1 * cs[half + i];
            }
        }
    }
}

void attention(const float* q, size_t ldq, const float* k, const float* v, float* out, size_t ldo,
               const AttentionShape& shape, ThreadPool& pool,
               std::vector<std::vector<float>>& scores) {
    const size_t row_blocks = (shape.rows + kAttentionRows - 1) / kAttentionRows;
    if (scores.size() < static_cast<size_t>(pool.size())) {
        scores.resize(static_cast<size_t>(pool.size()));
    }
    for (auto& s : scores) {
        if (s.size() < shape.pos0 + shape.rows) {
            s.resize(shape.pos0 + shape.rows);
        }
    }
    pool.parallelFor(shape.heads * row_blocks, [&](size_t task, int worker) {
        // Heads vary fastest so that the first tasks (the long, late rows) of every head
        // start early and the short tail balances the threads.
        const size_t head = task % shape.heads;
        const size_t block = row_blocks - 1 - task / shape.heads;
        const size_t r0 = block * kAttentionRows;
        const size_t r1 = std::min(shape.rows, r0 + kAttentionRows);
        float* sc = scores[static_cast<size_t>(worker)].data();
        if (kHaveAvx2) {
            attentionBlockAvx2(q, ldq, k, v, out, ldo, shape, head, r0, r1, sc);
        } else {
            attentionBlockPortable(q, ldq, k, v, out, ldo, shape, head, r0, r1, sc);
        }
    });
}

void siluMul(const float* gate, const float* up, size_t rows, size_t ld, size_t n, float* out,
             size_t ldout, ThreadPool& pool) {
    pool.parallelFor(rows, [&](size_t r, int) {
        const float* g = gate + r * ld;
        const float* u = up + r * ld;
        float* o = out + r * ldout;
        for (size_t i = 0; i < n; ++i) {
            o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
        }
    });
}

}  // namespace atlas::bubbletea::cpu
