// Internal: the typed tokenizer.json reader shared by the loader's two files
// (tokenizer_load.cc: bounds, model, vocabulary, added tokens; tokenizer_load_pipeline.cc:
// normalizer, pre-tokenizer, post-processor, decoder). Errors name the file and JSON path.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "bubbletea/tokenizer/pipeline.h"

namespace atlas::bubbletea::tok {

using json = nlohmann::json;

constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;
constexpr size_t kMaxPipelineSteps = 64;

extern const char* const kSentencePieceHint;

// model.vocab and model.merges as the first (SAX) pass collects them: a DOM of these two
// sections would cost several times the file's size and most of the load time.
struct CollectedModel {
    bool vocab_present = false;
    bool vocab_is_object = false;
    // (token, id); id nullopt when the value is not an integer.
    std::vector<std::pair<std::string, std::optional<int64_t>>> vocab;
    bool merges_present = false;
    bool merges_is_array = false;
    struct Merge {
        enum class Form : uint8_t { kLegacy, kPair, kBad };
        Form form = Form::kBad;
        std::string left;  // kLegacy: the whole "left right" string
        std::string right;
        int parts = 0;  // kPair: strings seen
    };
    std::vector<Merge> merges;
};

struct Loader {
    std::string source;

    Status fail(const std::string& where, const std::string& why) const {
        return {Code::kInvalidArgument, source + ": " + where + ": " + why};
    }

    // Optional typed fields: absent and null read as the default.
    Result<bool> flag(const json& obj, const char* key, const std::string& where, bool dflt) const {
        const auto it = obj.find(key);
        if (it == obj.end() || it->is_null()) {
            return dflt;
        }
        if (!it->is_boolean()) {
            return fail(where + "." + key, "must be a boolean");
        }
        return it->get<bool>();
    }
    Result<std::string> str(const json& obj, const char* key, const std::string& where) const {
        const auto it = obj.find(key);
        if (it == obj.end() || !it->is_string()) {
            return fail(where + "." + key, "must be a string");
        }
        return it->get<std::string>();
    }
    Result<std::string> typeOf(const json& obj, const std::string& where) const {
        if (!obj.is_object()) {
            return fail(where, "must be an object");
        }
        return str(obj, "type", where);
    }

    // A {"Regex": ...} or {"String": ...} pattern.
    Result<std::shared_ptr<const Regex>> pattern(const json& obj, const std::string& where) const {
        const auto it = obj.find("pattern");
        if (it == obj.end() || !it->is_object()) {
            return fail(where + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
        }
        const bool literal = it->contains("String");
        const auto p = literal ? it->find("String") : it->find("Regex");
        if (p == it->end() || !p->is_string()) {
            return fail(where + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
        }
        auto re = Regex::compile(p->get<std::string>(), literal);
        if (!re.isOk()) {
            return fail(where + ".pattern", re.status().message());
        }
        return re.value();
    }

    // Converts a token spelled in the byte-level alphabet to its bytes; false if a
    // character is outside the alphabet (or the text is not UTF-8).
    static bool alphabetToBytes(std::string_view s, std::string* out) {
        out->clear();
        if (firstInvalidUtf8(s) != s.size()) {
            return false;
        }
        for (size_t pos = 0; pos < s.size();) {
            char32_t cp = 0;
            pos += static_cast<size_t>(decodeUtf8(s, pos, &cp));
            const int b = unicodeToByte(cp);
            if (b < 0) {
                return false;
            }
            out->push_back(static_cast<char>(b));
        }
        return true;
    }

    Result<int32_t> tokenId(const json& v, const std::string& where) const {
        if (!v.is_number_integer()) {
            return fail(where, "must be an integer id");
        }
        const int64_t id =
            v.is_number_unsigned()
                ? static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), INT64_MAX))
                : v.get<int64_t>();
        if (id < 0 || id > kMaxId) {
            return fail(where, "id " + std::to_string(id) + " is outside [0, " +
                                   std::to_string(kMaxId) + "]");
        }
        return static_cast<int32_t>(id);
    }

    // The head of every pipeline section: "" for null (no step), else the type name, after
    // the step-count and nesting bounds.
    Result<std::string> stepType(const json& node, const std::string& where, int depth,
                                 size_t steps) const;
    // {"type": "Sequence", key: [...]}: `step` on each element.
    Status eachInSequence(
        const json& node, const std::string& where, const char* key, int depth,
        const std::function<Status(const json&, const std::string&, int)>& step) const;
    Status normalizer(const json& n, const std::string& where, int depth,
                      std::vector<NormalizerStep>* out) const;
    Status preTokenizer(const json& p, const std::string& where, int depth,
                        std::vector<PreTokenizerStep>* out) const;
    // `added_ids` / `vocab_strings`: token text -> id, for templates that name tokens.
    Status postProcessor(const json& p, const std::string& where, int depth,
                         const std::unordered_map<std::string, int32_t>& added_ids,
                         const TokenMap& vocab_strings, std::vector<Template>* out) const;
    // Only the ByteLevel decoder is supported; the error says what else is not.
    Status decoder(const json& d) const;
    // `root`: the DOM without model.vocab and model.merges, which come in `collected`.
    Result<std::unique_ptr<Tokenizer::Impl>> load(const json& root, const CollectedModel& collected,
                                                  const TokenizerOptions& options) const;
};

}  // namespace atlas::bubbletea::tok
