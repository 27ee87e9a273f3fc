// bubbletea-load's command line: one options table (options.cc) that also produces --help and
// the table in docs/bubbletea.md. Pure parsing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atlas/common/status.h"
#include "options/table.h"

namespace atlas::bubbletea_load {

struct Options {
    std::string url = "http://127.0.0.1:8100";
    std::string host;   // from url
    std::string port;   // from url
    std::string model;  // empty: ask GET /v1/models
    double rate = 100;
    double duration_s = 10;
    double warmup_s = 1;
    int connections = 8;
    std::string prompt_dist = "fixed:128";
    int64_t max_prompt = 8192;
    int64_t vocab = 256;
    double slo_ms = 500;
    double ttft_deadline_ms = 0;  // 0: not sent
    std::string kv_push;          // HOST:PORT: ask for a KV push there
    bool kv_pull = false;         // ask for remote decode without an endpoint (pull mode)
    uint64_t seed = 1;
    std::string json_path;
    double timeout_s = 60;
    bool help = false;
};

// A --prompt-dist: fixed:N, uniform:MIN:MAX or lognormal:MEDIAN:SIGMA.
struct PromptDist {
    std::string kind;
    double a = 1;
    double b = 1;
};
// nullopt unless the text is one of the three forms with a >= 1 (and b > 0).
std::optional<PromptDist> parsePromptDist(std::string_view text);

const options::Table<Options>& optionTable();
Result<Options> parseOptions(const std::vector<std::string>& args);
std::string usageText();

}  // namespace atlas::bubbletea_load
