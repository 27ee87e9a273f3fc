// The weights of one Llama-architecture model: loaded from a Hugging Face directory
// (config.json + safetensors, memory-mapped) or generated in memory from a seed.
//
// A Weights object is immutable after construction and shared by engines through
// std::shared_ptr<const Weights>; any number of threads may read it. It owns the memory its
// TensorViews point into (mappings or heap buffers) for as long as it lives.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "atlas/common/status.h"
#include "bubbletea/engine/dtype.h"
#include "bubbletea/engine/model_config.h"

namespace atlas::bubbletea {

// A read-only row-major matrix (or vector: cols == 1 is not used; vectors have rows == 1).
// `data` may be unaligned (safetensors data offsets need not be multiples of the element
// size): read through loadAsFloat/convertToFloat or unaligned vector loads.
struct TensorView {
    const std::byte* data = nullptr;
    DType dtype = DType::kF32;
    int64_t rows = 0;  // PyTorch Linear weights: out_features
    int64_t cols = 0;  //                          in_features

    int64_t numElements() const { return rows * cols; }
    size_t numBytes() const { return static_cast<size_t>(numElements()) * dtypeSize(dtype); }
    float at(int64_t r, int64_t c) const {
        return loadAsFloat(data, dtype, static_cast<size_t>(r * cols + c));
    }
};

struct LayerWeights {
    TensorView q_proj;                    // [heads * head_dim, hidden]
    TensorView k_proj;                    // [kv_heads * head_dim, hidden]
    TensorView v_proj;                    // [kv_heads * head_dim, hidden]
    TensorView o_proj;                    // [hidden, heads * head_dim]
    TensorView gate_proj;                 // [intermediate, hidden]
    TensorView up_proj;                   // [intermediate, hidden]
    TensorView down_proj;                 // [hidden, intermediate]
    TensorView input_layernorm;           // [1, hidden]
    TensorView post_attention_layernorm;  // [1, hidden]
};

class Weights {
  public:
    struct Storage;  // keeps mappings / buffers alive; defined in weights.cc

    Weights(ModelConfig config, std::vector<LayerWeights> layers, TensorView embed_tokens,
            TensorView norm, TensorView lm_head, std::shared_ptr<const Storage> storage,
            std::string description);
    ~Weights();

    const ModelConfig& config() const { return config_; }
    const std::vector<LayerWeights>& layers() const { return layers_; }
    const TensorView& embedTokens() const { return embed_tokens_; }  // [vocab, hidden]
    const TensorView& norm() const { return norm_; }                 // [1, hidden]
    // [vocab, hidden]; the same memory as embedTokens() when tie_word_embeddings.
    const TensorView& lmHead() const { return lm_head_; }
    // e.g. "/models/llama (2 safetensors files)" or "random llama-3.2-1b BF16 seed 1".
    const std::string& description() const { return description_; }

    // Every tensor under its Hugging Face name (lm_head.weight omitted when tied), in the
    // order a writer should store them.
    std::vector<std::pair<std::string, TensorView>> namedTensors() const;

  private:
    ModelConfig config_;
    std::vector<LayerWeights> layers_;
    TensorView embed_tokens_;
    TensorView norm_;
    TensorView lm_head_;
    std::shared_ptr<const Storage> storage_;
    std::string description_;
};

// Loads a Hugging Face model directory: config.json plus model.safetensors, or the shards
// listed in model.safetensors.index.json. Files are memory-mapped (no copy). Every tensor is
// checked against the config: present, dtype F32/BF16/F16, exact shape. Extra tensors (e.g.
// rotary_emb.inv_freq in old checkpoints) are ignored. Errors name the file and tensor.
// Blocking file I/O; call it outside latency-critical paths.
Result<std::shared_ptr<const Weights>> loadModelDir(const std::filesystem::path& dir);

// Builds weights in memory from a counter-based generator: the same (config, dtype, seed)
// gives bit-identical weights regardless of thread count. Linear weights are uniform with
// variance 1/in_features (activations keep unit scale through the layers), embeddings
// uniform in [-1, 1], norm weights uniform in [0.5, 1.5]. `threads` only affects speed.
Result<std::shared_ptr<const Weights>> makeRandomWeights(const ModelConfig& config, DType dtype,
                                                         uint64_t seed, int threads = 1);

// The daemon's `--random-weights SHAPE`: makeRandomWeights(shapePreset(shape), ...), with
// the shape name in description(). Unknown names fail with the list of known ones.
Result<std::shared_ptr<const Weights>> makeRandomWeights(std::string_view shape, DType dtype,
                                                         uint64_t seed, int threads = 1);

// Hugging Face tensor names.
std::string layerTensorName(int64_t layer, std::string_view suffix);  // "model.layers.3.<suffix>"

// The generator behind makeRandomWeights, exposed so the model writer can stream the same
// values to disk without holding them in memory: fills elements [first, first + count) of
// the tensor `name` (with `cols` columns; its scale depends on them) in `dtype`.
void fillRandomTensor(std::string_view name, int64_t cols, uint64_t seed, DType dtype,
                      uint64_t first, uint64_t count, std::byte* out);

// The list of (name, rows, cols) every Llama checkpoint of `config` must contain.
struct ExpectedTensor {
    std::string name;
    int64_t rows;
    int64_t cols;
};
std::vector<ExpectedTensor> expectedTensors(const ModelConfig& config);

}  // namespace atlas::bubbletea
