#include "bubbletea/daemon/config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "channel/local_rank.h"
#include "options/help.h"
#include "options/table.h"

namespace atlas::options {
template <>
struct EnumChoices<bubbletea::DrainMode> {
    static constexpr EnumChoice<bubbletea::DrainMode> kValues[] = {
        {"finish", bubbletea::DrainMode::kFinish}, {"reject", bubbletea::DrainMode::kReject}};
};
template <>
struct EnumChoices<bubbletea::ChecksumKind> {
    static constexpr EnumChoice<bubbletea::ChecksumKind> kValues[] = {
        {"crc32c", bubbletea::ChecksumKind::kCrc32c}, {"sha256", bubbletea::ChecksumKind::kSha256}};
};
}  // namespace atlas::options

namespace atlas::bubbletea {
namespace {

using namespace options::kinds;

struct WeightDtypes {
    static constexpr options::EnumChoice<DType> kValues[] = {
        {"bf16", DType::kBF16}, {"f32", DType::kF32}, {"f16", DType::kF16}};
};
struct KvDtypes {
    static constexpr options::EnumChoice<DType> kValues[] = {{"bf16", DType::kBF16},
                                                             {"f32", DType::kF32},
                                                             {"bfloat16", DType::kBF16},
                                                             {"float32", DType::kF32}};
};
using WeightDtype = Enum<DType, WeightDtypes>;
using KvDtype = Enum<DType, KvDtypes>;
using EngineKindKind =
    NamedEnum<EngineKind, &engineKindName, EngineKind::kCpu, EngineKind::kCuda, EngineKind::kNull>;

// What --windows sets: the mode and, for duty cycles, its timing.
struct Windows {
    WindowMode mode = WindowMode::kChannel;
    Nanos period_ns = 0;
    Nanos open_ns = 0;
    Nanos offset_ns = 0;
};

// channel | always | duty:PERIOD_MS:OPEN_MS[:OFFSET_MS] (OPEN_MS <= PERIOD_MS).
struct WindowsKind : Base {
    using Value = Windows;
    static constexpr const char* kType = "windows";
    static std::optional<Windows> parse(std::string_view t) {
        if (t == "channel" || t == "always") {
            return Windows{t == "channel" ? WindowMode::kChannel : WindowMode::kAlways};
        }
        if (t.rfind("duty:", 0) != 0) {
            return std::nullopt;
        }
        const auto parts = options::split(t.substr(5), ':');
        if (parts.size() != 2 && parts.size() != 3) {
            return std::nullopt;
        }
        const auto period = Millis::parse(parts[0]);
        const auto open = Millis::parse(parts[1]);
        const auto offset = parts.size() == 3 ? Millis::parse(parts[2]) : std::optional<Nanos>(0);
        if (!period || !open || !offset || !Millis::inRange(*period, 0.01, 3.6e6) ||
            !Millis::inRange(*open, 0.001, 3.6e6) || !Millis::inRange(*offset, 0, 3.6e6) ||
            *open > *period) {
            return std::nullopt;
        }
        return Windows{WindowMode::kDuty, *period, *open, *offset};
    }
    static std::string accepted(int, int) {
        return "channel, always or duty:PERIOD_MS:OPEN_MS[:OFFSET_MS] with OPEN_MS <= PERIOD_MS";
    }
    static std::string format(const Windows& w) {
        if (w.mode != WindowMode::kDuty) {
            return w.mode == WindowMode::kChannel ? "channel" : "always";
        }
        return "duty:" + Millis::format(w.period_ns) + ":" + Millis::format(w.open_ns) + ":" +
               Millis::format(w.offset_ns);
    }
};
// --no-channel: --windows always.
struct NoChannel : WindowsKind {
    static constexpr const char* kType = "switch";
    static constexpr bool kTakesValue = false;
    static Windows switched() { return Windows{WindowMode::kAlways}; }
    static std::string format(const Windows&) { return ""; }
};

// [tcp://]HOST:PORT[/], kept as written (validated here, split by parseHostPort).
struct Endpoint : String {
    static constexpr const char* kType = "address";
    static std::optional<std::string> parse(std::string_view t) {
        std::string host;
        uint16_t port = 0;
        return parseHostPort(std::string(t), &host, &port).isOk() && port != 0
                   ? std::optional<std::string>(std::string(t))
                   : std::nullopt;
    }
    static std::string accepted(int, int) { return "[tcp://]HOST:PORT with PORT 1..65535"; }
};
struct HttpUrl : String {
    static constexpr const char* kType = "url";
    static std::optional<std::string> parse(std::string_view t) {
        return t.rfind("http://", 0) == 0 && t.size() > 7
                   ? std::optional<std::string>(std::string(t))
                   : std::nullopt;
    }
    static std::string accepted(int, int) { return "an http:// URL"; }
};
// A,B,C: the cost model's coefficients, each a number in lo..hi.
struct CostTriple : List<Double> {
    static constexpr const char* kType = "coefficients";
    static std::optional<Value> parse(std::string_view t) {
        auto v = List<Double>::parse(t);
        return v && v->size() == 3 ? v : std::nullopt;
    }
    static std::string accepted(double lo, double hi) {
        return "A,B,C: three numbers in " + options::formatDouble(lo) + ".." +
               options::formatDouble(hi);
    }
};
struct LogLevelText : String {
    static constexpr const char* kType = "enum";
    static std::optional<std::string> parse(std::string_view t) {
        return t == "warn" || t == "info" || t == "trace"
                   ? std::optional<std::string>(std::string(t))
                   : std::nullopt;
    }
    static std::string accepted(int, int) { return "one of warn|info|trace"; }
};
// A fraction 0..1 stored in parts per million.
struct Ppm : Base {
    using Value = uint32_t;
    using Bound = double;
    static constexpr const char* kType = "number";
    static std::optional<uint32_t> parse(std::string_view t) {
        auto v = options::parseDouble(t);
        return v && *v >= 0 && *v <= 4000 ? std::optional<uint32_t>(std::lround(*v * 1e6))
                                          : std::nullopt;
    }
    static bool inRange(uint32_t v, double lo, double hi) { return v >= lo * 1e6 && v <= hi * 1e6; }
    static std::string accepted(double lo, double hi) {
        return "a number in " + options::formatDouble(lo) + ".." + options::formatDouble(hi);
    }
    static std::string format(uint32_t v) { return options::formatDouble(v / 1e6); }
};

// The parse target: the daemon's config plus the flags that do not map 1:1 onto a field.
struct DaemonFlags {
    DaemonConfig config;
    options::HostPort listen{DaemonConfig{}.listen_host, DaemonConfig{}.listen_port};
    Windows windows;
    std::string config_file;
    std::string auth_key_file;
    bool help = false;
};

#define ATLAS_BUBBLETEA_OPTIONS(X)                                                                 \
    X("--config", Path, config_file, 0, 0, "FILE",                                                 \
      "JSON file of flag-name -> value, applied before the other flags")                           \
    X("--help", Switch, help, 0, 0, "", "print this help and exit")                                \
    X("--log-level", LogLevelText, config.log_level, 0, 0, "LEVEL", "log verbosity")               \
    X("--listen", Address, listen, 0, 0, "HOST:PORT", "HTTP listen address (port 0: ephemeral)")   \
    X("--port-file", Path, config.port_file, 0, 0, "PATH",                                         \
      "write the bound HTTP port to PATH once listening")                                          \
    X("--http-threads", Uint, config.http_threads, 1, 256, "N", "io_context threads serving HTTP") \
    X("--body-limit-bytes", Size, config.body_limit_bytes, 1024, uint64_t{1} << 32, "N",           \
      "largest request body accepted (larger: 413)")                                               \
    X("--read-timeout-ms", Millis, config.read_timeout_ns, 1, 3.6e6, "MS",                         \
      "time allowed to receive one request after its first byte")                                  \
    X("--idle-timeout-ms", Millis, config.idle_timeout_ns, 1, 3.6e6, "MS",                         \
      "keep-alive connections idle this long are closed")                                          \
    X("--max-connections", Uint, config.max_connections, 1, 1000000, "N",                          \
      "open connections beyond this are refused with 503")                                         \
    X("--drain-timeout-ms", Millis, config.drain_timeout_ns, 0, 3.6e6, "MS",                       \
      "SIGTERM: how long queued work may take before it is failed")                                \
    X("--drain", Enum<DrainMode>, config.drain_mode, 0, 0, "MODE",                                 \
      "SIGTERM: finish (run queued requests) or reject (fail them with 503)")                      \
    X("--model-dir", Path, config.model_dir, 0, 0, "DIR",                                          \
      "Hugging Face Llama model directory (config.json + safetensors)")                            \
    X("--random-weights", String, config.random_weights, 0, 0, "SHAPE",                            \
      "random weights of a shape preset instead of --model-dir (tiny, small, llama-3.2-1b, "       \
      "llama-3.2-3b, llama-3-8b, llama-3.1-8b, llama-2-7b)")                                       \
    X("--tokenizer", Path, config.tokenizer, 0, 0, "FILE",                                         \
      "Hugging Face tokenizer.json for text prompts and /tokenize (default: the model dir's "      \
      "tokenizer.json, if any); with --random-weights it sets the vocabulary size")                \
    X("--random-dtype", WeightDtype, config.random_dtype, 0, 0, "DTYPE",                           \
      "weight dtype of --random-weights")                                                          \
    X("--seed", Uint, config.seed, 0, INT64_MAX, "N", "seed of --random-weights")                  \
    X("--model-name", String, config.model_name, 0, 0, "NAME",                                     \
      "served model name (default: model dir name or the shape)")                                  \
    X("--engine", EngineKindKind, config.engine, 0, 0, "KIND",                                     \
      "prefill engine; null: zero-cost test engine, a deterministic token and a tiny KV (for "     \
      "measuring HTTP overhead)")                                                                  \
    X("--compute-threads", Uint, config.engine_threads, 0, 1024, "N",                              \
      "cpu engine compute threads (0: all cores); not the KV transport's I/O threads")             \
    X("--cuda-device", Uint, config.cuda_device, 0, 1024, "N", "cuda engine device ordinal")       \
    X("--cuda-normal-priority", Off, config.cuda_low_priority, 0, 0, "",                           \
      "run the cuda engine on a default-priority stream (default: lowest priority)")               \
    X("--max-prompt-tokens", Uint, config.max_prompt_tokens, 0, int64_t{1} << 24, "N",             \
      "longest prompt (0: the model's context; larger: 413)")                                      \
    X("--engine-id", String, config.engine_id, 0, 0, "ID",                                         \
      "engine id reported in kv_transfer_params (default bubbletea-<host>-<pid>)")                 \
    X("--windows", WindowsKind, windows, 0, 0, "MODE",                                             \
      "channel: the bubble channel of this GPU; always: standalone, always open; duty: "           \
      "standalone, OPEN_MS of every PERIOD_MS, the first window OFFSET_MS after start-up")         \
    X("--no-channel", NoChannel, windows, 0, 0, "", "same as --windows always")                    \
    X("--channel", String, config.channel, 0, 0, "NAME",                                           \
      "bubble channel shm name; may contain {local_rank} (default: the channel rule's name for "   \
      "the local rank)")                                                                           \
    X("--local-rank", Int, config.local_rank, -1, channel::kMaxLocalRank, "N",                     \
      "local GPU rank whose channel to read; -1: the launcher's (LOCAL_RANK, Open MPI, Slurm, "    \
      "MPICH/PMI variables, as the plugin), else 0")                                               \
    X("--min-confidence", Ppm, config.min_confidence_ppm, 0, 1, "F",                               \
      "ignore predicted windows with confidence below F")                                          \
    X("--poll-us", WholeMicros, config.poll_ns, 10, 1000000, "US",                                 \
      "window poll and cancel-watch interval while work is queued")                                \
    X("--queue-limit", Uint, config.queue_limit, 1, 1000000, "N",                                  \
      "admitted requests waiting or running (more: 429)")                                          \
    X("--default-ttft-ms", Millis, config.default_ttft_ns, 0.001, 3.6e6, "MS",                     \
      "TTFT deadline of requests without ttft_deadline_ms")                                        \
    X("--min-chunk-tokens", Uint, config.min_chunk_tokens, 1, 1 << 20, "N",                        \
      "smallest chunk started unless it finishes the prompt")                                      \
    X("--max-chunk-tokens", Uint, config.max_chunk_tokens, 1, 1 << 24, "N", "largest chunk")       \
    X("--end-margin-us", Micros, config.end_margin_ns, 0, 1e7, "US",                               \
      "initial (and minimum) end margin the daemon keeps before each window's end (its own, "      \
      "after the plugin's ATLAS_BUBBLE_GUARD_US shrank the window)")                               \
    X("--max-end-margin-us", Micros, config.max_end_margin_ns, 0, 1e8, "US",                       \
      "ceiling of the overrun-driven end margin")                                                  \
    X("--end-margin-half-life-ms", Millis, config.end_margin_half_life_ns, 1, 3.6e6, "MS",         \
      "without overruns, the end margin's excess over its minimum halves this often")              \
    X("--error-margin", Double, config.error_margin, 0, 20, "K",                                   \
      "a chunk must fit with its predicted time stretched by K x the cost model's recent "         \
      "relative error (0: predicted time only)")                                                   \
    X("--profile-tokens", List<Int>, config.profile_tokens, 1, 1 << 20, "LIST",                    \
      "chunk sizes timed at start-up to fit the cost model")                                       \
    X("--profile-contexts", List<Int>, config.profile_contexts, 0, 1 << 24, "LIST",                \
      "contexts (cached tokens) the profile chunks run at")                                        \
    X("--profile-budget-ms", Millis, config.profile_budget_ns, 0, 3.6e6, "MS",                     \
      "stop profiling after this long (at least 2 samples run)")                                   \
    X("--cost-model", CostTriple, config.cost_model, 0, 1e15, "A,B,C",                             \
      "skip profiling: a (ns per chunk), b (ns per token), c (ns per attention pair)")             \
    X("--fallback-url", HttpUrl, config.fallback_url, 0, 0, "URL",                                 \
      "forward requests that cannot meet their deadline (or find the queue full) to this "         \
      "prefill server")                                                                            \
    X("--decode-url", Endpoint, config.decode_url, 0, 0, "HOST:PORT",                              \
      "default KV push endpoint (a kv-sink-compatible decode side) when a request's "              \
      "kv_transfer_params has no remote_host/remote_port")                                         \
    X("--kv-dtype", KvDtype, config.kv_dtype, 0, 0, "DTYPE", "dtype of exported KV caches")        \
    X("--kv-checksum", Enum<ChecksumKind>, config.kv_checksum, 0, 0, "ALG",                        \
      "KV payload integrity check")                                                                \
    X("--kv-timeout-ms", Millis, config.kv_timeout_ns, 1, 3.6e6, "MS",                             \
      "bound on one KV push (connect, send, ack)")                                                 \
    X("--kv-ttl-ms", Millis, config.kv_ttl_ns, 1, 3.6e6, "MS",                                     \
      "how long a KV cache kept for pull (GET /v1/kv/{id}) lives")                                 \
    X("--kv-store-bytes", Size, config.kv_store_bytes, 0, INT64_MAX, "N",                          \
      "memory for KV caches kept for pull (oldest evicted first)")                                 \
    X("--auth-key", Secret, config.auth_key, 0, 0, "KEY",                                          \
      "transport HMAC key shared with the decode side (KV push)")                                  \
    X("--auth-key-file", Path, auth_key_file, 0, 0, "PATH", "read --auth-key from a file")         \
    X("--transport-streams", Uint, config.transport_streams, 0, 64, "N",                           \
      "TCP streams per KV connection (0: from the RTT)")

#define ATLAS_BUBBLETEA_ALIASES(X)                                            \
    X("-h", "--help", false)                                                  \
    X("--engine-threads", "--compute-threads", true)                          \
    X("--guard-band-us", "--end-margin-us", options::kRenamed)                \
    X("--max-guard-band-us", "--max-end-margin-us", options::kRenamed)        \
    X("--guard-half-life-ms", "--end-margin-half-life-ms", options::kRenamed) \
    X("ATLAS_BUBBLE_CHANNEL", "--channel", false)                             \
    X("ATLAS_LOCAL_RANK", "--local-rank", false)

const options::Table<DaemonFlags>& table() {
    static const auto t =
        ATLAS_OPTIONS_TABLE(DaemonFlags, ATLAS_BUBBLETEA_OPTIONS, ATLAS_BUBBLETEA_ALIASES);
    return t;
}

DaemonFlags flagsOf(const DaemonConfig& c) {
    DaemonFlags f;
    f.config = c;
    f.listen = {c.listen_host, c.listen_port};
    f.windows = {c.window_mode, c.duty_period_ns, c.duty_open_ns, c.duty_offset_ns};
    return f;
}

void unpack(const DaemonFlags& f, DaemonConfig* c) {
    *c = f.config;
    c->listen_host = f.listen.host;
    c->listen_port = f.listen.port;
    c->window_mode = f.windows.mode;
    if (f.windows.mode == WindowMode::kDuty) {
        c->duty_period_ns = f.windows.period_ns;
        c->duty_open_ns = f.windows.open_ns;
        c->duty_offset_ns = f.windows.offset_ns;
    }
}

Result<std::string> readText(const std::string& flag, const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return Status{Code::kInvalidArgument, flag + ": cannot read '" + path + "'"};
    }
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Applies a JSON document onto `into` (keys: flag names without "--").
void applyJson(const std::string& text, const std::string& source,
               options::Parsed<DaemonFlags>* into) {
    const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
        into->errors.push_back(source + ": not a JSON object");
        return;
    }
    for (auto it = doc.begin(); it != doc.end(); ++it) {
        const std::string name = "--" + it.key();
        const options::Option<DaemonFlags>* o = table().find(name);
        if (o == nullptr || o->name == "--config" || o->name == "--help") {
            const std::string_view to = table().renamedTo(name);
            into->errors.push_back(source + ": " +
                                   (to.empty() ? "unknown key '" + it.key() + "'"
                                               : "key '" + it.key() + "' was renamed: use '" +
                                                     std::string(to.substr(2)) + "'"));
            continue;
        }
        std::string value;
        const auto& v = it.value();
        if (v.is_string()) {
            value = v.get<std::string>();
        } else if (v.is_boolean() && !o->takes_value) {
            if (!v.get<bool>()) {
                continue;  // a switch set to false: leave the default
            }
        } else if (v.is_boolean()) {
            value = v.get<bool>() ? "true" : "false";
        } else if (v.is_number_integer()) {
            value = std::to_string(v.get<int64_t>());
        } else if (v.is_number()) {
            value = options::formatDouble(v.get<double>());
        } else if (v.is_array() && std::all_of(v.begin(), v.end(), [](const auto& x) {
                       return x.is_number_integer();
                   })) {
            for (size_t i = 0; i < v.size(); ++i) {
                value += (i ? "," : "") + std::to_string(v[i].get<int64_t>());
            }
        } else {
            into->errors.push_back(source + ": unsupported value for '" + it.key() + "'");
            continue;
        }
        const size_t before = into->errors.size();
        options::applyNamed(table(), name, value, into);
        for (size_t i = before; i < into->errors.size(); ++i) {
            into->errors[i] = source + ": " + into->errors[i];
        }
    }
}

}  // namespace

const char* engineKindName(EngineKind kind) {
    switch (kind) {
        case EngineKind::kCpu:
            return "cpu";
        case EngineKind::kCuda:
            return "cuda";
        case EngineKind::kNull:
            return "null";
    }
    return "?";
}

Status parseHostPort(const std::string& text, std::string* host, uint16_t* port) {
    std::string_view t = text;
    if (t.rfind("tcp://", 0) == 0) {
        t.remove_prefix(6);
    }
    if (!t.empty() && t.back() == '/') {
        t.remove_suffix(1);
    }
    const auto hp = options::parseHostPort(t);
    if (!hp) {
        return {Code::kInvalidArgument, "expected [tcp://]HOST:PORT, got '" + text + "'"};
    }
    *host = hp->host;
    *port = hp->port;
    return Status::ok();
}

Status applyConfigJson(const std::string& text, const std::string& source, DaemonConfig* config) {
    options::Parsed<DaemonFlags> p;
    p.config = flagsOf(*config);
    applyJson(text, source, &p);
    ATLAS_RETURN_IF_ERROR(p.status());
    unpack(p.config, config);
    return Status::ok();
}

Result<ParsedArgs> parseDaemonArgs(int argc, const char* const* argv, const EnvLookup& env) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    options::Parsed<DaemonFlags> p;
    if (env) {
        options::readEnv(table(), env, &p);
    }
    // The flags once to find --config, whose file applies under them; then the flags again.
    options::Parsed<DaemonFlags> first = p;
    options::readArgs(table(), args, &first);
    if (!first.config.help && !first.config.config_file.empty() && first.errors.empty()) {
        auto text = readText("--config", first.config.config_file);
        if (!text.isOk()) {
            p.errors.push_back(text.status().message());
        } else {
            applyJson(text.value(), first.config.config_file, &p);
        }
    }
    options::readArgs(table(), args, &p);
    for (const std::string& word : p.positional) {
        p.errors.push_back("unexpected argument '" + word + "' (see --help)");
    }
    ParsedArgs out;
    out.help = p.config.help;
    out.warnings = p.warnings;
    if (out.help) {
        return out;
    }
    if (!p.config.auth_key_file.empty()) {
        auto key = readText("--auth-key-file", p.config.auth_key_file);
        std::string k = key.isOk() ? key.value() : "";
        while (!k.empty() && (k.back() == '\n' || k.back() == '\r')) {
            k.pop_back();
        }
        if (!key.isOk() || k.empty()) {
            p.errors.push_back("--auth-key-file: cannot read a key from '" +
                               p.config.auth_key_file + "'");
        }
        p.config.config.auth_key = k;
    }
    const EnvLookup none = [](const char*) -> const char* { return nullptr; };
    auto rank = channel::resolveLocalRank(p.config.config.local_rank, env ? env : none);
    if (!rank.isOk()) {
        p.errors.push_back(rank.status().message());
    } else {
        p.config.config.local_rank = rank.value().rank;
    }
    ATLAS_RETURN_IF_ERROR(p.status());
    unpack(p.config, &out.config);
    return out;
}

std::string daemonHelp() {
    return "bubbletea: prefill-as-a-service inside predicted GPU idle windows\n"
           "\n"
           "usage: bubbletea (--model-dir DIR | --random-weights SHAPE) [flags]\n"
           "\n"
           "Serves POST /v1/completions (OpenAI subset with kv_transfer_params, max_tokens=1),\n"
           "GET /v1/models, /healthz, /metrics and /v1/kv/{id}. Prefill runs only inside the\n"
           "windows of the GPU's bubble channel (or a standalone --windows mode). "
           "docs/bubbletea.md\n"
           "has the API, the scheduler and the KV hand-off protocol.\n"
           "\n"
           "flags (FLAG VALUE or FLAG=VALUE; config-file keys are the names without '--'):\n" +
           options::flagHelp(table()) +
           "\nenvironment (read only when the matching flag is absent):\n" +
           options::envHelp(table()) +
           "\nsignals: SIGTERM/SIGINT drain (stop accepting, finish or reject queued work, exit "
           "0).\n";
}

std::string daemonFlagsMarkdown() {
    return options::markdown(table());
}

Status validateDaemonConfig(const DaemonConfig& c) {
    if (c.model_dir.empty() == c.random_weights.empty() && c.engine != EngineKind::kNull) {
        return {Code::kInvalidArgument,
                "give exactly one of --model-dir DIR or --random-weights SHAPE"};
    }
    if (!c.model_dir.empty() && !c.random_weights.empty()) {
        return {Code::kInvalidArgument, "--model-dir and --random-weights are exclusive"};
    }
    if (c.min_chunk_tokens > c.max_chunk_tokens) {
        return {Code::kInvalidArgument, "--min-chunk-tokens exceeds --max-chunk-tokens"};
    }
    if (c.max_end_margin_ns < c.end_margin_ns) {
        return {Code::kInvalidArgument, "--max-end-margin-us is below --end-margin-us"};
    }
    if (c.log_level != "warn" && c.log_level != "info" && c.log_level != "trace") {
        return {Code::kInvalidArgument, "--log-level: expected warn, info or trace"};
    }
    if (!c.cost_model.empty() && c.cost_model.size() != 3) {
        return {Code::kInvalidArgument, "--cost-model: expected A,B,C"};
    }
    if (!c.decode_url.empty()) {
        std::string host;
        uint16_t port = 0;
        Status st = parseHostPort(c.decode_url, &host, &port);
        if (!st.isOk() || port == 0) {
            return {Code::kInvalidArgument,
                    "--decode-url: expected HOST:PORT, got '" + c.decode_url + "'"};
        }
    }
    if (!c.fallback_url.empty() && c.fallback_url.rfind("http://", 0) != 0) {
        return {Code::kInvalidArgument, "--fallback-url: only http:// URLs are supported"};
    }
    return Status::ok();
}

}  // namespace atlas::bubbletea
