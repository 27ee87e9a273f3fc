#include "perf/kv-sink/options.h"

#include <fstream>
#include <iterator>

#include "options/help.h"

namespace atlas::kvsink {
namespace {

using namespace options::kinds;

// [tcp://]HOST:PORT, kept as written.
struct Endpoint : String {
    static constexpr const char* kType = "address";
    static std::optional<std::string> parse(std::string_view t) {
        std::string_view hp = t.rfind("tcp://", 0) == 0 ? t.substr(6) : t;
        return options::parseHostPort(hp) ? std::optional<std::string>(std::string(t))
                                          : std::nullopt;
    }
    static std::string accepted(int, int) { return "[tcp://]HOST:PORT"; }
};
struct Checksum : String {
    static constexpr const char* kType = "enum";
    static std::optional<std::string> parse(std::string_view t) {
        return t == "crc32c" || t == "sha256" ? std::optional<std::string>(std::string(t))
                                              : std::nullopt;
    }
    static std::string accepted(int, int) { return "one of crc32c|sha256"; }
};

#define ATLAS_KVSINK_OPTIONS(X)                                                                    \
    X("--listen", Endpoint, listen, 0, 0, "HOST:PORT",                                             \
      "control port the daemon connects to (kv_transfer_params remote_host/remote_port or "        \
      "bubbletea --decode-url)")                                                                   \
    X("--auth-key", Secret, auth_key, 0, 0, "KEY",                                                 \
      "transport HMAC key; must match bubbletea --auth-key")                                       \
    X("--auth-key-file", Path, auth_key_file, 0, 0, "PATH", "read the key from a file")            \
    X("--expected-model", String, expected_model, 0, 0, "NAME",                                    \
      "nack transfers whose model id differs")                                                     \
    X("--max-bytes", Size, max_bytes, 1, uint64_t{1} << 50, "N", "nack payloads larger than this") \
    X("--count", Uint, count, 0, UINT64_MAX, "N",                                                  \
      "exit after N transfers (0: until SIGINT/SIGTERM)")                                          \
    X("--duration-s", Double, duration_s, 0, 1e9, "S", "exit after S seconds (0: no limit)")       \
    X("--timeout-ms", Uint, timeout_ms, 1, 3600000, "MS",                                          \
      "handshake and per-payload receive bound")                                                   \
    X("--json", Path, json_path, 0, 0, "FILE", "write the summary as JSON")                        \
    X("--quiet", Switch, quiet, 0, 0, "", "no per-transfer lines")                                 \
    X("--send-to", Endpoint, send_to, 0, 0, "HOST:PORT",                                           \
      "sender mode: push synthetic KV caches to a kv-sink")                                        \
    X("--size-mb", Double, size_mb, 0.000001, 1e6, "MB", "sender: payload size per transfer")      \
    X("--send-count", Uint, send_count, 1, 1000000000, "N", "sender: transfers")                   \
    X("--checksum", Checksum, checksum, 0, 0, "ALG", "sender: payload checksum")                   \
    X("--streams", Uint, streams, 0, 64, "N", "sender: transport streams (0: from the RTT)")       \
    X("--help", Switch, help, 0, 0, "", "this text")

#define ATLAS_KVSINK_ALIASES(X) X("-h", "--help", false)

}  // namespace

const options::Table<Options>& optionTable() {
    static const auto t = ATLAS_OPTIONS_TABLE(Options, ATLAS_KVSINK_OPTIONS, ATLAS_KVSINK_ALIASES);
    return t;
}

std::string usageText() {
    return "kv-sink: reference receiver for bubbletea KV pushes (and a synthetic sender)\n"
           "\n"
           "receiver: kv-sink [--listen HOST:PORT] [--auth-key KEY | --auth-key-file PATH] ...\n"
           "sender:   kv-sink --send-to HOST:PORT [--size-mb MB] [--send-count N] ...\n"
           "\n" +
           options::flagHelp(optionTable());
}

Result<Options> parseOptions(const std::vector<std::string>& args) {
    options::Parsed<Options> p;
    options::readArgs(optionTable(), args, &p);
    for (const std::string& w : p.positional) {
        p.errors.push_back("unexpected argument '" + w + "' (see --help)");
    }
    Options& o = p.config;
    if (!o.help && !o.auth_key_file.empty()) {
        std::ifstream in(o.auth_key_file, std::ios::binary);
        std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) {
            key.pop_back();
        }
        if (!in.good() && key.empty()) {
            p.errors.push_back("--auth-key-file: cannot read a key from '" + o.auth_key_file + "'");
        }
        o.auth_key = key;
    }
    ATLAS_RETURN_IF_ERROR(p.status());
    return o;
}

}  // namespace atlas::kvsink
