// The daemon's HTTP API surface, independent of the HTTP library: request validation for
// POST /v1/completions (untrusted bytes: fuzzed by tests/fuzz fuzz_bubbletea_request),
// route classification, and the JSON bodies of responses and OpenAI-style errors.
//
// The accepted subset of the OpenAI completions API is what disaggregated-prefill proxies
// (vLLM's toy_proxy_server, llm-d) send to a prefill server; docs/bubbletea.md lists it.
// Text prompts are tokenized here, with the served model's tokenizer (ModelLimits), as are
// vLLM's POST /tokenize and /detokenize bodies.
// Unknown fields are ignored (proxies forward sampling parameters that do not matter for a
// single greedy prefill token).
//
// Threads: pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "atlas/common/clock.h"
#include "bubbletea/tokenizer/tokenizer.h"

namespace atlas::bubbletea {

// An OpenAI-style error: rendered as {"error":{"message","type","param","code"}}.
struct ApiError {
    int status = 500;
    std::string message;
    std::string type = "invalid_request_error";
    std::string param;         // the offending request field ("" renders as null)
    std::string code;          // machine-readable reason ("" renders as null)
    Nanos retry_after_ns = 0;  // > 0: send "Retry-After: <ceil seconds>"
    // Metric label for bubbletea_rejections_total (e.g. "bad_request", "queue_full").
    std::string reason;
};

ApiError badRequest(std::string message, std::string param, std::string code = "invalid_value");
std::string errorJson(const ApiError& error);
// ceil(ns / 1 s), at least 1.
int64_t retryAfterSeconds(Nanos ns);

// kv_transfer_params of a request (vLLM naming). Fields the daemon does not use are kept
// verbatim and echoed back (`extra_json`, a JSON object text, possibly "{}").
struct KvTransferParams {
    bool present = false;
    bool do_remote_decode = false;
    std::string remote_host;  // decode endpoint for a push ("" = use --decode-url or pull)
    int remote_port = 0;      // 0 = not given
    std::string extra_json = "{}";
};

struct CompletionRequest {
    std::string model;
    std::vector<int32_t> prompt;  // the ids to prefill (a text prompt tokenized)
    bool text_prompt = false;
    std::optional<double> ttft_deadline_ms;  // Atlas extension
    KvTransferParams kv;
    std::string request_id;  // from the body's "request_id" if present, else ""
};

// What validation needs to know about the served model.
struct ModelLimits {
    std::vector<std::string> model_names;  // accepted "model" values (first is canonical)
    int64_t vocab_size = 0;
    int64_t max_prompt_tokens = 0;  // min(model context, --max-prompt-tokens)
    int64_t max_model_len = 0;      // the model's context (/tokenize reports it)
    // The served model's tokenizer (nullptr: text prompts and /tokenize are refused). Not
    // owned; it outlives every request.
    const Tokenizer* tokenizer = nullptr;
};

// Parses and validates a /v1/completions body. `prompt` is a string (tokenized, with the
// post-processor's special tokens unless add_special_tokens is false: vLLM's default for
// completions), a list of token ids, or a one-element list of either (OpenAI's batch form).
// On failure the error names the field:
//   400 malformed JSON, wrong types, stream=true, max_tokens != 1, n != 1, text prompts
//       without a tokenizer, batches of more than one prompt, empty prompts, token ids
//       outside the vocabulary, bad deadline or kv_transfer_params;
//   404 unknown model; 413 prompt longer than max_prompt_tokens.
std::variant<CompletionRequest, ApiError> parseCompletionRequest(std::string_view body,
                                                                 const ModelLimits& limits);

// POST /tokenize (vLLM's TokenizeCompletionRequest): {model?, prompt, add_special_tokens
// (default true), return_token_strs (default false)}. The chat form ({messages}) is refused:
// there is no chat template. The prompt is not limited to the context (the count is the
// answer). Errors: 400 (400 no_tokenizer without one), 404 unknown model.
struct TokenizeResult {
    std::vector<int32_t> tokens;
    bool return_token_strs = false;
};
std::variant<TokenizeResult, ApiError> parseTokenizeRequest(std::string_view body,
                                                            const ModelLimits& limits);
// {"count", "max_model_len", "tokens", "token_strs"} (token_strs null unless asked for).
std::string tokenizeJson(const TokenizeResult& result, const ModelLimits& limits);

// POST /detokenize (vLLM's DetokenizeRequest): {model?, tokens} -> the decoded text. Errors:
// 400 ids outside the vocabulary (naming the index), no tokenizer; 404 unknown model.
std::variant<std::string, ApiError> parseDetokenizeRequest(std::string_view body,
                                                           const ModelLimits& limits);
// {"prompt": text}
std::string detokenizeJson(const std::string& text);

enum class Route {
    kCompletions,  // POST /v1/completions
    kTokenize,     // POST /tokenize (also /v1/tokenize)
    kDetokenize,   // POST /detokenize (also /v1/detokenize)
    kModels,       // GET /v1/models
    kHealth,       // GET /healthz
    kMetrics,      // GET /metrics
    kKvPull,       // GET /v1/kv/{id}
    kNotFound,     // 404
    kBadMethod,    // 405: known path, wrong method
};

struct RouteMatch {
    Route route = Route::kNotFound;
    std::string kv_id;  // kKvPull
    std::string allow;  // kBadMethod: the Allow header value
};

// `method` as sent ("GET", "POST", ...); `target` the request target (query ignored).
RouteMatch classifyRoute(std::string_view method, std::string_view target);

// The result of one prefill, for the response body.
struct CompletionResult {
    std::string id;  // "cmpl-..."
    std::string model;
    int64_t created_unix_s = 0;
    int32_t first_token = -1;
    // choices[0].text: the token decoded by the served tokenizer (special tokens skipped, as
    // vLLM's default skip_special_tokens=true); without a tokenizer, nullopt and the text is
    // the token id in decimal.
    std::optional<std::string> first_token_text;
    int64_t prompt_tokens = 0;
    // Filled-in kv_transfer_params as a JSON object text ("" = omit the field).
    std::string kv_transfer_params_json;
    // Timing extension ("bubbletea" object): all in milliseconds.
    double queue_ms = 0;
    double prefill_ms = 0;
    double ttft_ms = 0;
    int chunks = 0;
};

std::string completionJson(const CompletionResult& result);
std::string modelsJson(const std::vector<std::string>& names, int64_t created_unix_s,
                       int64_t max_model_len);

}  // namespace atlas::bubbletea
