// CUDA engine vs CPU engine on small random models. Skips (with the reason) where the build
// has no CUDA or the machine has no GPU; perf/gpu-check/engine_check.cc is the fuller check.
//
// Tolerances: with F32 weights the CUDA engine runs fp32 GEMMs (no TF32) and an fp32 KV
// cache, so it must agree with the CPU to 1e-3 of the logit scale. With BF16 weights it feeds
// bf16 activations to the GEMMs and keeps a bf16 KV cache (2^-8 relative rounding per step),
// so the bound is 3e-2 relative L2 error; a real bug (RoPE pairing, head mapping, mask) is
// an O(1) error.
#include <gtest/gtest.h>

#include <cmath>

#include "bubbletea/engine/engine.h"
#include "engine_test_util.h"

namespace atlas::bubbletea {
namespace {

double relativeL2(const std::vector<float>& a, const std::vector<float>& b) {
    double num = 0;
    double den = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
        den += static_cast<double>(b[i]) * b[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

void compare(DType dtype, double logit_tol, double kv_tol) {
    const ModelConfig c = testutil::raggedConfig();
    auto weights = makeRandomWeights(c, dtype, 21);
    ASSERT_TRUE(weights.isOk());
    auto cuda = makeCudaEngine(*weights, 0, /*low_priority_stream=*/true);
    if (!cuda.isOk()) {
        if (cuda.status().code() == Code::kUnavailable) {
            GTEST_SKIP() << cuda.status().toString();
        }
        FAIL() << cuda.status().toString();
    }
    EXPECT_EQ((*cuda)->name(), "cuda");
    auto cpu = makeCpuEngine(*weights, 2);
    ASSERT_TRUE(cpu.isOk());
    const auto prompt = testutil::randomPrompt(45, c.vocab_size, 3);

    auto cpu_kv = (*cpu)->newSequence(45);
    auto gpu_kv = (*cuda)->newSequence(45);
    ASSERT_TRUE(cpu_kv.isOk() && gpu_kv.isOk());
    auto cpu_out = (*cpu)->prefillChunk(**cpu_kv, prompt, true);
    ASSERT_TRUE(cpu_out.isOk());
    ASSERT_TRUE((*cuda)->prefillChunk(**gpu_kv, std::span(prompt).first(20), false).isOk());
    auto gpu_out = (*cuda)->prefillChunk(**gpu_kv, std::span(prompt).subspan(20), true);
    ASSERT_TRUE(gpu_out.isOk()) << gpu_out.status().toString();

    EXPECT_LE(relativeL2(gpu_out->last_logits, cpu_out->last_logits), logit_tol);
    const auto [best, gap] = testutil::argmaxWithGap(cpu_out->last_logits);
    if (gap > 0.1) {
        EXPECT_EQ(gpu_out->next_token, static_cast<int32_t>(best));
    }
    std::vector<std::byte> a;
    std::vector<std::byte> b;
    KvLayout la;
    KvLayout lb;
    ASSERT_TRUE((*cpu)->exportKv(**cpu_kv, DType::kF32, &a, &la).isOk());
    ASSERT_TRUE((*cuda)->exportKv(**gpu_kv, DType::kF32, &b, &lb).isOk());
    ASSERT_EQ(a.size(), b.size());
    EXPECT_LE(relativeL2(kvToFloat(b, lb), kvToFloat(a, la)), kv_tol);
}

TEST(EngineCuda, F32MatchesCpu) {
    compare(DType::kF32, 1e-3, 1e-3);
}

TEST(EngineCuda, Bf16MatchesCpu) {
    compare(DType::kBF16, 3e-2, 3e-2);
}

}  // namespace
}  // namespace atlas::bubbletea
