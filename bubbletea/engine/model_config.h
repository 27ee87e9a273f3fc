// Llama-architecture model shape, read from a Hugging Face config.json or taken from a named
// preset, plus the derived RoPE frequency table.
//
// A ModelConfig is a plain value: copy it freely, share it read-only across threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/status.h"
#include "bubbletea/engine/dtype.h"

namespace atlas::bubbletea {

// RoPE frequency scaling, from config.json "rope_scaling". kNone is the original RoPE;
// kLinear divides every frequency by `factor`; kLlama3 is Llama 3.1/3.2's piecewise scaling
// (low frequencies divided by `factor`, high ones kept, a smooth ramp between).
struct RopeScaling {
    enum class Kind : uint8_t { kNone, kLinear, kLlama3 };
    Kind kind = Kind::kNone;
    double factor = 1.0;
    double low_freq_factor = 1.0;                  // kLlama3 only
    double high_freq_factor = 4.0;                 // kLlama3 only
    int64_t original_max_position_embeddings = 0;  // kLlama3 only
};

struct ModelConfig {
    int64_t hidden_size = 0;
    int64_t intermediate_size = 0;
    int64_t num_hidden_layers = 0;
    int64_t num_attention_heads = 0;
    int64_t num_key_value_heads = 0;  // < num_attention_heads means grouped-query attention
    int64_t head_dim = 0;             // config "head_dim", else hidden_size / num_attention_heads
    double rms_norm_eps = 1e-5;
    double rope_theta = 10000.0;
    RopeScaling rope_scaling;
    int64_t vocab_size = 0;
    int64_t max_position_embeddings = 0;
    DType torch_dtype = DType::kBF16;  // the checkpoint's declared dtype (informational)
    bool tie_word_embeddings = false;  // lm_head reuses model.embed_tokens.weight

    int64_t qDim() const { return num_attention_heads * head_dim; }
    int64_t kvDim() const { return num_key_value_heads * head_dim; }
    // Query heads per KV head.
    int64_t groupSize() const { return num_attention_heads / num_key_value_heads; }
    // Parameter count including embeddings (and lm_head when untied).
    int64_t parameterCount() const;
};

// Checks internal consistency and the limits the engines support: all sizes positive,
// heads divisible by kv heads, head_dim even and <= 256, eps and theta positive and finite,
// and sizes small enough that no tensor byte count can overflow. The message names the field.
Status validateConfig(const ModelConfig& config);

// Parses a Hugging Face Llama config.json (untrusted text). Requires model_type "llama" when
// present, hidden_act "silu" when present, no attention/mlp bias, and a supported
// rope_scaling. `source` names the file in error messages. The result is validated.
Result<ModelConfig> parseConfigJson(std::string_view json_text, std::string_view source);

// Serializes to a config.json that parseConfigJson and Hugging Face transformers both read.
std::string configToJson(const ModelConfig& config);

// Named shapes with the real dimensions of public models (no weights): "tiny" (2 layers,
// hidden 64, GQA 4 heads / 2 kv heads, vocab 256: for tests), "small" (4 layers, hidden
// 512: a mid-size check model), "llama-3.2-1b", "llama-3.2-3b", "llama-3-8b",
// "llama-3.1-8b", "llama-2-7b".
Result<ModelConfig> shapePreset(std::string_view name);
std::vector<std::string> shapePresetNames();

// Inverse RoPE frequencies, head_dim / 2 entries, after rope_scaling. Entry i rotates the
// dimension pair (i, i + head_dim / 2) by position * inv_freq[i] radians (the Hugging Face
// "rotate_half" convention). Computed in double.
std::vector<double> ropeInverseFrequencies(const ModelConfig& config);

}  // namespace atlas::bubbletea
