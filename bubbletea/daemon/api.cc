#include "bubbletea/daemon/api.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace atlas::bubbletea {
namespace {

using json = nlohmann::json;

// Deeper nesting than this is refused before parsing: no legitimate request comes close,
// and it bounds the work (and any recursion) a hostile body can cause.
constexpr int kMaxJsonDepth = 32;
// The longest deadline a client may ask for.
constexpr double kMaxDeadlineMs = 3600.0 * 1000.0;

std::string dumpJson(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Max nesting depth of brackets outside strings; -1 when it exceeds `limit`.
int jsonDepth(std::string_view text, int limit) {
    int depth = 0;
    int max_depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > limit) {
                return -1;
            }
            max_depth = std::max(max_depth, depth);
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return max_depth;
}

const char* typeName(const json& j) {
    return j.type_name();
}

ApiError notFoundModel(const std::string& model, const std::string& served) {
    ApiError e;
    e.status = 404;
    e.message = "The model '" + model + "' does not exist; this server serves '" + served + "'";
    e.param = "model";
    e.code = "model_not_found";
    e.reason = "unknown_model";
    return e;
}

std::optional<ApiError> parseKvParams(const json& v, KvTransferParams* out) {
    if (v.is_null()) {
        return std::nullopt;
    }
    if (!v.is_object()) {
        return badRequest(std::string("kv_transfer_params must be an object, not ") + typeName(v),
                          "kv_transfer_params", "invalid_type");
    }
    out->present = true;
    json extra = json::object();
    for (auto it = v.begin(); it != v.end(); ++it) {
        const std::string& key = it.key();
        const json& val = it.value();
        if (key == "do_remote_decode") {
            if (!val.is_null() && !val.is_boolean()) {
                return badRequest("kv_transfer_params.do_remote_decode must be a boolean",
                                  "kv_transfer_params.do_remote_decode", "invalid_type");
            }
            out->do_remote_decode = val.is_boolean() && val.get<bool>();
        } else if (key == "remote_host") {
            if (!val.is_null() && !val.is_string()) {
                return badRequest("kv_transfer_params.remote_host must be a string",
                                  "kv_transfer_params.remote_host", "invalid_type");
            }
            if (val.is_string()) {
                out->remote_host = val.get<std::string>();
                if (out->remote_host.size() > 253) {
                    return badRequest("kv_transfer_params.remote_host is too long",
                                      "kv_transfer_params.remote_host");
                }
            }
        } else if (key == "remote_port") {
            if (val.is_null()) {
                continue;
            }
            if (!val.is_number_integer() || val.get<int64_t>() < 1 || val.get<int64_t>() > 65535) {
                return badRequest(
                    "kv_transfer_params.remote_port must be an integer in "
                    "[1, 65535]",
                    "kv_transfer_params.remote_port");
            }
            out->remote_port = static_cast<int>(val.get<int64_t>());
        } else {
            extra[key] = val;
        }
    }
    if (out->do_remote_decode && !out->remote_host.empty() && out->remote_port == 0) {
        return badRequest("kv_transfer_params.remote_port is required with remote_host",
                          "kv_transfer_params.remote_port", "missing_field");
    }
    out->extra_json = dumpJson(extra);
    return std::nullopt;
}

ApiError tooLong(size_t tokens, int64_t limit) {
    ApiError e;
    e.status = 413;
    e.message = "prompt has " + std::to_string(tokens) + " tokens, more than the " +
                std::to_string(limit) + " this server accepts";
    e.param = "prompt";
    e.code = "context_length_exceeded";
    e.reason = "prompt_too_long";
    return e;
}

ApiError noTokenizer(const std::string& what) {
    ApiError e = badRequest(what +
                                " needs a tokenizer, and this server has none: start it with "
                                "--tokenizer FILE or a --model-dir holding tokenizer.json",
                            "prompt", "no_tokenizer");
    e.reason = "no_tokenizer";
    return e;
}

// Token ids of a list, each in [0, vocab); `param` names the field in errors.
std::optional<ApiError> parseIds(const json& v, int64_t vocab_size, const std::string& param,
                                 std::vector<int32_t>* out) {
    out->reserve(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
        const json& t = v[i];
        if (!t.is_number_integer()) {
            return badRequest(param + "[" + std::to_string(i) +
                                  "] must be an integer token id, not " + typeName(t),
                              param, "invalid_type");
        }
        const int64_t id =
            t.is_number_unsigned()
                ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), INT64_MAX))
                : t.get<int64_t>();
        if (id < 0 || id >= vocab_size) {
            return badRequest(param + "[" + std::to_string(i) + "]: token id " +
                                  std::to_string(id) + " is outside the vocabulary [0, " +
                                  std::to_string(vocab_size) + ")",
                              param);
        }
        out->push_back(static_cast<int32_t>(id));
    }
    return std::nullopt;
}

std::optional<ApiError> tokenizeText(const std::string& text, bool add_special_tokens,
                                     const ModelLimits& limits, std::vector<int32_t>* out) {
    if (limits.tokenizer == nullptr) {
        return noTokenizer("a text prompt");
    }
    auto ids = limits.tokenizer->encode(text, add_special_tokens);
    if (!ids.isOk()) {
        return badRequest("prompt: " + ids.status().message(), "prompt");
    }
    *out = std::move(ids.value());
    return std::nullopt;
}

// add_special_tokens: a boolean, default true (vLLM's completions and /tokenize).
std::optional<ApiError> addSpecialTokens(const json& doc, bool* out) {
    *out = true;
    const auto it = doc.find("add_special_tokens");
    if (it == doc.end() || it->is_null()) {
        return std::nullopt;
    }
    if (!it->is_boolean()) {
        return badRequest("add_special_tokens must be a boolean", "add_special_tokens",
                          "invalid_type");
    }
    *out = it->get<bool>();
    return std::nullopt;
}

std::optional<ApiError> parsePrompt(const json& v, bool add_special_tokens,
                                    const ModelLimits& limits, CompletionRequest* req) {
    std::vector<int32_t>* out = &req->prompt;
    const json* p = &v;
    // OpenAI's batch forms with a single prompt: ["text"] and [[ids]].
    if (p->is_array() && !p->empty() && (p->front().is_string() || p->front().is_array())) {
        if (p->size() > 1) {
            return badRequest("batched prompts (" + std::to_string(p->size()) +
                                  " prompts) are not supported; send one request per prompt",
                              "prompt", "unsupported_prompt");
        }
        p = &p->front();
    }
    if (p->is_string()) {
        req->text_prompt = true;
        if (auto err = tokenizeText(p->get<std::string>(), add_special_tokens, limits, out)) {
            return err;
        }
        if (out->empty()) {
            return badRequest("prompt encodes to no tokens", "prompt");
        }
        if (static_cast<int64_t>(out->size()) > limits.max_prompt_tokens) {
            return tooLong(out->size(), limits.max_prompt_tokens);
        }
        return std::nullopt;
    }
    if (!p->is_array()) {
        return badRequest(
            std::string("prompt must be a string or a list of token ids, not ") + typeName(*p),
            "prompt", "invalid_type");
    }
    if (p->empty()) {
        return badRequest("prompt must not be empty", "prompt");
    }
    if (static_cast<int64_t>(p->size()) > limits.max_prompt_tokens) {
        return tooLong(p->size(), limits.max_prompt_tokens);
    }
    return parseIds(*p, limits.vocab_size, "prompt", out);
}

// The body as a JSON object, refusing deep nesting before parsing.
std::variant<json, ApiError> parseBody(std::string_view body) {
    if (jsonDepth(body, kMaxJsonDepth) < 0) {
        return badRequest(
            "request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels", "",
            "invalid_json");
    }
    json doc = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
        return badRequest("request body is not valid JSON", "", "invalid_json");
    }
    if (!doc.is_object()) {
        return badRequest(std::string("request body must be a JSON object, not ") + typeName(doc),
                          "", "invalid_json");
    }
    return doc;
}

// "model": required (completions) or optional (vLLM's /tokenize, /detokenize); when given
// it must be a served name.
std::optional<ApiError> checkModel(const json& doc, const ModelLimits& limits, bool required,
                                   std::string* model) {
    const auto it = doc.find("model");
    if (it == doc.end() || it->is_null()) {
        if (required) {
            return badRequest("model is required", "model", "missing_field");
        }
        return std::nullopt;
    }
    if (!it->is_string()) {
        return badRequest("model must be a string", "model", "invalid_type");
    }
    *model = it->get<std::string>();
    for (const auto& name : limits.model_names) {
        if (name == *model) {
            return std::nullopt;
        }
    }
    return notFoundModel(*model, limits.model_names.empty() ? "" : limits.model_names[0]);
}

// /tokenize and /detokenize: a JSON object whose optional "model" is a served name.
std::variant<json, ApiError> parseTokenizationBody(std::string_view body,
                                                   const ModelLimits& limits) {
    auto parsed = parseBody(body);
    if (std::holds_alternative<ApiError>(parsed)) {
        return parsed;
    }
    std::string model;
    if (auto err = checkModel(std::get<json>(parsed), limits, /*required=*/false, &model)) {
        return *err;
    }
    return parsed;
}

}  // namespace

ApiError badRequest(std::string message, std::string param, std::string code) {
    ApiError e;
    e.status = 400;
    e.message = std::move(message);
    e.param = std::move(param);
    e.code = std::move(code);
    e.reason = "bad_request";
    return e;
}

std::string errorJson(const ApiError& error) {
    json inner = {{"message", error.message}, {"type", error.type}};
    inner["param"] = error.param.empty() ? json(nullptr) : json(error.param);
    inner["code"] = error.code.empty() ? json(nullptr) : json(error.code);
    return dumpJson(json{{"error", inner}});
}

int64_t retryAfterSeconds(Nanos ns) {
    const int64_t s = (ns + kNsPerSec - 1) / kNsPerSec;
    return s < 1 ? 1 : s;
}

std::variant<CompletionRequest, ApiError> parseCompletionRequest(std::string_view body,
                                                                 const ModelLimits& limits) {
    auto parsed = parseBody(body);
    if (std::holds_alternative<ApiError>(parsed)) {
        return std::get<ApiError>(parsed);
    }
    const json& doc = std::get<json>(parsed);
    CompletionRequest req;
    if (auto err = checkModel(doc, limits, /*required=*/true, &req.model)) {
        return *err;
    }

    const auto max_tokens = doc.find("max_tokens");
    if (max_tokens != doc.end() && !max_tokens->is_null()) {
        if (!max_tokens->is_number_integer()) {
            return badRequest("max_tokens must be an integer", "max_tokens", "invalid_type");
        }
        const bool positive = max_tokens->is_number_unsigned() || max_tokens->get<int64_t>() >= 1;
        if (!positive) {
            return badRequest("max_tokens must be 1", "max_tokens");
        }
        if (max_tokens->is_number_unsigned() ? max_tokens->get<uint64_t>() != 1
                                             : max_tokens->get<int64_t>() != 1) {
            return badRequest(
                "max_tokens must be 1: this is a prefill-only server that "
                "returns the first token; decoding runs on the decode server",
                "max_tokens", "unsupported_value");
        }
    }

    const auto stream = doc.find("stream");
    if (stream != doc.end() && !stream->is_null()) {
        if (!stream->is_boolean()) {
            return badRequest("stream must be a boolean", "stream", "invalid_type");
        }
        if (stream->get<bool>()) {
            return badRequest("stream=true is not supported: a prefill returns one token", "stream",
                              "unsupported_value");
        }
    }

    const auto n = doc.find("n");
    if (n != doc.end() && !n->is_null()) {
        if (!n->is_number_integer() || n->get<int64_t>() != 1) {
            return badRequest("n must be 1", "n", "unsupported_value");
        }
    }

    const auto deadline = doc.find("ttft_deadline_ms");
    if (deadline != doc.end() && !deadline->is_null()) {
        if (!deadline->is_number()) {
            return badRequest("ttft_deadline_ms must be a number", "ttft_deadline_ms",
                              "invalid_type");
        }
        const double ms = deadline->get<double>();
        if (!(ms > 0) || !(ms <= kMaxDeadlineMs)) {
            return badRequest("ttft_deadline_ms must be in (0, 3600000]", "ttft_deadline_ms");
        }
        req.ttft_deadline_ms = ms;
    }

    const auto request_id = doc.find("request_id");
    if (request_id != doc.end() && !request_id->is_null()) {
        if (!request_id->is_string() || request_id->get<std::string>().size() > 200) {
            return badRequest("request_id must be a string of at most 200 bytes", "request_id",
                              "invalid_type");
        }
        req.request_id = request_id->get<std::string>();
    }

    const auto kv = doc.find("kv_transfer_params");
    if (kv != doc.end()) {
        if (auto err = parseKvParams(*kv, &req.kv)) {
            return *err;
        }
    }

    bool add_special = true;
    if (auto err = addSpecialTokens(doc, &add_special)) {
        return *err;
    }
    const auto prompt = doc.find("prompt");
    if (prompt == doc.end() || prompt->is_null()) {
        return badRequest("prompt is required", "prompt", "missing_field");
    }
    if (auto err = parsePrompt(*prompt, add_special, limits, &req)) {
        return *err;
    }
    return req;
}

std::variant<TokenizeResult, ApiError> parseTokenizeRequest(std::string_view body,
                                                            const ModelLimits& limits) {
    auto parsed = parseTokenizationBody(body, limits);
    if (std::holds_alternative<ApiError>(parsed)) {
        return std::get<ApiError>(parsed);
    }
    const json& doc = std::get<json>(parsed);
    if (doc.contains("messages")) {
        return badRequest(
            "chat messages are not supported: this server has no chat template; "
            "send the rendered prompt as \"prompt\"",
            "messages", "unsupported_value");
    }
    bool add_special = true;
    if (auto err = addSpecialTokens(doc, &add_special)) {
        return *err;
    }
    TokenizeResult out;
    if (const auto it = doc.find("return_token_strs"); it != doc.end() && !it->is_null()) {
        if (!it->is_boolean()) {
            return badRequest("return_token_strs must be a boolean", "return_token_strs",
                              "invalid_type");
        }
        out.return_token_strs = it->get<bool>();
    }
    const auto prompt = doc.find("prompt");
    if (prompt == doc.end() || prompt->is_null()) {
        return badRequest("prompt is required", "prompt", "missing_field");
    }
    if (!prompt->is_string()) {
        return badRequest(std::string("prompt must be a string, not ") + typeName(*prompt),
                          "prompt", "invalid_type");
    }
    if (auto err = tokenizeText(prompt->get<std::string>(), add_special, limits, &out.tokens)) {
        return *err;
    }
    return out;
}

std::string tokenizeJson(const TokenizeResult& r, const ModelLimits& limits) {
    json out = {{"count", r.tokens.size()},
                {"max_model_len", limits.max_model_len},
                {"tokens", r.tokens},
                {"token_strs", nullptr}};
    if (r.return_token_strs && limits.tokenizer != nullptr) {
        json strs = json::array();
        for (int32_t id : r.tokens) {
            strs.push_back(limits.tokenizer->tokenString(id).value_or(""));
        }
        out["token_strs"] = std::move(strs);
    }
    return dumpJson(out);
}

std::variant<std::string, ApiError> parseDetokenizeRequest(std::string_view body,
                                                           const ModelLimits& limits) {
    auto parsed = parseTokenizationBody(body, limits);
    if (std::holds_alternative<ApiError>(parsed)) {
        return std::get<ApiError>(parsed);
    }
    const json& doc = std::get<json>(parsed);
    const auto tokens = doc.find("tokens");
    if (tokens == doc.end() || tokens->is_null()) {
        return badRequest("tokens is required", "tokens", "missing_field");
    }
    if (!tokens->is_array()) {
        return badRequest(
            std::string("tokens must be a list of token ids, not ") + typeName(*tokens), "tokens",
            "invalid_type");
    }
    if (limits.tokenizer == nullptr) {
        ApiError e = noTokenizer("/detokenize");
        e.param = "tokens";
        return e;
    }
    std::vector<int32_t> ids;
    if (auto err = parseIds(*tokens, limits.tokenizer->vocabSize(), "tokens", &ids)) {
        return *err;
    }
    auto text = limits.tokenizer->decode(ids, /*skip_special_tokens=*/false);
    if (!text.isOk()) {
        return badRequest("tokens: " + text.status().message(), "tokens");
    }
    return std::move(text.value());
}

std::string detokenizeJson(const std::string& text) {
    return dumpJson(json{{"prompt", text}});
}

RouteMatch classifyRoute(std::string_view method, std::string_view target) {
    const size_t q = target.find('?');
    const std::string_view path = q == std::string_view::npos ? target : target.substr(0, q);
    RouteMatch m;
    auto only = [&](std::string_view allowed, Route route) {
        if (method == allowed) {
            m.route = route;
        } else {
            m.route = Route::kBadMethod;
            m.allow = std::string(allowed);
        }
    };
    constexpr std::string_view kKvPrefix = "/v1/kv/";
    if (path == "/v1/completions") {
        only("POST", Route::kCompletions);
    } else if (path == "/tokenize" || path == "/v1/tokenize") {
        only("POST", Route::kTokenize);
    } else if (path == "/detokenize" || path == "/v1/detokenize") {
        only("POST", Route::kDetokenize);
    } else if (path == "/v1/models") {
        only("GET", Route::kModels);
    } else if (path == "/healthz" || path == "/health") {
        only("GET", Route::kHealth);
    } else if (path == "/metrics") {
        only("GET", Route::kMetrics);
    } else if (path.size() > kKvPrefix.size() && path.substr(0, kKvPrefix.size()) == kKvPrefix &&
               path.size() - kKvPrefix.size() <= 128 &&
               path.substr(kKvPrefix.size()).find('/') == std::string_view::npos) {
        only("GET", Route::kKvPull);
        m.kv_id = std::string(path.substr(kKvPrefix.size()));
    }
    return m;
}

std::string completionJson(const CompletionResult& r) {
    json choice = {
        {"index", 0},
        {"text", r.first_token_text ? *r.first_token_text : std::to_string(r.first_token)},
        {"token_ids", json::array({r.first_token})},
        {"logprobs", nullptr},
        {"finish_reason", "length"},
        {"stop_reason", nullptr},
    };
    json out = {
        {"id", r.id},
        {"object", "text_completion"},
        {"created", r.created_unix_s},
        {"model", r.model},
        {"choices", json::array({choice})},
        {"usage",
         {{"prompt_tokens", r.prompt_tokens},
          {"completion_tokens", 1},
          {"total_tokens", r.prompt_tokens + 1}}},
        {"bubbletea",
         {{"queue_ms", r.queue_ms},
          {"prefill_ms", r.prefill_ms},
          {"ttft_ms", r.ttft_ms},
          {"chunks", r.chunks}}},
    };
    if (!r.kv_transfer_params_json.empty()) {
        json kv = json::parse(r.kv_transfer_params_json, nullptr, false);
        out["kv_transfer_params"] = kv.is_discarded() ? json(nullptr) : kv;
    } else {
        out["kv_transfer_params"] = nullptr;
    }
    return dumpJson(out);
}

std::string modelsJson(const std::vector<std::string>& names, int64_t created_unix_s,
                       int64_t max_model_len) {
    json data = json::array();
    if (!names.empty()) {
        data.push_back({{"id", names[0]},
                        {"object", "model"},
                        {"created", created_unix_s},
                        {"owned_by", "bubbletea"},
                        {"max_model_len", max_model_len}});
    }
    return dumpJson(json{{"object", "list"}, {"data", data}});
}

}  // namespace atlas::bubbletea
