// A deliberately plain, single-threaded Llama prefill in double precision, written
// independently of the engine (no engine kernels, its own dtype decoding and RoPE) so that
// engine numerics can be checked against it. Slow by design; tests use tiny models.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "bubbletea/engine/weights.h"

namespace atlas::bubbletea::testref {

// Decodes one stored element. bf16 is the top half of an fp32; f16 is decoded with ldexp.
inline double decode(const TensorView& t, int64_t index) {
    const std::byte* p = t.data + index * static_cast<int64_t>(dtypeSize(t.dtype));
    if (t.dtype == DType::kF32) {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    if (t.dtype == DType::kBF16) {
        const uint32_t wide = static_cast<uint32_t>(bits) << 16;
        float f;
        std::memcpy(&f, &wide, 4);
        return f;
    }
    const int sign = (bits & 0x8000) != 0 ? -1 : 1;
    const int exp = (bits >> 10) & 0x1f;
    const int mant = bits & 0x3ff;
    if (exp == 0) {
        return sign * std::ldexp(mant, -24);
    }
    if (exp == 31) {
        return mant == 0 ? sign * INFINITY : NAN;
    }
    return sign * std::ldexp(1024 + mant, exp - 25);
}

inline double at(const TensorView& t, int64_t r, int64_t c) {
    return decode(t, r * t.cols + c);
}

struct Reference {
    std::vector<double> last_logits;
    // Per layer, [tokens x kv_heads * head_dim], K after RoPE.
    std::vector<std::vector<double>> k;
    std::vector<std::vector<double>> v;
};

// y[rows x W.rows] = x[rows x W.cols] * W^T
inline std::vector<double> linear(const std::vector<double>& x, size_t rows, const TensorView& w) {
    std::vector<double> y(rows * static_cast<size_t>(w.rows), 0.0);
    for (size_t r = 0; r < rows; ++r) {
        for (int64_t o = 0; o < w.rows; ++o) {
            double s = 0;
            for (int64_t i = 0; i < w.cols; ++i) {
                s += x[r * static_cast<size_t>(w.cols) + static_cast<size_t>(i)] * at(w, o, i);
            }
            y[r * static_cast<size_t>(w.rows) + static_cast<size_t>(o)] = s;
        }
    }
    return y;
}

inline std::vector<double> rmsnorm(const std::vector<double>& x, size_t rows, size_t n,
                                   const TensorView& w, double eps) {
    std::vector<double> y(x.size());
    for (size_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (size_t i = 0; i < n; ++i) {
            ss += x[r * n + i] * x[r * n + i];
        }
        const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
        for (size_t i = 0; i < n; ++i) {
            y[r * n + i] = x[r * n + i] * scale * decode(w, static_cast<int64_t>(i));
        }
    }
    return y;
}

// HF apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1].
// Only the unscaled RoPE (rope_scaling absent), which is what the test models use.
inline void rope(std::vector<double>& x, size_t rows, size_t heads, size_t d, double theta) {
    const size_t half = d / 2;
    for (size_t r = 0; r < rows; ++r) {
        for (size_t h = 0; h < heads; ++h) {
            double* v = &x[(r * heads + h) * d];
            std::vector<double> rotated(d);
            for (size_t i = 0; i < d; ++i) {
                const size_t pair = i % half;
                const double freq =
                    std::pow(theta, -2.0 * static_cast<double>(pair) / static_cast<double>(d));
                const double angle = static_cast<double>(r) * freq;
                const double rot = i < half ? -v[i + half] : v[i - half];
                rotated[i] = v[i] * std::cos(angle) + rot * std::sin(angle);
            }
            std::copy(rotated.begin(), rotated.end(), v);
        }
    }
}

inline Reference prefill(const Weights& weights, std::span<const int32_t> tokens) {
    const ModelConfig& c = weights.config();
    const size_t n = tokens.size();
    const size_t hidden = static_cast<size_t>(c.hidden_size);
    const size_t heads = static_cast<size_t>(c.num_attention_heads);
    const size_t kvh = static_cast<size_t>(c.num_key_value_heads);
    const size_t d = static_cast<size_t>(c.head_dim);
    const size_t inter = static_cast<size_t>(c.intermediate_size);

    std::vector<double> x(n * hidden);
    for (size_t r = 0; r < n; ++r) {
        for (size_t i = 0; i < hidden; ++i) {
            x[r * hidden + i] = at(weights.embedTokens(), tokens[r], static_cast<int64_t>(i));
        }
    }
    Reference ref;
    for (const LayerWeights& L : weights.layers()) {
        const auto h = rmsnorm(x, n, hidden, L.input_layernorm, c.rms_norm_eps);
        auto q = linear(h, n, L.q_proj);
        auto k = linear(h, n, L.k_proj);
        auto v = linear(h, n, L.v_proj);
        rope(q, n, heads, d, c.rope_theta);
        rope(k, n, kvh, d, c.rope_theta);
        std::vector<double> attn(n * heads * d, 0.0);
        for (size_t r = 0; r < n; ++r) {
            for (size_t hq = 0; hq < heads; ++hq) {
                const size_t g = hq / (heads / kvh);
                std::vector<double> p(r + 1);
                double mx = -INFINITY;
                for (size_t j = 0; j <= r; ++j) {
                    double s = 0;
                    for (size_t i = 0; i < d; ++i) {
                        s += q[(r * heads + hq) * d + i] * k[(j * kvh + g) * d + i];
                    }
                    p[j] = s / std::sqrt(static_cast<double>(d));
                    mx = std::max(mx, p[j]);
                }
                double sum = 0;
                for (double& e : p) {
                    e = std::exp(e - mx);
                    sum += e;
                }
                for (size_t j = 0; j <= r; ++j) {
                    for (size_t i = 0; i < d; ++i) {
                        attn[(r * heads + hq) * d + i] += p[j] / sum * v[(j * kvh + g) * d + i];
                    }
                }
            }
        }
        const auto o = linear(attn, n, L.o_proj);
        for (size_t i = 0; i < x.size(); ++i) {
            x[i] += o[i];
        }
        const auto h2 = rmsnorm(x, n, hidden, L.post_attention_layernorm, c.rms_norm_eps);
        const auto gate = linear(h2, n, L.gate_proj);
        const auto up = linear(h2, n, L.up_proj);
        std::vector<double> act(n * inter);
        for (size_t i = 0; i < act.size(); ++i) {
            act[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
        }
        const auto down = linear(act, n, L.down_proj);
        for (size_t i = 0; i < x.size(); ++i) {
            x[i] += down[i];
        }
        ref.k.push_back(std::move(k));
        ref.v.push_back(std::move(v));
    }
    std::vector<double> last(x.end() - static_cast<std::ptrdiff_t>(hidden), x.end());
    const auto normed = rmsnorm(last, 1, hidden, weights.norm(), c.rms_norm_eps);
    ref.last_logits = linear(normed, 1, weights.lmHead());
    return ref;
}

}  // namespace atlas::bubbletea::testref
