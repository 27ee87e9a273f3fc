#include "bubbletea/daemon/config.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

namespace atlas::bubbletea {
namespace {

using Setter = std::function<Status(const std::string& value, DaemonConfig* c)>;
using Getter = std::function<std::string(const DaemonConfig& c)>;

struct Flag {
    const char* name;  // without "--"
    const char* arg;   // nullptr: a switch (no value)
    const char* help;
    Setter set;
    Getter get;  // the default, shown in --help (nullptr: none)
};

Status invalid(const std::string& flag, const std::string& why) {
    return {Code::kInvalidArgument, "--" + flag + ": " + why};
}

Result<int64_t> parseInt(const std::string& flag, const std::string& v, int64_t lo, int64_t hi) {
    errno = 0;
    char* end = nullptr;
    const long long x = std::strtoll(v.c_str(), &end, 10);
    if (v.empty() || errno != 0 || end == nullptr || *end != '\0' || x < lo || x > hi) {
        return invalid(flag, "expected an integer in [" + std::to_string(lo) + ", " +
                                 std::to_string(hi) + "], got '" + v + "'");
    }
    return static_cast<int64_t>(x);
}

Result<double> parseDouble(const std::string& flag, const std::string& v, double lo, double hi) {
    errno = 0;
    char* end = nullptr;
    const double x = std::strtod(v.c_str(), &end);
    if (v.empty() || errno != 0 || end == nullptr || *end != '\0' || !std::isfinite(x) || x < lo ||
        x > hi) {
        std::ostringstream os;
        os << "expected a number in [" << lo << ", " << hi << "], got '" << v << "'";
        return invalid(flag, os.str());
    }
    return x;
}

Result<std::vector<int64_t>> parseIntList(const std::string& flag, const std::string& v, int64_t lo,
                                          int64_t hi) {
    std::vector<int64_t> out;
    std::stringstream ss(v);
    std::string item;
    while (std::getline(ss, item, ',')) {
        auto x = parseInt(flag, item, lo, hi);
        if (!x.isOk()) {
            return x.status();
        }
        out.push_back(x.value());
    }
    if (out.empty()) {
        return invalid(flag, "expected a comma-separated list");
    }
    return out;
}

std::string msText(Nanos ns) {
    std::ostringstream os;
    os << static_cast<double>(ns) / 1e6;
    return os.str();
}

std::string joinInts(const std::vector<int64_t>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
        s += (i ? "," : "") + std::to_string(v[i]);
    }
    return s;
}

// Helpers that build setters for common shapes.
Setter msSetter(const char* flag, Nanos DaemonConfig::*field, double lo_ms, double hi_ms) {
    return [=](const std::string& v, DaemonConfig* c) -> Status {
        auto x = parseDouble(flag, v, lo_ms, hi_ms);
        if (!x.isOk()) {
            return x.status();
        }
        c->*field = static_cast<Nanos>(std::llround(x.value() * 1e6));
        return Status::ok();
    };
}
Getter msGetter(Nanos DaemonConfig::*field) {
    return [=](const DaemonConfig& c) { return msText(c.*field); };
}
template <typename T>
Setter intSetter(const char* flag, T DaemonConfig::*field, int64_t lo, int64_t hi) {
    return [=](const std::string& v, DaemonConfig* c) -> Status {
        auto x = parseInt(flag, v, lo, hi);
        if (!x.isOk()) {
            return x.status();
        }
        c->*field = static_cast<T>(x.value());
        return Status::ok();
    };
}
template <typename T>
Getter intGetter(T DaemonConfig::*field) {
    return [=](const DaemonConfig& c) { return std::to_string(c.*field); };
}
Setter stringSetter(std::string DaemonConfig::*field) {
    return [=](const std::string& v, DaemonConfig* c) -> Status {
        c->*field = v;
        return Status::ok();
    };
}
Getter stringGetter(std::string DaemonConfig::*field) {
    return [=](const DaemonConfig& c) { return c.*field; };
}

Status setListen(const std::string& v, DaemonConfig* c) {
    return parseHostPort(v, &c->listen_host, &c->listen_port);
}

Status setEngine(const std::string& v, DaemonConfig* c) {
    if (v == "cpu") {
        c->engine = EngineKind::kCpu;
    } else if (v == "cuda") {
        c->engine = EngineKind::kCuda;
    } else if (v == "null") {
        c->engine = EngineKind::kNull;
    } else {
        return invalid("engine", "expected cpu, cuda or null, got '" + v + "'");
    }
    return Status::ok();
}

Status setWindows(const std::string& v, DaemonConfig* c) {
    if (v == "channel") {
        c->window_mode = WindowMode::kChannel;
        return Status::ok();
    }
    if (v == "always") {
        c->window_mode = WindowMode::kAlways;
        return Status::ok();
    }
    if (v.rfind("duty:", 0) == 0) {
        std::vector<std::string> parts;
        std::stringstream ss(v.substr(5));
        std::string item;
        while (std::getline(ss, item, ':')) {
            parts.push_back(item);
        }
        if (parts.size() != 2 && parts.size() != 3) {
            return invalid("windows",
                           "expected duty:PERIOD_MS:OPEN_MS[:OFFSET_MS], got '" + v + "'");
        }
        auto period = parseDouble("windows", parts[0], 0.01, 3.6e6);
        auto open = parseDouble("windows", parts[1], 0.001, 3.6e6);
        auto offset = parseDouble("windows", parts.size() == 3 ? parts[2] : "0", 0, 3.6e6);
        if (!period.isOk()) {
            return period.status();
        }
        if (!open.isOk()) {
            return open.status();
        }
        if (!offset.isOk()) {
            return offset.status();
        }
        if (open.value() > period.value()) {
            return invalid("windows", "OPEN_MS must not exceed PERIOD_MS");
        }
        c->window_mode = WindowMode::kDuty;
        c->duty_period_ns = static_cast<Nanos>(std::llround(period.value() * 1e6));
        c->duty_open_ns = static_cast<Nanos>(std::llround(open.value() * 1e6));
        c->duty_offset_ns = static_cast<Nanos>(std::llround(offset.value() * 1e6));
        return Status::ok();
    }
    return invalid(
        "windows",
        "expected channel, always or duty:PERIOD_MS:OPEN_MS[:OFFSET_MS], got '" + v + "'");
}

std::string windowsText(const DaemonConfig& c) {
    switch (c.window_mode) {
        case WindowMode::kChannel:
            return "channel";
        case WindowMode::kAlways:
            return "always";
        case WindowMode::kDuty:
            return "duty:" + msText(c.duty_period_ns) + ":" + msText(c.duty_open_ns) + ":" +
                   msText(c.duty_offset_ns);
    }
    return "?";
}

Status setKvDtype(const std::string& v, DaemonConfig* c) {
    if (v == "f32" || v == "F32" || v == "float32") {
        c->kv_dtype = DType::kF32;
    } else if (v == "bf16" || v == "BF16" || v == "bfloat16") {
        c->kv_dtype = DType::kBF16;
    } else {
        return invalid("kv-dtype", "expected f32 or bf16, got '" + v + "'");
    }
    return Status::ok();
}

Status setRandomDtype(const std::string& v, DaemonConfig* c) {
    if (v == "f32" || v == "F32") {
        c->random_dtype = DType::kF32;
    } else if (v == "bf16" || v == "BF16") {
        c->random_dtype = DType::kBF16;
    } else if (v == "f16" || v == "F16") {
        c->random_dtype = DType::kF16;
    } else {
        return invalid("random-dtype", "expected f32, bf16 or f16, got '" + v + "'");
    }
    return Status::ok();
}

Status setChecksum(const std::string& v, DaemonConfig* c) {
    if (v == "crc32c") {
        c->kv_checksum = ChecksumKind::kCrc32c;
    } else if (v == "sha256") {
        c->kv_checksum = ChecksumKind::kSha256;
    } else {
        return invalid("kv-checksum", "expected crc32c or sha256, got '" + v + "'");
    }
    return Status::ok();
}

Status setAuthKeyFile(const std::string& v, DaemonConfig* c) {
    std::ifstream in(v, std::ios::binary);
    if (!in) {
        return invalid("auth-key-file", "cannot read '" + v + "'");
    }
    std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) {
        key.pop_back();
    }
    if (key.empty()) {
        return invalid("auth-key-file", "'" + v + "' is empty");
    }
    c->auth_key = key;
    return Status::ok();
}

const std::vector<Flag>& flags() {
    static const std::vector<Flag> table = {
        // ---- general
        {"config", "FILE", "JSON file of flag-name -> value, applied before the other flags",
         nullptr, nullptr},
        {"help", nullptr, "print this help and exit", nullptr, nullptr},
        {"log-level", "LEVEL", "warn | info | trace", stringSetter(&DaemonConfig::log_level),
         stringGetter(&DaemonConfig::log_level)},
        // ---- HTTP
        {"listen", "HOST:PORT", "HTTP listen address (port 0: ephemeral)", setListen,
         [](const DaemonConfig& c) { return c.listen_host + ":" + std::to_string(c.listen_port); }},
        {"port-file", "PATH", "write the bound HTTP port to PATH once listening",
         stringSetter(&DaemonConfig::port_file), nullptr},
        {"http-threads", "N", "io_context threads serving HTTP",
         intSetter("http-threads", &DaemonConfig::http_threads, 1, 256),
         intGetter(&DaemonConfig::http_threads)},
        {"body-limit-bytes", "N", "largest request body accepted (larger: 413)",
         intSetter("body-limit-bytes", &DaemonConfig::body_limit_bytes, 1024, int64_t{1} << 32),
         intGetter(&DaemonConfig::body_limit_bytes)},
        {"read-timeout-ms", "MS", "time allowed to receive one request after its first byte",
         msSetter("read-timeout-ms", &DaemonConfig::read_timeout_ns, 1, 3.6e6),
         msGetter(&DaemonConfig::read_timeout_ns)},
        {"idle-timeout-ms", "MS", "keep-alive connections idle this long are closed",
         msSetter("idle-timeout-ms", &DaemonConfig::idle_timeout_ns, 1, 3.6e6),
         msGetter(&DaemonConfig::idle_timeout_ns)},
        {"max-connections", "N", "open connections beyond this are refused with 503",
         intSetter("max-connections", &DaemonConfig::max_connections, 1, 1000000),
         intGetter(&DaemonConfig::max_connections)},
        {"drain-timeout-ms", "MS", "SIGTERM: how long queued work may take before it is failed",
         msSetter("drain-timeout-ms", &DaemonConfig::drain_timeout_ns, 0, 3.6e6),
         msGetter(&DaemonConfig::drain_timeout_ns)},
        {"drain", "MODE", "SIGTERM: finish (run queued requests) | reject (fail them with 503)",
         [](const std::string& v, DaemonConfig* c) -> Status {
             if (v == "finish") {
                 c->drain_mode = DrainMode::kFinish;
             } else if (v == "reject") {
                 c->drain_mode = DrainMode::kReject;
             } else {
                 return invalid("drain", "expected finish or reject, got '" + v + "'");
             }
             return Status::ok();
         },
         [](const DaemonConfig& c) {
             return std::string(c.drain_mode == DrainMode::kFinish ? "finish" : "reject");
         }},
        // ---- model and engine
        {"model-dir", "DIR", "Hugging Face Llama model directory (config.json + safetensors)",
         stringSetter(&DaemonConfig::model_dir), nullptr},
        {"random-weights", "SHAPE",
         "random weights of a shape preset instead of --model-dir (tiny, small, llama-3.2-1b, "
         "llama-3.2-3b, llama-3-8b, llama-3.1-8b, llama-2-7b)",
         stringSetter(&DaemonConfig::random_weights), nullptr},
        {"tokenizer", "FILE",
         "Hugging Face tokenizer.json for text prompts and /tokenize (default: the model "
         "dir's tokenizer.json, if any); with --random-weights it sets the vocabulary size",
         stringSetter(&DaemonConfig::tokenizer), nullptr},
        {"random-dtype", "DTYPE", "weight dtype of --random-weights: f32 | bf16 | f16",
         setRandomDtype,
         [](const DaemonConfig& c) { return std::string(dtypeName(c.random_dtype)); }},
        {"seed", "N", "seed of --random-weights",
         intSetter("seed", &DaemonConfig::seed, 0, INT64_MAX), intGetter(&DaemonConfig::seed)},
        {"model-name", "NAME", "served model name (default: model dir name or the shape)",
         stringSetter(&DaemonConfig::model_name), nullptr},
        {"engine", "KIND",
         "cpu | cuda | null (null: zero-cost test engine, a deterministic token and a tiny KV; "
         "for measuring HTTP overhead)",
         setEngine, [](const DaemonConfig& c) { return std::string(engineKindName(c.engine)); }},
        {"engine-threads", "N", "cpu engine threads (0: all cores)",
         intSetter("engine-threads", &DaemonConfig::engine_threads, 0, 1024),
         intGetter(&DaemonConfig::engine_threads)},
        {"cuda-device", "N", "cuda engine device ordinal",
         intSetter("cuda-device", &DaemonConfig::cuda_device, 0, 1024),
         intGetter(&DaemonConfig::cuda_device)},
        {"cuda-normal-priority", nullptr,
         "run the cuda engine on a default-priority stream (default: lowest priority)",
         [](const std::string&, DaemonConfig* c) -> Status {
             c->cuda_low_priority = false;
             return Status::ok();
         },
         nullptr},
        {"max-prompt-tokens", "N", "longest prompt (default: the model's context; larger: 413)",
         intSetter("max-prompt-tokens", &DaemonConfig::max_prompt_tokens, 0, int64_t{1} << 24),
         intGetter(&DaemonConfig::max_prompt_tokens)},
        {"engine-id", "ID", "engine id reported in kv_transfer_params",
         stringSetter(&DaemonConfig::engine_id), nullptr},
        // ---- windows
        {"windows", "MODE",
         "channel (the bubble channel of this GPU) | always (standalone, always open) | "
         "duty:PERIOD_MS:OPEN_MS[:OFFSET_MS] (standalone: OPEN_MS of every PERIOD_MS, the "
         "first window OFFSET_MS after start-up)",
         setWindows, windowsText},
        {"no-channel", nullptr, "same as --windows always",
         [](const std::string&, DaemonConfig* c) -> Status {
             c->window_mode = WindowMode::kAlways;
             return Status::ok();
         },
         nullptr},
        {"channel", "NAME",
         "bubble channel shm name; may contain {local_rank} (default: $ATLAS_BUBBLE_CHANNEL, "
         "else the channel rule's name for --local-rank)",
         stringSetter(&DaemonConfig::channel), nullptr},
        {"local-rank", "N", "local GPU rank whose channel to read (default: $LOCAL_RANK, else 0)",
         intSetter("local-rank", &DaemonConfig::local_rank, 0, 4096), nullptr},
        {"min-confidence", "F", "ignore predicted windows with confidence below F (0..1)",
         [](const std::string& v, DaemonConfig* c) -> Status {
             auto x = parseDouble("min-confidence", v, 0, 1);
             if (!x.isOk()) {
                 return x.status();
             }
             c->min_confidence_ppm = static_cast<uint32_t>(std::lround(x.value() * 1e6));
             return Status::ok();
         },
         [](const DaemonConfig& c) { return std::to_string(c.min_confidence_ppm / 1e6); }},
        {"poll-us", "US", "window poll and cancel-watch interval while work is queued",
         [](const std::string& v, DaemonConfig* c) -> Status {
             auto x = parseInt("poll-us", v, 10, 1000000);
             if (!x.isOk()) {
                 return x.status();
             }
             c->poll_ns = x.value() * kNsPerUs;
             return Status::ok();
         },
         [](const DaemonConfig& c) { return std::to_string(c.poll_ns / kNsPerUs); }},
        // ---- scheduler and cost model
        {"queue-limit", "N", "admitted requests waiting or running (more: 429)",
         intSetter("queue-limit", &DaemonConfig::queue_limit, 1, 1000000),
         intGetter(&DaemonConfig::queue_limit)},
        {"default-ttft-ms", "MS", "TTFT deadline of requests without ttft_deadline_ms",
         msSetter("default-ttft-ms", &DaemonConfig::default_ttft_ns, 0.001, 3.6e6),
         msGetter(&DaemonConfig::default_ttft_ns)},
        {"min-chunk-tokens", "N", "smallest chunk started unless it finishes the prompt",
         intSetter("min-chunk-tokens", &DaemonConfig::min_chunk_tokens, 1, 1 << 20),
         intGetter(&DaemonConfig::min_chunk_tokens)},
        {"max-chunk-tokens", "N", "largest chunk",
         intSetter("max-chunk-tokens", &DaemonConfig::max_chunk_tokens, 1, 1 << 24),
         intGetter(&DaemonConfig::max_chunk_tokens)},
        {"guard-band-us", "US", "initial (and minimum) guard band before each window's end",
         [](const std::string& v, DaemonConfig* c) -> Status {
             auto x = parseDouble("guard-band-us", v, 0, 1e7);
             if (!x.isOk()) {
                 return x.status();
             }
             c->guard_ns = static_cast<Nanos>(x.value() * 1e3);
             return Status::ok();
         },
         [](const DaemonConfig& c) { return std::to_string(c.guard_ns / kNsPerUs); }},
        {"max-guard-band-us", "US", "ceiling of the overrun-driven guard band",
         [](const std::string& v, DaemonConfig* c) -> Status {
             auto x = parseDouble("max-guard-band-us", v, 0, 1e8);
             if (!x.isOk()) {
                 return x.status();
             }
             c->max_guard_ns = static_cast<Nanos>(x.value() * 1e3);
             return Status::ok();
         },
         [](const DaemonConfig& c) { return std::to_string(c.max_guard_ns / kNsPerUs); }},
        {"guard-half-life-ms", "MS",
         "without overruns, the guard band's excess over its minimum halves this often",
         msSetter("guard-half-life-ms", &DaemonConfig::guard_half_life_ns, 1, 3.6e6),
         msGetter(&DaemonConfig::guard_half_life_ns)},
        {"error-margin", "K",
         "a chunk must fit with its predicted time stretched by K x the cost model's recent "
         "relative error (0: predicted time only)",
         [](const std::string& v, DaemonConfig* c) -> Status {
             auto x = parseDouble("error-margin", v, 0, 20);
             if (!x.isOk()) {
                 return x.status();
             }
             c->error_margin = x.value();
             return Status::ok();
         },
         [](const DaemonConfig& c) { return std::to_string(c.error_margin); }},
        {"profile-tokens", "LIST", "chunk sizes timed at start-up to fit the cost model",
         [](const std::string& v, DaemonConfig* c) -> Status {
             auto x = parseIntList("profile-tokens", v, 1, 1 << 20);
             if (!x.isOk()) {
                 return x.status();
             }
             c->profile_tokens = x.value();
             return Status::ok();
         },
         [](const DaemonConfig& c) { return joinInts(c.profile_tokens); }},
        {"profile-contexts", "LIST", "contexts (cached tokens) the profile chunks run at",
         [](const std::string& v, DaemonConfig* c) -> Status {
             auto x = parseIntList("profile-contexts", v, 0, 1 << 24);
             if (!x.isOk()) {
                 return x.status();
             }
             c->profile_contexts = x.value();
             return Status::ok();
         },
         [](const DaemonConfig& c) { return joinInts(c.profile_contexts); }},
        {"profile-budget-ms", "MS", "stop profiling after this long (at least 2 samples run)",
         msSetter("profile-budget-ms", &DaemonConfig::profile_budget_ns, 0, 3.6e6),
         msGetter(&DaemonConfig::profile_budget_ns)},
        {"cost-model", "A,B,C",
         "skip profiling: a (ns per chunk), b (ns per token), c (ns per attention pair)",
         stringSetter(&DaemonConfig::cost_model), nullptr},
        // ---- fallback and KV hand-off
        {"fallback-url", "URL",
         "forward requests that cannot meet their deadline (or find the queue full) to this "
         "http:// prefill server",
         stringSetter(&DaemonConfig::fallback_url), nullptr},
        {"decode-url", "HOST:PORT",
         "default KV push endpoint (a kv-sink-compatible decode side) when a request's "
         "kv_transfer_params has no remote_host/remote_port",
         stringSetter(&DaemonConfig::decode_url), nullptr},
        {"kv-dtype", "DTYPE", "dtype of exported KV caches: f32 | bf16", setKvDtype,
         [](const DaemonConfig& c) { return std::string(dtypeName(c.kv_dtype)); }},
        {"kv-checksum", "ALG", "KV payload integrity check: crc32c | sha256", setChecksum,
         [](const DaemonConfig& c) {
             return std::string(c.kv_checksum == ChecksumKind::kCrc32c ? "crc32c" : "sha256");
         }},
        {"kv-timeout-ms", "MS", "bound on one KV push (connect, send, ack)",
         msSetter("kv-timeout-ms", &DaemonConfig::kv_timeout_ns, 1, 3.6e6),
         msGetter(&DaemonConfig::kv_timeout_ns)},
        {"kv-ttl-ms", "MS", "how long a KV cache kept for pull (GET /v1/kv/{id}) lives",
         msSetter("kv-ttl-ms", &DaemonConfig::kv_ttl_ns, 1, 3.6e6),
         msGetter(&DaemonConfig::kv_ttl_ns)},
        {"kv-store-bytes", "N", "memory for KV caches kept for pull (oldest evicted first)",
         intSetter("kv-store-bytes", &DaemonConfig::kv_store_bytes, 0, INT64_MAX),
         intGetter(&DaemonConfig::kv_store_bytes)},
        {"auth-key", "KEY", "transport HMAC key shared with the decode side (KV push)",
         stringSetter(&DaemonConfig::auth_key), nullptr},
        {"auth-key-file", "PATH", "read --auth-key from a file", setAuthKeyFile, nullptr},
        {"transport-streams", "N", "TCP streams per KV connection (0: from the RTT)",
         intSetter("transport-streams", &DaemonConfig::transport_streams, 0, 64),
         intGetter(&DaemonConfig::transport_streams)},
    };
    return table;
}

const Flag* findFlag(const std::string& name) {
    for (const auto& f : flags()) {
        if (name == f.name) {
            return &f;
        }
    }
    return nullptr;
}

Status applyFlag(const Flag& flag, const std::string& value, DaemonConfig* c) {
    if (!flag.set) {
        return Status::ok();
    }
    return flag.set(value, c);
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
    std::string t = text;
    if (t.rfind("tcp://", 0) == 0) {
        t = t.substr(6);
    }
    if (!t.empty() && t.back() == '/') {
        t.pop_back();
    }
    std::string h;
    std::string p;
    if (!t.empty() && t.front() == '[') {  // [v6]:port
        const size_t close = t.find(']');
        if (close == std::string::npos || close + 1 >= t.size() || t[close + 1] != ':') {
            return {Code::kInvalidArgument, "expected [HOST]:PORT, got '" + text + "'"};
        }
        h = t.substr(1, close - 1);
        p = t.substr(close + 2);
    } else {
        const size_t colon = t.rfind(':');
        if (colon == std::string::npos || colon == 0) {
            return {Code::kInvalidArgument, "expected HOST:PORT, got '" + text + "'"};
        }
        h = t.substr(0, colon);
        p = t.substr(colon + 1);
    }
    auto n = parseInt("port", p, 0, 65535);
    if (!n.isOk()) {
        return {Code::kInvalidArgument, "bad port in '" + text + "'"};
    }
    *host = h;
    *port = static_cast<uint16_t>(n.value());
    return Status::ok();
}

Status applyConfigJson(const std::string& text, const std::string& source, DaemonConfig* c) {
    const auto doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.is_object()) {
        return {Code::kInvalidArgument, source + ": not a JSON object"};
    }
    for (auto it = doc.begin(); it != doc.end(); ++it) {
        const Flag* flag = findFlag(it.key());
        if (flag == nullptr || std::string(flag->name) == "config" ||
            std::string(flag->name) == "help") {
            return {Code::kInvalidArgument, source + ": unknown key '" + it.key() + "'"};
        }
        std::string value;
        const auto& v = it.value();
        if (v.is_string()) {
            value = v.get<std::string>();
        } else if (v.is_boolean()) {
            if (flag->arg == nullptr) {
                if (!v.get<bool>()) {
                    continue;  // a switch set to false: leave the default
                }
            } else {
                value = v.get<bool>() ? "true" : "false";
            }
        } else if (v.is_number_integer()) {
            value = std::to_string(v.get<int64_t>());
        } else if (v.is_number()) {
            std::ostringstream os;
            os.precision(17);
            os << v.get<double>();
            value = os.str();
        } else if (v.is_array()) {
            for (size_t i = 0; i < v.size(); ++i) {
                if (!v[i].is_number_integer()) {
                    return {Code::kInvalidArgument,
                            source + ": '" + it.key() + "' must be a list of integers"};
                }
                value += (i ? "," : "") + std::to_string(v[i].get<int64_t>());
            }
        } else {
            return {Code::kInvalidArgument, source + ": unsupported value for '" + it.key() + "'"};
        }
        Status st = applyFlag(*flag, value, c);
        if (!st.isOk()) {
            return {st.code(), source + ": " + st.message()};
        }
    }
    return Status::ok();
}

Result<ParsedArgs> parseDaemonArgs(int argc, const char* const* argv) {
    ParsedArgs out;
    // Split "--name=value" / "--name value" first, so --config can be applied before the rest.
    std::vector<std::pair<const Flag*, std::string>> items;
    for (int i = 1; i < argc; ++i) {
        std::string arg = argv[i];
        if (arg == "-h") {
            arg = "--help";
        }
        if (arg.rfind("--", 0) != 0) {
            return Status{Code::kInvalidArgument, "unexpected argument '" + arg + "' (see --help)"};
        }
        std::string name = arg.substr(2);
        std::string value;
        bool has_value = false;
        const size_t eq = name.find('=');
        if (eq != std::string::npos) {
            value = name.substr(eq + 1);
            name = name.substr(0, eq);
            has_value = true;
        }
        const Flag* flag = findFlag(name);
        if (flag == nullptr) {
            return Status{Code::kInvalidArgument, "unknown flag --" + name + " (see --help)"};
        }
        if (flag->arg == nullptr) {
            if (has_value) {
                return Status{Code::kInvalidArgument, "--" + name + " takes no value"};
            }
        } else if (!has_value) {
            if (i + 1 >= argc) {
                return Status{Code::kInvalidArgument,
                              "--" + name + " needs a value (" + flag->arg + ")"};
            }
            value = argv[++i];
        }
        items.emplace_back(flag, value);
    }
    for (const auto& [flag, value] : items) {
        if (std::string(flag->name) == "help") {
            out.help = true;
        } else if (std::string(flag->name) == "config") {
            std::ifstream in(value, std::ios::binary);
            if (!in) {
                return Status{Code::kInvalidArgument, "--config: cannot read '" + value + "'"};
            }
            std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
            ATLAS_RETURN_IF_ERROR(applyConfigJson(text, value, &out.config));
        }
    }
    for (const auto& [flag, value] : items) {
        ATLAS_RETURN_IF_ERROR(applyFlag(*flag, value, &out.config));
    }
    return out;
}

std::string daemonHelp() {
    std::string out =
        "bubbletea: prefill-as-a-service inside predicted GPU idle windows\n"
        "\n"
        "usage: bubbletea (--model-dir DIR | --random-weights SHAPE) [flags]\n"
        "\n"
        "Serves POST /v1/completions (OpenAI subset with kv_transfer_params, max_tokens=1),\n"
        "GET /v1/models, /healthz, /metrics and /v1/kv/{id}. Prefill runs only inside the\n"
        "windows of the GPU's bubble channel (or a standalone --windows mode). docs/bubbletea.md\n"
        "has the API, the scheduler and the KV hand-off protocol.\n"
        "\n"
        "flags (FLAG VALUE or FLAG=VALUE; config-file keys are the names without '--'):\n";
    const DaemonConfig defaults;
    for (const auto& f : flags()) {
        std::string line = "  --" + std::string(f.name);
        if (f.arg != nullptr) {
            line += " " + std::string(f.arg);
        }
        if (line.size() < 30) {
            line.resize(30, ' ');
        } else {
            line += "\n" + std::string(30, ' ');
        }
        line += f.help;
        if (f.get) {
            const std::string d = f.get(defaults);
            if (!d.empty()) {
                line += " [" + d + "]";
            }
        }
        out += line + "\n";
    }
    out +=
        "\n"
        "environment (read only when the matching flag is absent):\n"
        "  ATLAS_BUBBLE_CHANNEL        channel name pattern, as for the NCCL plugin\n"
        "  LOCAL_RANK                  local rank (set by torchrun) for the channel name\n"
        "\n"
        "signals: SIGTERM/SIGINT drain (stop accepting, finish or reject queued work, exit 0).\n";
    return out;
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
    if (c.max_guard_ns < c.guard_ns) {
        return {Code::kInvalidArgument, "--max-guard-band-us is below --guard-band-us"};
    }
    if (c.log_level != "warn" && c.log_level != "info" && c.log_level != "trace") {
        return {Code::kInvalidArgument, "--log-level: expected warn, info or trace"};
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
    if (!c.cost_model.empty()) {
        std::stringstream ss(c.cost_model);
        std::string item;
        int n = 0;
        while (std::getline(ss, item, ',')) {
            auto x = parseDouble("cost-model", item, 0, 1e15);
            if (!x.isOk()) {
                return x.status();
            }
            ++n;
        }
        if (n != 3) {
            return {Code::kInvalidArgument, "--cost-model: expected A,B,C"};
        }
    }
    return Status::ok();
}

}  // namespace atlas::bubbletea
