// Loading tokenizer.json: bounds first (size, nesting, value count), then a DOM whose every
// field is type-checked before use. Errors name the file and the JSON path.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bubbletea/tokenizer/loader.h"
#include "bubbletea/tokenizer/tokenizer.h"

namespace atlas::bubbletea {
namespace tok {

const char* const kSentencePieceHint =
    ": SentencePiece-style tokenizers (Metaspace / ByteFallback, as Llama 2 and Mistral "
    "use) are not supported; bubbletea's tokenizer takes byte-level BPE (Llama 3, Qwen, "
    "GPT-2). Send token ids instead";

}  // namespace tok

namespace {

using tok::json;
using tok::kMaxId;
using tok::kSentencePieceHint;
using tok::Loader;
using tok::PreTokenizerStep;

constexpr size_t kMaxFileBytes = size_t{64} << 20;
constexpr int kMaxDepth = 64;
constexpr size_t kMaxValues = size_t{16} << 20;
constexpr size_t kMaxStringBytes = size_t{4} << 20;
// Ids may leave gaps, but not so many that the per-id tables grow far past the token count.
constexpr int64_t kMaxIdGap = 65536;
constexpr size_t kMaxAddedTokens = 65536;
constexpr size_t kMaxAddedTokenBytes = 4096;

// The first pass over the text (SAX, no DOM): refuses documents that would cost too much to
// hold as a DOM, and collects model.vocab and model.merges.
class FirstPass final : public nlohmann::json_sax<json> {
  public:
    std::string error;
    tok::CollectedModel model;

    bool null() override { return scalar(nullptr); }
    bool boolean(bool) override { return scalar(nullptr); }
    bool number_integer(number_integer_t v) override {
        const int64_t x = v;
        return scalar(&x);
    }
    bool number_unsigned(number_unsigned_t v) override {
        const int64_t x = static_cast<int64_t>(std::min<uint64_t>(v, INT64_MAX));
        return scalar(&x);
    }
    bool number_float(number_float_t, const string_t&) override { return scalar(nullptr); }
    bool string(string_t& s) override {
        if (!text(s) || !value()) {
            return false;
        }
        switch (where()) {
            case Where::kVocabEntry:
                model.vocab.emplace_back(stack_[2].key, std::nullopt);
                break;
            case Where::kMergesEntry: {
                tok::CollectedModel::Merge m;
                m.form = tok::CollectedModel::Merge::Form::kLegacy;
                m.left = std::move(s);
                model.merges.push_back(std::move(m));
                break;
            }
            case Where::kMergePart: {
                auto& m = model.merges.back();
                if (m.form == tok::CollectedModel::Merge::Form::kPair && m.parts < 2) {
                    (m.parts == 0 ? m.left : m.right) = std::move(s);
                    ++m.parts;
                } else {
                    m.form = tok::CollectedModel::Merge::Form::kBad;
                }
                break;
            }
            default:
                break;
        }
        return true;
    }
    bool binary(binary_t&) override { return scalar(nullptr); }
    bool start_object(std::size_t) override { return open(true); }
    bool key(string_t& s) override {
        if (!text(s)) {
            return false;
        }
        stack_.back().key = std::move(s);
        return true;
    }
    bool end_object() override { return close(); }
    bool start_array(std::size_t) override { return open(false); }
    bool end_array() override { return close(); }
    bool parse_error(std::size_t position, const std::string&,
                     const nlohmann::detail::exception& ex) override {
        error = "not valid JSON near byte " + std::to_string(position) + ": " + ex.what();
        return false;
    }

  private:
    struct Frame {
        bool object;
        std::string key;  // objects: the key of the value being read
    };
    enum class Where { kOther, kVocab, kVocabEntry, kMerges, kMergesEntry, kMergePart, kDeeper };

    // Where the next value goes, relative to model.vocab / model.merges.
    Where where() const {
        const size_t n = stack_.size();
        if (n < 2 || !stack_[0].object || stack_[0].key != "model" || !stack_[1].object) {
            return Where::kOther;
        }
        const std::string& k = stack_[1].key;
        if (k != "vocab" && k != "merges") {
            return Where::kOther;
        }
        const bool vocab = k == "vocab";
        if (n == 2) {
            return vocab ? Where::kVocab : Where::kMerges;
        }
        if (vocab) {
            return n == 3 && stack_[2].object ? Where::kVocabEntry : Where::kDeeper;
        }
        if (stack_[2].object) {
            return Where::kDeeper;
        }
        if (n == 3) {
            return Where::kMergesEntry;
        }
        return n == 4 && !stack_[3].object ? Where::kMergePart : Where::kDeeper;
    }

    // A non-string scalar; `id` set for integers.
    bool scalar(const int64_t* id) {
        if (!value()) {
            return false;
        }
        switch (where()) {
            case Where::kVocab:
                model.vocab_present = true;
                break;
            case Where::kMerges:
                model.merges_present = true;
                break;
            case Where::kVocabEntry:
                model.vocab.emplace_back(stack_[2].key,
                                         id ? std::optional<int64_t>(*id) : std::nullopt);
                break;
            case Where::kMergesEntry:
                model.merges.emplace_back();  // kBad
                break;
            case Where::kMergePart:
                model.merges.back().form = tok::CollectedModel::Merge::Form::kBad;
                break;
            default:
                break;
        }
        return true;
    }
    bool open(bool object) {
        if (static_cast<int>(stack_.size()) >= kMaxDepth) {
            error = "nesting deeper than " + std::to_string(kMaxDepth) + " levels";
            return false;
        }
        if (!value()) {
            return false;
        }
        switch (where()) {
            case Where::kVocab:
                model.vocab_present = true;
                model.vocab_is_object = object;
                break;
            case Where::kMerges:
                model.merges_present = true;
                model.merges_is_array = !object;
                break;
            case Where::kVocabEntry:
                model.vocab.emplace_back(stack_[2].key, std::nullopt);
                break;
            case Where::kMergesEntry:
                model.merges.emplace_back();
                if (!object) {
                    model.merges.back().form = tok::CollectedModel::Merge::Form::kPair;
                }
                break;
            case Where::kMergePart:
                model.merges.back().form = tok::CollectedModel::Merge::Form::kBad;
                break;
            default:
                break;
        }
        stack_.push_back(Frame{object, {}});
        return true;
    }
    bool close() {
        stack_.pop_back();
        return true;
    }
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
    std::vector<Frame> stack_;
    size_t values_ = 0;
};

}  // namespace

Result<std::unique_ptr<Tokenizer::Impl>> tok::Loader::load(const json& root,
                                                           const CollectedModel& collected,
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

    if (!collected.vocab_present || !collected.vocab_is_object || collected.vocab.empty()) {
        return fail("model.vocab", "must be a non-empty object of token -> id");
    }
    // Pass 1: ids and the id range.
    int64_t max_id = -1;
    std::vector<std::pair<int32_t, const std::string*>> entries;
    entries.reserve(collected.vocab.size());
    tok::TokenMap vocab_strings;  // the file's spelling -> id (post-processor lookups)
    vocab_strings.reserve(collected.vocab.size());
    for (const auto& [token, value] : collected.vocab) {
        const std::string where = "model.vocab[\"" + token.substr(0, 64) + "\"]";
        if (!value.has_value()) {
            return fail(where, "must be an integer id");
        }
        if (*value < 0 || *value > kMaxId) {
            return fail(where, "id " + std::to_string(*value) + " is outside [0, " +
                                   std::to_string(kMaxId) + "]");
        }
        const auto id = static_cast<int32_t>(*value);
        if (!vocab_strings.emplace(token, id).second) {
            return fail(where, "the token appears twice");
        }
        entries.emplace_back(id, &token);
        max_id = std::max<int64_t>(max_id, id);
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
    if (!collected.merges_present || !collected.merges_is_array) {
        return fail("model.merges", "must be a list");
    }
    std::vector<std::pair<std::string, std::string>> merges;
    merges.reserve(collected.merges.size());
    std::string ra;
    std::string rb;
    for (size_t i = 0; i < collected.merges.size(); ++i) {
        const tok::CollectedModel::Merge& m = collected.merges[i];
        using Form = tok::CollectedModel::Merge::Form;
        std::string_view a;
        std::string_view b;
        if (m.form == Form::kLegacy) {
            // Legacy "left right": exactly one space separates them.
            const size_t sp = m.left.find(' ');
            if (sp == std::string::npos || m.left.find(' ', sp + 1) != std::string::npos) {
                return fail("model.merges[" + std::to_string(i) + "]",
                            "must be \"left right\" (one space)");
            }
            a = std::string_view(m.left).substr(0, sp);
            b = std::string_view(m.left).substr(sp + 1);
        } else if (m.form == Form::kPair && m.parts == 2) {
            a = m.left;
            b = m.right;
        } else {
            return fail("model.merges[" + std::to_string(i) + "]",
                        "must be \"left right\" or [left, right]");
        }
        if (!alphabetToBytes(a, &ra) || !alphabetToBytes(b, &rb)) {
            return fail("model.merges[" + std::to_string(i) + "]",
                        "a side is not a byte-level token");
        }
        merges.emplace_back(ra, rb);
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
    ATLAS_RETURN_IF_ERROR(decoder(section("decoder")));
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

Result<std::shared_ptr<const Tokenizer>> Tokenizer::fromJson(std::string_view json_text,
                                                             std::string_view source,
                                                             const TokenizerOptions& options) {
    const std::string src(source);
    if (json_text.size() > kMaxFileBytes) {
        return Status{Code::kInvalidArgument,
                      src + ": larger than " + std::to_string(kMaxFileBytes >> 20) + " MiB"};
    }
    FirstPass first;
    if (!json::sax_parse(json_text.begin(), json_text.end(), &first)) {
        return Status{Code::kInvalidArgument,
                      src + ": " + (first.error.empty() ? "not valid JSON" : first.error)};
    }
    // The DOM of the rest: the keys "vocab" and "merges" of second-level objects (model's)
    // are skipped, since the first pass has them.
    const json::parser_callback_t skip = [](int depth, json::parse_event_t event, json& parsed) {
        return !(event == json::parse_event_t::key && depth == 2 &&
                 (parsed == "vocab" || parsed == "merges"));
    };
    const json root = json::parse(json_text.begin(), json_text.end(), skip, false);
    if (root.is_discarded()) {
        return Status{Code::kInvalidArgument, src + ": not valid JSON"};
    }
    Loader loader{src};
    auto impl = loader.load(root, first.model, options);
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
            FirstPass bounds;
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
