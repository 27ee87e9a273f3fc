#include "bubbletea/daemon/engine_profile.h"

#include <algorithm>

namespace atlas::bubbletea {

Result<std::vector<CostSample>> profileEngine(Engine& engine, const ProfilePlan& plan,
                                              const Clock& clock, const Logger& logger) {
    const ModelConfig& mc = engine.config();
    const int64_t max_len = mc.max_position_embeddings;
    std::vector<int64_t> sizes = plan.chunk_tokens;
    std::vector<int64_t> contexts = plan.contexts;
    std::sort(sizes.begin(), sizes.end());
    std::sort(contexts.begin(), contexts.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    contexts.erase(std::unique(contexts.begin(), contexts.end()), contexts.end());
    if (sizes.empty() || sizes.front() <= 0) {
        return Status{Code::kInvalidArgument, "profile: no chunk sizes"};
    }
    // Deterministic pseudo-random tokens: the cost does not depend on their values.
    std::vector<int32_t> tokens(static_cast<size_t>(
        std::min<int64_t>(max_len, (contexts.empty() ? 0 : contexts.back()) + sizes.back())));
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (auto& t : tokens) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t = static_cast<int32_t>(x % static_cast<uint64_t>(mc.vocab_size));
    }
    auto seq = engine.newSequence(tokens.size());
    if (!seq.isOk()) {
        return seq.status();
    }
    KvCache& kv = *seq.value();
    std::vector<CostSample> samples;
    const Nanos start = clock.nowNs();
    {
        // Warm-up: first-touch allocations, caches, lazy CUDA initialisation.
        const size_t n = static_cast<size_t>(std::min<int64_t>(sizes.front(), max_len));
        auto r = engine.prefillChunk(kv, std::span<const int32_t>(tokens.data(), n), true);
        if (!r.isOk()) {
            return r.status();
        }
        kv.truncate(0);
    }
    for (int64_t context : contexts) {
        if (context + sizes.front() > static_cast<int64_t>(tokens.size())) {
            break;
        }
        // Build the context once (this chunk is itself a sample at context 0).
        if (context > 0) {
            kv.truncate(0);
            const Nanos t0 = clock.nowNs();
            auto r = engine.prefillChunk(
                kv, std::span<const int32_t>(tokens.data(), static_cast<size_t>(context)), false);
            if (!r.isOk()) {
                return r.status();
            }
            samples.push_back({context, 0, clock.nowNs() - t0});
        }
        for (int64_t size : sizes) {
            if (context + size > static_cast<int64_t>(tokens.size())) {
                break;
            }
            if (samples.size() >= 2 && clock.nowNs() - start > plan.budget_ns) {
                ATLAS_LOG_INFO(logger, "bubbletea: profiling budget spent after %zu samples",
                               samples.size());
                return samples;
            }
            // Twice, keeping the faster: the first call of a new shape pays one-off costs
            // (GEMM algorithm selection, allocations) that later chunks do not.
            Nanos best = -1;
            for (int rep = 0; rep < 2; ++rep) {
                kv.truncate(static_cast<size_t>(context));
                const Nanos t0 = clock.nowNs();
                auto r = engine.prefillChunk(
                    kv,
                    std::span<const int32_t>(tokens.data() + context, static_cast<size_t>(size)),
                    true);
                if (!r.isOk()) {
                    return r.status();
                }
                const Nanos t = clock.nowNs() - t0;
                best = best < 0 ? t : std::min(best, t);
            }
            samples.push_back({size, context, best});
        }
    }
    if (samples.empty()) {
        return Status{Code::kInvalidArgument, "profile: no chunk fits the model's context"};
    }
    return samples;
}

}  // namespace atlas::bubbletea
