// CPU prefill engine microbenchmarks (bubbletea/engine). Random weights, no files.
//
//   engine_bench [--shape=llama-3.2-1b] [--dtype=bf16|f32] [--threads=2] [--prompt=512]
//                [--contexts=0,512] [--chunks=32,128,512] [--chunk-iterations=2]
//                [Google Benchmark flags]
//
// BM_Prefill        one-shot prefill of --prompt tokens: tokens/s at --threads and, in the
//                   same run, at 1 thread (the scaling baseline).
// BM_ChunkCost      one chunk of C tokens appended after a context of L tokens (the
//                   daemon's cost model: time(C, L)); the context is prefilled once per L
//                   and the chunk is rolled back with KvCache::truncate between iterations.
// BM_Gemm           the engine's blocked AVX2 GEMM vs a naive triple loop on the same
//                   shape (q_proj of the chosen model, 64 rows): GFLOP/s and their ratio.
// Counters: tokens_per_s (wall clock), process_cpu_s and tokens_per_cpu_s (CPU time of all
// threads: meaningful on a shared machine). JSON: --benchmark_out=engine.json
// --benchmark_out_format=json.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bubbletea/engine/cpu_kernels.h"
#include "bubbletea/engine/engine.h"
#include "options/value.h"

namespace {

using namespace atlas::bubbletea;

struct Options {
    std::string shape = "llama-3.2-1b";
    DType dtype = DType::kBF16;
    int threads = 2;
    int prompt = 512;
    std::vector<int64_t> contexts = {0, 512};
    std::vector<int64_t> chunks = {32, 128, 512};
    int chunk_iterations = 2;
};

Options& options() {
    static Options o;
    return o;
}

std::shared_ptr<const Weights> weights() {
    static std::shared_ptr<const Weights> w = [] {
        auto config = shapePreset(options().shape);
        if (!config.isOk()) {
            std::fprintf(stderr, "%s\n", config.status().toString().c_str());
            std::exit(2);
        }
        auto made = makeRandomWeights(*config, options().dtype, 1, options().threads);
        if (!made.isOk()) {
            std::fprintf(stderr, "%s\n", made.status().toString().c_str());
            std::exit(2);
        }
        return made.value();
    }();
    return w;
}

std::vector<int32_t> prompt(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> dist(
        0, static_cast<int32_t>(weights()->config().vocab_size - 1));
    std::vector<int32_t> out(n);
    for (auto& t : out) {
        t = dist(rng);
    }
    return out;
}

std::string label(int threads) {
    return options().shape + " " + std::string(dtypeName(options().dtype)) + " " +
           std::to_string(threads) + "T" + (cpu::usingAvx2() ? " avx2" : " portable");
}

// CPU seconds used by the whole process (all threads) so far. The 2-core development
// machine is shared, so wall time is unreliable there; process CPU time per token is not.
double processCpuSeconds() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    auto secs = [](const timeval& tv) {
        return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
    };
    return secs(ru.ru_utime) + secs(ru.ru_stime);
}

void reportCpu(benchmark::State& state, double cpu_seconds, double tokens) {
    const auto iterations = static_cast<double>(state.iterations());
    state.counters["process_cpu_s"] = cpu_seconds / iterations;
    state.counters["tokens_per_cpu_s"] = tokens * iterations / cpu_seconds;
}

void failOn(benchmark::State& state, const atlas::Status& st) {
    if (!st.isOk()) {
        state.SkipWithError(st.toString().c_str());
    }
}

void BM_Prefill(benchmark::State& state) {
    const int threads = static_cast<int>(state.range(0));
    auto engine = makeCpuEngine(weights(), threads);
    if (!engine.isOk()) {
        return failOn(state, engine.status());
    }
    const auto tokens = prompt(static_cast<size_t>(options().prompt), 1);
    const double cpu0 = processCpuSeconds();
    for (auto _ : state) {
        auto kv = (*engine)->newSequence(tokens.size());
        auto r = (*engine)->prefillChunk(**kv, tokens, true);
        if (!r.isOk()) {
            return failOn(state, r.status());
        }
        benchmark::DoNotOptimize(r->next_token);
    }
    state.counters["tokens_per_s"] = benchmark::Counter(
        static_cast<double>(tokens.size()) * static_cast<double>(state.iterations()),
        benchmark::Counter::kIsRate);
    state.counters["prompt"] = static_cast<double>(tokens.size());
    reportCpu(state, processCpuSeconds() - cpu0, static_cast<double>(tokens.size()));
    state.SetLabel(label(threads));
}

void BM_ChunkCost(benchmark::State& state) {
    const auto chunk = static_cast<size_t>(state.range(0));
    const auto context = static_cast<size_t>(state.range(1));
    // One engine and one prefilled context per context length, shared by the chunk sizes.
    static std::unique_ptr<Engine> engine;
    static std::map<size_t, std::unique_ptr<KvCache>> contexts;
    if (!engine) {
        auto made = makeCpuEngine(weights(), options().threads);
        if (!made.isOk()) {
            return failOn(state, made.status());
        }
        engine = std::move(made.value());
    }
    size_t max_chunk = 0;
    for (int64_t c : options().chunks) {
        max_chunk = std::max(max_chunk, static_cast<size_t>(c));
    }
    auto& kv = contexts[context];
    if (!kv) {
        auto made = engine->newSequence(context + max_chunk);
        if (!made.isOk()) {
            return failOn(state, made.status());
        }
        kv = std::move(made.value());
        const auto ctx_tokens = prompt(context, 2);
        for (size_t at = 0; at < context; at += 256) {
            const size_t n = std::min<size_t>(256, context - at);
            auto r = engine->prefillChunk(*kv, std::span(ctx_tokens).subspan(at, n), false);
            if (!r.isOk()) {
                return failOn(state, r.status());
            }
        }
    }
    const auto tokens = prompt(chunk, 3);
    const double cpu0 = processCpuSeconds();
    for (auto _ : state) {
        auto r = engine->prefillChunk(*kv, tokens, /*last=*/true);
        if (!r.isOk()) {
            return failOn(state, r.status());
        }
        benchmark::DoNotOptimize(r->next_token);
        state.PauseTiming();
        kv->truncate(context);
        state.ResumeTiming();
    }
    state.counters["tokens_per_s"] =
        benchmark::Counter(static_cast<double>(chunk) * static_cast<double>(state.iterations()),
                           benchmark::Counter::kIsRate);
    state.counters["chunk"] = static_cast<double>(chunk);
    state.counters["context"] = static_cast<double>(context);
    reportCpu(state, processCpuSeconds() - cpu0, static_cast<double>(chunk));
    state.SetLabel(label(options().threads));
}

void naiveGemm(const float* x, size_t rows, const TensorView& w, float* y) {
    const size_t n = static_cast<size_t>(w.rows);
    const size_t k = static_cast<size_t>(w.cols);
    for (size_t r = 0; r < rows; ++r) {
        for (size_t j = 0; j < n; ++j) {
            float s = 0.0f;
            for (size_t i = 0; i < k; ++i) {
                s += x[r * k + i] * loadAsFloat(w.data, w.dtype, j * k + i);
            }
            y[r * n + j] = s;
        }
    }
}

void BM_Gemm(benchmark::State& state) {
    const bool blocked = state.range(0) != 0;
    const TensorView& w = weights()->layers()[0].q_proj;
    constexpr size_t kRows = 64;
    const size_t k = static_cast<size_t>(w.cols);
    const size_t n = static_cast<size_t>(w.rows);
    std::vector<float> x(kRows * k);
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : x) {
        v = dist(rng);
    }
    std::vector<float> y(kRows * n);
    ThreadPool pool(1);  // single thread: this compares kernels, not threading
    cpu::GemmScratch scratch;
    const cpu::GemmOutput out[] = {{&w, y.data(), n}};
    for (auto _ : state) {
        if (blocked) {
            cpu::gemm(x.data(), kRows, k, out, false, pool, scratch);
        } else {
            naiveGemm(x.data(), kRows, w, y.data());
        }
        benchmark::DoNotOptimize(y.data());
    }
    state.counters["GFLOP_per_s"] = benchmark::Counter(
        2.0 * static_cast<double>(kRows * n * k) * static_cast<double>(state.iterations()) / 1e9,
        benchmark::Counter::kIsRate);
    state.SetLabel(std::string(blocked ? "blocked " : "naive ") + label(1) + " " +
                   std::to_string(kRows) + "x" + std::to_string(k) + "x" + std::to_string(n));
}

// Strict numbers (options/value.h): "12abc", " 8", "-1" and overflow are errors, not 12.
std::vector<int64_t> parseList(const std::string& text) {
    std::vector<int64_t> out;
    for (std::string_view item : atlas::options::split(text, ',')) {
        const auto v = atlas::options::parseUnsigned(item);
        if (!v || *v < 1 || *v > (1u << 24)) {
            return {};
        }
        out.push_back(static_cast<int64_t>(*v));
    }
    return out;
}
int parseCount(const char* text) {
    const auto v = atlas::options::parseUnsigned(text);
    return v && *v <= (1u << 24) ? static_cast<int>(*v) : 0;  // 0 is refused below
}

// Takes our flags out of argv; returns "" or the malformed "--flag=value".
std::string parseOwnFlags(int* argc, char** argv) {
    Options& o = options();
    int kept = 1;
    for (int i = 1; i < *argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&](const char* flag) -> const char* {
            const std::string prefix = std::string(flag) + "=";
            return arg.rfind(prefix, 0) == 0 ? argv[i] + prefix.size() : nullptr;
        };
        bool ok = true;
        if (const char* v = value("--shape")) {
            o.shape = v;
        } else if (const char* v2 = value("--dtype")) {
            const std::string d = v2;
            ok = d == "bf16" || d == "f32";
            o.dtype = d == "bf16" ? DType::kBF16 : DType::kF32;
        } else if (const char* v3 = value("--threads")) {
            o.threads = parseCount(v3);
            ok = o.threads >= 1;
        } else if (const char* v4 = value("--prompt")) {
            o.prompt = parseCount(v4);
            ok = o.prompt >= 1;
        } else if (const char* v5 = value("--contexts")) {
            o.contexts = parseList(v5);
            ok = !o.contexts.empty();
        } else if (const char* v6 = value("--chunks")) {
            o.chunks = parseList(v6);
            ok = !o.chunks.empty();
        } else if (const char* v7 = value("--chunk-iterations")) {
            o.chunk_iterations = parseCount(v7);
            ok = o.chunk_iterations >= 1;
        } else {
            argv[kept++] = argv[i];
        }
        if (!ok) {
            return arg;
        }
    }
    *argc = kept;
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    if (const std::string bad = parseOwnFlags(&argc, argv); !bad.empty()) {
        std::fprintf(stderr,
                     "engine_bench: %s is invalid: expected --dtype=bf16|f32, --threads, "
                     "--prompt, --chunk-iterations a count >= 1, --contexts/--chunks a "
                     "comma-separated list of counts >= 1\n",
                     bad.c_str());
        return 2;
    }
    const Options& o = options();
    benchmark::RegisterBenchmark("BM_Gemm/naive", BM_Gemm)
        ->Arg(0)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
    benchmark::RegisterBenchmark("BM_Gemm/blocked", BM_Gemm)
        ->Arg(1)
        ->Unit(benchmark::kMillisecond)
        ->Iterations(5);
    auto* prefill = benchmark::RegisterBenchmark("BM_Prefill", BM_Prefill);
    prefill->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();
    if (o.threads != 1) {
        prefill->Arg(o.threads);
    }
    auto* chunk = benchmark::RegisterBenchmark("BM_ChunkCost", BM_ChunkCost);
    chunk->ArgNames({"chunk", "context"})->ArgsProduct({o.chunks, o.contexts});
    chunk->Unit(benchmark::kMillisecond)->Iterations(o.chunk_iterations)->UseRealTime();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 2;
    }
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
