// kv-sink's command line: one options table (options.cc) that also produces --help and the
// table in docs/bubbletea.md. Pure parsing apart from reading --auth-key-file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atlas/common/status.h"
#include "options/table.h"

namespace atlas::kvsink {

struct Options {
    std::string listen = "127.0.0.1:7100";
    std::string auth_key;
    std::string auth_key_file;
    std::string expected_model;
    uint64_t max_bytes = 64ull << 30;
    uint64_t count = 0;     // exit after this many transfers (0: run until signalled)
    double duration_s = 0;  // exit after this long (0: no limit)
    int timeout_ms = 10000;
    std::string json_path;
    bool quiet = false;
    bool help = false;
    // sender mode
    std::string send_to;
    double size_mb = 64;
    int send_count = 10;
    std::string checksum = "crc32c";
    int streams = 0;
};

const options::Table<Options>& optionTable();
// argv without the program name. The key file's contents (trailing newlines stripped, the
// rule bubbletea --auth-key-file uses) become auth_key.
Result<Options> parseOptions(const std::vector<std::string>& args);
std::string usageText();

}  // namespace atlas::kvsink
