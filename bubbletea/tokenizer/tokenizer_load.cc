// Loading tokenizer.json: bounds first (size, nesting, value count), then a DOM whose every
// field is type-checked before use. Errors name the file and the JSON path.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bubbletea/tokenizer/pipeline.h"
#include "bubbletea/tokenizer/tokenizer.h"

namespace atlas::bubbletea {
namespace {

using json = nlohmann::json;
using tok::NormalizerStep;
using tok::PreTokenizerStep;

constexpr size_t kMaxFileBytes = size_t{64} << 20;
constexpr int kMaxDepth = 64;
constexpr size_t kMaxValues = size_t{16} << 20;
constexpr size_t kMaxStringBytes = size_t{4} << 20;
constexpr int64_t kMaxId = (int64_t{1} << 24) - 1;
// Ids may leave gaps, but not so many that the per-id tables grow far past the token count.
constexpr int64_t kMaxIdGap = 65536;
constexpr size_t kMaxAddedTokens = 65536;
constexpr size_t kMaxAddedTokenBytes = 4096;
constexpr size_t kMaxPipelineSteps = 64;

const char* const kSentencePieceHint =
    ": SentencePiece-style tokenizers (Metaspace / ByteFallback, as Llama 2 and Mistral "
    "use) are not supported; bubbletea's tokenizer takes byte-level BPE (Llama 3, Qwen, "
    "GPT-2). Send token ids instead";

// Refuses documents that would cost too much to hold as a DOM, before building one.
class BoundsCheck final : public nlohmann::json_sax<json> {
  public:
    std::string error;

    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(number_integer_t) override { return value(); }
    bool number_unsigned(number_unsigned_t) override { return value(); }
    bool number_float(number_float_t, const string_t&) override { return value(); }
    bool string(string_t& s) override { return text(s) && value(); }
    bool binary(binary_t&) override { return value(); }
    bool start_object(std::size_t) override { return open(); }
    bool key(string_t& s) override { return text(s); }
    bool end_object() override { return close(); }
    bool start_array(std::size_t) override { return open(); }
    bool end_array() override { return close(); }
    bool parse_error(std::size_t position, const std::string&,
                     const nlohmann::detail::exception& ex) override {
        error = "not valid JSON near byte " + std::to_string(position) + ": " + ex.what();
        return false;
    }

  private:
    bool value() {
        if (++values_ > kMaxValues) {
            error = "more than " + std::to_string(kMaxValues) + " JSON values";
            return false;
        }
        return true;
    }
    bool text(const string_t& s) {
        if (s.size() > kMaxStringBytes) {
            error = "a JSON string is longer than " + std::to_string(kMaxStringBytes) + " bytes";
            return false;
        }
        return true;
    }
    bool open() {
        if (++depth_ > kMaxDepth) {
            error = "nesting deeper than " + std::to_string(kMaxDepth) + " levels";
            return false;
        }
        return value();
    }
    bool close() {
        --depth_;
        return true;
    }
    int depth_ = 0;
    size_t values_ = 0;
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
    Result<std::shared_ptr<const tok::Regex>> pattern(const json& obj,
                                                      const std::string& where) const {
        const auto it = obj.find("pattern");
        if (it == obj.end() || !it->is_object()) {
            return fail(where + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
        }
        const bool literal = it->contains("String");
        const auto p = literal ? it->find("String") : it->find("Regex");
        if (p == it->end() || !p->is_string()) {
            return fail(where + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
        }
        auto re = tok::Regex::compile(p->get<std::string>(), literal);
        if (!re.isOk()) {
            return fail(where + ".pattern", re.status().message());
        }
        return re.value();
    }

    Status normalizer(const json& n, const std::string& where, int depth,
                      std::vector<NormalizerStep>* out) const {
        if (n.is_null()) {
            return Status::ok();
        }
        auto type = typeOf(n, where);
        if (!type.isOk()) {
            return type.status();
        }
        const std::string& t = type.value();
        if (out->size() >= kMaxPipelineSteps || depth > 4) {
            return fail(where, "too many normalizer steps");
        }
        NormalizerStep step;
        if (t == "Sequence") {
            const auto it = n.find("normalizers");
            if (it == n.end() || !it->is_array()) {
                return fail(where + ".normalizers", "must be a list");
            }
            for (size_t i = 0; i < it->size(); ++i) {
                ATLAS_RETURN_IF_ERROR(normalizer(
                    (*it)[i], where + ".normalizers[" + std::to_string(i) + "]", depth + 1, out));
            }
            return Status::ok();
        }
        if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") {
            step.kind = NormalizerStep::Kind::kUnicode;
            step.form = t == "NFC"    ? tok::NormalForm::kNfc
                        : t == "NFD"  ? tok::NormalForm::kNfd
                        : t == "NFKC" ? tok::NormalForm::kNfkc
                                      : tok::NormalForm::kNfkd;
        } else if (t == "Lowercase") {
            step.kind = NormalizerStep::Kind::kLowercase;
        } else if (t == "Replace") {
            step.kind = NormalizerStep::Kind::kReplace;
            auto re = pattern(n, where);
            if (!re.isOk()) {
                return re.status();
            }
            step.pattern = re.value();
            auto content = str(n, "content", where);
            if (!content.isOk()) {
                return content.status();
            }
            step.content = content.value();
        } else if (t == "Prepend") {
            step.kind = NormalizerStep::Kind::kPrepend;
            auto content = str(n, "prepend", where);
            if (!content.isOk()) {
                return content.status();
            }
            step.content = content.value();
        } else if (t == "Precompiled") {
            return fail(where, "normalizer type Precompiled is not supported" +
                                   std::string(kSentencePieceHint));
        } else {
            return fail(where, "normalizer type '" + t +
                                   "' is not supported (supported: NFC, NFD, NFKC, NFKD, "
                                   "Lowercase, Replace, Prepend, Sequence)");
        }
        if (step.kind == NormalizerStep::Kind::kReplace ||
            step.kind == NormalizerStep::Kind::kPrepend) {
            if (tok::firstInvalidUtf8(step.content) != step.content.size()) {
                return fail(where, "content is not valid UTF-8");
            }
        }
        out->push_back(std::move(step));
        return Status::ok();
    }

    Status preTokenizer(const json& p, const std::string& where, int depth,
                        std::vector<PreTokenizerStep>* out) const {
        if (p.is_null()) {
            return Status::ok();
        }
        auto type = typeOf(p, where);
        if (!type.isOk()) {
            return type.status();
        }
        const std::string& t = type.value();
        if (out->size() >= kMaxPipelineSteps || depth > 4) {
            return fail(where, "too many pre-tokenizer steps");
        }
        PreTokenizerStep step;
        if (t == "Sequence") {
            const auto it = p.find("pretokenizers");
            if (it == p.end() || !it->is_array()) {
                return fail(where + ".pretokenizers", "must be a list");
            }
            for (size_t i = 0; i < it->size(); ++i) {
                ATLAS_RETURN_IF_ERROR(preTokenizer(
                    (*it)[i], where + ".pretokenizers[" + std::to_string(i) + "]", depth + 1, out));
            }
            return Status::ok();
        }
        if (t == "Split") {
            step.kind = PreTokenizerStep::Kind::kSplit;
            auto re = pattern(p, where);
            if (!re.isOk()) {
                return re.status();
            }
            step.regex = re.value();
            auto behavior = str(p, "behavior", where);
            if (!behavior.isOk()) {
                return behavior.status();
            }
            const std::string& b = behavior.value();
            using B = tok::SplitBehavior;
            if (b == "Removed") {
                step.behavior = B::kRemoved;
            } else if (b == "Isolated") {
                step.behavior = B::kIsolated;
            } else if (b == "MergedWithPrevious") {
                step.behavior = B::kMergedWithPrevious;
            } else if (b == "MergedWithNext") {
                step.behavior = B::kMergedWithNext;
            } else if (b == "Contiguous") {
                step.behavior = B::kContiguous;
            } else {
                return fail(where + ".behavior", "unknown split behavior '" + b + "'");
            }
            auto invert = flag(p, "invert", where, false);
            if (!invert.isOk()) {
                return invert.status();
            }
            step.invert = invert.value();
        } else if (t == "ByteLevel") {
            step.kind = PreTokenizerStep::Kind::kByteLevel;
            auto prefix = flag(p, "add_prefix_space", where, true);
            auto use_regex = flag(p, "use_regex", where, true);
            if (!prefix.isOk()) {
                return prefix.status();
            }
            if (!use_regex.isOk()) {
                return use_regex.status();
            }
            step.add_prefix_space = prefix.value();
            if (use_regex.value()) {
                auto re = tok::Regex::compile(tok::kGpt2Pattern, false);
                if (!re.isOk()) {
                    return re.status();
                }
                step.regex = re.value();
            }
        } else if (t == "Digits") {
            step.kind = PreTokenizerStep::Kind::kDigits;
            auto individual = flag(p, "individual_digits", where, false);
            if (!individual.isOk()) {
                return individual.status();
            }
            step.individual_digits = individual.value();
        } else if (t == "Metaspace") {
            return fail(where, "pre-tokenizer type Metaspace is not supported" +
                                   std::string(kSentencePieceHint));
        } else {
            return fail(where, "pre-tokenizer type '" + t +
                                   "' is not supported (supported: Split, ByteLevel, Digits, "
                                   "Sequence)");
        }
        out->push_back(std::move(step));
        return Status::ok();
    }

    // Converts a token spelled in the byte-level alphabet to its bytes; false if a
    // character is outside the alphabet (or the text is not UTF-8).
    static bool alphabetToBytes(std::string_view s, std::string* out) {
        out->clear();
        if (tok::firstInvalidUtf8(s) != s.size()) {
            return false;
        }
        for (size_t pos = 0; pos < s.size();) {
            char32_t cp = 0;
            pos += static_cast<size_t>(tok::decodeUtf8(s, pos, &cp));
            const int b = tok::unicodeToByte(cp);
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

    Status postProcessor(const json& p, const std::string& where, int depth,
                         const std::unordered_map<std::string, int32_t>& added_ids,
                         const tok::TokenMap& vocab_strings,
                         std::vector<tok::Template>* out) const {
        if (p.is_null()) {
            return Status::ok();
        }
        auto type = typeOf(p, where);
        if (!type.isOk()) {
            return type.status();
        }
        const std::string& t = type.value();
        if (out->size() >= kMaxPipelineSteps || depth > 4) {
            return fail(where, "too many post-processor steps");
        }
        auto idOf = [&](const std::string& token) -> int32_t {
            if (const auto it = added_ids.find(token); it != added_ids.end()) {
                return it->second;
            }
            if (const auto it = vocab_strings.find(token); it != vocab_strings.end()) {
                return it->second;
            }
            return -1;
        };
        if (t == "Sequence") {
            const auto it = p.find("processors");
            if (it == p.end() || !it->is_array()) {
                return fail(where + ".processors", "must be a list");
            }
            for (size_t i = 0; i < it->size(); ++i) {
                ATLAS_RETURN_IF_ERROR(
                    postProcessor((*it)[i], where + ".processors[" + std::to_string(i) + "]",
                                  depth + 1, added_ids, vocab_strings, out));
            }
            return Status::ok();
        }
        if (t == "ByteLevel") {
            return Status::ok();  // offsets only; the ids are unchanged
        }
        if (t == "RobertaProcessing" || t == "BertProcessing") {
            tok::Template tpl;
            for (const char* key : {"cls", "sep"}) {
                const auto it = p.find(key);
                if (it == p.end() || !it->is_array() || it->size() != 2) {
                    return fail(where + "." + key, "must be [token, id]");
                }
                auto id = tokenId((*it)[1], where + "." + key + "[1]");
                if (!id.isOk()) {
                    return id.status();
                }
                if (std::string(key) == "sep") {
                    tpl.push_back(tok::kSequenceA);
                }
                tpl.push_back(id.value());
            }
            out->push_back(std::move(tpl));
            return Status::ok();
        }
        if (t != "TemplateProcessing") {
            return fail(where, "post-processor type '" + t +
                                   "' is not supported (supported: TemplateProcessing, "
                                   "ByteLevel, RobertaProcessing, BertProcessing, Sequence)");
        }
        const auto single = p.find("single");
        if (single == p.end() || !single->is_array()) {
            return fail(where + ".single", "must be a list");
        }
        const auto specials = p.find("special_tokens");
        tok::Template tpl;
        bool has_a = false;
        for (size_t i = 0; i < single->size(); ++i) {
            const json& piece = (*single)[i];
            const std::string at = where + ".single[" + std::to_string(i) + "]";
            if (piece.is_object() && piece.contains("Sequence")) {
                const json& seq = piece["Sequence"];
                if (!seq.is_object() || !seq.contains("id") || seq["id"] != "A") {
                    return fail(at, "a single-sequence template may only hold sequence A");
                }
                if (has_a) {
                    return fail(at, "sequence A appears twice");
                }
                has_a = true;
                tpl.push_back(tok::kSequenceA);
                continue;
            }
            if (!piece.is_object() || !piece.contains("SpecialToken") ||
                !piece["SpecialToken"].is_object() || !piece["SpecialToken"].contains("id") ||
                !piece["SpecialToken"]["id"].is_string()) {
                return fail(at, "must be {\"Sequence\": ...} or {\"SpecialToken\": {\"id\": ...}}");
            }
            const std::string name = piece["SpecialToken"]["id"].get<std::string>();
            // special_tokens maps the name to its ids; without an entry the name is a token.
            if (specials != p.end() && specials->is_object() && specials->contains(name)) {
                const json& entry = (*specials)[name];
                const auto ids = entry.is_object() ? entry.find("ids") : entry.end();
                if (ids == entry.end() || !ids->is_array() || ids->empty() || ids->size() > 64) {
                    return fail(where + ".special_tokens." + name, "ids must be a short list");
                }
                for (size_t k = 0; k < ids->size(); ++k) {
                    auto id = tokenId((*ids)[k], where + ".special_tokens." + name + ".ids");
                    if (!id.isOk()) {
                        return id.status();
                    }
                    tpl.push_back(id.value());
                }
            } else {
                const int32_t id = idOf(name);
                if (id < 0) {
                    return fail(at, "special token '" + name + "' is not in the vocabulary");
                }
                tpl.push_back(id);
            }
        }
        if (!has_a) {
            return fail(where + ".single", "has no sequence A");
        }
        out->push_back(std::move(tpl));
        return Status::ok();
    }

    Result<std::unique_ptr<Tokenizer::Impl>> load(const json& root,
                                                  const TokenizerOptions& options) const;
};

Result<std::unique_ptr<Tokenizer::Impl>> Loader::load(const json& root,
                                                      const TokenizerOptions& options) const {
    if (!root.is_object()) {
        return fail("(root)", "must be an object");
    }
    auto impl = std::make_unique<Tokenizer::Impl>();
    impl->options = options;

    // ---- model
    const auto model_it = root.find("model");
    if (model_it == root.end() || !model_it->is_object()) {
        return fail("model", "must be an object");
    }
    const json& model = *model_it;
    const auto mtype = model.find("type");
    if (mtype != model.end() && (!mtype->is_string() || *mtype != "BPE")) {
        return fail("model.type", "model type " +
                                      (mtype->is_string() ? "'" + mtype->get<std::string>() + "'"
                                                          : std::string("?")) +
                                      " is not supported (supported: BPE)");
    }
    if (const auto d = model.find("dropout");
        d != model.end() && !d->is_null() && !(d->is_number() && d->get<double>() == 0.0)) {
        return fail("model.dropout", "BPE dropout is not supported (it is random)");
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
        const auto it = model.find(key);
        if (it != model.end() && !it->is_null() &&
            !(it->is_string() && it->get<std::string>().empty())) {
            return fail(std::string("model.") + key, "is not supported by byte-level BPE");
        }
    }
    auto byte_fallback = flag(model, "byte_fallback", "model", false);
    if (!byte_fallback.isOk()) {
        return byte_fallback.status();
    }
    if (byte_fallback.value()) {
        return fail("model.byte_fallback", std::string("is true") + kSentencePieceHint);
    }
    tok::BpeOptions bpe;
    auto ignore_merges = flag(model, "ignore_merges", "model", false);
    auto fuse_unk = flag(model, "fuse_unk", "model", false);
    if (!ignore_merges.isOk()) {
        return ignore_merges.status();
    }
    if (!fuse_unk.isOk()) {
        return fuse_unk.status();
    }
    bpe.ignore_merges = ignore_merges.value();
    bpe.fuse_unk = fuse_unk.value();

    const auto vocab_it = model.find("vocab");
    if (vocab_it == model.end() || !vocab_it->is_object() || vocab_it->empty()) {
        return fail("model.vocab", "must be a non-empty object of token -> id");
    }
    // Pass 1: ids, duplicates and the id range.
    int64_t max_id = -1;
    std::vector<std::pair<int32_t, const std::string*>> entries;
    entries.reserve(vocab_it->size());
    tok::TokenMap vocab_strings;  // the file's spelling -> id (post-processor lookups)
    for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
        auto id = tokenId(it.value(), "model.vocab[\"" + it.key().substr(0, 64) + "\"]");
        if (!id.isOk()) {
            return id.status();
        }
        entries.emplace_back(id.value(), &it.key());
        max_id = std::max<int64_t>(max_id, id.value());
    }
    // ---- added tokens (ids count towards the tables' size)
    const auto added_it = root.find("added_tokens");
    if (added_it != root.end() && !added_it->is_null()) {
        if (!added_it->is_array()) {
            return fail("added_tokens", "must be a list");
        }
        if (added_it->size() > kMaxAddedTokens) {
            return fail("added_tokens", "more than " + std::to_string(kMaxAddedTokens) + " tokens");
        }
        for (size_t i = 0; i < added_it->size(); ++i) {
            const json& a = (*added_it)[i];
            const std::string at = "added_tokens[" + std::to_string(i) + "]";
            if (!a.is_object()) {
                return fail(at, "must be an object");
            }
            tok::AddedToken t;
            auto id = tokenId(a.contains("id") ? a["id"] : json(), at + ".id");
            auto content = str(a, "content", at);
            if (!id.isOk()) {
                return id.status();
            }
            if (!content.isOk()) {
                return content.status();
            }
            t.id = id.value();
            t.content = content.value();
            if (t.content.empty() || t.content.size() > kMaxAddedTokenBytes ||
                tok::firstInvalidUtf8(t.content) != t.content.size()) {
                return fail(at + ".content", "must be non-empty UTF-8 of at most " +
                                                 std::to_string(kMaxAddedTokenBytes) + " bytes");
            }
            auto special = flag(a, "special", at, false);
            if (!special.isOk()) {
                return special.status();
            }
            t.special = special.value();
            auto normalized = flag(a, "normalized", at, !t.special);
            auto single = flag(a, "single_word", at, false);
            auto lstrip = flag(a, "lstrip", at, false);
            auto rstrip = flag(a, "rstrip", at, false);
            for (const auto* r : {&normalized, &single, &lstrip, &rstrip}) {
                if (!r->isOk()) {
                    return r->status();
                }
            }
            t.normalized = normalized.value();
            t.single_word = single.value();
            t.lstrip = lstrip.value();
            t.rstrip = rstrip.value();
            max_id = std::max<int64_t>(max_id, t.id);
            impl->added.push_back(std::move(t));
        }
    }
    const size_t token_count = entries.size() + impl->added.size();
    if (max_id >= static_cast<int64_t>(token_count) + kMaxIdGap) {
        return fail("model.vocab", "id " + std::to_string(max_id) + " leaves more than " +
                                       std::to_string(kMaxIdGap) + " unused ids (" +
                                       std::to_string(token_count) + " tokens)");
    }
    const size_t table = static_cast<size_t>(max_id) + 1;
    impl->kind.assign(table, tok::TokenKind::kNone);
    impl->bytes.assign(table, std::string());
    tok::TokenMap vocab;  // raw bytes -> id (the model's map)
    vocab.reserve(entries.size());
    std::vector<const std::string*> owner(table, nullptr);
    std::string raw;
    for (const auto& [id, token] : entries) {
        if (owner[id] != nullptr) {
            return fail("model.vocab", "tokens \"" + owner[id]->substr(0, 64) + "\" and \"" +
                                           token->substr(0, 64) + "\" share id " +
                                           std::to_string(id));
        }
        owner[id] = token;
        vocab_strings.emplace(*token, id);
        impl->kind[id] = tok::TokenKind::kModel;
        if (alphabetToBytes(*token, &raw)) {
            impl->bytes[id] = raw;
            vocab.emplace(raw, id);
        } else {
            // Outside the byte alphabet: unreachable by merges; decodes as its own text
            // (tokenizers' ByteLevel decoder does the same).
            impl->bytes[id] = *token;
        }
    }
    impl->model_tokens = entries.size();

    std::unordered_map<std::string, int32_t> added_ids;
    for (size_t i = 0; i < impl->added.size(); ++i) {
        const tok::AddedToken& t = impl->added[i];
        const auto [it, inserted] = added_ids.emplace(t.content, t.id);
        if (!inserted && it->second != t.id) {
            return fail("added_tokens[" + std::to_string(i) + "]",
                        "'" + t.content.substr(0, 64) + "' is listed with ids " +
                            std::to_string(it->second) + " and " + std::to_string(t.id));
        }
        if (impl->kind[t.id] == tok::TokenKind::kAdded ||
            impl->kind[t.id] == tok::TokenKind::kSpecial) {
            if (impl->bytes[t.id] != t.content) {
                return fail("added_tokens[" + std::to_string(i) + "]",
                            "id " + std::to_string(t.id) + " is given to two added tokens");
            }
        }
        // An added token wins its id for decoding, as in tokenizers.
        impl->kind[t.id] = t.special ? tok::TokenKind::kSpecial : tok::TokenKind::kAdded;
        impl->bytes[t.id] = t.content;
    }
    std::vector<const tok::AddedToken*> raw_tokens;
    std::vector<const tok::AddedToken*> norm_tokens;
    for (const tok::AddedToken& t : impl->added) {
        (t.normalized ? norm_tokens : raw_tokens).push_back(&t);
    }

    if (const auto unk = model.find("unk_token"); unk != model.end() && !unk->is_null()) {
        if (!unk->is_string()) {
            return fail("model.unk_token", "must be a string");
        }
        const auto it = vocab_strings.find(unk->get<std::string>());
        if (it == vocab_strings.end()) {
            return fail("model.unk_token", "is not in the vocabulary");
        }
        bpe.unk_id = it->second;
    }

    // ---- merges
    const auto merges_it = model.find("merges");
    if (merges_it == model.end() || !merges_it->is_array()) {
        return fail("model.merges", "must be a list");
    }
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(merges_it->size());
    for (size_t i = 0; i < merges_it->size(); ++i) {
        const json& m = (*merges_it)[i];
        std::string a;
        std::string b;
        if (m.is_string()) {
            // Legacy "left right": exactly one space separates them.
            const std::string& s = m.get_ref<const std::string&>();
            const size_t sp = s.find(' ');
            if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
                return fail("model.merges[" + std::to_string(i) + "]",
                            "must be \"left right\" (one space)");
            }
            a = s.substr(0, sp);
            b = s.substr(sp + 1);
        } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
            a = m[0].get<std::string>();
            b = m[1].get<std::string>();
        } else {
            return fail("model.merges[" + std::to_string(i) + "]",
                        "must be \"left right\" or [left, right]");
        }
        std::string ra;
        std::string rb;
        if (!alphabetToBytes(a, &ra) || !alphabetToBytes(b, &rb)) {
            return fail("model.merges[" + std::to_string(i) + "]",
                        "a side is not a byte-level token");
        }
        merges.emplace_back(std::move(ra), std::move(rb));
    }
    auto built = tok::BpeModel::build(std::move(vocab), merges, bpe);
    if (!built.isOk()) {
        return fail("model", built.status().message());
    }
    impl->merges = built.value().mergeCount();
    impl->model.emplace(std::move(built.value()));

    // ---- pipeline
    const auto section = [&](const char* key) -> const json& {
        static const json null_json;
        const auto it = root.find(key);
        return it == root.end() ? null_json : *it;
    };
    ATLAS_RETURN_IF_ERROR(normalizer(section("normalizer"), "normalizer", 0, &impl->normalizer));
    ATLAS_RETURN_IF_ERROR(
        preTokenizer(section("pre_tokenizer"), "pre_tokenizer", 0, &impl->pre_tokenizer));
    bool byte_level = false;
    for (const auto& s : impl->pre_tokenizer) {
        byte_level = byte_level || s.kind == PreTokenizerStep::Kind::kByteLevel;
    }
    if (!byte_level) {
        return fail("pre_tokenizer", "has no ByteLevel step: not a byte-level BPE tokenizer" +
                                         std::string(kSentencePieceHint));
    }
    const json& decoder = section("decoder");
    auto dtype = typeOf(decoder, "decoder");
    if (!dtype.isOk()) {
        return dtype.status();
    }
    if (dtype.value() != "ByteLevel") {
        const std::string& d = dtype.value();
        const bool sp = d == "Metaspace" || d == "ByteFallback" || d == "Sequence" || d == "Fuse" ||
                        d == "Strip" || d == "Replace";
        return fail("decoder", "decoder type '" + d + "' is not supported (supported: ByteLevel)" +
                                   (sp ? std::string(kSentencePieceHint) : std::string()));
    }
    ATLAS_RETURN_IF_ERROR(postProcessor(section("post_processor"), "post_processor", 0, added_ids,
                                        vocab_strings, &impl->templates));
    for (const tok::Template& t : impl->templates) {
        for (int32_t id : t) {
            if (id != tok::kSequenceA &&
                (static_cast<size_t>(id) >= table || impl->kind[id] == tok::TokenKind::kNone)) {
                return fail("post_processor",
                            "template id " + std::to_string(id) + " is not in the vocabulary");
            }
        }
    }
    impl->raw_matcher = tok::AddedTokenMatcher(raw_tokens);
    impl->normalized_matcher = tok::AddedTokenMatcher(norm_tokens);
    return impl;
}

}  // namespace

Result<std::shared_ptr<const Tokenizer>> Tokenizer::fromJson(std::string_view json_text,
                                                             std::string_view source,
                                                             const TokenizerOptions& options) {
    const std::string src(source);
    if (json_text.size() > kMaxFileBytes) {
        return Status{Code::kInvalidArgument,
                      src + ": larger than " + std::to_string(kMaxFileBytes >> 20) + " MiB"};
    }
    BoundsCheck bounds;
    if (!json::sax_parse(json_text.begin(), json_text.end(), &bounds)) {
        return Status{Code::kInvalidArgument,
                      src + ": " + (bounds.error.empty() ? "not valid JSON" : bounds.error)};
    }
    const json root = json::parse(json_text.begin(), json_text.end(), nullptr, false);
    if (root.is_discarded()) {
        return Status{Code::kInvalidArgument, src + ": not valid JSON"};
    }
    Loader loader{src};
    auto impl = loader.load(root, options);
    if (!impl.isOk()) {
        return impl.status();
    }
    return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl.value())));
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::fromFile(const std::string& path,
                                                             const TokenizerOptions& options) {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) {
        return Status{Code::kInvalidArgument, "cannot read tokenizer file '" + path + "'"};
    }
    const std::streamoff size = in.tellg();
    if (size < 0 || static_cast<uint64_t>(size) > kMaxFileBytes) {
        return Status{Code::kInvalidArgument,
                      path + ": larger than " + std::to_string(kMaxFileBytes >> 20) + " MiB"};
    }
    std::string text(static_cast<size_t>(size), '\0');
    in.seekg(0);
    in.read(text.data(), size);
    if (!in) {
        return Status{Code::kInvalidArgument, "cannot read tokenizer file '" + path + "'"};
    }
    return fromJson(text, path, options);
}

Result<std::shared_ptr<const Tokenizer>> Tokenizer::fromModelDir(const std::string& dir) {
    const std::string path = dir + "/tokenizer.json";
    if (!std::ifstream(path).good()) {
        return Status{Code::kUnavailable, "no tokenizer.json in '" + dir + "'"};
    }
    TokenizerOptions options;
    // transformers reads clean_up_tokenization_spaces from tokenizer_config.json; a missing or
    // unreadable config keeps the default (off).
    std::ifstream cfg(dir + "/tokenizer_config.json", std::ios::binary);
    if (cfg) {
        std::stringstream ss;
        ss << cfg.rdbuf();
        const std::string text = ss.str();
        if (text.size() <= kMaxFileBytes) {
            BoundsCheck bounds;
            if (json::sax_parse(text.begin(), text.end(), &bounds)) {
                const json c = json::parse(text, nullptr, false);
                if (c.is_object() && c.contains("clean_up_tokenization_spaces") &&
                    c["clean_up_tokenization_spaces"].is_boolean()) {
                    options.clean_up_tokenization_spaces =
                        c["clean_up_tokenization_spaces"].get<bool>();
                }
            }
        }
    }
    return fromFile(path, options);
}

}  // namespace atlas::bubbletea
