// Shared helpers for the engine tests: small model shapes that exercise GQA, ragged sizes
// and tied embeddings, deterministic prompts, and error metrics.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bubbletea/engine/engine.h"
#include "bubbletea/engine/model_config.h"
#include "bubbletea/engine/weights.h"

namespace atlas::bubbletea::testutil {

// "tiny" with GQA (4 query heads over 2 KV heads).
inline ModelConfig tinyConfig() {
    auto c = shapePreset("tiny");
    EXPECT_TRUE(c.isOk());
    return c.value();
}

// Sizes that are not multiples of the GEMM tiles (16 columns, 6 rows, 256-deep K blocks),
// 3 query heads per KV head, tied embeddings: every remainder path runs.
inline ModelConfig raggedConfig() {
    ModelConfig c = tinyConfig();
    c.hidden_size = 72;
    c.num_attention_heads = 6;
    c.num_key_value_heads = 2;
    c.head_dim = 12;
    c.intermediate_size = 300;
    c.vocab_size = 301;
    c.num_hidden_layers = 3;
    c.tie_word_embeddings = true;
    c.rope_theta = 500000.0;
    c.rms_norm_eps = 1e-6;
    return c;
}

inline std::vector<int32_t> randomPrompt(size_t n, int64_t vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
    std::vector<int32_t> out(n);
    for (auto& t : out) {
        t = dist(rng);
    }
    return out;
}

// max |a - b| / max(1, max |b|): an error relative to the scale of the reference values.
template <typename A, typename B>
double scaledMaxError(const std::vector<A>& a, const std::vector<B>& b) {
    EXPECT_EQ(a.size(), b.size());
    double max_err = 0;
    double scale = 1;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
        max_err =
            std::max(max_err, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
        scale = std::max(scale, std::abs(static_cast<double>(b[i])));
    }
    return max_err / scale;
}

// Index of the largest value and the gap to the runner-up.
template <typename T>
std::pair<size_t, double> argmaxWithGap(const std::vector<T>& v) {
    size_t best = 0;
    for (size_t i = 1; i < v.size(); ++i) {
        if (v[i] > v[best]) {
            best = i;
        }
    }
    double second = -INFINITY;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i != best) {
            second = std::max(second, static_cast<double>(v[i]));
        }
    }
    return {best, static_cast<double>(v[best]) - second};
}

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
  public:
    TempDir() {
        std::string templ =
            (std::filesystem::temp_directory_path() / "atlas-engine-XXXXXX").string();
        path_ = ::mkdtemp(templ.data());
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    const std::filesystem::path& path() const { return path_; }

  private:
    std::filesystem::path path_;
};

}  // namespace atlas::bubbletea::testutil
