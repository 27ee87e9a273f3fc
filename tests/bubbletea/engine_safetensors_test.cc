// The safetensors parser and the model loader must reject damaged or mismatched files with
// messages that name the file and the tensor, and accept well-formed ones (single file and
// sharded).
#include <gtest/gtest.h>

#include <fstream>

#include "bubbletea/engine/mapped_file.h"
#include "bubbletea/engine/model_writer.h"
#include "bubbletea/engine/safetensors.h"
#include "engine_test_util.h"

namespace atlas::bubbletea {
namespace {

// A file image: 8-byte little-endian length, the header text, then `data_bytes` bytes.
std::vector<std::byte> image(const std::string& header, size_t data_bytes) {
    std::vector<std::byte> out(8 + header.size() + data_bytes, std::byte{0});
    for (int i = 0; i < 8; ++i) {
        out[static_cast<size_t>(i)] = static_cast<std::byte>((header.size() >> (8 * i)) & 0xff);
    }
    std::memcpy(out.data() + 8, header.data(), header.size());
    return out;
}

std::string parseError(const std::vector<std::byte>& file) {
    auto parsed = parseSafetensors(file, "m.safetensors");
    EXPECT_FALSE(parsed.isOk());
    if (parsed.isOk()) {
        return {};
    }
    EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument);
    EXPECT_EQ(parsed.status().message().rfind("m.safetensors: ", 0), 0u)
        << parsed.status().message();
    return parsed.status().message();
}

bool contains(const std::string& haystack, const std::string& needle) {
    return haystack.find(needle) != std::string::npos;
}

const char* kTwoTensors =
    R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
    R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},"__metadata__":{"format":"pt"}})";

TEST(Safetensors, ParsesAWellFormedFile) {
    auto parsed = parseSafetensors(image(kTwoTensors, 22), "m");
    ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
    ASSERT_EQ(parsed->tensors.size(), 2u);
    const SafetensorsTensor* b = parsed->find("b");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->dtype, "BF16");
    EXPECT_EQ(b->engine_dtype, DType::kBF16);
    EXPECT_EQ(b->shape, std::vector<int64_t>{3});
    EXPECT_EQ(b->begin, 16u);
    EXPECT_EQ(b->end, 22u);
    EXPECT_EQ(parsed->metadata.at("format"), "pt");
    EXPECT_EQ(parsed->data_offset, 8 + std::string(kTwoTensors).size());
    EXPECT_EQ(parsed->find("missing"), nullptr);
}

TEST(Safetensors, RejectsTruncatedFiles) {
    EXPECT_TRUE(contains(parseError({}), "truncated"));
    EXPECT_TRUE(contains(parseError(std::vector<std::byte>(5)), "truncated"));
    auto file = image(kTwoTensors, 22);
    file.resize(8 + 10);  // header cut short
    EXPECT_TRUE(contains(parseError(file), "truncated: header length"));
    file = image(kTwoTensors, 22);
    file.resize(file.size() - 3);  // data cut short
    const std::string msg = parseError(file);
    EXPECT_TRUE(contains(msg, "tensor \"b\"")) << msg;
    EXPECT_TRUE(contains(msg, "out of bounds")) << msg;
}

TEST(Safetensors, RejectsCorruptHeaders) {
    auto zero = image("", 0);
    EXPECT_TRUE(contains(parseError(zero), "header length is 0"));
    std::vector<std::byte> huge(16, std::byte{0xff});
    EXPECT_TRUE(contains(parseError(huge), "exceeds"));
    EXPECT_TRUE(contains(parseError(image("[1,2]", 0)), "does not start with '{'"));
    EXPECT_TRUE(contains(parseError(image(R"({"a": )", 0)), "not a valid JSON object"));
    EXPECT_TRUE(contains(parseError(image(std::string(20, '{') + std::string(20, '}'), 0)),
                         "nests deeper"));
    EXPECT_TRUE(
        contains(parseError(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                  R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                                  4)),
                 "repeats the key \"a\""));
    EXPECT_TRUE(contains(parseError(image(R"({"__metadata__":{"k":1}})", 0)), "not a string"));
}

TEST(Safetensors, RejectsBadTensorEntries) {
    auto err = [](const std::string& entry, size_t data) {
        return parseError(image(R"({"w":)" + entry + "}", data));
    };
    std::string msg = err(R"({"dtype":"Q4","shape":[1],"data_offsets":[0,1]})", 1);
    EXPECT_TRUE(contains(msg, "tensor \"w\": unknown dtype \"Q4\"")) << msg;
    msg = err(R"({"dtype":"F32","shape":[3],"data_offsets":[0,8]})", 8);
    EXPECT_TRUE(contains(msg, "does not match dtype F32 x shape (3 elements)")) << msg;
    msg = err(R"({"dtype":"F32","shape":[-1],"data_offsets":[0,4]})", 4);
    EXPECT_TRUE(contains(msg, "non-negative")) << msg;
    msg = err(R"({"dtype":"F32","shape":[1],"data_offsets":[4,0]})", 4);
    EXPECT_TRUE(contains(msg, "begin after end")) << msg;
    msg = err(R"({"dtype":"F32","shape":[1]})", 4);
    EXPECT_TRUE(contains(msg, "data_offsets")) << msg;
    msg = err(R"({"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]})",
              4);
    EXPECT_TRUE(contains(msg, "overflows")) << msg;
    msg = err(R"("not an object")", 0);
    EXPECT_TRUE(contains(msg, "not a JSON object")) << msg;
}

TEST(Safetensors, RejectsOverlapsHolesAndTrailingBytes) {
    std::string msg = parseError(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                       12));
    EXPECT_TRUE(contains(msg, "tensor \"b\"")) << msg;
    EXPECT_TRUE(contains(msg, "overlap tensor \"a\"")) << msg;
    msg = parseError(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8));
    EXPECT_TRUE(contains(msg, "hole of 4 bytes")) << msg;
    msg = parseError(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 6));
    EXPECT_TRUE(contains(msg, "2 bytes after the last tensor")) << msg;
}

TEST(Safetensors, WriterOutputParsesBack) {
    testutil::TempDir dir;
    const std::vector<float> values = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f};
    TensorToWrite t;
    t.name = "x";
    t.dtype = DType::kF32;
    t.shape = {2, 3};
    t.fill = [&](uint64_t first, std::span<std::byte> out) {
        std::memcpy(out.data(), values.data() + first, out.size());
    };
    TensorToWrite e{"empty", DType::kBF16, {0, 4}, [](uint64_t, std::span<std::byte>) {}};
    const auto path = dir.path() / "t.safetensors";
    ASSERT_TRUE(writeSafetensors(path, {t, e}, {{"format", "pt"}}).isOk());
    EXPECT_FALSE(std::filesystem::exists(path.string() + ".tmp"));
    auto mapped = MappedFile::open(path);
    ASSERT_TRUE(mapped.isOk());
    auto parsed = parseSafetensors(mapped->bytes(), path.string());
    ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
    EXPECT_EQ(parsed->data_offset % 8, 0u);  // header padded for alignment
    const SafetensorsTensor* x = parsed->find("x");
    ASSERT_NE(x, nullptr);
    EXPECT_EQ(x->shape, (std::vector<int64_t>{2, 3}));
    std::vector<float> back(6);
    std::memcpy(back.data(), mapped->bytes().data() + parsed->data_offset + x->begin, 24);
    EXPECT_EQ(back, values);
    EXPECT_EQ(parsed->find("empty")->numElements(), 0u);
}

// ---- the loader: config.json + safetensors against each other -----------------------------

class LoaderTest : public ::testing::Test {
  protected:
    void SetUp() override {
        config_ = testutil::tinyConfig();
        ASSERT_TRUE(writeRandomModel(dir_.path(), config_, DType::kBF16, 3).isOk());
    }

    // Rewrites model.safetensors with every tensor kept except that `edit` may change one.
    void rewrite(const std::function<void(TensorToWrite&)>& edit) {
        auto weights = makeRandomWeights(config_, DType::kBF16, 3);
        ASSERT_TRUE(weights.isOk());
        std::vector<TensorToWrite> tensors;
        for (const auto& [name, view] : (*weights)->namedTensors()) {
            TensorToWrite t;
            t.name = name;
            t.dtype = view.dtype;
            t.shape = name.ends_with("norm.weight") ? std::vector<int64_t>{view.cols}
                                                    : std::vector<int64_t>{view.rows, view.cols};
            t.fill = [](uint64_t, std::span<std::byte> out) {
                std::memset(out.data(), 0, out.size());
            };
            edit(t);
            if (!t.name.empty()) {
                tensors.push_back(std::move(t));
            }
        }
        ASSERT_TRUE(writeSafetensors(dir_.path() / "model.safetensors", tensors, {}).isOk());
    }

    std::string loadError() {
        auto loaded = loadModelDir(dir_.path());
        EXPECT_FALSE(loaded.isOk());
        return loaded.isOk() ? std::string() : loaded.status().message();
    }

    testutil::TempDir dir_;
    ModelConfig config_;
};

TEST_F(LoaderTest, LoadsTheWrittenModel) {
    auto loaded = loadModelDir(dir_.path());
    ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
    EXPECT_EQ((*loaded)->layers().size(), 2u);
    EXPECT_EQ((*loaded)->lmHead().rows, config_.vocab_size);
    EXPECT_TRUE(contains((*loaded)->description(), "1 safetensors file"));
}

TEST_F(LoaderTest, RejectsWrongDtype) {
    rewrite([](TensorToWrite& t) {
        if (t.name == "model.layers.1.mlp.up_proj.weight") {
            t.dtype = DType::kF32;  // fine by itself; now make it a dtype the engine refuses
        }
    });
    ASSERT_TRUE(loadModelDir(dir_.path()).isOk());  // mixed F32/BF16 is accepted

    // An I32 tensor cannot be written by writeSafetensors, so patch the header text: the
    // dtype string "F32" -> "I32" keeps every size identical.
    auto mapped = MappedFile::open(dir_.path() / "model.safetensors");
    ASSERT_TRUE(mapped.isOk());
    std::vector<std::byte> bytes(mapped->bytes().begin(), mapped->bytes().end());
    mapped = MappedFile();
    std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const size_t at = text.find(R"("dtype":"F32")");
    ASSERT_NE(at, std::string::npos);
    bytes[at + 9] = std::byte{'I'};
    std::ofstream(dir_.path() / "model.safetensors", std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    const std::string msg = loadError();
    EXPECT_TRUE(contains(msg, "model.layers.1.mlp.up_proj.weight")) << msg;
    EXPECT_TRUE(contains(msg, "dtype I32")) << msg;
    EXPECT_TRUE(contains(msg, "model.safetensors")) << msg;
}

TEST_F(LoaderTest, RejectsShapeMismatch) {
    rewrite([](TensorToWrite& t) {
        if (t.name == "model.layers.0.self_attn.k_proj.weight") {
            t.shape = {64, 64};  // config says [kv_heads * head_dim = 32, 64]
        }
    });
    const std::string msg = loadError();
    EXPECT_TRUE(contains(msg, "model.layers.0.self_attn.k_proj.weight")) << msg;
    EXPECT_TRUE(contains(msg, "shape [64, 64] but config.json implies [32, 64]")) << msg;
}

TEST_F(LoaderTest, RejectsMissingTensor) {
    rewrite([](TensorToWrite& t) {
        if (t.name == "model.norm.weight") {
            t.name.clear();
        }
    });
    const std::string msg = loadError();
    EXPECT_TRUE(contains(msg, "required tensor \"model.norm.weight\" is missing")) << msg;
}

TEST_F(LoaderTest, RejectsCorruptAndTruncatedFiles) {
    const auto path = dir_.path() / "model.safetensors";
    const auto size = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, size - 100);
    std::string msg = loadError();
    EXPECT_TRUE(contains(msg, path.string())) << msg;
    EXPECT_TRUE(contains(msg, "out of bounds")) << msg;

    std::filesystem::resize_file(path, 4);
    msg = loadError();
    EXPECT_TRUE(contains(msg, "truncated")) << msg;

    std::ofstream(path, std::ios::binary | std::ios::trunc) << "garbage that is not a model";
    msg = loadError();
    EXPECT_TRUE(contains(msg, path.string())) << msg;
}

TEST_F(LoaderTest, RejectsBadConfig) {
    std::ofstream(dir_.path() / "config.json", std::ios::trunc)
        << R"({"hidden_size": 64, "num_hidden_layers": 2})";
    std::string msg = loadError();
    EXPECT_TRUE(contains(msg, "config.json")) << msg;
    EXPECT_TRUE(contains(msg, "missing field \"intermediate_size\"")) << msg;
    std::filesystem::remove(dir_.path() / "config.json");
    msg = loadError();
    EXPECT_TRUE(contains(msg, "config.json")) << msg;
    std::filesystem::remove(dir_.path() / "model.safetensors");
    ASSERT_TRUE(writeRandomModel(dir_.path(), config_, DType::kBF16, 3).isOk());
    std::filesystem::remove(dir_.path() / "model.safetensors");
    msg = loadError();
    EXPECT_TRUE(contains(msg, "no model.safetensors")) << msg;
}

TEST_F(LoaderTest, ShardedModelsLoadAndIndexErrorsAreReported) {
    testutil::TempDir sharded;
    WriteOptions options;
    options.max_shard_bytes = 20000;  // the tiny bf16 model is ~150 KB: several shards
    ASSERT_TRUE(writeRandomModel(sharded.path(), config_, DType::kBF16, 3, options).isOk());
    ASSERT_TRUE(std::filesystem::exists(sharded.path() / "model.safetensors.index.json"));
    ASSERT_FALSE(std::filesystem::exists(sharded.path() / "model.safetensors"));
    auto loaded = loadModelDir(sharded.path());
    ASSERT_TRUE(loaded.isOk()) << loaded.status().toString();
    EXPECT_FALSE(contains((*loaded)->description(), "1 safetensors file"));

    // The index points a tensor at a shard that does not hold it.
    const auto index_path = sharded.path() / "model.safetensors.index.json";
    std::string index;
    {
        std::ifstream in(index_path);
        index.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    const std::string key = R"("model.norm.weight": ")";
    const size_t at = index.find(key);
    ASSERT_NE(at, std::string::npos);
    std::string broken = index;
    const size_t shard_digit = at + key.size() + std::string("model-0000").size();
    broken[shard_digit] = broken[shard_digit] == '1' ? '2' : '1';
    std::ofstream(index_path, std::ios::trunc) << broken;
    auto bad = loadModelDir(sharded.path());
    ASSERT_FALSE(bad.isOk());
    EXPECT_TRUE(contains(bad.status().message(), "model.norm.weight")) << bad.status().message();

    std::ofstream(index_path, std::ios::trunc)
        << R"({"weight_map": {"model.norm.weight": "../etc/passwd"}})";
    bad = loadModelDir(sharded.path());
    ASSERT_FALSE(bad.isOk());
    EXPECT_TRUE(contains(bad.status().message(), "not a plain file name"));
}

}  // namespace
}  // namespace atlas::bubbletea
