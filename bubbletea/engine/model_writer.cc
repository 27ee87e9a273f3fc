#include "bubbletea/engine/model_writer.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bubbletea/engine/safetensors.h"

namespace atlas::bubbletea {

namespace {

Status writeTextFile(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
        return {Code::kSystem, "could not write " + path.string()};
    }
    return Status::ok();
}

uint64_t tensorBytes(const TensorToWrite& t) {
    uint64_t n = dtypeSize(t.dtype);
    for (int64_t d : t.shape) {
        n *= static_cast<uint64_t>(d);
    }
    return n;
}

std::string shardName(size_t index, size_t count) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", index + 1, count);
    return buf;
}

Status writeTensors(const std::filesystem::path& dir, const ModelConfig& config,
                    std::vector<TensorToWrite> tensors, const WriteOptions& options) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) {
        return {Code::kSystem, "create " + dir.string() + ": " + ec.message()};
    }
    ATLAS_RETURN_IF_ERROR(writeTextFile(dir / "config.json", configToJson(config)));
    const std::map<std::string, std::string> metadata = {{"format", "pt"}};

    std::vector<std::vector<TensorToWrite>> shards(1);
    uint64_t shard_bytes = 0;
    uint64_t total_bytes = 0;
    for (TensorToWrite& t : tensors) {
        const uint64_t bytes = tensorBytes(t);
        if (options.max_shard_bytes > 0 && !shards.back().empty() &&
            shard_bytes + bytes > options.max_shard_bytes) {
            shards.emplace_back();
            shard_bytes = 0;
        }
        shard_bytes += bytes;
        total_bytes += bytes;
        shards.back().push_back(std::move(t));
    }
    if (shards.size() == 1) {
        std::filesystem::remove(dir / "model.safetensors.index.json", ec);
        return writeSafetensors(dir / "model.safetensors", shards.front(), metadata);
    }
    nlohmann::ordered_json index;
    index["metadata"] = {{"total_size", total_bytes}};
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
        const std::string name = shardName(i, shards.size());
        for (const TensorToWrite& t : shards[i]) {
            weight_map[t.name] = name;
        }
        ATLAS_RETURN_IF_ERROR(writeSafetensors(dir / name, shards[i], metadata));
    }
    index["weight_map"] = std::move(weight_map);
    std::filesystem::remove(dir / "model.safetensors", ec);
    return writeTextFile(dir / "model.safetensors.index.json", index.dump(2) + "\n");
}

}  // namespace

Status writeModelDir(const std::filesystem::path& dir, const Weights& weights,
                     const WriteOptions& options) {
    std::vector<TensorToWrite> tensors;
    for (const auto& [name, view] : weights.namedTensors()) {
        TensorToWrite t;
        t.name = name;
        t.dtype = view.dtype;
        t.shape = name.ends_with("norm.weight") ? std::vector<int64_t>{view.cols}
                                                : std::vector<int64_t>{view.rows, view.cols};
        const std::byte* data = view.data;
        const size_t esize = dtypeSize(view.dtype);
        t.fill = [data, esize](uint64_t first, std::span<std::byte> out) {
            std::memcpy(out.data(), data + first * esize, out.size());
        };
        tensors.push_back(std::move(t));
    }
    ModelConfig config = weights.config();
    config.torch_dtype = weights.embedTokens().dtype;
    return writeTensors(dir, config, std::move(tensors), options);
}

Status writeRandomModel(const std::filesystem::path& dir, const ModelConfig& config, DType dtype,
                        uint64_t seed, const WriteOptions& options) {
    ATLAS_RETURN_IF_ERROR(validateConfig(config));
    std::vector<TensorToWrite> tensors;
    for (const ExpectedTensor& e : expectedTensors(config)) {
        TensorToWrite t;
        t.name = e.name;
        t.dtype = dtype;
        t.shape = e.name.ends_with("norm.weight") ? std::vector<int64_t>{e.cols}
                                                  : std::vector<int64_t>{e.rows, e.cols};
        const int64_t cols = e.cols;
        t.fill = [name = e.name, cols, seed, dtype](uint64_t first, std::span<std::byte> out) {
            fillRandomTensor(name, cols, seed, dtype, first, out.size() / dtypeSize(dtype),
                             out.data());
        };
        tensors.push_back(std::move(t));
    }
    ModelConfig written = config;
    written.torch_dtype = dtype;
    return writeTensors(dir, written, std::move(tensors), options);
}

}  // namespace atlas::bubbletea
