// The daemon's model set-up: the tokenizer and the engine a DaemonConfig asks for, and the
// rule tying their vocabularies together (declared in daemon.h).
#include <filesystem>
#include <fstream>
#include <thread>

#include "bubbletea/daemon/daemon.h"
#include "bubbletea/daemon/null_engine.h"
#include "bubbletea/engine/engine.h"
#include "bubbletea/engine/weights.h"

namespace atlas::bubbletea {

namespace {

Status checkVocab(const ModelConfig& mc, int64_t tokenizer_vocab, const std::string& what) {
    if (tokenizer_vocab > mc.vocab_size) {
        return Status{Code::kInvalidArgument,
                      what + " has a vocabulary of " + std::to_string(mc.vocab_size) +
                          " but its tokenizer produces ids up to " +
                          std::to_string(tokenizer_vocab - 1) +
                          ": the tokenizer does not belong to this model (give the matching "
                          "--tokenizer)"};
    }
    return Status::ok();
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> loadTokenizerFromConfig(const DaemonConfig& config) {
    if (!config.tokenizer.empty()) {
        return Tokenizer::fromFile(config.tokenizer);
    }
    if (!config.model_dir.empty()) {
        auto t = Tokenizer::fromModelDir(config.model_dir);
        if (!t.isOk() && t.status().code() == Code::kUnavailable) {
            return std::shared_ptr<const Tokenizer>();
        }
        return t;
    }
    return std::shared_ptr<const Tokenizer>();
}

Result<std::unique_ptr<Engine>> makeEngineFromConfig(const DaemonConfig& config,
                                                     std::string* model_name,
                                                     int64_t tokenizer_vocab) {
    std::string default_name;
    if (!config.model_dir.empty()) {
        std::filesystem::path p(config.model_dir);
        if (p.filename().empty()) {
            p = p.parent_path();
        }
        default_name = p.filename().string();
    } else {
        default_name = config.random_weights.empty() ? "tiny" : config.random_weights;
    }
    *model_name = config.model_name.empty() ? default_name : config.model_name;

    if (config.engine == EngineKind::kNull) {
        ModelConfig mc;
        if (!config.model_dir.empty()) {
            const auto path = std::filesystem::path(config.model_dir) / "config.json";
            std::ifstream in(path, std::ios::binary);
            if (!in) {
                return Status{Code::kInvalidArgument, "cannot read " + path.string()};
            }
            std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
            auto parsed = parseConfigJson(text, path.string());
            if (!parsed.isOk()) {
                return parsed.status();
            }
            mc = parsed.value();
            ATLAS_RETURN_IF_ERROR(checkVocab(mc, tokenizer_vocab, path.string()));
        } else {
            auto preset = shapePreset(default_name);
            if (!preset.isOk()) {
                return preset.status();
            }
            mc = preset.value();
            if (tokenizer_vocab > 0) {
                mc.vocab_size = tokenizer_vocab;
            }
        }
        return makeNullEngine(mc);
    }

    const int threads = config.engine_threads > 0
                            ? config.engine_threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    Result<std::shared_ptr<const Weights>> weights = Status{Code::kInternal, "no weights"};
    if (!config.model_dir.empty()) {
        weights = loadModelDir(config.model_dir);
    } else if (tokenizer_vocab > 0) {
        auto shape = shapePreset(config.random_weights);
        if (!shape.isOk()) {
            return shape.status();
        }
        shape.value().vocab_size = tokenizer_vocab;
        weights = makeRandomWeights(shape.value(), config.random_dtype, config.seed, threads);
    } else {
        weights =
            makeRandomWeights(config.random_weights, config.random_dtype, config.seed, threads);
    }
    if (!weights.isOk()) {
        return weights.status();
    }
    if (!config.model_dir.empty()) {
        ATLAS_RETURN_IF_ERROR(checkVocab(weights.value()->config(), tokenizer_vocab,
                                         "the checkpoint in " + config.model_dir));
    }
    if (config.engine == EngineKind::kCuda) {
        return makeCudaEngine(weights.value(), config.cuda_device, config.cuda_low_priority);
    }
    return makeCpuEngine(weights.value(), threads);
}

}  // namespace atlas::bubbletea
