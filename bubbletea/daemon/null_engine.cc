#include "bubbletea/daemon/null_engine.h"

#include <vector>

namespace atlas::bubbletea {
namespace {

constexpr uint64_t kFnvOffset = 1469598103934665603ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t hashTokens(uint64_t h, std::span<const int32_t> tokens) {
    for (int32_t t : tokens) {
        h = (h ^ static_cast<uint32_t>(t)) * kFnvPrime;
    }
    return h;
}

class NullKvCache final : public KvCache {
  public:
    NullKvCache(const void* owner, size_t capacity) : KvCache(owner, capacity) {}
    void append(std::span<const int32_t> tokens) {
        tokens_.resize(length_);  // drop positions a truncate() forgot
        tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
        length_ += tokens.size();
    }
    bool ownedBy(const void* engine) const { return owner_ == engine; }
    uint64_t hash() const {
        // The hash of the first length_ tokens (truncate() may have shortened the cache).
        return hashTokens(kFnvOffset, std::span<const int32_t>(tokens_.data(), length_));
    }
    const std::vector<int32_t>& tokens() const { return tokens_; }

  private:
    std::vector<int32_t> tokens_;
};

class NullEngine final : public Engine {
  public:
    explicit NullEngine(const ModelConfig& config) : config_(config) {}

    const ModelConfig& config() const override { return config_; }
    std::string name() const override { return "null"; }

    Result<std::unique_ptr<KvCache>> newSequence(size_t max_tokens) override {
        if (max_tokens == 0 || max_tokens > static_cast<size_t>(config_.max_position_embeddings)) {
            return Status{Code::kInvalidArgument,
                          "max_tokens " + std::to_string(max_tokens) + " is outside [1, " +
                              std::to_string(config_.max_position_embeddings) + "]"};
        }
        return std::unique_ptr<KvCache>(std::make_unique<NullKvCache>(this, max_tokens));
    }

    Result<PrefillResult> prefillChunk(KvCache& kv, std::span<const int32_t> tokens, bool last,
                                       const std::atomic<bool>* cancel) override {
        auto* cache = dynamic_cast<NullKvCache*>(&kv);
        if (cache == nullptr || !cache->ownedBy(this)) {
            return Status{Code::kInvalidArgument, "KV cache belongs to another engine"};
        }
        if (tokens.empty()) {
            return Status{Code::kInvalidArgument, "empty prefill chunk"};
        }
        if (cache->length() + tokens.size() > cache->capacity()) {
            return Status{Code::kInvalidArgument, "chunk exceeds the sequence capacity"};
        }
        for (int32_t t : tokens) {
            if (t < 0 || t >= config_.vocab_size) {
                return Status{Code::kInvalidArgument, "token id outside the vocabulary"};
            }
        }
        if (cancel != nullptr && cancel->load(std::memory_order_acquire)) {
            return Status{Code::kTimeout, "prefill cancelled"};
        }
        cache->append(tokens);
        PrefillResult r;
        r.kv_length = cache->length();
        if (last) {
            r.next_token =
                static_cast<int32_t>(cache->hash() % static_cast<uint64_t>(config_.vocab_size));
        }
        return r;
    }

    Status exportKv(const KvCache& kv, DType dtype, std::vector<std::byte>* out,
                    KvLayout* layout) override {
        const auto* cache = dynamic_cast<const NullKvCache*>(&kv);
        if (cache == nullptr || !cache->ownedBy(this)) {
            return Status{Code::kInvalidArgument, "KV cache belongs to another engine"};
        }
        if (dtype != DType::kF32 && dtype != DType::kBF16) {
            return Status{Code::kInvalidArgument, "export dtype must be F32 or BF16"};
        }
        KvLayout l;
        l.dtype = dtype;
        l.num_layers = 1;
        l.num_tokens = static_cast<int64_t>(cache->length());
        l.num_kv_heads = 1;
        l.head_dim = 2;
        std::vector<float> values(static_cast<size_t>(2 * l.num_tokens * 2));
        for (int64_t t = 0; t < l.num_tokens; ++t) {
            values[l.elementIndex(0, 0, t, 0, 0)] = static_cast<float>(cache->tokens()[t]);
            values[l.elementIndex(0, 0, t, 0, 1)] = static_cast<float>(t);
            values[l.elementIndex(0, 1, t, 0, 0)] = static_cast<float>(t);
            values[l.elementIndex(0, 1, t, 0, 1)] = static_cast<float>(cache->tokens()[t]);
        }
        out->resize(l.totalBytes());
        convertFromFloat(values.data(), values.size(), dtype, out->data());
        *layout = l;
        return Status::ok();
    }

  private:
    ModelConfig config_;
};

}  // namespace

std::unique_ptr<Engine> makeNullEngine(const ModelConfig& config) {
    return std::make_unique<NullEngine>(config);
}

int32_t nullEngineToken(std::span<const int32_t> prompt, int64_t vocab_size) {
    return static_cast<int32_t>(hashTokens(kFnvOffset, prompt) % static_cast<uint64_t>(vocab_size));
}

}  // namespace atlas::bubbletea
