// Chunked prefill must equal one-shot prefill. The CPU engine promises more than closeness:
// every output element is computed by the same operation sequence whatever the chunk split
// or thread count, so the exported KV bytes, logits and next token are bit-identical. Also
// covers cancellation and argument errors.
#include <gtest/gtest.h>

#include <numeric>

#include "bubbletea/engine/engine.h"
#include "engine_test_util.h"

namespace atlas::bubbletea {
namespace {

struct PrefillRun {
    PrefillResult result;
    std::vector<std::byte> kv;
    KvLayout layout;
};

PrefillRun runSplit(Engine& engine, const std::vector<int32_t>& prompt,
                    const std::vector<size_t>& split) {
    PrefillRun run;
    auto kv = engine.newSequence(prompt.size());
    EXPECT_TRUE(kv.isOk());
    size_t at = 0;
    for (size_t i = 0; i < split.size(); ++i) {
        const bool last = i + 1 == split.size();
        auto r = engine.prefillChunk(**kv, std::span(prompt).subspan(at, split[i]), last);
        EXPECT_TRUE(r.isOk()) << r.status().toString();
        if (!r.isOk()) {
            return run;
        }
        at += split[i];
        EXPECT_EQ(r->kv_length, at);
        EXPECT_EQ((*kv)->length(), at);
        if (last) {
            run.result = std::move(r.value());
        } else {
            EXPECT_EQ(r->next_token, -1);
            EXPECT_TRUE(r->last_logits.empty());
        }
    }
    EXPECT_EQ(at, prompt.size());
    EXPECT_TRUE(engine.exportKv(**kv, DType::kF32, &run.kv, &run.layout).isOk());
    return run;
}

void expectIdentical(const PrefillRun& a, const PrefillRun& b, const std::string& what) {
    SCOPED_TRACE(what);
    EXPECT_EQ(a.result.next_token, b.result.next_token);
    EXPECT_EQ(a.result.last_logits, b.result.last_logits);  // bitwise: exact float equality
    ASSERT_EQ(a.kv.size(), b.kv.size());
    EXPECT_TRUE(std::equal(a.kv.begin(), a.kv.end(), b.kv.begin()));
}

class ChunkingTest : public ::testing::TestWithParam<DType> {};

TEST_P(ChunkingTest, EverySplitMatchesOneShotBitForBit) {
    const ModelConfig c = testutil::raggedConfig();
    auto weights = makeRandomWeights(c, GetParam(), 5);
    ASSERT_TRUE(weights.isOk());
    auto engine = makeCpuEngine(*weights, 2);
    ASSERT_TRUE(engine.isOk());
    const auto prompt = testutil::randomPrompt(41, c.vocab_size, 9);
    const PrefillRun one_shot = runSplit(**engine, prompt, {41});
    ASSERT_EQ(one_shot.result.last_logits.size(), static_cast<size_t>(c.vocab_size));

    const std::vector<std::vector<size_t>> splits = {{1, 40},
                                                     {40, 1},
                                                     {7, 13, 21},
                                                     {6, 6, 6, 6, 6, 6, 5},
                                                     {16, 16, 9},
                                                     {20, 21},
                                                     std::vector<size_t>(41, 1)};
    for (const auto& split : splits) {
        std::string label = "split";
        for (size_t s : split) {
            label += " " + std::to_string(s);
        }
        expectIdentical(one_shot, runSplit(**engine, prompt, split), label);
    }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ChunkingTest, ::testing::Values(DType::kF32, DType::kBF16),
                         [](const ::testing::TestParamInfo<DType>& p) {
                             return std::string(dtypeName(p.param));
                         });

TEST(EngineChunking, ThreadCountDoesNotChangeResults) {
    const ModelConfig c = testutil::tinyConfig();
    auto weights = makeRandomWeights(c, DType::kBF16, 2);
    ASSERT_TRUE(weights.isOk());
    const auto prompt = testutil::randomPrompt(50, c.vocab_size, 4);
    auto one = makeCpuEngine(*weights, 1);
    auto three = makeCpuEngine(*weights, 3);
    ASSERT_TRUE(one.isOk() && three.isOk());
    expectIdentical(runSplit(**one, prompt, {50}), runSplit(**three, prompt, {17, 33}),
                    "1 thread one-shot vs 3 threads chunked");
}

TEST(EngineChunking, PromptsDoNotInterfere) {
    // Two sequences on one engine, interleaved chunk by chunk, match running each alone.
    const ModelConfig c = testutil::tinyConfig();
    auto weights = makeRandomWeights(c, DType::kF32, 3);
    ASSERT_TRUE(weights.isOk());
    auto engine = makeCpuEngine(*weights, 2);
    ASSERT_TRUE(engine.isOk());
    const auto p1 = testutil::randomPrompt(20, c.vocab_size, 1);
    const auto p2 = testutil::randomPrompt(30, c.vocab_size, 2);
    const PrefillRun alone1 = runSplit(**engine, p1, {20});
    const PrefillRun alone2 = runSplit(**engine, p2, {30});

    auto kv1 = (*engine)->newSequence(20);
    auto kv2 = (*engine)->newSequence(30);
    ASSERT_TRUE(kv1.isOk() && kv2.isOk());
    ASSERT_TRUE((*engine)->prefillChunk(**kv1, std::span(p1).first(10), false).isOk());
    ASSERT_TRUE((*engine)->prefillChunk(**kv2, std::span(p2).first(15), false).isOk());
    auto r1 = (*engine)->prefillChunk(**kv1, std::span(p1).subspan(10), true);
    auto r2 = (*engine)->prefillChunk(**kv2, std::span(p2).subspan(15), true);
    ASSERT_TRUE(r1.isOk() && r2.isOk());
    EXPECT_EQ(r1->last_logits, alone1.result.last_logits);
    EXPECT_EQ(r2->last_logits, alone2.result.last_logits);
}

TEST(EngineChunking, CancelLeavesTheCacheUnchangedAndRetrySucceeds) {
    const ModelConfig c = testutil::tinyConfig();
    auto weights = makeRandomWeights(c, DType::kF32, 6);
    ASSERT_TRUE(weights.isOk());
    auto engine = makeCpuEngine(*weights, 2);
    ASSERT_TRUE(engine.isOk());
    const auto prompt = testutil::randomPrompt(24, c.vocab_size, 8);
    const PrefillRun expected = runSplit(**engine, prompt, {10, 14});

    auto kv = (*engine)->newSequence(24);
    ASSERT_TRUE(kv.isOk());
    ASSERT_TRUE((*engine)->prefillChunk(**kv, std::span(prompt).first(10), false).isOk());
    std::atomic<bool> cancel{true};
    auto cancelled = (*engine)->prefillChunk(**kv, std::span(prompt).subspan(10), true, &cancel);
    ASSERT_FALSE(cancelled.isOk());
    EXPECT_EQ(cancelled.status().code(), Code::kTimeout);
    EXPECT_NE(cancelled.status().message().find("cancelled"), std::string::npos);
    EXPECT_EQ((*kv)->length(), 10u);

    cancel = false;
    auto retried = (*engine)->prefillChunk(**kv, std::span(prompt).subspan(10), true, &cancel);
    ASSERT_TRUE(retried.isOk());
    EXPECT_EQ(retried->last_logits, expected.result.last_logits);
    std::vector<std::byte> bytes;
    KvLayout layout;
    ASSERT_TRUE((*engine)->exportKv(**kv, DType::kF32, &bytes, &layout).isOk());
    EXPECT_EQ(bytes, expected.kv);
}

TEST(EngineChunking, TruncateReusesASharedPrefix) {
    // prefix + suffix A, truncate back to the prefix, then suffix B: the same as a fresh
    // prefill of prefix + suffix B.
    const ModelConfig c = testutil::tinyConfig();
    auto weights = makeRandomWeights(c, DType::kBF16, 4);
    ASSERT_TRUE(weights.isOk());
    auto engine = makeCpuEngine(*weights, 2);
    ASSERT_TRUE(engine.isOk());
    const auto prefix = testutil::randomPrompt(16, c.vocab_size, 1);
    const auto suffix_a = testutil::randomPrompt(9, c.vocab_size, 2);
    const auto suffix_b = testutil::randomPrompt(5, c.vocab_size, 3);
    std::vector<int32_t> full_b = prefix;
    full_b.insert(full_b.end(), suffix_b.begin(), suffix_b.end());
    const PrefillRun fresh = runSplit(**engine, full_b, {full_b.size()});

    auto kv = (*engine)->newSequence(32);
    ASSERT_TRUE(kv.isOk());
    ASSERT_TRUE((*engine)->prefillChunk(**kv, prefix, false).isOk());
    ASSERT_TRUE((*engine)->prefillChunk(**kv, suffix_a, true).isOk());
    (*kv)->truncate(40);  // longer than the cache: no-op
    EXPECT_EQ((*kv)->length(), 25u);
    (*kv)->truncate(prefix.size());
    EXPECT_EQ((*kv)->length(), 16u);
    auto r = (*engine)->prefillChunk(**kv, suffix_b, true);
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r->last_logits, fresh.result.last_logits);
    std::vector<std::byte> bytes;
    KvLayout layout;
    ASSERT_TRUE((*engine)->exportKv(**kv, DType::kF32, &bytes, &layout).isOk());
    EXPECT_EQ(bytes, fresh.kv);
}

TEST(EngineChunking, RejectsBadArguments) {
    const ModelConfig c = testutil::tinyConfig();
    auto weights = makeRandomWeights(c, DType::kF32, 1);
    ASSERT_TRUE(weights.isOk());
    auto engine = makeCpuEngine(*weights, 1);
    auto other = makeCpuEngine(*weights, 1);
    ASSERT_TRUE(engine.isOk() && other.isOk());

    EXPECT_EQ((*engine)->newSequence(0).status().code(), Code::kInvalidArgument);
    EXPECT_EQ(
        (*engine)->newSequence(static_cast<size_t>(c.max_position_embeddings) + 1).status().code(),
        Code::kInvalidArgument);
    auto kv = (*engine)->newSequence(8);
    ASSERT_TRUE(kv.isOk());

    const std::vector<int32_t> empty;
    auto r = (*engine)->prefillChunk(**kv, empty, true);
    EXPECT_NE(r.status().message().find("empty"), std::string::npos);

    const std::vector<int32_t> bad_id = {1, static_cast<int32_t>(c.vocab_size)};
    r = (*engine)->prefillChunk(**kv, bad_id, true);
    EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
    EXPECT_NE(r.status().message().find("token id 256"), std::string::npos);
    const std::vector<int32_t> negative = {-1};
    EXPECT_FALSE((*engine)->prefillChunk(**kv, negative, true).isOk());

    const std::vector<int32_t> nine(9, 1);
    r = (*engine)->prefillChunk(**kv, nine, true);
    EXPECT_NE(r.status().message().find("capacity"), std::string::npos);
    EXPECT_EQ((*kv)->length(), 0u);

    const std::vector<int32_t> ok = {1, 2, 3};
    r = (*other)->prefillChunk(**kv, ok, true);
    EXPECT_NE(r.status().message().find("another engine"), std::string::npos);
    std::vector<std::byte> bytes;
    KvLayout layout;
    EXPECT_FALSE((*other)->exportKv(**kv, DType::kF32, &bytes, &layout).isOk());

    EXPECT_FALSE(makeCpuEngine(*weights, 0).isOk());
    EXPECT_FALSE(makeCpuEngine(nullptr, 1).isOk());
}

TEST(EngineKvExport, LayoutAndBf16Conversion) {
    const ModelConfig c = testutil::tinyConfig();
    auto weights = makeRandomWeights(c, DType::kBF16, 12);
    ASSERT_TRUE(weights.isOk());
    auto engine = makeCpuEngine(*weights, 2);
    ASSERT_TRUE(engine.isOk());
    const auto prompt = testutil::randomPrompt(13, c.vocab_size, 5);
    const PrefillRun run = runSplit(**engine, prompt, {13});
    const KvLayout& f32 = run.layout;
    EXPECT_EQ(f32.dtype, DType::kF32);
    EXPECT_EQ(f32.num_layers, c.num_hidden_layers);
    EXPECT_EQ(f32.num_kv_heads, c.num_key_value_heads);
    EXPECT_EQ(f32.head_dim, c.head_dim);
    EXPECT_EQ(run.kv.size(), static_cast<size_t>(2 * c.num_hidden_layers * 13 * c.kvDim() * 4));
    EXPECT_EQ(f32.elementIndex(1, 1, 12, 1, 15) + 1, f32.totalBytes() / 4);

    auto kv = (*engine)->newSequence(13);
    ASSERT_TRUE(kv.isOk());
    ASSERT_TRUE((*engine)->prefillChunk(**kv, prompt, true).isOk());
    std::vector<std::byte> bf16;
    KvLayout layout;
    ASSERT_TRUE((*engine)->exportKv(**kv, DType::kBF16, &bf16, &layout).isOk());
    EXPECT_EQ(layout.dtype, DType::kBF16);
    ASSERT_EQ(bf16.size(), run.kv.size() / 2);
    const std::vector<float> wide = kvToFloat(run.kv, f32);
    const std::vector<float> narrow = kvToFloat(bf16, layout);
    ASSERT_EQ(wide.size(), narrow.size());
    size_t differing = 0;
    for (size_t i = 0; i < wide.size(); ++i) {
        EXPECT_NEAR(narrow[i], wide[i], std::abs(wide[i]) * (1.0 / 256) + 1e-30);
        differing += narrow[i] != wide[i] ? 1 : 0;
    }
    EXPECT_GT(differing, wide.size() / 2);  // it really was narrowed
    // K of layer 0 at position 0 is the unrotated projection (angle 0): differs from V.
    EXPECT_NE(wide[f32.elementIndex(0, 0, 0, 0, 0)], wide[f32.elementIndex(0, 1, 0, 0, 0)]);
}

}  // namespace
}  // namespace atlas::bubbletea
