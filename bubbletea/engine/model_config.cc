#include "bubbletea/engine/model_config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>

namespace atlas::bubbletea {

namespace {

using Json = nlohmann::json;

// Upper bounds that keep every tensor's element count (and byte count) far from overflow
// while admitting every public Llama shape.
constexpr int64_t kMaxHidden = 1 << 16;
constexpr int64_t kMaxIntermediate = 1 << 18;
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kMaxVocab = 1 << 22;
constexpr int64_t kMaxPositions = 1 << 24;

Status configError(std::string_view source, const std::string& what) {
    return {Code::kInvalidArgument, std::string(source) + ": " + what};
}

// Reads an optional integer field; absent or null leaves `out` unchanged.
Status readInt(const Json& obj, const char* key, bool required, int64_t* out,
               std::string_view source) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
        return required ? configError(source, std::string("missing field \"") + key + "\"")
                        : Status::ok();
    }
    if (it->is_number_unsigned()) {
        const uint64_t v = it->get<uint64_t>();
        if (v > static_cast<uint64_t>(INT64_MAX)) {
            return configError(source, std::string("field \"") + key + "\" is too large");
        }
        *out = static_cast<int64_t>(v);
        return Status::ok();
    }
    if (it->is_number_integer()) {
        *out = it->get<int64_t>();
        return Status::ok();
    }
    return configError(source, std::string("field \"") + key + "\" must be an integer");
}

Status readDouble(const Json& obj, const char* key, double* out, std::string_view source) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) {
        return Status::ok();
    }
    if (!it->is_number()) {
        return configError(source, std::string("field \"") + key + "\" must be a number");
    }
    *out = it->get<double>();
    return Status::ok();
}

Status readRopeScaling(const Json& obj, RopeScaling* out, std::string_view source) {
    auto it = obj.find("rope_scaling");
    if (it == obj.end() || it->is_null()) {
        return Status::ok();
    }
    if (!it->is_object()) {
        return configError(source, "field \"rope_scaling\" must be an object or null");
    }
    const Json& rs = *it;
    std::string type;
    for (const char* key : {"rope_type", "type"}) {
        auto t = rs.find(key);
        if (t != rs.end() && t->is_string()) {
            type = t->get<std::string>();
            break;
        }
    }
    if (type.empty() || type == "default") {
        *out = RopeScaling{};
        return Status::ok();
    }
    RopeScaling scaling;
    ATLAS_RETURN_IF_ERROR(readDouble(rs, "factor", &scaling.factor, source));
    if (type == "linear") {
        scaling.kind = RopeScaling::Kind::kLinear;
    } else if (type == "llama3") {
        scaling.kind = RopeScaling::Kind::kLlama3;
        ATLAS_RETURN_IF_ERROR(readDouble(rs, "low_freq_factor", &scaling.low_freq_factor, source));
        ATLAS_RETURN_IF_ERROR(
            readDouble(rs, "high_freq_factor", &scaling.high_freq_factor, source));
        ATLAS_RETURN_IF_ERROR(readInt(rs, "original_max_position_embeddings", true,
                                      &scaling.original_max_position_embeddings, source));
    } else {
        return configError(source, "unsupported rope_scaling type \"" + type +
                                       "\" (supported: default, linear, llama3)");
    }
    *out = scaling;
    return Status::ok();
}

Status checkRange(const char* field, int64_t value, int64_t max) {
    if (value <= 0 || value > max) {
        return {Code::kInvalidArgument, std::string(field) + " = " + std::to_string(value) +
                                            " is outside [1, " + std::to_string(max) + "]"};
    }
    return Status::ok();
}

}  // namespace

int64_t ModelConfig::parameterCount() const {
    const int64_t per_layer = hidden_size * (qDim() + 2 * kvDim()) + qDim() * hidden_size +
                              3 * hidden_size * intermediate_size + 2 * hidden_size;
    return vocab_size * hidden_size * (tie_word_embeddings ? 1 : 2) +
           num_hidden_layers * per_layer + hidden_size;
}

Status validateConfig(const ModelConfig& c) {
    ATLAS_RETURN_IF_ERROR(checkRange("hidden_size", c.hidden_size, kMaxHidden));
    ATLAS_RETURN_IF_ERROR(checkRange("intermediate_size", c.intermediate_size, kMaxIntermediate));
    ATLAS_RETURN_IF_ERROR(checkRange("num_hidden_layers", c.num_hidden_layers, kMaxLayers));
    ATLAS_RETURN_IF_ERROR(checkRange("num_attention_heads", c.num_attention_heads, kMaxHeads));
    ATLAS_RETURN_IF_ERROR(checkRange("num_key_value_heads", c.num_key_value_heads, kMaxHeads));
    ATLAS_RETURN_IF_ERROR(checkRange("head_dim", c.head_dim, kMaxHeadDim));
    ATLAS_RETURN_IF_ERROR(checkRange("vocab_size", c.vocab_size, kMaxVocab));
    ATLAS_RETURN_IF_ERROR(
        checkRange("max_position_embeddings", c.max_position_embeddings, kMaxPositions));
    if (c.num_attention_heads % c.num_key_value_heads != 0) {
        return {Code::kInvalidArgument, "num_attention_heads (" +
                                            std::to_string(c.num_attention_heads) +
                                            ") is not a multiple of num_key_value_heads (" +
                                            std::to_string(c.num_key_value_heads) + ")"};
    }
    if (c.head_dim % 2 != 0) {
        return {Code::kInvalidArgument,
                "head_dim = " + std::to_string(c.head_dim) + " must be even for RoPE"};
    }
    if (c.qDim() > 4 * kMaxHidden) {
        return {Code::kInvalidArgument, "num_attention_heads * head_dim is too large"};
    }
    if (!std::isfinite(c.rms_norm_eps) || c.rms_norm_eps <= 0 || c.rms_norm_eps > 1) {
        return {Code::kInvalidArgument, "rms_norm_eps must be in (0, 1]"};
    }
    if (!std::isfinite(c.rope_theta) || c.rope_theta <= 1) {
        return {Code::kInvalidArgument, "rope_theta must be finite and > 1"};
    }
    const RopeScaling& rs = c.rope_scaling;
    if (rs.kind != RopeScaling::Kind::kNone) {
        if (!std::isfinite(rs.factor) || rs.factor < 1 || rs.factor > 1e6) {
            return {Code::kInvalidArgument, "rope_scaling.factor must be in [1, 1e6]"};
        }
    }
    if (rs.kind == RopeScaling::Kind::kLlama3) {
        if (!std::isfinite(rs.low_freq_factor) || !std::isfinite(rs.high_freq_factor) ||
            rs.low_freq_factor <= 0 || rs.high_freq_factor <= rs.low_freq_factor) {
            return {Code::kInvalidArgument,
                    "rope_scaling needs 0 < low_freq_factor < high_freq_factor"};
        }
        ATLAS_RETURN_IF_ERROR(checkRange("rope_scaling.original_max_position_embeddings",
                                         rs.original_max_position_embeddings, kMaxPositions));
    }
    return Status::ok();
}

Result<ModelConfig> parseConfigJson(std::string_view json_text, std::string_view source) {
    // Untrusted text: parse without exceptions and check every type before reading it.
    Json root = Json::parse(json_text.begin(), json_text.end(), nullptr,
                            /*allow_exceptions=*/false);
    if (root.is_discarded()) {
        return configError(source, "not valid JSON");
    }
    if (!root.is_object()) {
        return configError(source, "top level is not a JSON object");
    }
    auto string_field = [&](const char* key) -> std::string {
        auto it = root.find(key);
        return it != root.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    if (const std::string type = string_field("model_type"); !type.empty() && type != "llama") {
        return configError(source, "model_type \"" + type + "\" is not supported (only llama)");
    }
    if (const std::string act = string_field("hidden_act"); !act.empty() && act != "silu") {
        return configError(source, "hidden_act \"" + act + "\" is not supported (only silu)");
    }
    for (const char* key : {"attention_bias", "mlp_bias"}) {
        auto it = root.find(key);
        if (it != root.end() && it->is_boolean() && it->get<bool>()) {
            return configError(source, std::string(key) + " = true is not supported");
        }
    }

    ModelConfig c;
    c.rms_norm_eps = 1e-6;  // transformers' LlamaConfig defaults for absent fields
    c.max_position_embeddings = 2048;
    c.torch_dtype = DType::kF32;
    ATLAS_RETURN_IF_ERROR(readInt(root, "hidden_size", true, &c.hidden_size, source));
    ATLAS_RETURN_IF_ERROR(readInt(root, "intermediate_size", true, &c.intermediate_size, source));
    ATLAS_RETURN_IF_ERROR(readInt(root, "num_hidden_layers", true, &c.num_hidden_layers, source));
    ATLAS_RETURN_IF_ERROR(
        readInt(root, "num_attention_heads", true, &c.num_attention_heads, source));
    c.num_key_value_heads = c.num_attention_heads;
    ATLAS_RETURN_IF_ERROR(
        readInt(root, "num_key_value_heads", false, &c.num_key_value_heads, source));
    ATLAS_RETURN_IF_ERROR(readInt(root, "vocab_size", true, &c.vocab_size, source));
    ATLAS_RETURN_IF_ERROR(
        readInt(root, "max_position_embeddings", false, &c.max_position_embeddings, source));
    ATLAS_RETURN_IF_ERROR(readDouble(root, "rms_norm_eps", &c.rms_norm_eps, source));
    ATLAS_RETURN_IF_ERROR(readDouble(root, "rope_theta", &c.rope_theta, source));
    ATLAS_RETURN_IF_ERROR(readRopeScaling(root, &c.rope_scaling, source));
    if (c.num_attention_heads > 0 && c.hidden_size % c.num_attention_heads == 0) {
        c.head_dim = c.hidden_size / c.num_attention_heads;
    }
    ATLAS_RETURN_IF_ERROR(readInt(root, "head_dim", false, &c.head_dim, source));
    if (c.head_dim == 0) {
        return configError(source,
                           "hidden_size is not a multiple of num_attention_heads and "
                           "no head_dim is given");
    }
    if (auto it = root.find("tie_word_embeddings"); it != root.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            return configError(source, "field \"tie_word_embeddings\" must be a boolean");
        }
        c.tie_word_embeddings = it->get<bool>();
    }
    // transformers >= 4.56 writes "dtype"; older versions "torch_dtype".
    for (const char* key : {"torch_dtype", "dtype"}) {
        auto it = root.find(key);
        if (it == root.end() || it->is_null()) {
            continue;
        }
        const auto dtype = it->is_string() ? parseDtype(it->get<std::string>()) : std::nullopt;
        if (!dtype) {
            return configError(
                source, std::string("field \"") + key + "\" must be float32, bfloat16 or float16");
        }
        c.torch_dtype = *dtype;
        break;
    }
    if (Status st = validateConfig(c); !st.isOk()) {
        return configError(source, st.message());
    }
    return c;
}

std::string configToJson(const ModelConfig& c) {
    nlohmann::ordered_json j;
    j["architectures"] = {"LlamaForCausalLM"};
    j["model_type"] = "llama";
    j["hidden_act"] = "silu";
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["hidden_size"] = c.hidden_size;
    j["intermediate_size"] = c.intermediate_size;
    j["num_hidden_layers"] = c.num_hidden_layers;
    j["num_attention_heads"] = c.num_attention_heads;
    j["num_key_value_heads"] = c.num_key_value_heads;
    j["head_dim"] = c.head_dim;
    j["rms_norm_eps"] = c.rms_norm_eps;
    j["rope_theta"] = c.rope_theta;
    switch (c.rope_scaling.kind) {
        case RopeScaling::Kind::kNone:
            j["rope_scaling"] = nullptr;
            break;
        case RopeScaling::Kind::kLinear:
            j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
            break;
        case RopeScaling::Kind::kLlama3:
            j["rope_scaling"] = {{"rope_type", "llama3"},
                                 {"factor", c.rope_scaling.factor},
                                 {"low_freq_factor", c.rope_scaling.low_freq_factor},
                                 {"high_freq_factor", c.rope_scaling.high_freq_factor},
                                 {"original_max_position_embeddings",
                                  c.rope_scaling.original_max_position_embeddings}};
            break;
    }
    j["vocab_size"] = c.vocab_size;
    j["max_position_embeddings"] = c.max_position_embeddings;
    j["tie_word_embeddings"] = c.tie_word_embeddings;
    j["torch_dtype"] = std::string(torchDtypeName(c.torch_dtype));
    return j.dump(2) + "\n";
}

namespace {

struct Preset {
    const char* name;
    ModelConfig config;
};

ModelConfig makeShape(int64_t hidden, int64_t inter, int64_t layers, int64_t heads, int64_t kv,
                      int64_t vocab, int64_t max_pos, double theta, bool tie) {
    ModelConfig c;
    c.hidden_size = hidden;
    c.intermediate_size = inter;
    c.num_hidden_layers = layers;
    c.num_attention_heads = heads;
    c.num_key_value_heads = kv;
    c.head_dim = hidden / heads;
    c.vocab_size = vocab;
    c.max_position_embeddings = max_pos;
    c.rope_theta = theta;
    c.rms_norm_eps = 1e-5;
    c.tie_word_embeddings = tie;
    c.torch_dtype = DType::kBF16;
    return c;
}

RopeScaling llama3Scaling(double factor) {
    RopeScaling rs;
    rs.kind = RopeScaling::Kind::kLlama3;
    rs.factor = factor;
    rs.low_freq_factor = 1.0;
    rs.high_freq_factor = 4.0;
    rs.original_max_position_embeddings = 8192;
    return rs;
}

std::vector<Preset> presets() {
    std::vector<Preset> out;
    out.push_back({"tiny", makeShape(64, 176, 2, 4, 2, 256, 1024, 10000.0, false)});
    out.push_back({"small", makeShape(512, 1536, 4, 8, 2, 4096, 4096, 500000.0, true)});
    ModelConfig l32_1b = makeShape(2048, 8192, 16, 32, 8, 128256, 131072, 500000.0, true);
    l32_1b.rope_scaling = llama3Scaling(32.0);
    out.push_back({"llama-3.2-1b", l32_1b});
    ModelConfig l32_3b = makeShape(3072, 8192, 28, 24, 8, 128256, 131072, 500000.0, true);
    l32_3b.rope_scaling = llama3Scaling(32.0);
    out.push_back({"llama-3.2-3b", l32_3b});
    out.push_back({"llama-3-8b", makeShape(4096, 14336, 32, 32, 8, 128256, 8192, 500000.0, false)});
    ModelConfig l31_8b = makeShape(4096, 14336, 32, 32, 8, 128256, 131072, 500000.0, false);
    l31_8b.rope_scaling = llama3Scaling(8.0);
    out.push_back({"llama-3.1-8b", l31_8b});
    out.push_back({"llama-2-7b", makeShape(4096, 11008, 32, 32, 32, 32000, 4096, 10000.0, false)});
    return out;
}

}  // namespace

Result<ModelConfig> shapePreset(std::string_view name) {
    for (const Preset& p : presets()) {
        if (name == p.name) {
            return p.config;
        }
    }
    std::string known;
    for (const std::string& n : shapePresetNames()) {
        known += (known.empty() ? "" : ", ") + n;
    }
    return Status{Code::kInvalidArgument,
                  "unknown model shape \"" + std::string(name) + "\" (known: " + known + ")"};
}

std::vector<std::string> shapePresetNames() {
    std::vector<std::string> names;
    for (const Preset& p : presets()) {
        names.emplace_back(p.name);
    }
    return names;
}

std::vector<double> ropeInverseFrequencies(const ModelConfig& c) {
    const int64_t half = c.head_dim / 2;
    std::vector<double> inv(static_cast<size_t>(half));
    for (int64_t i = 0; i < half; ++i) {
        inv[i] = 1.0 / std::pow(c.rope_theta,
                                static_cast<double>(2 * i) / static_cast<double>(c.head_dim));
    }
    const RopeScaling& rs = c.rope_scaling;
    if (rs.kind == RopeScaling::Kind::kLinear) {
        for (double& f : inv) {
            f /= rs.factor;
        }
    } else if (rs.kind == RopeScaling::Kind::kLlama3) {
        // transformers' _compute_llama3_parameters: wavelengths longer than
        // original_max / low_freq_factor are slowed by `factor`, shorter than
        // original_max / high_freq_factor are kept, and the band between is interpolated.
        const double old_len = static_cast<double>(rs.original_max_position_embeddings);
        const double low_wavelen = old_len / rs.low_freq_factor;
        const double high_wavelen = old_len / rs.high_freq_factor;
        for (double& f : inv) {
            const double wavelen = 2.0 * std::numbers::pi / f;
            if (wavelen > low_wavelen) {
                f /= rs.factor;
            } else if (wavelen >= high_wavelen) {
                const double smooth = (old_len / wavelen - rs.low_freq_factor) /
                                      (rs.high_freq_factor - rs.low_freq_factor);
                f = (1.0 - smooth) * f / rs.factor + smooth * f;
            }
        }
    }
    return inv;
}

}  // namespace atlas::bubbletea
