// bubbletea-engine-check: runs the CUDA prefill engine against the CPU engine on random
// models and prints a PASS/FAIL table, then (unless --skip-perf) CUDA prefill throughput.
// Needs a GPU; exits 2 when no CUDA device is usable, 1 when any check fails, 0 otherwise.
//
//   bubbletea-engine-check [--device N] [--perf-shape NAME] [--perf-prompt N] [--skip-perf]
// (--flag=value works too; --help lists them with their defaults).
//
// Tolerances (relative L2 error ||cuda - cpu|| / ||cpu||, over all last-position logits and
// over every exported K/V element):
//   F32 weights  1e-4: the CUDA engine is fp32 end to end (cuBLAS COMPUTE_32F, no TF32), so
//                only summation order differs (expected ~1e-6).
//   BF16 weights 3e-2: the CUDA engine rounds GEMM inputs and the KV cache to bf16 (2^-9
//                relative per rounding, ~1e-3 rms per layer), the CPU keeps fp32.
//   CUDA chunked vs CUDA one-shot (BF16) 1e-2: cuBLAS may pick different algorithms per
//                chunk size, which can flip bf16 roundings downstream.
// A broken kernel (RoPE pairing, GQA head mapping, causal mask, softmax) gives errors of
// order 1. The next token must match the CPU's whenever the CPU's top-2 logit gap exceeds
// 5% of the logits' RMS (otherwise it is reported, not judged).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bubbletea/engine/engine.h"
#include "options/help.h"
#include "options/table.h"

namespace {

using namespace atlas::bubbletea;
using Clock = std::chrono::steady_clock;

struct Row {
    std::string check;
    std::string metric;
    double value;
    double limit;
    bool pass;
};

std::vector<Row> g_rows;

void record(const std::string& check, const std::string& metric, double value, double limit,
            bool pass) {
    g_rows.push_back({check, metric, value, limit, pass});
}

double relativeL2(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size()) {
        return INFINITY;
    }
    double num = 0;
    double den = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        const double d = static_cast<double>(a[i]) - b[i];
        num += d * d;
        den += static_cast<double>(b[i]) * b[i];
    }
    return std::sqrt(num / std::max(den, 1e-30));
}

std::vector<int32_t> randomPrompt(size_t n, int64_t vocab, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
    std::vector<int32_t> out(n);
    for (auto& t : out) {
        t = dist(rng);
    }
    return out;
}

struct Outcome {
    bool ok = false;
    std::string error;
    PrefillResult result;
    std::vector<float> kv;
};

Outcome run(Engine& engine, const std::vector<int32_t>& prompt, const std::vector<size_t>& split) {
    Outcome out;
    auto kv = engine.newSequence(prompt.size());
    if (!kv.isOk()) {
        out.error = kv.status().toString();
        return out;
    }
    size_t at = 0;
    for (size_t i = 0; i < split.size(); ++i) {
        auto r = engine.prefillChunk(**kv, std::span(prompt).subspan(at, split[i]),
                                     i + 1 == split.size());
        if (!r.isOk()) {
            out.error = r.status().toString();
            return out;
        }
        at += split[i];
        out.result = std::move(r.value());
    }
    std::vector<std::byte> bytes;
    KvLayout layout;
    const atlas::Status st = engine.exportKv(**kv, DType::kF32, &bytes, &layout);
    if (!st.isOk()) {
        out.error = st.toString();
        return out;
    }
    out.kv = kvToFloat(bytes, layout);
    out.ok = true;
    return out;
}

void compareOutcomes(const std::string& name, const Outcome& got, const Outcome& want,
                     double tolerance) {
    if (!got.ok || !want.ok) {
        record(name, "ran: " + (got.ok ? want.error : got.error), 0, 0, false);
        return;
    }
    const double logit_err = relativeL2(got.result.last_logits, want.result.last_logits);
    record(name, "logits rel L2", logit_err, tolerance, logit_err <= tolerance);
    const double kv_err = relativeL2(got.kv, want.kv);
    record(name, "KV rel L2", kv_err, tolerance, kv_err <= tolerance);
    const auto& logits = want.result.last_logits;
    std::vector<float> sorted = logits;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    double ms = 0;
    for (float v : logits) {
        ms += static_cast<double>(v) * v;
    }
    const double rms = std::sqrt(ms / static_cast<double>(logits.size()));
    const double gap = static_cast<double>(sorted[0]) - sorted[1];
    const bool judged = gap > 0.05 * rms;
    const bool same = got.result.next_token == want.result.next_token;
    record(name, std::string("next token ") + (judged ? "equal" : "equal (gap too small, info)"),
           same ? 1 : 0, 1, same || !judged);
}

struct ModelCase {
    std::string name;
    ModelConfig config;
    DType dtype;
    size_t prompt;
    std::vector<size_t> gpu_split;
    double tolerance;
};

ModelConfig preset(const char* name) {
    auto c = shapePreset(name);
    if (!c.isOk()) {
        std::fprintf(stderr, "%s\n", c.status().toString().c_str());
        std::exit(2);
    }
    return c.value();
}

void checkModel(const ModelCase& mc, int device, int cpu_threads) {
    auto weights = makeRandomWeights(mc.config, mc.dtype, 31, cpu_threads);
    if (!weights.isOk()) {
        record(mc.name, "weights: " + weights.status().toString(), 0, 0, false);
        return;
    }
    auto cuda = makeCudaEngine(*weights, device, true);
    auto cpu = makeCpuEngine(*weights, cpu_threads);
    if (!cuda.isOk() || !cpu.isOk()) {
        record(mc.name, "engine: " + (cuda.isOk() ? cpu.status() : cuda.status()).toString(), 0, 0,
               false);
        return;
    }
    const auto prompt = randomPrompt(mc.prompt, mc.config.vocab_size, 17);
    const Outcome want = run(**cpu, prompt, {mc.prompt});
    const Outcome got = run(**cuda, prompt, mc.gpu_split);
    compareOutcomes(mc.name + " cuda(chunked) vs cpu", got, want, mc.tolerance);
    if (mc.dtype == DType::kBF16) {
        const Outcome one_shot = run(**cuda, prompt, {mc.prompt});
        compareOutcomes(mc.name + " cuda chunked vs one-shot", got, one_shot,
                        std::min(mc.tolerance, 1e-2));
    }
}

void checkCancel(int device) {
    const std::string name = "tiny cancel + retry";
    auto weights = makeRandomWeights(preset("tiny"), DType::kBF16, 5);
    auto cuda = makeCudaEngine(*weights, device, true);
    if (!cuda.isOk()) {
        record(name, "engine: " + cuda.status().toString(), 0, 0, false);
        return;
    }
    const auto prompt = randomPrompt(64, 256, 3);
    const Outcome reference = run(**cuda, prompt, {32, 32});
    auto kv = (*cuda)->newSequence(64);
    bool ok = kv.isOk() && (*cuda)->prefillChunk(**kv, std::span(prompt).first(32), false).isOk();
    std::atomic<bool> cancel{true};
    auto cancelled = (*cuda)->prefillChunk(**kv, std::span(prompt).subspan(32), true, &cancel);
    ok = ok && !cancelled.isOk() && cancelled.status().code() == atlas::Code::kTimeout &&
         (*kv)->length() == 32;
    cancel = false;
    auto retried = (*cuda)->prefillChunk(**kv, std::span(prompt).subspan(32), true, &cancel);
    ok = ok && retried.isOk() && reference.ok &&
         relativeL2(retried->last_logits, reference.result.last_logits) < 1e-2;
    record(name, "kTimeout, length kept, retry matches", ok ? 1 : 0, 1, ok);
}

double seconds(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

void perf(int device, const std::string& shape, size_t prompt_len, int cpu_threads) {
    auto config = shapePreset(shape);
    if (!config.isOk()) {
        std::printf("perf: %s\n", config.status().toString().c_str());
        return;
    }
    std::printf("\nCUDA prefill throughput: %s, random BF16 weights, low-priority stream\n",
                shape.c_str());
    const auto t0 = Clock::now();
    auto weights = makeRandomWeights(*config, DType::kBF16, 1, cpu_threads);
    auto cuda = weights.isOk() ? makeCudaEngine(*weights, device, true)
                               : atlas::Result<std::unique_ptr<Engine>>(weights.status());
    if (!cuda.isOk()) {
        std::printf("perf: %s\n", cuda.status().toString().c_str());
        return;
    }
    std::printf("  weights generated + uploaded in %.1f s\n", seconds(t0, Clock::now()));
    const auto tokens = randomPrompt(prompt_len, config->vocab_size, 9);
    std::printf("  %-28s %10s %12s\n", "case", "ms", "tokens/s");
    auto time_chunks = [&](const char* label, size_t context, size_t chunk) {
        if (context + chunk > tokens.size()) {
            return;
        }
        double best = INFINITY;
        for (int rep = 0; rep < 3; ++rep) {  // best of 3 (the first also warms up cuBLAS)
            auto kv = (*cuda)->newSequence(context + chunk);
            if (!kv.isOk()) {
                return;
            }
            for (size_t at = 0; at < context; at += 512) {
                const size_t n = std::min<size_t>(512, context - at);
                if (!(*cuda)->prefillChunk(**kv, std::span(tokens).subspan(at, n), false).isOk()) {
                    return;
                }
            }
            const auto start = Clock::now();
            auto r = (*cuda)->prefillChunk(**kv, std::span(tokens).subspan(context, chunk), true);
            const double s = seconds(start, Clock::now());
            if (!r.isOk()) {
                std::printf("  %s: %s\n", label, r.status().toString().c_str());
                return;
            }
            best = std::min(best, s);
        }
        char name[64];
        std::snprintf(name, sizeof(name), "%s chunk %zu @ ctx %zu", label, chunk, context);
        std::printf("  %-28s %10.2f %12.0f\n", name, best * 1e3, static_cast<double>(chunk) / best);
    };
    time_chunks("one-shot", 0, prompt_len);
    for (size_t chunk : {64u, 256u, 1024u}) {
        time_chunks("chunk", 0, chunk);
        time_chunks("chunk", prompt_len / 2, chunk);
    }
}

struct CheckOptions {
    int device = 0;
    std::string perf_shape = "llama-3.2-1b";
    uint64_t perf_prompt = 2048;
    bool skip_perf = false;
    bool help = false;
};

using namespace atlas::options::kinds;
#define ATLAS_ENGINE_CHECK_OPTIONS(X)                                                             \
    X("--device", Uint, device, 0, 1023, "N", "CUDA device")                                      \
    X("--perf-shape", Path, perf_shape, 0, 0, "NAME", "model preset of the throughput run")       \
    X("--perf-prompt", Uint, perf_prompt, 1, 1 << 20, "N", "prompt tokens of the throughput run") \
    X("--skip-perf", Switch, skip_perf, 0, 0, "", "checks only, no throughput run")               \
    X("--help", Switch, help, 0, 0, "", "this text")
#define ATLAS_ENGINE_CHECK_ALIASES(X) X("-h", "--help", false)

}  // namespace

int main(int argc, char** argv) {
    static const auto table =
        ATLAS_OPTIONS_TABLE(CheckOptions, ATLAS_ENGINE_CHECK_OPTIONS, ATLAS_ENGINE_CHECK_ALIASES);
    atlas::options::Parsed<CheckOptions> parsed;
    atlas::options::readArgs(table, std::vector<std::string>(argv + 1, argv + argc), &parsed);
    for (const std::string& w : parsed.positional) {
        parsed.errors.push_back("unexpected argument '" + w + "'");
    }
    const std::string usage =
        "usage: bubbletea-engine-check [options]\n"
        "CUDA prefill engine against the CPU engine (docs/gpu-check.md); needs a GPU.\n\n" +
        atlas::options::flagHelp(table);
    if (!parsed.errors.empty()) {
        std::fprintf(stderr, "bubbletea-engine-check: %s\n%s", parsed.status().message().c_str(),
                     usage.c_str());
        return 2;
    }
    if (parsed.config.help) {
        std::fputs(usage.c_str(), stdout);
        return 0;
    }
    const int device = parsed.config.device;
    const std::string perf_shape = parsed.config.perf_shape;
    const size_t perf_prompt = parsed.config.perf_prompt;
    const bool skip_perf = parsed.config.skip_perf;
    const int cpu_threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    {
        auto probe = makeRandomWeights(preset("tiny"), DType::kF32, 1);
        auto cuda = makeCudaEngine(*probe, device, true);
        if (!cuda.isOk()) {
            std::printf("SKIP: %s\n", cuda.status().toString().c_str());
            return 2;
        }
    }

    ModelConfig real_width = preset("llama-3.2-1b");
    real_width.num_hidden_layers = 2;  // real widths and vocab, quick to build
    const std::vector<ModelCase> cases = {
        {"tiny F32", preset("tiny"), DType::kF32, 100, {37, 63}, 1e-4},
        {"tiny BF16", preset("tiny"), DType::kBF16, 100, {37, 63}, 3e-2},
        {"small BF16", preset("small"), DType::kBF16, 300, {128, 128, 44}, 3e-2},
        {"small F32", preset("small"), DType::kF32, 300, {1, 200, 99}, 1e-4},
        {"llama-3.2-1b x2 layers BF16", real_width, DType::kBF16, 200, {64, 136}, 3e-2},
    };
    for (const ModelCase& mc : cases) {
        checkModel(mc, device, cpu_threads);
    }
    checkCancel(device);

    bool all = true;
    std::printf("%-44s %-36s %12s %10s  %s\n", "check", "metric", "value", "limit", "result");
    for (const Row& r : g_rows) {
        std::printf("%-44s %-36s %12.3e %10.1e  %s\n", r.check.c_str(), r.metric.c_str(), r.value,
                    r.limit, r.pass ? "PASS" : "FAIL");
        all = all && r.pass;
    }
    std::printf("%s: %zu checks\n", all ? "ALL PASS" : "SOME CHECKS FAILED", g_rows.size());
    if (!skip_perf) {
        perf(device, perf_shape, perf_prompt, cpu_threads);
    }
    return all ? 0 : 1;
}
