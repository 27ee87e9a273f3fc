// config.json parsing and writing, shape presets, the deterministic random-weight
// generator, and the model writer's round trip through the loader.
#include <gtest/gtest.h>

#include <cstring>

#include "bubbletea/engine/model_writer.h"
#include "bubbletea/engine/weights.h"
#include "engine_test_util.h"

namespace atlas::bubbletea {
namespace {

bool sameBytes(const TensorView& a, const TensorView& b) {
    return a.dtype == b.dtype && a.rows == b.rows && a.cols == b.cols &&
           std::memcmp(a.data, b.data, a.numBytes()) == 0;
}

void expectSameWeights(const Weights& a, const Weights& b) {
    const auto ta = a.namedTensors();
    const auto tb = b.namedTensors();
    ASSERT_EQ(ta.size(), tb.size());
    for (size_t i = 0; i < ta.size(); ++i) {
        EXPECT_EQ(ta[i].first, tb[i].first);
        EXPECT_TRUE(sameBytes(ta[i].second, tb[i].second)) << ta[i].first;
    }
}

TEST(ModelConfig, ParsesAHuggingFaceLlama32Config) {
    // The shape of meta-llama/Llama-3.2-1B's config.json (fields the engine reads + others).
    const char* text = R"({
      "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
      "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
      "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
      "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
      "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
      "pretraining_tp": 1, "rms_norm_eps": 1e-05,
      "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                       "original_max_position_embeddings": 8192, "rope_type": "llama3"},
      "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
      "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";
    auto c = parseConfigJson(text, "config.json");
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    auto preset = shapePreset("llama-3.2-1b");
    ASSERT_TRUE(preset.isOk());
    EXPECT_EQ(c->hidden_size, preset->hidden_size);
    EXPECT_EQ(c->num_key_value_heads, 8);
    EXPECT_EQ(c->head_dim, 64);
    EXPECT_EQ(c->rope_scaling.kind, RopeScaling::Kind::kLlama3);
    EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
    EXPECT_TRUE(c->tie_word_embeddings);
    EXPECT_EQ(c->torch_dtype, DType::kBF16);
    EXPECT_EQ(ropeInverseFrequencies(*c), ropeInverseFrequencies(*preset));
    // 1.24B parameters (the published count for Llama 3.2 1B).
    EXPECT_NEAR(static_cast<double>(c->parameterCount()), 1.236e9, 0.005e9);
}

TEST(ModelConfig, DefaultsAndDerivedFields) {
    auto c = parseConfigJson(R"({"hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10})",
                             "c");
    ASSERT_TRUE(c.isOk()) << c.status().toString();
    EXPECT_EQ(c->num_key_value_heads, 4);  // absent: plain multi-head attention
    EXPECT_EQ(c->head_dim, 16);
    EXPECT_EQ(c->max_position_embeddings, 2048);
    EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
    EXPECT_FALSE(c->tie_word_embeddings);
}

TEST(ModelConfig, RejectsUnsupportedOrInconsistentConfigs) {
    const std::string base = R"("hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 10)";
    auto error = [&](const std::string& extra) {
        auto c = parseConfigJson("{" + base + extra + "}", "cfg.json");
        EXPECT_FALSE(c.isOk()) << extra;
        return c.isOk() ? std::string() : c.status().message();
    };
    EXPECT_NE(error(R"(, "model_type": "qwen2")").find("model_type \"qwen2\""), std::string::npos);
    EXPECT_NE(error(R"(, "hidden_act": "gelu")").find("gelu"), std::string::npos);
    EXPECT_NE(error(R"(, "attention_bias": true)").find("attention_bias"), std::string::npos);
    EXPECT_NE(error(R"(, "num_key_value_heads": 3)").find("not a multiple"), std::string::npos);
    EXPECT_NE(error(R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0})").find("yarn"),
              std::string::npos);
    EXPECT_NE(error(R"(, "torch_dtype": "int8")").find("torch_dtype"), std::string::npos);
    EXPECT_NE(error(R"(, "head_dim": 15)").find("even"), std::string::npos);
    EXPECT_NE(error(R"(, "rms_norm_eps": "small")").find("rms_norm_eps"), std::string::npos);
    EXPECT_NE(error(R"(, "max_position_embeddings": -5)").find("max_position_embeddings"),
              std::string::npos);
    auto bad = parseConfigJson("{\"hidden_size\": 1e99}", "cfg.json");
    EXPECT_FALSE(bad.isOk());
    bad = parseConfigJson("not json", "cfg.json");
    ASSERT_FALSE(bad.isOk());
    EXPECT_EQ(bad.status().message(), "cfg.json: not valid JSON");
}

TEST(ModelConfig, JsonRoundTripForEveryPreset) {
    for (const std::string& name : shapePresetNames()) {
        auto c = shapePreset(name);
        ASSERT_TRUE(c.isOk()) << name;
        ASSERT_TRUE(validateConfig(*c).isOk()) << name;
        auto back = parseConfigJson(configToJson(*c), name);
        ASSERT_TRUE(back.isOk()) << name << ": " << back.status().toString();
        EXPECT_EQ(configToJson(*back), configToJson(*c)) << name;
        EXPECT_EQ(ropeInverseFrequencies(*back), ropeInverseFrequencies(*c)) << name;
    }
    EXPECT_FALSE(shapePreset("gpt-5").isOk());
    auto l3 = shapePreset("llama-3-8b");
    ASSERT_TRUE(l3.isOk());
    EXPECT_NEAR(static_cast<double>(l3->parameterCount()), 8.03e9, 0.01e9);
}

TEST(RandomWeights, DeterministicAndThreadIndependent) {
    const ModelConfig c = testutil::raggedConfig();
    auto a = makeRandomWeights(c, DType::kBF16, 42, 1);
    auto b = makeRandomWeights(c, DType::kBF16, 42, 4);
    auto other_seed = makeRandomWeights(c, DType::kBF16, 43, 1);
    ASSERT_TRUE(a.isOk() && b.isOk() && other_seed.isOk());
    expectSameWeights(**a, **b);
    EXPECT_FALSE(sameBytes((*a)->layers()[0].q_proj, (*other_seed)->layers()[0].q_proj));
    // Tied: lm_head is the embedding itself, and is not listed separately.
    EXPECT_EQ((*a)->lmHead().data, (*a)->embedTokens().data);
    for (const auto& [name, view] : (*a)->namedTensors()) {
        EXPECT_NE(name, "lm_head.weight");
    }
    // Scales: linear weights within +-sqrt(3 / in), norms in [0.5, 1.5].
    const TensorView& down = (*a)->layers()[1].down_proj;
    const double bound = std::sqrt(3.0 / static_cast<double>(down.cols)) * 1.01;
    double max_abs = 0;
    for (int64_t i = 0; i < down.numElements(); ++i) {
        max_abs = std::max(max_abs, std::abs(static_cast<double>(down.at(0, i))));
    }
    EXPECT_LE(max_abs, bound);
    EXPECT_GT(max_abs, bound * 0.9);
    const TensorView& norm = (*a)->norm();
    for (int64_t i = 0; i < norm.cols; ++i) {
        EXPECT_GE(norm.at(0, i), 0.5f);
        EXPECT_LE(norm.at(0, i), 1.5f);
    }
}

TEST(ModelWriter, RandomModelRoundTripsBitExactly) {
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
        SCOPED_TRACE(std::string(dtypeName(dtype)));
        testutil::TempDir dir;
        const ModelConfig c = testutil::tinyConfig();
        ASSERT_TRUE(writeRandomModel(dir.path(), c, dtype, 17).isOk());
        auto loaded = loadModelDir(dir.path());
        ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
        auto direct = makeRandomWeights(c, dtype, 17);
        ASSERT_TRUE(direct.isOk());
        expectSameWeights(**loaded, **direct);
        EXPECT_EQ((*loaded)->config().torch_dtype, dtype);
        ModelConfig expected = c;
        expected.torch_dtype = dtype;
        EXPECT_EQ(configToJson((*loaded)->config()), configToJson(expected));
    }
}

TEST(ModelWriter, WriteModelDirRoundTripsShardedAndSingle) {
    const ModelConfig c = testutil::raggedConfig();
    auto weights = makeRandomWeights(c, DType::kF32, 5);
    ASSERT_TRUE(weights.isOk());
    for (uint64_t shard : {uint64_t{0}, uint64_t{50000}}) {
        SCOPED_TRACE(shard);
        testutil::TempDir dir;
        WriteOptions options;
        options.max_shard_bytes = shard;
        ASSERT_TRUE(writeModelDir(dir.path(), **weights, options).isOk());
        EXPECT_EQ(std::filesystem::exists(dir.path() / "model.safetensors.index.json"), shard > 0);
        auto loaded = loadModelDir(dir.path());
        ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
        expectSameWeights(**loaded, **weights);
    }
}

TEST(DtypeConversion, Bf16AndF16RoundTrip) {
    EXPECT_EQ(floatToBf16Bits(1.0f), 0x3f80);
    EXPECT_EQ(floatToBf16Bits(1.00390625f), 0x3f80);  // exactly halfway: ties to even
    EXPECT_EQ(floatToBf16Bits(1.01171875f), 0x3f82);  // halfway above odd: rounds up
    EXPECT_EQ(bf16BitsToFloat(0xc040), -3.0f);
    EXPECT_TRUE(std::isnan(bf16BitsToFloat(floatToBf16Bits(NAN))));
    EXPECT_EQ(floatToF16Bits(1.0f), 0x3c00);
    EXPECT_EQ(floatToF16Bits(65504.0f), 0x7bff);
    EXPECT_EQ(floatToF16Bits(65520.0f), 0x7c00);  // rounds to infinity
    EXPECT_EQ(floatToF16Bits(-2.0f), 0xc000);
    EXPECT_EQ(floatToF16Bits(5.960464477539063e-8f), 0x0001);  // smallest subnormal
    for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive f16 survives a round trip
        ASSERT_EQ(floatToF16Bits(f16BitsToFloat(static_cast<uint16_t>(h))), h) << h;
    }
}

}  // namespace
}  // namespace atlas::bubbletea
