// Microbenchmarks of the scheduler's hot decisions (target: < 1 us each):
//  - a link decision with 64 active flows, per policy: unchanged (cached), after a
//    completion + new request (churn), and at a lease end (preempt and re-pick);
//  - a bubble predictor update (observe one idle interval) and a prediction, in steady state;
//  - the period detector: one event while locked, and one event while searching (the
//    expensive path, amortised by its back-off).
// Run: build-x/perf/micro/scheduler_bench [--benchmark_format=json --benchmark_out=f.json]
#include <benchmark/benchmark.h>

#include <cmath>
#include <memory>
#include <vector>

#include "scheduler/bubble_predictor.h"
#include "scheduler/link_policy.h"
#include "scheduler/period_detector.h"

namespace atlas::sched {
namespace {

constexpr int kFlows = 64;
// Each flow re-requests every kFlows steps; a 10 us step makes that a 640 us period, inside
// the detectors' range, so WorkloadAware learns it and runs planned (not fallback) decisions.
constexpr Nanos kStep = 10 * kNsPerUs;

PolicyKind kindOf(const benchmark::State& state) {
    return static_cast<PolicyKind>(state.range(0));
}

std::unique_ptr<LinkPolicy> makeLoaded(PolicyKind kind, Nanos* now, FlowId* next_flow) {
    PolicyConfig cfg;
    cfg.max_slot_ns = 100 * kNsPerUs;
    cfg.min_slot_ns = 20 * kNsPerUs;
    auto policy = std::move(makePolicy(kind, cfg).value());
    for (int i = 0; i < kFlows; ++i) {
        (void)policy->onRequest((*next_flow)++, {i, 1, Direction::kForward}, 1 << 20, *now);
        *now += kStep;
    }
    (void)policy->decide(*now);
    return policy;
}

// Completes the current holder (or the oldest flow) and re-requests for the same class.
// Flow ids keep (id - 1) % kFlows equal to the pipeline.
void churn(LinkPolicy& p, Nanos* now) {
    std::span<const Grant> g = p.decide(*now);
    const FlowId done = g[0].flow;
    const auto pipeline = static_cast<int32_t>((done - 1) % kFlows);
    *now += kStep;
    (void)p.onComplete(done, *now);
    (void)p.onRequest(done + kFlows, {pipeline, 1, Direction::kForward}, 1 << 20, *now);
}

void BM_DecideUnchanged(benchmark::State& state) {
    Nanos now = 0;
    FlowId next = 1;
    auto policy = makeLoaded(kindOf(state), &now, &next);
    for (auto _ : state) {
        benchmark::DoNotOptimize(policy->decide(now).data());
    }
    state.SetLabel(policyKindName(kindOf(state)));
}

void BM_DecideAfterChurn(benchmark::State& state) {
    Nanos now = 0;
    FlowId next = 1;
    auto policy = makeLoaded(kindOf(state), &now, &next);
    // Warm up: let WorkloadAware's detectors lock on the 640 us request period.
    for (int i = 0; i < 200 * kFlows; ++i) {
        churn(*policy, &now);
    }
    for (auto _ : state) {
        churn(*policy, &now);
        benchmark::DoNotOptimize(policy->decide(now).data());
    }
    state.SetLabel(std::string(policyKindName(kindOf(state))) +
                   " (onComplete + onRequest + decide)");
}

void BM_DecideAtLeaseEnd(benchmark::State& state) {
    Nanos now = 0;
    FlowId next = 1;
    auto policy = makeLoaded(kindOf(state), &now, &next);
    for (auto _ : state) {
        now = std::max(now + 1, policy->nextDecisionNs(now));
        benchmark::DoNotOptimize(policy->decide(now).data());
    }
    state.SetLabel(policyKindName(kindOf(state)));
}

// A stage with three bubbles per 100 ms iteration, in steady state.
struct BubbleStream {
    Nanos iteration_start = kNsPerSec;
    int k = 0;
    Interval next() {
        static constexpr double kOffsets[] = {0.0, 0.35, 0.8};
        static constexpr double kLengths[] = {0.15, 0.10, 0.15};
        constexpr Nanos kP = 100 * kNsPerMs;
        const Nanos s = iteration_start + static_cast<Nanos>(kOffsets[k] * kP);
        const Interval iv{s, s + static_cast<Nanos>(kLengths[k] * kP)};
        if (++k == 3) {
            k = 0;
            iteration_start += kP;
        }
        return iv;
    }
};

void BM_PredictorObserve(benchmark::State& state) {
    BubblePredictor p;
    BubbleStream stream;
    for (int i = 0; i < 600; ++i) {
        (void)p.observe(stream.next());
    }
    for (auto _ : state) {
        benchmark::DoNotOptimize(p.observe(stream.next()).isOk());
    }
    state.SetLabel(p.period(stream.iteration_start).locked() ? "locked" : "NOT LOCKED");
}

void BM_PredictorPredict(benchmark::State& state) {
    BubblePredictor p;
    BubbleStream stream;
    Interval last{};
    for (int i = 0; i < 600; ++i) {
        last = stream.next();
        (void)p.observe(last);
    }
    std::vector<PredictedWindow> out;
    out.reserve(64);
    for (auto _ : state) {
        benchmark::DoNotOptimize(p.predict(last.end_ns, &out));
    }
    state.SetLabel(std::to_string(out.size()) + " windows");
}

void BM_DetectorEventLocked(benchmark::State& state) {
    PeriodDetector d;
    Nanos t = kNsPerSec;
    for (int i = 0; i < 200; ++i) {
        (void)d.addEvent(t += 100 * kNsPerMs);
    }
    for (auto _ : state) {
        benchmark::DoNotOptimize(d.addEvent(t += 100 * kNsPerMs).isOk());
    }
    state.SetLabel(d.estimate(t).locked() ? "locked" : "NOT LOCKED");
}

void BM_DetectorEventSearching(benchmark::State& state) {
    PeriodDetector d;
    Nanos t = kNsPerSec;
    uint64_t x = 88172645463325252ULL;
    auto gap = [&] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const double u = static_cast<double>(x >> 11) * 0x1.0p-53;
        return static_cast<Nanos>(-std::log(1.0 - u) * 100e6) + 1;
    };
    for (int i = 0; i < 200; ++i) {
        (void)d.addEvent(t += gap());
    }
    for (auto _ : state) {
        benchmark::DoNotOptimize(d.addEvent(t += gap()).isOk());
    }
    state.SetLabel("random arrivals (never locks)");
}

void policies(benchmark::internal::Benchmark* b) {
    for (PolicyKind k : {PolicyKind::kFair, PolicyKind::kTemporal, PolicyKind::kWorkload}) {
        b->Arg(static_cast<int64_t>(k));
    }
}

BENCHMARK(BM_DecideUnchanged)->Apply(policies);
BENCHMARK(BM_DecideAfterChurn)->Apply(policies);
BENCHMARK(BM_DecideAtLeaseEnd)
    ->Arg(static_cast<int64_t>(PolicyKind::kTemporal))
    ->Arg(static_cast<int64_t>(PolicyKind::kWorkload));
BENCHMARK(BM_PredictorObserve);
BENCHMARK(BM_PredictorPredict);
BENCHMARK(BM_DetectorEventLocked);
BENCHMARK(BM_DetectorEventSearching);

}  // namespace
}  // namespace atlas::sched

BENCHMARK_MAIN();
