#include "perf/bubbletea-load/options.h"

#include "options/help.h"

namespace atlas::bubbletea_load {
namespace {

using namespace options::kinds;

// http://HOST[:PORT][/path], kept as written.
struct HttpUrl : String {
    static constexpr const char* kType = "url";
    static std::optional<std::string> parse(std::string_view t) {
        std::string_view u = t.rfind("http://", 0) == 0 ? t.substr(7) : t;
        u = u.substr(0, u.find('/'));
        const size_t colon = u.rfind(':');
        const bool ok = !u.empty() && colon != 0 &&
                        (colon == std::string_view::npos ||
                         (options::parseUnsigned(u.substr(colon + 1)).value_or(0) - 1 < 65535));
        return ok ? std::optional<std::string>(std::string(t)) : std::nullopt;
    }
    static std::string accepted(int, int) { return "[http://]HOST[:PORT][/path]"; }
};
struct Distribution : String {
    static constexpr const char* kType = "distribution";
    static std::optional<std::string> parse(std::string_view t) {
        return parsePromptDist(t) ? std::optional<std::string>(std::string(t)) : std::nullopt;
    }
    static std::string accepted(int, int) {
        return "fixed:N, uniform:MIN:MAX or lognormal:MEDIAN:SIGMA";
    }
};
struct Endpoint : String {
    static constexpr const char* kType = "address";
    static std::optional<std::string> parse(std::string_view t) {
        auto hp = options::parseHostPort(t);
        return hp && hp->port != 0 ? std::optional<std::string>(std::string(t)) : std::nullopt;
    }
    static std::string accepted(int, int) { return "HOST:PORT"; }
};

#define ATLAS_LOAD_OPTIONS(X)                                                                \
    X("--url", HttpUrl, url, 0, 0, "URL", "server")                                          \
    X("--model", String, model, 0, 0, "NAME",                                                \
      "model field (default: the first of GET /v1/models)")                                  \
    X("--rate", Double, rate, 0.001, 1e9, "R", "mean arrivals per second (Poisson)")         \
    X("--duration", Double, duration_s, 0.001, 1e7, "S", "measured seconds (after warm-up)") \
    X("--warmup", Double, warmup_s, 0, 1e7, "S", "seconds of load before measuring")         \
    X("--connections", Uint, connections, 1, 65536, "N", "keep-alive connections")           \
    X("--prompt-dist", Distribution, prompt_dist, 0, 0, "D", "prompt lengths")               \
    X("--max-prompt", Uint, max_prompt, 1, int64_t{1} << 31, "N",                            \
      "clamp prompt lengths to [1, N]")                                                      \
    X("--vocab", Uint, vocab, 1, int64_t{1} << 31, "N", "token ids are uniform in [0, N)")   \
    X("--slo-ms", Double, slo_ms, 0, 1e9, "MS", "TTFT SLO for goodput")                      \
    X("--ttft-deadline-ms", Double, ttft_deadline_ms, 0, 1e9, "MS",                          \
      "send ttft_deadline_ms (0: use the server's default)")                                 \
    X("--kv-push", Endpoint, kv_push, 0, 0, "HOST:PORT",                                     \
      "ask for the KV cache to be pushed there (kv-sink)")                                   \
    X("--kv-pull", Switch, kv_pull, 0, 0, "",                                                \
      "ask for remote decode without an endpoint (pull mode)")                               \
    X("--seed", Uint, seed, 0, UINT64_MAX, "N", "RNG seed")                                  \
    X("--timeout", Double, timeout_s, 0.001, 1e7, "S", "per-request timeout")                \
    X("--json", Path, json_path, 0, 0, "FILE", "write results as JSON")                      \
    X("--help", Switch, help, 0, 0, "", "this text")

#define ATLAS_LOAD_ALIASES(X) X("-h", "--help", false)

}  // namespace

std::optional<PromptDist> parsePromptDist(std::string_view text) {
    const auto parts = options::split(text, ':');
    PromptDist d;
    d.kind = std::string(parts[0]);
    const bool two = d.kind == "uniform" || d.kind == "lognormal";
    if (parts.size() != (two ? 3u : 2u) || (!two && d.kind != "fixed")) {
        return std::nullopt;
    }
    const auto a = options::parseDouble(parts[1]);
    const auto b = two ? options::parseDouble(parts[2]) : std::optional<double>(1);
    if (!a || !b || *a < 1 || *b <= 0) {
        return std::nullopt;
    }
    d.a = *a;
    d.b = *b;
    return d;
}

const options::Table<Options>& optionTable() {
    static const auto t = ATLAS_OPTIONS_TABLE(Options, ATLAS_LOAD_OPTIONS, ATLAS_LOAD_ALIASES);
    return t;
}

std::string usageText() {
    return "bubbletea-load: open-loop Poisson load for bubbletea's POST /v1/completions\n\n" +
           options::flagHelp(optionTable());
}

Result<Options> parseOptions(const std::vector<std::string>& args) {
    options::Parsed<Options> p;
    options::readArgs(optionTable(), args, &p);
    for (const std::string& w : p.positional) {
        p.errors.push_back("unexpected argument '" + w + "' (see --help)");
    }
    ATLAS_RETURN_IF_ERROR(p.status());
    Options& o = p.config;
    std::string u = o.url.rfind("http://", 0) == 0 ? o.url.substr(7) : o.url;
    u = u.substr(0, u.find('/'));
    const size_t colon = u.rfind(':');
    o.host = u.substr(0, colon);
    o.port = colon == std::string::npos ? "80" : u.substr(colon + 1);
    return o;
}

}  // namespace atlas::bubbletea_load
