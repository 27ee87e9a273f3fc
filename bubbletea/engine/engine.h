// The bubbletea prefill engine: Llama-architecture transformer prefill, run in chunks so that
// a scheduler can fit work into predicted GPU idle windows, with the KV cache exported as
// bytes for a decode server.
//
// Math (Hugging Face LlamaForCausalLM): per layer
//   h = x + o_proj(attn(rope(q_proj(rms(x))), rope(k_proj(rms(x))), v_proj(rms(x))))
//   x = h + down_proj(silu(gate_proj(rms(h))) * up_proj(rms(h)))
// with RMSNorm (fp32 statistics), RoPE in the "rotate_half" convention (pairs (i, i + d/2)),
// grouped-query causal attention over the KV cache, then the final norm and lm_head on the
// last position only. Activations and accumulation are fp32 on the CPU; see cuda_engine.cc
// for the GPU's precision.
//
// Threading: an Engine is used by one thread at a time (the daemon's worker); calls are not
// internally serialized. Different engines are independent. KvCaches belong to the engine
// that made them and must not be shared between concurrent calls.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "atlas/common/status.h"
#include "bubbletea/engine/dtype.h"
#include "bubbletea/engine/model_config.h"
#include "bubbletea/engine/weights.h"

namespace atlas::bubbletea {

// The KV cache of one sequence: for every layer, K and V of shape
// [tokens x num_key_value_heads x head_dim]; K is stored after RoPE (as Hugging Face and vLLM
// cache it). Storage is engine-specific (host memory for "cpu", device memory for "cuda").
// Created by Engine::newSequence; grows by one chunk per prefillChunk up to capacity().
class KvCache {
  public:
    virtual ~KvCache() = default;
    KvCache(const KvCache&) = delete;
    KvCache& operator=(const KvCache&) = delete;

    // Tokens prefilled so far (positions [0, length)).
    size_t length() const { return length_; }
    // The most tokens this sequence may hold (newSequence's max_tokens).
    size_t capacity() const { return capacity_; }
    // Forgets positions >= new_length (no-op if already shorter): the next chunk is written
    // at new_length. Lets a caller keep a shared prompt prefix and prefill different
    // suffixes after it, or measure chunk costs at a fixed context. Storage is kept.
    void truncate(size_t new_length) { length_ = new_length < length_ ? new_length : length_; }

  protected:
    KvCache(const void* owner, size_t capacity) : owner_(owner), capacity_(capacity) {}

    // What every engine checks before prefilling `tokens` into this cache: made by `engine`,
    // a non-empty chunk that fits the remaining capacity, every id in [0, vocab_size).
    Status checkChunk(const void* engine, std::span<const int32_t> tokens,
                      int64_t vocab_size) const {
        if (owner_ != engine) {
            return Status{Code::kInvalidArgument, "KvCache belongs to another engine"};
        }
        if (tokens.empty()) {
            return Status{Code::kInvalidArgument, "empty prefill chunk"};
        }
        if (tokens.size() > capacity_ - length_) {
            return Status{Code::kInvalidArgument,
                          "chunk of " + std::to_string(tokens.size()) + " tokens at position " +
                              std::to_string(length_) + " exceeds the sequence capacity " +
                              std::to_string(capacity_)};
        }
        for (size_t i = 0; i < tokens.size(); ++i) {
            if (tokens[i] < 0 || tokens[i] >= vocab_size) {
                return Status{Code::kInvalidArgument, "token id " + std::to_string(tokens[i]) +
                                                          " at chunk index " + std::to_string(i) +
                                                          " is outside [0, " +
                                                          std::to_string(vocab_size) + ")"};
            }
        }
        return Status::ok();
    }

    const void* owner_;  // the engine that created it; engines reject foreign caches
    size_t capacity_;
    size_t length_ = 0;

    friend class CpuEngine;
    friend class CudaEngine;
};

struct PrefillResult {
    int32_t next_token = -1;         // argmax of the last position's logits (-1 unless `last`)
    std::vector<float> last_logits;  // [vocab_size] logits of the last position when `last`
    size_t kv_length = 0;            // the cache length after this chunk
};

// Describes the bytes exportKv produces. Order: layer-major; within a layer all of K, then
// all of V; each is [num_tokens x num_kv_heads x head_dim] row-major, little-endian `dtype`.
//   offset(layer, kind, token, head, d) =
//       ((((layer * 2 + kind) * num_tokens + token) * num_kv_heads + head) * head_dim + d)
//       * dtypeSize(dtype),      kind 0 = K (post-RoPE), 1 = V
struct KvLayout {
    DType dtype = DType::kF32;
    int64_t num_layers = 0;
    int64_t num_tokens = 0;
    int64_t num_kv_heads = 0;
    int64_t head_dim = 0;

    size_t elementIndex(int64_t layer, int kind, int64_t token, int64_t head, int64_t d) const {
        return static_cast<size_t>(
            (((layer * 2 + kind) * num_tokens + token) * num_kv_heads + head) * head_dim + d);
    }
    size_t totalBytes() const {
        return static_cast<size_t>(num_layers * 2 * num_tokens * num_kv_heads * head_dim) *
               dtypeSize(dtype);
    }
};

class Engine {
  public:
    virtual ~Engine() = default;

    virtual const ModelConfig& config() const = 0;
    virtual std::string name() const = 0;  // "cpu" | "cuda"

    // A new empty sequence that can hold up to `max_tokens` positions
    // (1 <= max_tokens <= max_position_embeddings). The "cuda" engine allocates the whole
    // cache here (stream-ordered, so it does not synchronize the device); "cpu" grows it
    // chunk by chunk.
    virtual Result<std::unique_ptr<KvCache>> newSequence(size_t max_tokens) = 0;

    // Runs one prefill chunk: computes the chunk's K/V for every layer, appends them at
    // positions [kv.length(), kv.length() + tokens.size()), attends causally over the whole
    // cache, and when `last` is true returns the next token and the last position's logits.
    // Blocks until the work is done (the "cuda" engine synchronizes its stream).
    //
    // `cancel` (optional) is polled between layers; when it reads true the call returns
    // Code::kTimeout ("prefill cancelled") and the cache keeps its previous length, so the
    // chunk can be retried later. On any error the cache length is unchanged.
    // Errors: kInvalidArgument for an empty chunk, token ids outside [0, vocab), a chunk past
    // capacity, or a cache from another engine; kSystem/kInternal for device failures.
    virtual Result<PrefillResult> prefillChunk(KvCache& kv, std::span<const int32_t> tokens,
                                               bool last, const std::atomic<bool>* cancel) = 0;
    Result<PrefillResult> prefillChunk(KvCache& kv, std::span<const int32_t> tokens, bool last) {
        return prefillChunk(kv, tokens, last, nullptr);
    }

    // Copies the cache's [0, length) positions into `out` (resized) in the layout above,
    // converted to `dtype` (F32 or BF16; bf16 rounds to nearest-even).
    virtual Status exportKv(const KvCache& kv, DType dtype, std::vector<std::byte>* out,
                            KvLayout* layout) = 0;
};

// The multithreaded CPU engine: `threads` workers in total (the calling thread is one of
// them; 1 means no extra threads). Weights may be F32, BF16 or F16 (widened on the fly);
// compute, activations and the KV cache are fp32. Results are bit-identical for every chunk
// split of a prompt and every thread count.
Result<std::unique_ptr<Engine>> makeCpuEngine(std::shared_ptr<const Weights> weights, int threads);

// The CUDA engine on device `device` (cuBLAS GEMMs + the project's kernels), on a stream of
// the lowest priority when `low_priority_stream` (so training kernels win the SMs), else
// default priority. Uploads all weights at creation. Returns Code::kUnavailable when the
// build has no CUDA or no usable device exists.
Result<std::unique_ptr<Engine>> makeCudaEngine(std::shared_ptr<const Weights> weights, int device,
                                               bool low_priority_stream);

// Converts exported KV bytes of either dtype to fp32 (for comparisons and tools).
std::vector<float> kvToFloat(std::span<const std::byte> bytes, const KvLayout& layout);

}  // namespace atlas::bubbletea
