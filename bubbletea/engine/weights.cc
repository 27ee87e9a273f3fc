#include "bubbletea/engine/weights.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "bubbletea/engine/mapped_file.h"
#include "bubbletea/engine/safetensors.h"

namespace atlas::bubbletea {

struct Weights::Storage {
    std::vector<MappedFile> files;
    std::vector<std::unique_ptr<std::byte[]>> buffers;
};

Weights::Weights(ModelConfig config, std::vector<LayerWeights> layers, TensorView embed_tokens,
                 TensorView norm, TensorView lm_head, std::shared_ptr<const Storage> storage,
                 std::string description)
    : config_(std::move(config)),
      layers_(std::move(layers)),
      embed_tokens_(embed_tokens),
      norm_(norm),
      lm_head_(lm_head),
      storage_(std::move(storage)),
      description_(std::move(description)) {}

Weights::~Weights() = default;

std::string layerTensorName(int64_t layer, std::string_view suffix) {
    return "model.layers." + std::to_string(layer) + "." + std::string(suffix);
}

namespace {

// Per-layer tensor suffixes in storage order, with the LayerWeights member each fills.
struct LayerTensor {
    const char* suffix;
    TensorView LayerWeights::*member;
};
constexpr LayerTensor kLayerTensors[] = {
    {"input_layernorm.weight", &LayerWeights::input_layernorm},
    {"self_attn.q_proj.weight", &LayerWeights::q_proj},
    {"self_attn.k_proj.weight", &LayerWeights::k_proj},
    {"self_attn.v_proj.weight", &LayerWeights::v_proj},
    {"self_attn.o_proj.weight", &LayerWeights::o_proj},
    {"post_attention_layernorm.weight", &LayerWeights::post_attention_layernorm},
    {"mlp.gate_proj.weight", &LayerWeights::gate_proj},
    {"mlp.up_proj.weight", &LayerWeights::up_proj},
    {"mlp.down_proj.weight", &LayerWeights::down_proj},
};

constexpr const char* kEmbedName = "model.embed_tokens.weight";
constexpr const char* kNormName = "model.norm.weight";
constexpr const char* kLmHeadName = "lm_head.weight";

std::pair<int64_t, int64_t> layerShape(const ModelConfig& c, std::string_view suffix) {
    if (suffix.find("layernorm") != std::string_view::npos) {
        return {1, c.hidden_size};
    }
    if (suffix.find("q_proj") != std::string_view::npos) {
        return {c.qDim(), c.hidden_size};
    }
    if (suffix.find("k_proj") != std::string_view::npos ||
        suffix.find("v_proj") != std::string_view::npos) {
        return {c.kvDim(), c.hidden_size};
    }
    if (suffix.find("o_proj") != std::string_view::npos) {
        return {c.hidden_size, c.qDim()};
    }
    if (suffix.find("down_proj") != std::string_view::npos) {
        return {c.hidden_size, c.intermediate_size};
    }
    return {c.intermediate_size, c.hidden_size};  // gate_proj, up_proj
}

bool isVectorName(std::string_view name) {
    return name.ends_with("norm.weight");
}

// Assembles a Weights object from a name -> view lookup (all names known to be present).
std::shared_ptr<const Weights> assemble(const ModelConfig& config,
                                        const std::map<std::string, TensorView>& views,
                                        std::shared_ptr<const Weights::Storage> storage,
                                        std::string description) {
    std::vector<LayerWeights> layers(static_cast<size_t>(config.num_hidden_layers));
    for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
        for (const LayerTensor& t : kLayerTensors) {
            layers[l].*t.member = views.at(layerTensorName(l, t.suffix));
        }
    }
    const TensorView embed = views.at(kEmbedName);
    const TensorView lm_head = config.tie_word_embeddings ? embed : views.at(kLmHeadName);
    return std::make_shared<const Weights>(config, std::move(layers), embed, views.at(kNormName),
                                           lm_head, std::move(storage), std::move(description));
}

uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t hashName(std::string_view name, uint64_t seed) {
    uint64_t h = 0xcbf29ce484222325ull ^ splitmix64(seed);
    for (char ch : name) {
        h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
    }
    return splitmix64(h);
}

}  // namespace

std::vector<std::pair<std::string, TensorView>> Weights::namedTensors() const {
    std::vector<std::pair<std::string, TensorView>> out;
    out.emplace_back(kEmbedName, embed_tokens_);
    for (size_t l = 0; l < layers_.size(); ++l) {
        for (const LayerTensor& t : kLayerTensors) {
            out.emplace_back(layerTensorName(static_cast<int64_t>(l), t.suffix),
                             layers_[l].*t.member);
        }
    }
    out.emplace_back(kNormName, norm_);
    if (!config_.tie_word_embeddings) {
        out.emplace_back(kLmHeadName, lm_head_);
    }
    return out;
}

std::vector<ExpectedTensor> expectedTensors(const ModelConfig& c) {
    std::vector<ExpectedTensor> out;
    out.push_back({kEmbedName, c.vocab_size, c.hidden_size});
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
        for (const LayerTensor& t : kLayerTensors) {
            const auto [rows, cols] = layerShape(c, t.suffix);
            out.push_back({layerTensorName(l, t.suffix), rows, cols});
        }
    }
    out.push_back({kNormName, 1, c.hidden_size});
    if (!c.tie_word_embeddings) {
        out.push_back({kLmHeadName, c.vocab_size, c.hidden_size});
    }
    return out;
}

void fillRandomTensor(std::string_view name, int64_t cols, uint64_t seed, DType dtype,
                      uint64_t first, uint64_t count, std::byte* out) {
    // Uniform(lo, hi) from the top 24 bits of a counter hash: exact in fp32, and element i
    // depends only on (seed, name, i), so slices and threads cannot change the values.
    float lo;
    float hi;
    if (isVectorName(name)) {
        lo = 0.5f;
        hi = 1.5f;
    } else if (name == kEmbedName) {
        lo = -1.0f;
        hi = 1.0f;
    } else {
        hi = static_cast<float>(std::sqrt(3.0 / static_cast<double>(cols)));
        lo = -hi;
    }
    const uint64_t key = hashName(name, seed);
    constexpr size_t kBlock = 1024;
    float tmp[kBlock];
    for (uint64_t done = 0; done < count; done += kBlock) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, count - done));
        for (size_t i = 0; i < n; ++i) {
            const uint64_t r = splitmix64(key + (first + done + i) * 0xd1b54a32d192ed03ull);
            const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
            tmp[i] = lo + (hi - lo) * u;
        }
        convertFromFloat(tmp, n, dtype, out + done * dtypeSize(dtype));
    }
}

namespace {

Result<std::shared_ptr<const Weights>> buildRandomWeights(const ModelConfig& config, DType dtype,
                                                          uint64_t seed, int threads,
                                                          const std::string& description_prefix) {
    ATLAS_RETURN_IF_ERROR(validateConfig(config));
    auto storage = std::make_shared<Weights::Storage>();
    std::map<std::string, TensorView> views;
    struct Work {
        const ExpectedTensor* tensor;
        std::byte* base;
        uint64_t first;
        uint64_t count;
    };
    std::vector<Work> work;
    const std::vector<ExpectedTensor> expected = expectedTensors(config);
    constexpr uint64_t kSlice = 1u << 22;
    for (const ExpectedTensor& t : expected) {
        const uint64_t n = static_cast<uint64_t>(t.rows * t.cols);
        storage->buffers.emplace_back(new std::byte[n * dtypeSize(dtype)]);
        std::byte* base = storage->buffers.back().get();
        views[t.name] = TensorView{base, dtype, t.rows, t.cols};
        for (uint64_t first = 0; first < n; first += kSlice) {
            work.push_back({&t, base, first, std::min(kSlice, n - first)});
        }
    }
    std::atomic<size_t> next{0};
    auto worker = [&] {
        for (size_t i = next.fetch_add(1); i < work.size(); i = next.fetch_add(1)) {
            const Work& w = work[i];
            fillRandomTensor(w.tensor->name, w.tensor->cols, seed, dtype, w.first, w.count,
                             w.base + w.first * dtypeSize(dtype));
        }
    };
    std::vector<std::thread> pool;
    for (int i = 1; i < std::max(threads, 1); ++i) {
        pool.emplace_back(worker);
    }
    worker();
    for (std::thread& t : pool) {
        t.join();
    }
    return assemble(
        config, views, std::move(storage),
        description_prefix + " " + std::string(dtypeName(dtype)) + " seed " + std::to_string(seed));
}

}  // namespace

Result<std::shared_ptr<const Weights>> makeRandomWeights(const ModelConfig& config, DType dtype,
                                                         uint64_t seed, int threads) {
    return buildRandomWeights(config, dtype, seed, threads, "random");
}

Result<std::shared_ptr<const Weights>> makeRandomWeights(std::string_view shape, DType dtype,
                                                         uint64_t seed, int threads) {
    auto config = shapePreset(shape);
    if (!config.isOk()) {
        return config.status();
    }
    return buildRandomWeights(config.value(), dtype, seed, threads, "random " + std::string(shape));
}

namespace {

constexpr size_t kMaxSmallJsonBytes = 64u << 20;

Status loadError(const std::filesystem::path& where, const std::string& what) {
    return {Code::kInvalidArgument, where.string() + ": " + what};
}

// Reads model.safetensors.index.json: tensor name -> shard file name (a plain file name in
// the model directory; anything with a path separator is rejected).
Result<std::map<std::string, std::string>> readIndex(const std::filesystem::path& path) {
    auto text = readSmallFile(path, kMaxSmallJsonBytes);
    if (!text.isOk()) {
        return text.status();
    }
    const nlohmann::json root = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded() || !root.is_object()) {
        return loadError(path, "not a valid JSON object");
    }
    auto map_it = root.find("weight_map");
    if (map_it == root.end() || !map_it->is_object()) {
        return loadError(path, "missing \"weight_map\" object");
    }
    std::map<std::string, std::string> out;
    for (const auto& [name, file] : map_it->items()) {
        if (!file.is_string()) {
            return loadError(path, "weight_map entry for \"" + name + "\" is not a string");
        }
        const std::string f = file.get<std::string>();
        if (f.empty() || f == "." || f == ".." || f.find('/') != std::string::npos ||
            f.find('\0') != std::string::npos) {
            return loadError(path, "weight_map entry for \"" + name +
                                       "\" is not a plain file name: \"" + f + "\"");
        }
        out.emplace(name, f);
    }
    return out;
}

}  // namespace

Result<std::shared_ptr<const Weights>> loadModelDir(const std::filesystem::path& dir) {
    auto config_text = readSmallFile(dir / "config.json", kMaxSmallJsonBytes);
    if (!config_text.isOk()) {
        return config_text.status();
    }
    auto config = parseConfigJson(*config_text, (dir / "config.json").string());
    if (!config.isOk()) {
        return config.status();
    }

    std::map<std::string, std::string> index;  // empty for a single-file model
    std::vector<std::string> file_names;
    const std::filesystem::path index_path = dir / "model.safetensors.index.json";
    std::error_code ec;
    if (std::filesystem::exists(index_path, ec)) {
        auto parsed = readIndex(index_path);
        if (!parsed.isOk()) {
            return parsed.status();
        }
        index = std::move(parsed.value());
        for (const auto& [name, file] : index) {
            if (std::find(file_names.begin(), file_names.end(), file) == file_names.end()) {
                file_names.push_back(file);
            }
        }
        if (file_names.empty()) {
            return loadError(index_path, "weight_map is empty");
        }
    } else if (std::filesystem::exists(dir / "model.safetensors", ec)) {
        file_names.push_back("model.safetensors");
    } else {
        return loadError(dir, "no model.safetensors or model.safetensors.index.json");
    }

    auto storage = std::make_shared<Weights::Storage>();
    struct Located {
        const std::string* file;
        const SafetensorsTensor* info;
        const std::byte* data;
    };
    std::vector<SafetensorsHeader> headers;
    headers.reserve(file_names.size());
    std::map<std::string, Located> located;
    for (const std::string& name : file_names) {
        const std::filesystem::path path = dir / name;
        auto mapped = MappedFile::open(path);
        if (!mapped.isOk()) {
            return mapped.status();
        }
        auto header = parseSafetensors(mapped->bytes(), path.string());
        if (!header.isOk()) {
            return header.status();
        }
        const std::byte* data_section = mapped->bytes().data() + header->data_offset;
        storage->files.push_back(std::move(mapped.value()));
        headers.push_back(std::move(header.value()));
        for (const SafetensorsTensor& t : headers.back().tensors) {
            auto [it, inserted] =
                located.emplace(t.name, Located{&name, &t, data_section + t.begin});
            if (!inserted) {
                return loadError(path, "tensor \"" + t.name + "\" also appears in " +
                                           (dir / *it->second.file).string());
            }
        }
    }

    std::map<std::string, TensorView> views;
    for (const ExpectedTensor& want : expectedTensors(config.value())) {
        auto it = located.find(want.name);
        if (!index.empty()) {
            auto idx = index.find(want.name);
            if (idx == index.end()) {
                return loadError(index_path, "weight_map has no entry for required tensor \"" +
                                                 want.name + "\"");
            }
            if (it == located.end() || *it->second.file != idx->second) {
                return loadError(
                    dir / idx->second,
                    "tensor \"" + want.name + "\" is missing (the index says it is in this file)");
            }
        }
        if (it == located.end()) {
            return loadError(dir / file_names.front(),
                             "required tensor \"" + want.name + "\" is missing");
        }
        const SafetensorsTensor& t = *it->second.info;
        const std::filesystem::path where = dir / *it->second.file;
        if (!t.engine_dtype) {
            return loadError(where, "tensor \"" + want.name + "\" has dtype " + t.dtype +
                                        "; the engine supports F32, BF16 and F16");
        }
        const bool vector = isVectorName(want.name);
        const std::vector<int64_t> expect_shape =
            vector ? std::vector<int64_t>{want.cols} : std::vector<int64_t>{want.rows, want.cols};
        if (t.shape != expect_shape) {
            auto show = [](const std::vector<int64_t>& s) {
                std::string out = "[";
                for (size_t i = 0; i < s.size(); ++i) {
                    out += (i ? ", " : "") + std::to_string(s[i]);
                }
                return out + "]";
            };
            return loadError(where, "tensor \"" + want.name + "\" has shape " + show(t.shape) +
                                        " but config.json implies " + show(expect_shape));
        }
        views[want.name] = TensorView{it->second.data, *t.engine_dtype, want.rows, want.cols};
    }
    const std::string description = dir.string() + " (" + std::to_string(file_names.size()) +
                                    " safetensors file" + (file_names.size() == 1 ? "" : "s") +
                                    ", " + std::string(dtypeName(views.at(kEmbedName).dtype)) + ")";
    return assemble(config.value(), views, std::move(storage), description);
}

}  // namespace atlas::bubbletea
