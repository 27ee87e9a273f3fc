// Loading tokenizer.json, part 2: the normalizer, pre-tokenizer, post-processor and
// decoder sections.
#include "bubbletea/tokenizer/loader.h"

namespace atlas::bubbletea::tok {

Result<std::string> Loader::stepType(const json& node, const std::string& where, int depth,
                                     size_t steps) const {
    if (node.is_null()) {
        return std::string();
    }
    if (steps >= kMaxPipelineSteps || depth > 4) {
        return fail(where, "too many steps (or Sequences nested too deep)");
    }
    auto type = typeOf(node, where);
    if (type.isOk() && type.value().empty()) {
        return fail(where + ".type", "must not be empty");
    }
    return type;
}

Status Loader::eachInSequence(
    const json& node, const std::string& where, const char* key, int depth,
    const std::function<Status(const json&, const std::string&, int)>& step) const {
    const auto it = node.find(key);
    if (it == node.end() || !it->is_array()) {
        return fail(where + "." + key, "must be a list");
    }
    for (size_t i = 0; i < it->size(); ++i) {
        ATLAS_RETURN_IF_ERROR(
            step((*it)[i], where + "." + key + "[" + std::to_string(i) + "]", depth + 1));
    }
    return Status::ok();
}

Status Loader::normalizer(const json& n, const std::string& where, int depth,
                          std::vector<NormalizerStep>* out) const {
    auto type = stepType(n, where, depth, out->size());
    if (!type.isOk()) {
        return type.status();
    }
    const std::string& t = type.value();
    if (t.empty()) {
        return Status::ok();
    }
    NormalizerStep step;
    if (t == "Sequence") {
        return eachInSequence(
            n, where, "normalizers", depth,
            [&](const json& e, const std::string& w, int d) { return normalizer(e, w, d, out); });
    }
    if (t == "NFC" || t == "NFD" || t == "NFKC" || t == "NFKD") {
        step.kind = NormalizerStep::Kind::kUnicode;
        step.form = t == "NFC"    ? NormalForm::kNfc
                    : t == "NFD"  ? NormalForm::kNfd
                    : t == "NFKC" ? NormalForm::kNfkc
                                  : NormalForm::kNfkd;
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
        if (firstInvalidUtf8(step.content) != step.content.size()) {
            return fail(where, "content is not valid UTF-8");
        }
    }
    out->push_back(std::move(step));
    return Status::ok();
}

Status Loader::preTokenizer(const json& p, const std::string& where, int depth,
                            std::vector<PreTokenizerStep>* out) const {
    auto type = stepType(p, where, depth, out->size());
    if (!type.isOk()) {
        return type.status();
    }
    const std::string& t = type.value();
    if (t.empty()) {
        return Status::ok();
    }
    PreTokenizerStep step;
    if (t == "Sequence") {
        return eachInSequence(
            p, where, "pretokenizers", depth,
            [&](const json& e, const std::string& w, int d) { return preTokenizer(e, w, d, out); });
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
        using B = SplitBehavior;
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
            auto re = Regex::compile(kGpt2Pattern, false);
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

Status Loader::postProcessor(const json& p, const std::string& where, int depth,
                             const std::unordered_map<std::string, int32_t>& added_ids,
                             const TokenMap& vocab_strings, std::vector<Template>* out) const {
    auto type = stepType(p, where, depth, out->size());
    if (!type.isOk()) {
        return type.status();
    }
    const std::string& t = type.value();
    if (t.empty()) {
        return Status::ok();
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
        return eachInSequence(p, where, "processors", depth,
                              [&](const json& e, const std::string& w, int d) {
                                  return postProcessor(e, w, d, added_ids, vocab_strings, out);
                              });
    }
    if (t == "ByteLevel") {
        return Status::ok();  // offsets only; the ids are unchanged
    }
    if (t == "RobertaProcessing" || t == "BertProcessing") {
        Template tpl;
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
                tpl.push_back(kSequenceA);
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
    Template tpl;
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
            tpl.push_back(kSequenceA);
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

Status Loader::decoder(const json& d) const {
    auto dtype = typeOf(d, "decoder");
    if (!dtype.isOk()) {
        return dtype.status();
    }
    const std::string& t = dtype.value();
    if (t == "ByteLevel") {
        return Status::ok();
    }
    const bool sp = t == "Metaspace" || t == "ByteFallback" || t == "Sequence" || t == "Fuse" ||
                    t == "Strip" || t == "Replace";
    return fail("decoder", "decoder type '" + t + "' is not supported (supported: ByteLevel)" +
                               (sp ? std::string(kSentencePieceHint) : std::string()));
}

}  // namespace atlas::bubbletea::tok
