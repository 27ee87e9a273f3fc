// Text prompts, /tokenize and /detokenize at the API layer (pure: no sockets), with the
// committed self-made tokenizer and its reference ids (tokenizer/expected_small.json).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "bubbletea/daemon/api.h"
#include "bubbletea/daemon/config.h"
#include "tokenizer_test_util.h"

namespace atlas::bubbletea {
namespace {

using json = nlohmann::json;

const Tokenizer& smallTokenizer() {
    static const std::shared_ptr<const Tokenizer> t = [] {
        auto r = Tokenizer::fromFile(testutil::tokenizerDataDir() + "/small_tokenizer.json");
        EXPECT_TRUE(r.isOk()) << r.status().toString();
        return r.isOk() ? r.value() : nullptr;
    }();
    return *t;
}

ModelLimits tokenizerLimits(bool with_tokenizer = true) {
    ModelLimits l;
    l.model_names = {"tiny"};
    l.vocab_size = smallTokenizer().vocabSize();
    l.max_prompt_tokens = 100;
    l.max_model_len = 2048;
    l.tokenizer = with_tokenizer ? &smallTokenizer() : nullptr;
    return l;
}

// The reference entry of `text` in expected_small.json.
json expectedFor(const std::string& text) {
    static const json doc =
        testutil::readJson(testutil::tokenizerDataDir() + "/expected_small.json");
    for (const json& e : doc["entries"]) {
        if (e["text"] == text) {
            return e;
        }
    }
    ADD_FAILURE() << "no reference entry for " << text;
    return json::object();
}

std::vector<int32_t> promptOf(const json& body, const ModelLimits& l = tokenizerLimits()) {
    auto r = parseCompletionRequest(body.dump(), l);
    if (std::holds_alternative<ApiError>(r)) {
        ADD_FAILURE() << body.dump() << ": " << std::get<ApiError>(r).message;
        return {};
    }
    return std::get<CompletionRequest>(r).prompt;
}

ApiError errorOf(const json& body, const ModelLimits& l = tokenizerLimits()) {
    auto r = parseCompletionRequest(body.dump(), l);
    EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body.dump();
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(DaemonTokenizerApi, TextPromptsAreTokenizedAsVllmDoes) {
    const std::string text = "Hello, world!";
    const json ref = expectedFor(text);
    const auto with_special = ref["ids_special"].get<std::vector<int32_t>>();
    const auto plain = ref["ids"].get<std::vector<int32_t>>();
    // add_special_tokens defaults to true (vLLM's CompletionRequest).
    EXPECT_EQ(promptOf({{"model", "tiny"}, {"prompt", text}}), with_special);
    EXPECT_EQ(promptOf({{"model", "tiny"}, {"prompt", text}, {"add_special_tokens", true}}),
              with_special);
    EXPECT_EQ(promptOf({{"model", "tiny"}, {"prompt", text}, {"add_special_tokens", false}}),
              plain);
    // OpenAI's one-element batch forms.
    EXPECT_EQ(promptOf({{"model", "tiny"}, {"prompt", json::array({text})}}), with_special);
    EXPECT_EQ(promptOf({{"model", "tiny"}, {"prompt", json::array({plain})}}), plain);
    // Token ids are prefilled as given: add_special_tokens does not touch them.
    EXPECT_EQ(promptOf({{"model", "tiny"}, {"prompt", plain}, {"add_special_tokens", true}}),
              plain);
    auto r =
        parseCompletionRequest(json{{"model", "tiny"}, {"prompt", text}}.dump(), tokenizerLimits());
    ASSERT_TRUE(std::holds_alternative<CompletionRequest>(r));
    EXPECT_TRUE(std::get<CompletionRequest>(r).text_prompt);
}

TEST(DaemonTokenizerApi, PromptErrorsFollowTheErrorTable) {
    ApiError e = errorOf({{"model", "tiny"}, {"prompt", json::array({"a", "b"})}});
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "unsupported_prompt");
    e = errorOf({{"model", "tiny"}, {"prompt", json::array({json::array({1}), json::array({2})})}});
    EXPECT_EQ(e.code, "unsupported_prompt");
    e = errorOf({{"model", "tiny"}, {"prompt", "hi"}}, tokenizerLimits(false));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "no_tokenizer");
    EXPECT_EQ(e.param, "prompt");
    e = errorOf({{"model", "tiny"}, {"prompt", "hi"}, {"add_special_tokens", "yes"}});
    EXPECT_EQ(e.code, "invalid_type");
    EXPECT_EQ(e.param, "add_special_tokens");
    e = errorOf({{"model", "tiny"}, {"prompt", ""}, {"add_special_tokens", false}});
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(e.message.find("no tokens"), std::string::npos);
    e = errorOf({{"model", "tiny"}, {"prompt", std::string(400, 'x') + " " + "日本語 " + "🎉 "}});
    EXPECT_EQ(e.status, 413);
    EXPECT_EQ(e.code, "context_length_exceeded");
    e = errorOf({{"model", "tiny"}, {"prompt", 5}});
    EXPECT_EQ(e.code, "invalid_type");
    // With the BOS/EOS template an empty text is two tokens.
    EXPECT_EQ(promptOf({{"model", "tiny"}, {"prompt", ""}}).size(), 2u);
}

TEST(DaemonTokenizerApi, TokenizeAndDetokenizeHaveVllmShapes) {
    const std::string text = "Привет, мир! Съешь же ещё этих мягких французских булок.";
    const json ref = expectedFor(text);
    auto t =
        parseTokenizeRequest(json{{"model", "tiny"}, {"prompt", text}}.dump(), tokenizerLimits());
    ASSERT_TRUE(std::holds_alternative<TokenizeResult>(t));
    const json out = json::parse(tokenizeJson(std::get<TokenizeResult>(t), tokenizerLimits()));
    EXPECT_EQ(out["tokens"], ref["ids_special"]);
    EXPECT_EQ(out["count"], ref["ids_special"].size());
    EXPECT_EQ(out["max_model_len"], 2048);
    EXPECT_TRUE(out["token_strs"].is_null());
    EXPECT_EQ(out.size(), 4u);

    // model is optional (vLLM); return_token_strs gives the vocabulary's spelling.
    t = parseTokenizeRequest(
        json{{"prompt", "a b"}, {"add_special_tokens", false}, {"return_token_strs", true}}.dump(),
        tokenizerLimits());
    ASSERT_TRUE(std::holds_alternative<TokenizeResult>(t));
    const json strs = json::parse(tokenizeJson(std::get<TokenizeResult>(t), tokenizerLimits()));
    ASSERT_EQ(strs["token_strs"].size(), strs["tokens"].size());
    EXPECT_EQ(strs["token_strs"][0], "a");
    EXPECT_EQ(strs["token_strs"].back().get<std::string>().rfind("\xC4\xA0", 0), 0u)
        << strs.dump();  // " b" starts with the alphabet's space

    auto d = parseDetokenizeRequest(json{{"model", "tiny"}, {"tokens", ref["ids"]}}.dump(),
                                    tokenizerLimits());
    ASSERT_TRUE(std::holds_alternative<std::string>(d));
    EXPECT_EQ(json::parse(detokenizeJson(std::get<std::string>(d))), json({{"prompt", text}}));
    d = parseDetokenizeRequest(json{{"tokens", json::array()}}.dump(), tokenizerLimits());
    ASSERT_TRUE(std::holds_alternative<std::string>(d));
    EXPECT_EQ(std::get<std::string>(d), "");
}

TEST(DaemonTokenizerApi, TokenizeErrors) {
    auto err = [](const std::variant<TokenizeResult, ApiError>& r) {
        EXPECT_TRUE(std::holds_alternative<ApiError>(r));
        return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
    };
    EXPECT_EQ(
        err(parseTokenizeRequest(R"({"model":"other","prompt":"x"})", tokenizerLimits())).status,
        404);
    EXPECT_EQ(err(parseTokenizeRequest(R"({"prompt":[1,2]})", tokenizerLimits())).code,
              "invalid_type");
    EXPECT_EQ(err(parseTokenizeRequest(R"({"messages":[{"role":"user","content":"x"}]})",
                                       tokenizerLimits()))
                  .param,
              "messages");
    EXPECT_EQ(err(parseTokenizeRequest(R"({"prompt":"x"})", tokenizerLimits(false))).code,
              "no_tokenizer");
    EXPECT_EQ(
        err(parseTokenizeRequest(R"({"prompt":"x","return_token_strs":1})", tokenizerLimits()))
            .param,
        "return_token_strs");
    EXPECT_EQ(err(parseTokenizeRequest("[1]", tokenizerLimits())).code, "invalid_json");

    auto derr = [](const std::variant<std::string, ApiError>& r) {
        EXPECT_TRUE(std::holds_alternative<ApiError>(r));
        return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
    };
    const int64_t vocab = smallTokenizer().vocabSize();
    ApiError e =
        derr(parseDetokenizeRequest(json{{"tokens", {1, vocab}}}.dump(), tokenizerLimits()));
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.param, "tokens");
    EXPECT_NE(e.message.find("tokens[1]"), std::string::npos) << e.message;
    EXPECT_EQ(derr(parseDetokenizeRequest(R"({"tokens":["a"]})", tokenizerLimits())).code,
              "invalid_type");
    EXPECT_EQ(derr(parseDetokenizeRequest(R"({"tokens":[1]})", tokenizerLimits(false))).code,
              "no_tokenizer");
    EXPECT_EQ(derr(parseDetokenizeRequest(R"({})", tokenizerLimits())).code, "missing_field");
    EXPECT_EQ(
        derr(parseDetokenizeRequest(R"({"model":"x","tokens":[1]})", tokenizerLimits())).status,
        404);
}

TEST(DaemonTokenizerApi, RoutesAndFlag) {
    EXPECT_EQ(classifyRoute("POST", "/tokenize").route, Route::kTokenize);
    EXPECT_EQ(classifyRoute("POST", "/v1/detokenize").route, Route::kDetokenize);
    const RouteMatch m = classifyRoute("GET", "/detokenize");
    EXPECT_EQ(m.route, Route::kBadMethod);
    EXPECT_EQ(m.allow, "POST");

    const char* argv[] = {"bubbletea", "--random-weights", "tiny", "--tokenizer",
                          "/x/tokenizer.json"};
    auto parsed = parseDaemonArgs(5, argv);
    ASSERT_TRUE(parsed.isOk()) << parsed.status().toString();
    EXPECT_EQ(parsed.value().config.tokenizer, "/x/tokenizer.json");
    EXPECT_NE(daemonHelp().find("--tokenizer FILE"), std::string::npos);
}

}  // namespace
}  // namespace atlas::bubbletea
