// Cost of the bubble channel's hot operations, with baselines measured in the same run:
//   - Baseline_ClockGettime: the timestamp every publish takes (the floor of a publish);
//   - Baseline_MutexCopy: the naive alternative to the seqlock (lock, copy a record, unlock),
//     uncontended, so the ratio is a lower bound on what the seqlock saves.
// Run: bench_bubble_channel --benchmark_min_time=0.2 [--benchmark_out=f.json
//      --benchmark_out_format=json]
#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "channel/channel_reader.h"
#include "channel/channel_writer.h"

namespace {

using namespace atlas;
using namespace atlas::channel;

std::string benchName(const char* tag) {
    return "/atlas-chbench-" + std::string(tag) + "-" + std::to_string(::getpid());
}

ChannelWriter makeWriter(const std::string& name) {
    auto w = ChannelWriter::create(name, {256, 4096});
    if (!w.isOk()) {
        std::abort();
    }
    return std::move(w.value());
}

void Baseline_ClockGettime(benchmark::State& state) {
    for (auto _ : state) {
        benchmark::DoNotOptimize(monotonicNowNs());
    }
}
BENCHMARK(Baseline_ClockGettime);

void Baseline_MutexCopy(benchmark::State& state) {
    std::mutex mu;
    IdleInterval shared{};
    int64_t i = 0;
    for (auto _ : state) {
        std::lock_guard<std::mutex> lock(mu);
        shared = IdleInterval{i, i + 1, static_cast<uint64_t>(i)};
        benchmark::ClobberMemory();
        ++i;
    }
}
BENCHMARK(Baseline_MutexCopy);

void PublishObserved(benchmark::State& state) {
    ChannelWriter w = makeWriter(benchName("obs"));
    int64_t i = 0;
    for (auto _ : state) {
        benchmark::DoNotOptimize(w.publishObserved({i, i + 10, static_cast<uint64_t>(i)}));
        ++i;
    }
}
BENCHMARK(PublishObserved);

void PublishPredictions(benchmark::State& state) {
    ChannelWriter w = makeWriter(benchName("pred"));
    std::vector<PredictedWindow> set(static_cast<size_t>(state.range(0)));
    for (size_t i = 0; i < set.size(); ++i) {
        set[i] = {static_cast<Nanos>(i) * 100, static_cast<Nanos>(i) * 100 + 50, 900000, i,
                  WindowSource::kPredictor};
    }
    for (auto _ : state) {
        benchmark::DoNotOptimize(w.publishPredictions(set));
    }
    state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(PublishPredictions)->Arg(1)->Arg(4)->Arg(16)->Arg(64);

void SetStats(benchmark::State& state) {
    ChannelWriter w = makeWriter(benchName("stats"));
    ChannelStats s;
    for (auto _ : state) {
        s.iteration++;
        w.setStats(s);
    }
}
BENCHMARK(SetStats);

void ReadPredictions(benchmark::State& state) {
    const std::string name = benchName("readp");
    ChannelWriter w = makeWriter(name);
    std::vector<PredictedWindow> set(4, PredictedWindow{0, 10, 1, 1, WindowSource::kPredictor});
    w.publishPredictions(set);
    auto r = ChannelReader::open(name);
    for (auto _ : state) {
        auto s = r.value().readPredictions();
        benchmark::DoNotOptimize(s);
    }
}
BENCHMARK(ReadPredictions);

void ReadObserved64(benchmark::State& state) {
    const std::string name = benchName("reado");
    ChannelWriter w = makeWriter(name);
    auto r = ChannelReader::open(name);
    ReadCursor cursor;
    int64_t t = 0;
    for (auto _ : state) {
        state.PauseTiming();
        for (int i = 0; i < 64; ++i, ++t) {
            w.publishObserved({t, t + 1, static_cast<uint64_t>(t)});
        }
        state.ResumeTiming();
        auto b = r.value().readObservedSince(cursor);
        benchmark::DoNotOptimize(b);
    }
    state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(ReadObserved64);

}  // namespace

BENCHMARK_MAIN();
