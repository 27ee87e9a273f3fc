// The byte-level BPE tokenizer the fuzz targets use (fuzz_tokenizer_encode,
// fuzz_bubbletea_request), built in code so a fuzz run needs no file: the 256 byte tokens,
// merges of a few common pairs, added tokens <|bos|> (special) and <x>, Llama 3's split
// pattern, a BOS template, no normalizer.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "bubbletea/tokenizer/tokenizer.h"
#include "bubbletea/tokenizer/unicode.h"

namespace atlas::bubbletea::testutil {

using nlohmann::json;

inline std::string alphabet(const std::string& bytes) {
    std::string out;
    for (char c : bytes) {
        atlas::bubbletea::tok::appendUtf8(
            atlas::bubbletea::tok::byteToUnicode(static_cast<uint8_t>(c)), &out);
    }
    return out;
}

// The fixed tokenizer of the fuzz targets (built once).
inline const Tokenizer& fuzzTokenizer() {
    static const std::shared_ptr<const Tokenizer> t = [] {
        json vocab = json::object();
        int id = 0;
        for (int b = 0; b < 256; ++b) {
            vocab[alphabet(std::string(1, static_cast<char>(b)))] = id++;
        }
        json merges = json::array();
        const char* pairs[][2] = {{" ", "t"}, {"h", "e"},   {" t", "he"},     {"i", "n"},
                                  {" ", " "}, {"  ", "  "}, {"\xe4", "\xbd"}, {"\xe4\xbd", "\xa0"},
                                  {"1", "2"}, {"12", "3"},  {"'", "s"},       {"\r", "\n"}};
        for (const auto& p : pairs) {
            const std::string a = alphabet(p[0]);
            const std::string b = alphabet(p[1]);
            if (!vocab.contains(a + b)) {
                vocab[a + b] = id++;
            }
            merges.push_back({a, b});
        }
        const int bos = id;
        json doc = json::object();
        doc["added_tokens"] = json::array();
        doc["added_tokens"].push_back(
            {{"id", bos}, {"content", "<|bos|>"}, {"special", true}, {"normalized", false}});
        doc["added_tokens"].push_back(
            {{"id", bos + 1}, {"content", "<x>"}, {"special", false}, {"normalized", false}});
        doc["normalizer"] = nullptr;
        json split = {{"type", "Split"}, {"behavior", "Isolated"}};
        split["pattern"]["Regex"] =
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
            "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
        json byte_level = {
            {"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
        doc["pre_tokenizer"]["type"] = "Sequence";
        doc["pre_tokenizer"]["pretokenizers"] = json::array({split, byte_level});
        json bos_piece;
        bos_piece["SpecialToken"]["id"] = "<|bos|>";
        json a_piece;
        a_piece["Sequence"]["id"] = "A";
        doc["post_processor"]["type"] = "TemplateProcessing";
        doc["post_processor"]["single"] = json::array({bos_piece, a_piece});
        doc["decoder"]["type"] = "ByteLevel";
        doc["model"]["type"] = "BPE";
        doc["model"]["ignore_merges"] = true;
        doc["model"]["vocab"] = vocab;
        doc["model"]["merges"] = merges;
        auto r = Tokenizer::fromJson(doc.dump(), "fuzz-encode");
        if (!r.isOk()) {
            __builtin_trap();
        }
        return r.value();
    }();
    return *t;
}

}  // namespace atlas::bubbletea::testutil
