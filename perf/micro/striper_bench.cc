// Cost of the striper's per-piece decision (runs on the engine thread for every chunk).
#include <benchmark/benchmark.h>

#include <vector>

#include "transport/striper.h"

using atlas::transport::StripeMode;
using atlas::transport::Striper;

static void BM_StriperLoadAware(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    Striper s(StripeMode::kLoadAware, n, 512 * 1024, 1024 * 1024);
    std::vector<uint64_t> q(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        q[static_cast<size_t>(i)] = static_cast<uint64_t>((i * 7919) % 1000000);
    }
    uint64_t remaining = 1ull << 40;
    for (auto _ : state) {
        auto a = s.next(1ull << 40, remaining, q);
        benchmark::DoNotOptimize(a);
        if (a) {
            // Keep loads moving so the choice changes from call to call.
            q[static_cast<size_t>(a->stream)] =
                (q[static_cast<size_t>(a->stream)] + 4099) % 1000000;
        }
    }
}
BENCHMARK(BM_StriperLoadAware)->Arg(1)->Arg(8)->Arg(16)->Arg(64);

static void BM_StriperEven(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    Striper s(StripeMode::kEven, n, 512 * 1024, 1);
    std::vector<uint64_t> q(static_cast<size_t>(n));
    for (auto _ : state) {
        auto a = s.next(64 << 20, 64 << 20, q);
        benchmark::DoNotOptimize(a);
    }
}
BENCHMARK(BM_StriperEven)->Arg(16)->Arg(64);

BENCHMARK_MAIN();
