// Request validation, routing and response bodies of the daemon's HTTP API, and the daemon's
// flag/config parsing. Pure functions: no sockets.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bubbletea/daemon/api.h"
#include "bubbletea/daemon/config.h"

namespace atlas::bubbletea {
namespace {

using json = nlohmann::json;

ModelLimits limits() {
    ModelLimits l;
    l.model_names = {"tiny"};
    l.vocab_size = 256;
    l.max_prompt_tokens = 100;
    return l;
}

ApiError errorOf(const std::string& body) {
    auto r = parseCompletionRequest(body, limits());
    EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body;
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(DaemonApi, AcceptsTheDisaggregatedPrefillSubset) {
    const std::string body = R"({
        "model": "tiny", "prompt": [1, 2, 3, 255], "max_tokens": 1, "stream": false,
        "temperature": 0.0, "ttft_deadline_ms": 250, "request_id": "abc-1",
        "kv_transfer_params": {"do_remote_decode": true, "do_remote_prefill": false,
                               "remote_engine_id": null, "remote_block_ids": null,
                               "remote_host": "10.0.0.5", "remote_port": 7000}})";
    auto r = parseCompletionRequest(body, limits());
    ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r)) << std::get<ApiError>(r).message;
    const auto& req = std::get<CompletionRequest>(r);
    EXPECT_EQ(req.prompt, (std::vector<int32_t>{1, 2, 3, 255}));
    ASSERT_TRUE(req.ttft_deadline_ms.has_value());
    EXPECT_DOUBLE_EQ(*req.ttft_deadline_ms, 250);
    EXPECT_EQ(req.request_id, "abc-1");
    EXPECT_TRUE(req.kv.present);
    EXPECT_TRUE(req.kv.do_remote_decode);
    EXPECT_EQ(req.kv.remote_host, "10.0.0.5");
    EXPECT_EQ(req.kv.remote_port, 7000);
    // Fields the daemon does not interpret are echoed back.
    const json extra = json::parse(req.kv.extra_json);
    EXPECT_TRUE(extra.contains("remote_engine_id"));
    EXPECT_FALSE(extra.contains("remote_host"));
}

TEST(DaemonApi, MaxTokensDefaultsToOneAndKvParamsAreOptional) {
    auto r = parseCompletionRequest(R"({"model":"tiny","prompt":[7]})", limits());
    ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r));
    EXPECT_FALSE(std::get<CompletionRequest>(r).kv.present);
}

TEST(DaemonApi, MalformedInputNamesTheField) {
    struct Case {
        const char* body;
        int status;
        const char* param;
    };
    const Case cases[] = {
        {"{not json", 400, ""},
        {"[1,2]", 400, ""},
        {R"({"prompt":[1]})", 400, "model"},
        {R"({"model":5,"prompt":[1]})", 400, "model"},
        {R"({"model":"other","prompt":[1]})", 404, "model"},
        {R"({"model":"tiny"})", 400, "prompt"},
        {R"({"model":"tiny","prompt":"hello"})", 400, "prompt"},
        {R"({"model":"tiny","prompt":[[1,2],[3]]})", 400, "prompt"},
        {R"({"model":"tiny","prompt":[]})", 400, "prompt"},
        {R"({"model":"tiny","prompt":[1,2.5]})", 400, "prompt"},
        {R"({"model":"tiny","prompt":[1,-3]})", 400, "prompt"},
        {R"({"model":"tiny","prompt":[256]})", 400, "prompt"},
        {R"({"model":"tiny","prompt":[1],"max_tokens":16})", 400, "max_tokens"},
        {R"({"model":"tiny","prompt":[1],"max_tokens":0})", 400, "max_tokens"},
        {R"({"model":"tiny","prompt":[1],"max_tokens":"1"})", 400, "max_tokens"},
        {R"({"model":"tiny","prompt":[1],"stream":true})", 400, "stream"},
        {R"({"model":"tiny","prompt":[1],"n":2})", 400, "n"},
        {R"({"model":"tiny","prompt":[1],"ttft_deadline_ms":-5})", 400, "ttft_deadline_ms"},
        {R"({"model":"tiny","prompt":[1],"ttft_deadline_ms":"soon"})", 400, "ttft_deadline_ms"},
        {R"({"model":"tiny","prompt":[1],"kv_transfer_params":[1]})", 400, "kv_transfer_params"},
        {R"({"model":"tiny","prompt":[1],"kv_transfer_params":{"remote_port":70000}})", 400,
         "kv_transfer_params.remote_port"},
        {R"({"model":"tiny","prompt":[1],"kv_transfer_params":{"do_remote_decode":true,
            "remote_host":"h"}})",
         400, "kv_transfer_params.remote_port"},
        {R"({"model":"tiny","prompt":[1],"kv_transfer_params":{"do_remote_decode":"yes"}})", 400,
         "kv_transfer_params.do_remote_decode"},
    };
    for (const auto& c : cases) {
        const ApiError e = errorOf(c.body);
        EXPECT_EQ(e.status, c.status) << c.body << ": " << e.message;
        EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
        EXPECT_FALSE(e.message.empty());
        // The error body is an OpenAI error object naming the field.
        const json j = json::parse(errorJson(e));
        ASSERT_TRUE(j.contains("error"));
        EXPECT_EQ(j["error"]["message"], e.message);
        if (c.param[0] != '\0') {
            EXPECT_EQ(j["error"]["param"], c.param);
        } else {
            EXPECT_TRUE(j["error"]["param"].is_null());
        }
    }
}

TEST(DaemonApi, PromptOverTheContextIs413) {
    json body = {{"model", "tiny"}, {"prompt", std::vector<int>(101, 1)}};
    const ApiError e = errorOf(body.dump());
    EXPECT_EQ(e.status, 413);
    EXPECT_EQ(e.code, "context_length_exceeded");
    body["prompt"] = std::vector<int>(100, 1);
    EXPECT_TRUE(
        std::holds_alternative<CompletionRequest>(parseCompletionRequest(body.dump(), limits())));
}

TEST(DaemonApi, DeepNestingIsRefusedBeforeParsing) {
    const std::string deep = std::string(10000, '[') + std::string(10000, ']');
    EXPECT_EQ(errorOf(deep).status, 400);
    const std::string in_string =
        R"({"model":"tiny","prompt":[1],"x":")" + std::string(100, '[') + R"("})";
    EXPECT_TRUE(
        std::holds_alternative<CompletionRequest>(parseCompletionRequest(in_string, limits())));
}

TEST(DaemonApi, Routes) {
    EXPECT_EQ(classifyRoute("POST", "/v1/completions").route, Route::kCompletions);
    EXPECT_EQ(classifyRoute("POST", "/v1/completions?x=1").route, Route::kCompletions);
    const RouteMatch bad = classifyRoute("GET", "/v1/completions");
    EXPECT_EQ(bad.route, Route::kBadMethod);
    EXPECT_EQ(bad.allow, "POST");
    EXPECT_EQ(classifyRoute("GET", "/v1/models").route, Route::kModels);
    EXPECT_EQ(classifyRoute("GET", "/healthz").route, Route::kHealth);
    EXPECT_EQ(classifyRoute("GET", "/metrics").route, Route::kMetrics);
    const RouteMatch kv = classifyRoute("GET", "/v1/kv/cmpl-abc");
    EXPECT_EQ(kv.route, Route::kKvPull);
    EXPECT_EQ(kv.kv_id, "cmpl-abc");
    EXPECT_EQ(classifyRoute("GET", "/v1/kv/").route, Route::kNotFound);
    EXPECT_EQ(classifyRoute("GET", "/v1/kv/a/b").route, Route::kNotFound);
    EXPECT_EQ(classifyRoute("GET", "/nope").route, Route::kNotFound);
}

TEST(DaemonApi, CompletionBodyCarriesTokenAndKvParams) {
    CompletionResult r;
    r.id = "cmpl-1";
    r.model = "tiny";
    r.first_token = 42;
    r.prompt_tokens = 5;
    r.kv_transfer_params_json = R"({"remote_engine_id":"e1","do_remote_prefill":true})";
    const json j = json::parse(completionJson(r));
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["choices"][0]["text"], "42");
    EXPECT_EQ(j["choices"][0]["token_ids"][0], 42);
    EXPECT_EQ(j["usage"]["prompt_tokens"], 5);
    EXPECT_EQ(j["kv_transfer_params"]["remote_engine_id"], "e1");
    EXPECT_EQ(retryAfterSeconds(1), 1);
    EXPECT_EQ(retryAfterSeconds(2 * kNsPerSec + 1), 3);
}

// ---- configuration -------------------------------------------------------------------------

TEST(DaemonConfig, FlagsOverrideTheConfigFileAndHelpListsEveryFlag) {
    const char* argv[] = {"bubbletea",
                          "--random-weights",
                          "tiny",
                          "--engine=null",
                          "--listen",
                          "0.0.0.0:9000",
                          "--windows",
                          "duty:40:10",
                          "--queue-limit",
                          "7",
                          "--kv-dtype",
                          "f32",
                          "--profile-tokens",
                          "8,32"};
    auto r = parseDaemonArgs(static_cast<int>(std::size(argv)), argv);
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    const DaemonConfig& c = r.value().config;
    EXPECT_EQ(c.engine, EngineKind::kNull);
    EXPECT_EQ(c.listen_host, "0.0.0.0");
    EXPECT_EQ(c.listen_port, 9000);
    EXPECT_EQ(c.window_mode, WindowMode::kDuty);
    EXPECT_EQ(c.duty_period_ns, 40 * kNsPerMs);
    EXPECT_EQ(c.duty_open_ns, 10 * kNsPerMs);
    EXPECT_EQ(c.duty_offset_ns, 0);
    const char* offset[] = {"bubbletea", "--windows", "duty:100:5:2500"};
    auto r2 = parseDaemonArgs(3, offset);
    ASSERT_TRUE(r2.isOk());
    EXPECT_EQ(r2.value().config.duty_offset_ns, 2500 * kNsPerMs);
    EXPECT_EQ(c.queue_limit, 7u);
    EXPECT_EQ(c.kv_dtype, DType::kF32);
    EXPECT_EQ(c.profile_tokens, (std::vector<int64_t>{8, 32}));
    EXPECT_TRUE(validateDaemonConfig(c).isOk());

    DaemonConfig fromFile;
    ASSERT_TRUE(applyConfigJson(R"({"queue-limit": 3, "engine": "cpu", "no-channel": true,
                                    "profile-contexts": [0, 64], "default-ttft-ms": 1.5})",
                                "test.json", &fromFile)
                    .isOk());
    EXPECT_EQ(fromFile.queue_limit, 3u);
    EXPECT_EQ(fromFile.window_mode, WindowMode::kAlways);
    EXPECT_EQ(fromFile.profile_contexts, (std::vector<int64_t>{0, 64}));
    EXPECT_EQ(fromFile.default_ttft_ns, 1500 * kNsPerUs);
    EXPECT_FALSE(applyConfigJson(R"({"no-such-flag": 1})", "t.json", &fromFile).isOk());

    const std::string help = daemonHelp();
    for (const char* flag :
         {"--listen", "--model-dir", "--random-weights", "--engine", "--http-threads", "--channel",
          "--local-rank", "--end-margin-us", "--queue-limit", "--default-ttft-ms", "--fallback-url",
          "--decode-url", "--kv-dtype", "--auth-key", "--windows"}) {
        EXPECT_NE(help.find(flag), std::string::npos) << flag;
    }
}

TEST(DaemonConfig, BadFlagsAreNamed) {
    const char* unknown[] = {"bubbletea", "--bogus"};
    auto r = parseDaemonArgs(2, unknown);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("--bogus"), std::string::npos);
    const char* bad_engine[] = {"bubbletea", "--engine", "tpu"};
    r = parseDaemonArgs(3, bad_engine);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("--engine"), std::string::npos);
    const char* missing[] = {"bubbletea", "--queue-limit"};
    EXPECT_FALSE(parseDaemonArgs(2, missing).isOk());
    DaemonConfig c;  // no model source
    EXPECT_FALSE(validateDaemonConfig(c).isOk());
    std::string host;
    uint16_t port = 0;
    EXPECT_TRUE(parseHostPort("tcp://10.1.2.3:7000", &host, &port).isOk());
    EXPECT_EQ(host, "10.1.2.3");
    EXPECT_EQ(port, 7000);
    EXPECT_TRUE(parseHostPort("[::1]:80", &host, &port).isOk());
    EXPECT_EQ(host, "::1");
    EXPECT_FALSE(parseHostPort("nohost", &host, &port).isOk());
}

}  // namespace
}  // namespace atlas::bubbletea
