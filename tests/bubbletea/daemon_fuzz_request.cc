// Fuzz target: raw bytes from an HTTP client through Beast's request parser (the daemon's
// limits), route classification, and the /v1/completions, /tokenize and /detokenize
// validators (text prompts through a real tokenizer); and the same bytes as a bare JSON body.
// Invariants checked: validation never throws or crashes, an accepted request respects the limits,
// and every error renders as a JSON error object.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "bubbletea/daemon/api.h"
#include "bubbletea/tokenizer/unicode.h"
#include "tokenizer_fuzz_util.h"

namespace {

using atlas::bubbletea::ApiError;
using atlas::bubbletea::CompletionRequest;
using atlas::bubbletea::ModelLimits;

const ModelLimits& limits() {
    static const ModelLimits l = [] {
        ModelLimits m;
        m.model_names = {"tiny"};
        m.vocab_size = 512;  // above the fuzz tokenizer's ids
        m.max_prompt_tokens = 512;
        m.max_model_len = 1024;
        // Text prompts go through a real tokenizer, whose ids fit the vocabulary above.
        m.tokenizer = &atlas::bubbletea::testutil::fuzzTokenizer();
        if (m.tokenizer->vocabSize() > m.vocab_size) {
            __builtin_trap();
        }
        return m;
    }();
    return l;
}

void checkError(const ApiError& e) {
    if (e.status < 400 || e.status > 599 || e.message.empty()) {
        __builtin_trap();
    }
    if (atlas::bubbletea::errorJson(e).find("\"error\"") == std::string::npos) {
        __builtin_trap();
    }
}

// POST /tokenize and /detokenize bodies.
void validateTokenization(std::string_view body) {
    auto t = atlas::bubbletea::parseTokenizeRequest(body, limits());
    if (std::holds_alternative<ApiError>(t)) {
        checkError(std::get<ApiError>(t));
    } else {
        const auto& r = std::get<atlas::bubbletea::TokenizeResult>(t);
        for (int32_t id : r.tokens) {
            if (id < 0 || id >= limits().tokenizer->vocabSize()) {
                __builtin_trap();
            }
        }
        (void)atlas::bubbletea::tokenizeJson(r, limits());
    }
    auto d = atlas::bubbletea::parseDetokenizeRequest(body, limits());
    if (std::holds_alternative<ApiError>(d)) {
        checkError(std::get<ApiError>(d));
    } else if (atlas::bubbletea::tok::firstInvalidUtf8(std::get<std::string>(d)) !=
               std::get<std::string>(d).size()) {
        __builtin_trap();  // the response must be UTF-8 JSON
    }
}

void validate(std::string_view body) {
    auto r = atlas::bubbletea::parseCompletionRequest(body, limits());
    if (std::holds_alternative<CompletionRequest>(r)) {
        const auto& req = std::get<CompletionRequest>(r);
        if (req.prompt.empty() ||
            static_cast<int64_t>(req.prompt.size()) > limits().max_prompt_tokens) {
            __builtin_trap();
        }
        for (int32_t t : req.prompt) {
            if (t < 0 || t >= limits().vocab_size) {
                __builtin_trap();
            }
        }
        if (req.kv.remote_port < 0 || req.kv.remote_port > 65535) {
            __builtin_trap();
        }
    } else {
        checkError(std::get<ApiError>(r));
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    namespace http = boost::beast::http;
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    validate(bytes);
    validateTokenization(bytes);

    // Parse as a stream of pipelined requests, like a keep-alive session does.
    size_t offset = 0;
    for (int n = 0; n < 8 && offset < size; ++n) {
        http::request_parser<http::string_body> parser;
        parser.eager(true);
        parser.body_limit(1 << 20);
        parser.header_limit(16 * 1024);
        boost::beast::error_code ec;
        const size_t used = parser.put(boost::asio::buffer(data + offset, size - offset), ec);
        if (ec || !parser.is_done()) {
            return 0;  // incomplete or rejected: the session would answer 400/413 or wait
        }
        offset += used;
        const auto& req = parser.get();
        const auto method = req.method_string();  // boost::string_view in Boost 1.74
        const auto target = req.target();
        const auto route =
            atlas::bubbletea::classifyRoute(std::string_view(method.data(), method.size()),
                                            std::string_view(target.data(), target.size()));
        if (route.route == atlas::bubbletea::Route::kCompletions) {
            validate(req.body());
        }
        if (route.route == atlas::bubbletea::Route::kTokenize ||
            route.route == atlas::bubbletea::Route::kDetokenize) {
            validateTokenization(req.body());
        }
        if (route.route == atlas::bubbletea::Route::kKvPull &&
            (route.kv_id.empty() || route.kv_id.find('/') != std::string::npos)) {
            __builtin_trap();
        }
        if (used == 0) {
            break;
        }
    }
    return 0;
}
