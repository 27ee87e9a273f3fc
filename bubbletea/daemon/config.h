// The daemon's configuration: one plain struct, filled from the environment
// (ATLAS_BUBBLE_CHANNEL, ATLAS_LOCAL_RANK: the plugin's variables), a JSON config file
// (--config FILE) and command-line flags, in that order (flags win). Every flag is one entry
// of config.cc's options table (options/table.h), which also produces --help and the flag
// table of docs/bubbletea.md, so the documentation cannot drift from what is parsed. JSON
// keys are the flag names without the leading "--" (e.g. {"listen": "0.0.0.0:8100",
// "engine": "cpu"}). The local rank follows the plugin's rule (channel/local_rank.h), so the
// daemon reads the channel the plugin of its GPU writes.
//
// Threads: plain values; parsing is pure apart from reading the config and key files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/env.h"
#include "atlas/common/status.h"
#include "bubbletea/engine/dtype.h"

namespace atlas::bubbletea {

enum class EngineKind { kCpu, kCuda, kNull };
enum class WindowMode {
    kChannel,  // the bubble channel of this GPU (default)
    kAlways,   // standalone: always open
    kDuty,     // standalone: fixed duty cycle
};
enum class DrainMode { kFinish, kReject };
enum class ChecksumKind : uint8_t { kCrc32c = 1, kSha256 = 2 };

struct DaemonConfig {
    // HTTP
    std::string listen_host = "127.0.0.1";
    uint16_t listen_port = 8100;  // 0: ephemeral (see port_file)
    std::string port_file;        // write the bound port here once listening
    int http_threads = 2;
    size_t body_limit_bytes = 4 * 1024 * 1024;
    Nanos read_timeout_ns = 10 * kNsPerSec;  // reading one request once its first byte came
    Nanos idle_timeout_ns = 60 * kNsPerSec;  // keep-alive connection with no request
    size_t max_connections = 1024;
    Nanos drain_timeout_ns = 30 * kNsPerSec;  // SIGTERM: finish queued work within this
    DrainMode drain_mode = DrainMode::kFinish;

    // Model and engine
    std::string model_dir;       // Hugging Face directory (config.json + safetensors)
    std::string random_weights;  // or a shape preset with random weights
    std::string tokenizer;       // tokenizer.json; default <model_dir>/tokenizer.json if present
    DType random_dtype = DType::kBF16;
    uint64_t seed = 1;
    std::string model_name;  // served name; default: model dir basename / random shape
    EngineKind engine = EngineKind::kCpu;
    int engine_threads = 0;  // cpu engine compute threads (--compute-threads); 0 = all cores
    int cuda_device = 0;
    bool cuda_low_priority = true;
    int64_t max_prompt_tokens = 0;  // 0: the model's max_position_embeddings
    std::string engine_id;          // default "bubbletea-<host>-<pid>"

    // Windows
    WindowMode window_mode = WindowMode::kChannel;
    std::string channel;  // shm name; may contain "{local_rank}"; default per rank
    int local_rank = -1;  // -1: the launcher's (channel/local_rank.h), resolved by parsing
    Nanos duty_period_ns = 50 * kNsPerMs;
    Nanos duty_open_ns = 20 * kNsPerMs;
    Nanos duty_offset_ns = 0;  // the first window opens this long after start-up
    uint32_t min_confidence_ppm = 0;
    Nanos poll_ns = 1 * kNsPerMs;  // window poll / cancel watcher interval while busy

    // Scheduler and cost model
    size_t queue_limit = 64;
    Nanos default_ttft_ns = 2 * kNsPerSec;
    int64_t min_chunk_tokens = 16;
    int64_t max_chunk_tokens = 2048;
    Nanos end_margin_ns = 300 * kNsPerUs;
    Nanos max_end_margin_ns = 50 * kNsPerMs;
    Nanos end_margin_half_life_ns = 10 * kNsPerSec;
    double error_margin = 2.0;
    std::vector<int64_t> profile_tokens = {16, 64, 256};
    std::vector<int64_t> profile_contexts = {0, 512};
    Nanos profile_budget_ns = 20 * kNsPerSec;
    std::vector<double> cost_model;  // {a_ns, b_ns, c_ns}: skip profiling; empty: profile

    // Fallback and KV hand-off
    std::string fallback_url;  // http://host:port[/path]
    std::string decode_url;    // default push endpoint: [tcp://]host:port
    DType kv_dtype = DType::kBF16;
    ChecksumKind kv_checksum = ChecksumKind::kCrc32c;
    Nanos kv_timeout_ns = 10 * kNsPerSec;
    Nanos kv_ttl_ns = 30 * kNsPerSec;
    uint64_t kv_store_bytes = 4ull << 30;
    std::string auth_key;  // transport HMAC key (or auth_key_file)
    int transport_streams = 0;

    std::string log_level = "info";  // warn | info | trace
};

const char* engineKindName(EngineKind kind);

struct ParsedArgs {
    DaemonConfig config;
    bool help = false;
    std::vector<std::string> warnings;  // deprecated spellings in use
};

// Parses argv (argv[0] skipped) over the environment `env` (none when empty). Applies
// --config FILE first wherever it appears, then the flags, then resolves the local rank
// (--local-rank, else ATLAS_LOCAL_RANK, else the launcher's variables). Errors
// (kInvalidArgument) name the flag and the accepted values, all of them at once.
Result<ParsedArgs> parseDaemonArgs(int argc, const char* const* argv, const EnvLookup& env = {});

// Applies one JSON config document (an object of flag-name -> value).
Status applyConfigJson(const std::string& text, const std::string& source, DaemonConfig* config);

// The --help text: usage, every flag with its default and meaning, and the environment.
std::string daemonHelp();
// The flag table of docs/bubbletea.md, generated from the registry.
std::string daemonFlagsMarkdown();

// Checks cross-field constraints (a model source, ports, chunk bounds, ...).
Status validateDaemonConfig(const DaemonConfig& config);

// "host:port", "tcp://host:port" or "[v6]:port", optional trailing '/' -> (host, port).
Status parseHostPort(const std::string& text, std::string* host, uint16_t* port);

}  // namespace atlas::bubbletea
