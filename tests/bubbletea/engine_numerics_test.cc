// CPU engine numerics against the independent double-precision reference in
// engine_reference.h.
//
// Tolerance: the engine computes in fp32 on the same (exactly widened) weight values, so
// the only differences are fp32 rounding and summation order. Logits and every K/V element
// must agree within 2e-5 of the reference's scale (max |ref|, at least 1); a wrong RoPE
// convention, head mapping or mask produces errors of order 1. The predicted token must be
// the reference argmax unless the reference's top two logits are within that tolerance.
#include <gtest/gtest.h>

#include "bubbletea/engine/engine.h"
#include "engine_reference.h"
#include "engine_test_util.h"

namespace atlas::bubbletea {
namespace {

using testutil::scaledMaxError;

constexpr double kTolerance = 2e-5;

struct NumericsCase {
    const char* name;
    ModelConfig config;
    DType dtype;
    size_t prompt;
    int threads;
};

void checkAgainstReference(const NumericsCase& tc) {
    SCOPED_TRACE(tc.name);
    auto weights = makeRandomWeights(tc.config, tc.dtype, /*seed=*/7);
    ASSERT_TRUE(weights.isOk()) << weights.status().toString();
    auto engine = makeCpuEngine(*weights, tc.threads);
    ASSERT_TRUE(engine.isOk()) << engine.status().toString();
    const auto prompt = testutil::randomPrompt(tc.prompt, tc.config.vocab_size, 11);

    auto kv = (*engine)->newSequence(tc.prompt);
    ASSERT_TRUE(kv.isOk());
    auto result = (*engine)->prefillChunk(**kv, prompt, /*last=*/true);
    ASSERT_TRUE(result.isOk()) << result.status().toString();
    const testref::Reference ref = testref::prefill(**weights, prompt);

    EXPECT_LE(scaledMaxError(result->last_logits, ref.last_logits), kTolerance);
    const auto [ref_best, gap] = testutil::argmaxWithGap(ref.last_logits);
    if (gap > kTolerance * 10) {
        EXPECT_EQ(result->next_token, static_cast<int32_t>(ref_best));
    }
    EXPECT_EQ(result->kv_length, tc.prompt);

    std::vector<std::byte> bytes;
    KvLayout layout;
    ASSERT_TRUE((*engine)->exportKv(**kv, DType::kF32, &bytes, &layout).isOk());
    ASSERT_EQ(layout.num_tokens, static_cast<int64_t>(tc.prompt));
    const std::vector<float> flat = kvToFloat(bytes, layout);
    const size_t block = tc.prompt * static_cast<size_t>(tc.config.kvDim());
    for (int64_t l = 0; l < tc.config.num_hidden_layers; ++l) {
        const auto first_k =
            flat.begin() + static_cast<std::ptrdiff_t>(layout.elementIndex(l, 0, 0, 0, 0));
        const auto first_v =
            flat.begin() + static_cast<std::ptrdiff_t>(layout.elementIndex(l, 1, 0, 0, 0));
        const std::vector<float> k(first_k, first_k + static_cast<std::ptrdiff_t>(block));
        const std::vector<float> v(first_v, first_v + static_cast<std::ptrdiff_t>(block));
        EXPECT_LE(scaledMaxError(k, ref.k[static_cast<size_t>(l)]), kTolerance) << "K layer " << l;
        EXPECT_LE(scaledMaxError(v, ref.v[static_cast<size_t>(l)]), kTolerance) << "V layer " << l;
    }
}

TEST(EngineNumerics, TinyGqaF32MatchesReference) {
    checkAgainstReference({"tiny f32", testutil::tinyConfig(), DType::kF32, 37, 2});
}

TEST(EngineNumerics, TinyGqaBf16MatchesReference) {
    checkAgainstReference({"tiny bf16", testutil::tinyConfig(), DType::kBF16, 37, 2});
}

TEST(EngineNumerics, TinyGqaF16MatchesReference) {
    checkAgainstReference({"tiny f16", testutil::tinyConfig(), DType::kF16, 19, 1});
}

TEST(EngineNumerics, RaggedTiedBf16MatchesReference) {
    checkAgainstReference({"ragged bf16", testutil::raggedConfig(), DType::kBF16, 29, 3});
}

TEST(EngineNumerics, MultiHeadAttentionF32MatchesReference) {
    ModelConfig c = testutil::tinyConfig();
    c.num_key_value_heads = c.num_attention_heads;  // plain MHA, like Llama 2
    checkAgainstReference({"mha f32", c, DType::kF32, 23, 2});
}

TEST(EngineNumerics, SingleTokenPrompt) {
    checkAgainstReference({"one token", testutil::tinyConfig(), DType::kF32, 1, 2});
}

// The reference is only as good as its independence: make sure a broken model is caught.
TEST(EngineNumerics, ReferenceDetectsAPerturbedWeight) {
    const ModelConfig c = testutil::tinyConfig();
    auto weights = makeRandomWeights(c, DType::kF32, 7);
    ASSERT_TRUE(weights.isOk());
    auto other = makeRandomWeights(c, DType::kF32, 8);
    ASSERT_TRUE(other.isOk());
    const auto prompt = testutil::randomPrompt(9, c.vocab_size, 3);
    auto engine = makeCpuEngine(*other, 1);
    ASSERT_TRUE(engine.isOk());
    auto kv = (*engine)->newSequence(9);
    ASSERT_TRUE(kv.isOk());
    auto result = (*engine)->prefillChunk(**kv, prompt, true);
    ASSERT_TRUE(result.isOk());
    const auto ref = testref::prefill(**weights, prompt);
    EXPECT_GT(scaledMaxError(result->last_logits, ref.last_logits), 100 * kTolerance);
}

// Llama 3.1/3.2 RoPE scaling, checked against values derived by hand from the transformers
// formula: with original context 8192, low/high frequency factors 1/4, the band edges are
// wavelengths 8192 and 2048 tokens.
TEST(EngineNumerics, Llama3RopeScaling) {
    auto c = shapePreset("llama-3.2-1b");
    ASSERT_TRUE(c.isOk());
    const std::vector<double> inv = ropeInverseFrequencies(*c);
    ASSERT_EQ(inv.size(), 32u);
    const double two_pi = 2 * M_PI;
    for (size_t i = 0; i < inv.size(); ++i) {
        const double base = std::pow(500000.0, -2.0 * static_cast<double>(i) / 64.0);
        const double wavelen = two_pi / base;
        double expect;
        if (wavelen < 2048) {
            expect = base;
        } else if (wavelen > 8192) {
            expect = base / 32;
        } else {
            const double smooth = (8192 / wavelen - 1) / 3;
            expect = (1 - smooth) * base / 32 + smooth * base;
        }
        EXPECT_NEAR(inv[i], expect, 1e-12 * base) << i;
    }
    EXPECT_DOUBLE_EQ(inv[0], 1.0);                              // highest frequency untouched
    EXPECT_LT(inv[31], std::pow(500000.0, -62.0 / 64.0) / 31);  // lowest divided by 32
}

}  // namespace
}  // namespace atlas::bubbletea
