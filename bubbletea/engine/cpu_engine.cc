// The "cpu" engine: fp32 Llama prefill over a pool of threads. See engine.h for the contract.
#include <cmath>
#include <limits>

#include "bubbletea/engine/cpu_kernels.h"
#include "bubbletea/engine/engine.h"
#include "bubbletea/engine/thread_pool.h"

namespace atlas::bubbletea {

namespace {

constexpr int kMaxThreads = 1024;

class CpuKvCache final : public KvCache {
  public:
    CpuKvCache(const void* owner, size_t capacity, size_t layers)
        : KvCache(owner, capacity), k(layers), v(layers) {}

    // Per layer, [positions x kv_heads * head_dim] fp32, K after RoPE. The vectors grow
    // geometrically as chunks arrive; only the first length() positions are meaningful.
    std::vector<std::vector<float>> k;
    std::vector<std::vector<float>> v;
};

std::vector<float> toFloat(const TensorView& view) {
    std::vector<float> out(static_cast<size_t>(view.numElements()));
    convertToFloat(view.data, view.dtype, 0, out.size(), out.data());
    return out;
}

void ensureSize(std::vector<float>& v, size_t n) {
    if (v.size() < n) {
        v.resize(n);
    }
}

}  // namespace

class CpuEngine final : public Engine {
  public:
    CpuEngine(std::shared_ptr<const Weights> weights, int threads)
        : weights_(std::move(weights)),
          config_(weights_->config()),
          inv_freq_(ropeInverseFrequencies(config_)),
          final_norm_(toFloat(weights_->norm())),
          pool_(threads) {
        for (const LayerWeights& layer : weights_->layers()) {
            input_norms_.push_back(toFloat(layer.input_layernorm));
            post_norms_.push_back(toFloat(layer.post_attention_layernorm));
        }
    }

    const ModelConfig& config() const override { return config_; }
    std::string name() const override { return "cpu"; }

    Result<std::unique_ptr<KvCache>> newSequence(size_t max_tokens) override {
        if (max_tokens == 0 || max_tokens > static_cast<size_t>(config_.max_position_embeddings)) {
            return Status{Code::kInvalidArgument,
                          "max_tokens " + std::to_string(max_tokens) + " is outside [1, " +
                              std::to_string(config_.max_position_embeddings) + "]"};
        }
        return std::unique_ptr<KvCache>(std::make_unique<CpuKvCache>(
            this, max_tokens, static_cast<size_t>(config_.num_hidden_layers)));
    }

    Result<PrefillResult> prefillChunk(KvCache& kv, std::span<const int32_t> tokens, bool last,
                                       const std::atomic<bool>* cancel) override;

    Status exportKv(const KvCache& kv, DType dtype, std::vector<std::byte>* out,
                    KvLayout* layout) override;

  private:
    void runLayer(size_t layer, CpuKvCache& cache, size_t pos0, size_t n, size_t q_begin);

    std::shared_ptr<const Weights> weights_;
    const ModelConfig config_;
    const std::vector<double> inv_freq_;
    std::vector<std::vector<float>> input_norms_;
    std::vector<std::vector<float>> post_norms_;
    const std::vector<float> final_norm_;
    ThreadPool pool_;
    cpu::GemmScratch gemm_scratch_;
    std::vector<std::vector<float>> attention_scratch_;
    // Activations for the current chunk, [rows x width] row-major, grown on demand.
    std::vector<float> x_;        // residual stream [n x hidden]
    std::vector<float> h_;        // normalized input to the projections [n x hidden]
    std::vector<float> q_;        // [n x heads * head_dim]
    std::vector<float> attn_;     // [n x heads * head_dim]
    std::vector<float> gate_;     // [n x intermediate]
    std::vector<float> up_;       // [n x intermediate]
    std::vector<float> act_;      // [n x intermediate]
    std::vector<float> cos_sin_;  // [n x head_dim]: cos then sin of each rotation angle
};

Result<PrefillResult> CpuEngine::prefillChunk(KvCache& kv, std::span<const int32_t> tokens,
                                              bool last, const std::atomic<bool>* cancel) {
    ATLAS_RETURN_IF_ERROR(kv.checkChunk(this, tokens, config_.vocab_size));
    const size_t n = tokens.size();
    const size_t pos0 = kv.length_;
    auto& cache = static_cast<CpuKvCache&>(kv);
    const size_t hidden = static_cast<size_t>(config_.hidden_size);
    const size_t q_dim = static_cast<size_t>(config_.qDim());
    const size_t kv_dim = static_cast<size_t>(config_.kvDim());
    const size_t inter = static_cast<size_t>(config_.intermediate_size);
    const size_t head_dim = static_cast<size_t>(config_.head_dim);
    const size_t half = head_dim / 2;

    ensureSize(x_, n * hidden);
    ensureSize(h_, n * hidden);
    ensureSize(q_, n * q_dim);
    ensureSize(attn_, n * q_dim);
    ensureSize(gate_, n * inter);
    ensureSize(up_, n * inter);
    ensureSize(act_, n * inter);
    ensureSize(cos_sin_, n * head_dim);
    for (size_t l = 0; l < cache.k.size(); ++l) {
        ensureSize(cache.k[l], (pos0 + n) * kv_dim);
        ensureSize(cache.v[l], (pos0 + n) * kv_dim);
    }

    const TensorView& embed = weights_->embedTokens();
    for (size_t r = 0; r < n; ++r) {
        convertToFloat(embed.data, embed.dtype, static_cast<size_t>(tokens[r]) * hidden, hidden,
                       x_.data() + r * hidden);
    }
    // Angles in double: position * inv_freq loses digits in fp32 at long contexts.
    for (size_t r = 0; r < n; ++r) {
        const double pos = static_cast<double>(pos0 + r);
        for (size_t i = 0; i < half; ++i) {
            const double angle = pos * inv_freq_[i];
            cos_sin_[r * head_dim + i] = static_cast<float>(std::cos(angle));
            cos_sin_[r * head_dim + half + i] = static_cast<float>(std::sin(angle));
        }
    }

    const size_t layers = cache.k.size();
    for (size_t l = 0; l < layers; ++l) {
        // relaxed: the flag carries no data; a late observation only costs one more layer.
        if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
            return Status{Code::kTimeout, "prefill cancelled before layer " + std::to_string(l)};
        }
        // The last layer's outputs only matter for the logits of the final position: every
        // other row needs just its K/V there.
        const size_t q_begin = l + 1 < layers ? 0 : (last ? n - 1 : n);
        runLayer(l, cache, pos0, n, q_begin);
    }
    kv.length_ = pos0 + n;

    PrefillResult result;
    result.kv_length = kv.length_;
    if (last) {
        float* h_last = h_.data();
        cpu::rmsNorm(x_.data() + (n - 1) * hidden, 1, hidden, hidden, final_norm_.data(),
                     static_cast<float>(config_.rms_norm_eps), h_last, hidden);
        result.last_logits.resize(static_cast<size_t>(config_.vocab_size));
        cpu::gemv(h_last, weights_->lmHead(), result.last_logits.data(), pool_);
        float best = -std::numeric_limits<float>::infinity();
        for (size_t i = 0; i < result.last_logits.size(); ++i) {
            if (result.last_logits[i] > best) {  // NaN never wins; ties pick the lowest id
                best = result.last_logits[i];
                result.next_token = static_cast<int32_t>(i);
            }
        }
        if (result.next_token < 0) {
            return Status{Code::kInternal, "all logits are NaN or -inf"};
        }
    }
    return result;
}

void CpuEngine::runLayer(size_t l, CpuKvCache& cache, size_t pos0, size_t n, size_t q_begin) {
    const LayerWeights& w = weights_->layers()[l];
    const size_t hidden = static_cast<size_t>(config_.hidden_size);
    const size_t q_dim = static_cast<size_t>(config_.qDim());
    const size_t kv_dim = static_cast<size_t>(config_.kvDim());
    const size_t inter = static_cast<size_t>(config_.intermediate_size);
    const size_t head_dim = static_cast<size_t>(config_.head_dim);
    const auto eps = static_cast<float>(config_.rms_norm_eps);

    cpu::rmsNorm(x_.data(), n, hidden, hidden, input_norms_[l].data(), eps, h_.data(), hidden);
    // K and V go straight into the cache rows of this chunk.
    float* k_rows = cache.k[l].data() + pos0 * kv_dim;
    float* v_rows = cache.v[l].data() + pos0 * kv_dim;
    if (q_begin == 0) {
        const cpu::GemmOutput outs[] = {{&w.q_proj, q_.data(), q_dim},
                                        {&w.k_proj, k_rows, kv_dim},
                                        {&w.v_proj, v_rows, kv_dim}};
        cpu::gemm(h_.data(), n, hidden, outs, false, pool_, gemm_scratch_);
    } else {
        const cpu::GemmOutput outs[] = {{&w.k_proj, k_rows, kv_dim}, {&w.v_proj, v_rows, kv_dim}};
        cpu::gemm(h_.data(), n, hidden, outs, false, pool_, gemm_scratch_);
        if (q_begin < n) {
            const cpu::GemmOutput q_out[] = {{&w.q_proj, q_.data() + q_begin * q_dim, q_dim}};
            cpu::gemm(h_.data() + q_begin * hidden, n - q_begin, hidden, q_out, false, pool_,
                      gemm_scratch_);
        }
    }
    cpu::applyRope(k_rows, n, kv_dim, static_cast<size_t>(config_.num_key_value_heads), head_dim,
                   cos_sin_.data());
    if (q_begin == n) {
        return;
    }
    const size_t m = n - q_begin;
    float* q_rows = q_.data() + q_begin * q_dim;
    float* x_rows = x_.data() + q_begin * hidden;
    float* h_rows = h_.data() + q_begin * hidden;
    cpu::applyRope(q_rows, m, q_dim, static_cast<size_t>(config_.num_attention_heads), head_dim,
                   cos_sin_.data() + q_begin * head_dim);
    const cpu::AttentionShape shape{m, pos0 + q_begin,
                                    static_cast<size_t>(config_.num_attention_heads),
                                    static_cast<size_t>(config_.num_key_value_heads), head_dim};
    float* attn_rows = attn_.data() + q_begin * q_dim;
    cpu::attention(q_rows, q_dim, cache.k[l].data(), cache.v[l].data(), attn_rows, q_dim, shape,
                   pool_, attention_scratch_);
    const cpu::GemmOutput o_out[] = {{&w.o_proj, x_rows, hidden}};
    cpu::gemm(attn_rows, m, q_dim, o_out, /*accumulate=*/true, pool_, gemm_scratch_);

    cpu::rmsNorm(x_rows, m, hidden, hidden, post_norms_[l].data(), eps, h_rows, hidden);
    float* gate_rows = gate_.data() + q_begin * inter;
    float* up_rows = up_.data() + q_begin * inter;
    float* act_rows = act_.data() + q_begin * inter;
    const cpu::GemmOutput mlp_in[] = {{&w.gate_proj, gate_rows, inter},
                                      {&w.up_proj, up_rows, inter}};
    cpu::gemm(h_rows, m, hidden, mlp_in, false, pool_, gemm_scratch_);
    cpu::siluMul(gate_rows, up_rows, m, inter, inter, act_rows, inter, pool_);
    const cpu::GemmOutput down_out[] = {{&w.down_proj, x_rows, hidden}};
    cpu::gemm(act_rows, m, inter, down_out, /*accumulate=*/true, pool_, gemm_scratch_);
}

Status CpuEngine::exportKv(const KvCache& kv, DType dtype, std::vector<std::byte>* out,
                           KvLayout* layout) {
    if (kv.owner_ != this) {
        return {Code::kInvalidArgument, "KvCache belongs to another engine"};
    }
    if (out == nullptr || layout == nullptr) {
        return {Code::kInvalidArgument, "exportKv needs out and layout"};
    }
    const auto& cache = static_cast<const CpuKvCache&>(kv);
    *layout = KvLayout{dtype, config_.num_hidden_layers, static_cast<int64_t>(kv.length_),
                       config_.num_key_value_heads, config_.head_dim};
    out->resize(layout->totalBytes());
    const size_t per_block = kv.length_ * static_cast<size_t>(config_.kvDim());
    const size_t block_bytes = per_block * dtypeSize(dtype);
    for (size_t l = 0; l < cache.k.size(); ++l) {
        convertFromFloat(cache.k[l].data(), per_block, dtype, out->data() + (2 * l) * block_bytes);
        convertFromFloat(cache.v[l].data(), per_block, dtype,
                         out->data() + (2 * l + 1) * block_bytes);
    }
    return Status::ok();
}

Result<std::unique_ptr<Engine>> makeCpuEngine(std::shared_ptr<const Weights> weights, int threads) {
    if (weights == nullptr) {
        return Status{Code::kInvalidArgument, "makeCpuEngine: no weights"};
    }
    if (threads < 1 || threads > kMaxThreads) {
        return Status{Code::kInvalidArgument,
                      "makeCpuEngine: threads must be in [1, " + std::to_string(kMaxThreads) + "]"};
    }
    ATLAS_RETURN_IF_ERROR(validateConfig(weights->config()));
    return std::unique_ptr<Engine>(std::make_unique<CpuEngine>(std::move(weights), threads));
}

std::vector<float> kvToFloat(std::span<const std::byte> bytes, const KvLayout& layout) {
    const size_t count = std::min(bytes.size() / dtypeSize(layout.dtype),
                                  layout.totalBytes() / dtypeSize(layout.dtype));
    std::vector<float> out(count);
    convertToFloat(bytes.data(), layout.dtype, 0, count, out.data());
    return out;
}

}  // namespace atlas::bubbletea
