// Writes models in the exact on-disk form loadModelDir reads (and Hugging Face transformers
// loads): config.json + model.safetensors, or shards model-0000i-of-0000n.safetensors plus
// model.safetensors.index.json. Blocking file I/O; safe to call from any thread.
#pragma once

#include <cstdint>
#include <filesystem>

#include "atlas/common/status.h"
#include "bubbletea/engine/dtype.h"
#include "bubbletea/engine/model_config.h"
#include "bubbletea/engine/weights.h"

namespace atlas::bubbletea {

struct WriteOptions {
    // 0: one model.safetensors. Otherwise start a new shard whenever the next tensor would
    // push the current one past this many bytes (a tensor is never split).
    uint64_t max_shard_bytes = 0;
};

// Writes `weights` (in their stored dtypes) to `dir`, creating it if needed.
Status writeModelDir(const std::filesystem::path& dir, const Weights& weights,
                     const WriteOptions& options = {});

// Writes the model makeRandomWeights(config, dtype, seed) would build, streaming each tensor
// in slices so memory stays small even for an 8B shape. Loading the result gives weights
// bit-identical to makeRandomWeights with the same arguments.
Status writeRandomModel(const std::filesystem::path& dir, const ModelConfig& config, DType dtype,
                        uint64_t seed, const WriteOptions& options = {});

}  // namespace atlas::bubbletea
