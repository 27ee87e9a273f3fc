// Cost of the plugin's bubble measurement on the receive path (docs/bubbles.md): what one WAN
// receive adds when the observer is on, i.e. the clock reads the transport takes for it plus
// CommIdleObserver::posted()/arrived()/completed(), and the publisher's pop of the finished
// interval. Compare with the time per message in atlas-net-perf to get the overhead fraction.
#include <benchmark/benchmark.h>

#include "atlas/common/clock.h"
#include "plugin/bubbles.h"

namespace atlas::plugin {
namespace {

// One receive that waits (opens and closes an interval), as on a GPU stalled on the WAN.
void BM_ObservedReceive(benchmark::State& state) {
    IdleRecorder recorder;
    CommIdleObserver observer(&recorder, 1);
    const Clock& clock = MonotonicClock::instance();
    uint64_t seq = 0;
    ObservedWait iv;
    for (auto _ : state) {
        observer.posted(seq, clock.nowNs());
        observer.arrived(seq, 1 << 20, clock.nowNs());
        observer.completed(seq, clock.nowNs());
        ++seq;
        benchmark::DoNotOptimize(recorder.pop(&iv));
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ObservedReceive);

// Receives posted ahead (NCCL keeps up to NCCL_STEPS in flight): only the first one of a
// burst opens an interval; the others cost the counters alone.
void BM_ObservedReceiveBurst8(benchmark::State& state) {
    IdleRecorder recorder;
    CommIdleObserver observer(&recorder, 1);
    const Clock& clock = MonotonicClock::instance();
    uint64_t seq = 0;
    ObservedWait iv;
    for (auto _ : state) {
        for (int i = 0; i < 8; ++i) {
            observer.posted(seq + i, clock.nowNs());
        }
        for (int i = 0; i < 8; ++i) {
            observer.arrived(seq + i, 1 << 20, clock.nowNs());
            observer.completed(seq + i, clock.nowNs());
        }
        seq += 8;
        benchmark::DoNotOptimize(recorder.pop(&iv));
    }
    state.SetItemsProcessed(state.iterations() * 8);
}
BENCHMARK(BM_ObservedReceiveBurst8);

}  // namespace
}  // namespace atlas::plugin

BENCHMARK_MAIN();
