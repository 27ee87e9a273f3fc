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

}  // namespace

Result<std::unique_ptr<Tokenizer::Impl>> tok::Loader::load(const json& root,
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
