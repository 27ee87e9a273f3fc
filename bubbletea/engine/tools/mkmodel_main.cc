// bubbletea-mkmodel: writes a random-weight Llama model (config.json + safetensors) with the
// shape of a real model, for tests, demos and benchmarks without downloading weights.
//
//   bubbletea-mkmodel --shape tiny --dtype bf16 --out /tmp/tiny [--seed 1] [--layers N]
//                     [--shard-mb MB]
#include <charconv>
#include <cstdio>
#include <string>
#include <string_view>

#include "bubbletea/engine/model_writer.h"

namespace {

void usage(std::FILE* to) {
    std::string shapes;
    for (const std::string& n : atlas::bubbletea::shapePresetNames()) {
        shapes += (shapes.empty() ? "" : "|") + n;
    }
    std::fprintf(to,
                 "usage: bubbletea-mkmodel --shape %s\n"
                 "                         --out DIR [--dtype f32|bf16|f16] [--seed N]\n"
                 "                         [--layers N] [--shard-mb MB]\n"
                 "Writes config.json and model.safetensors (or shards + index when the model\n"
                 "exceeds --shard-mb) with deterministic random weights. --layers overrides the\n"
                 "shape's layer count (a real-width model that is quick to build).\n",
                 shapes.c_str());
}

bool parseU64(std::string_view text, uint64_t* out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
    return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

int main(int argc, char** argv) {
    using namespace atlas::bubbletea;
    std::string shape;
    std::string out_dir;
    std::string dtype_name = "bf16";
    uint64_t seed = 1;
    uint64_t layers = 0;
    uint64_t shard_mb = 0;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "-h" || arg == "--help") {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "bubbletea-mkmodel: %s needs a value\n", argv[i]);
            usage(stderr);
            return 2;
        }
        const std::string_view value = argv[++i];
        bool ok = true;
        if (arg == "--shape") {
            shape = value;
        } else if (arg == "--out") {
            out_dir = value;
        } else if (arg == "--dtype") {
            dtype_name = value;
        } else if (arg == "--seed") {
            ok = parseU64(value, &seed);
        } else if (arg == "--layers") {
            ok = parseU64(value, &layers) && layers > 0;
        } else if (arg == "--shard-mb") {
            ok = parseU64(value, &shard_mb);
        } else {
            std::fprintf(stderr, "bubbletea-mkmodel: unknown option %s\n", argv[i - 1]);
            usage(stderr);
            return 2;
        }
        if (!ok) {
            std::fprintf(stderr, "bubbletea-mkmodel: bad value for %s: %s\n", argv[i - 1], argv[i]);
            return 2;
        }
    }
    if (shape.empty() || out_dir.empty()) {
        usage(stderr);
        return 2;
    }
    DType dtype;
    if (dtype_name == "f32" || dtype_name == "fp32") {
        dtype = DType::kF32;
    } else if (dtype_name == "bf16") {
        dtype = DType::kBF16;
    } else if (dtype_name == "f16" || dtype_name == "fp16") {
        dtype = DType::kF16;
    } else {
        std::fprintf(stderr, "bubbletea-mkmodel: --dtype must be f32, bf16 or f16\n");
        return 2;
    }
    auto config = shapePreset(shape);
    if (!config.isOk()) {
        std::fprintf(stderr, "bubbletea-mkmodel: %s\n", config.status().toString().c_str());
        return 2;
    }
    if (layers > 0) {
        config->num_hidden_layers = static_cast<int64_t>(layers);
    }
    WriteOptions options;
    options.max_shard_bytes = shard_mb << 20;
    const double gib = static_cast<double>(config->parameterCount()) *
                       static_cast<double>(dtypeSize(dtype)) / (1u << 30);
    std::fprintf(stderr, "bubbletea-mkmodel: %s, %lld layers, %.3f GiB of %s weights -> %s\n",
                 shape.c_str(), static_cast<long long>(config->num_hidden_layers), gib,
                 std::string(dtypeName(dtype)).c_str(), out_dir.c_str());
    const atlas::Status st = writeRandomModel(out_dir, *config, dtype, seed, options);
    if (!st.isOk()) {
        std::fprintf(stderr, "bubbletea-mkmodel: %s\n", st.toString().c_str());
        return 1;
    }
    return 0;
}
