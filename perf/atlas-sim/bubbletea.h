// BubbleTea inside the simulator: inference prefill requests (Poisson arrivals, a prompt
// length distribution) run on stage groups while their GPUs wait for pipeline data.
//
// Rules (the paper's "no impact on training"):
//  - A chunk is only started inside a window (oracle: the exact idle intervals of a run
//    without BubbleTea, each optionally stretched by prediction_error; predicted: the windows
//    scheduler/'s BubblePipeline, the plugin's publishing step, has in force: stepped at the
//    model's events, fed each idle interval when it ends and the wait open now, and only
//    windows whose wait has begun are used, as bubbletea uses only predictor-open ones),
//    shrunk by the guard band.
//  - A chunk is sized so that its cost ends before the window does; a prompt that does not
//    fit is split into chunks (at most chunk_tokens, at least min_chunk_tokens) that continue
//    in later windows on the same group (its KV cache lives there).
//  - Chunks are not preempted: if the window was wrong and training work becomes ready while
//    a chunk runs, training waits for the chunk's end. The simulator measures that delay; it is
//    zero by construction when windows are exact.
// Queueing: FIFO with a bounded look-ahead (the first request whose first chunk fits the
// window is taken), optional drop after max_wait. Arrivals start when the measured
// iterations start, so TTFT is not inflated by the warm-up.
//
// Threads: one owner (the simulator). Randomness: its own splitmix64 stream from the seed, so
// arrivals do not depend on event order.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "perf/atlas-sim/config.h"
#include "perf/atlas-sim/event_queue.h"
#include "perf/atlas-sim/model.h"
#include "scheduler/bubble_pipeline.h"
#include "scheduler/types.h"

namespace atlas::sim {

// splitmix64: small, fast, identical everywhere (std:: distributions are not portable).
class Rng {
  public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint64_t next() {
        uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)

  private:
    uint64_t state_;
};

// Stateless hash of a key tuple -> [0, 1); used for per-task jitter so that two runs draw the
// same value for the same task whatever the event order.
double hashUniform(uint64_t seed, uint64_t a, uint64_t b, uint64_t c);

// What BubbleTea needs from the training side.
class PrefillHost {
  public:
    virtual ~PrefillHost() = default;
    // True while the group's GPUs have no training work running or ready.
    virtual bool prefillAllowed(int group) const = 0;
    // While prefillAllowed: when the group's wait for training work began (the end of its
    // last training activity), what the plugin's recorder reports as the wait open now.
    virtual Nanos waitStart(int group) const = 0;
    // A chunk ended on `group` at now_ns: training may resume.
    virtual void prefillFinished(int group, Nanos now_ns) = 0;
    virtual void recordPrefill(int group, Nanos start_ns, Nanos end_ns, int32_t request) = 0;
};

struct PrefillStats {
    uint64_t arrived = 0;
    uint64_t completed = 0;
    uint64_t dropped = 0;     // waited longer than max_wait without starting
    uint64_t unfinished = 0;  // queued or partly done when training ended
    uint64_t tokens = 0;      // prefilled tokens (including partial prompts)
    uint64_t chunks = 0;
    std::vector<Nanos> ttft_ns;   // per completed request, arrival to last chunk + handoff
    uint64_t predictor_ok = 0;    // window look-ups answered with a prediction
    uint64_t predictor_none = 0;  // ... answered "no prediction" (learning, stale, lost)
};

class BubbleTea {
  public:
    // Event types this component posts to the queue (the simulator routes them back).
    static constexpr uint32_t kArrivalEvent = 100;
    static constexpr uint32_t kChunkDoneEvent = 101;
    static constexpr uint32_t kWindowEvent = 102;

    // `oracle` (oracle mode) holds each group's exact idle intervals, sorted; it must outlive
    // this object.
    BubbleTea(const SimConfig& config, int groups, EventQueue* queue, PrefillHost* host,
              const std::vector<std::vector<sched::Interval>>* oracle);

    // Arrivals start / stop (the measured iterations' start; the end of training).
    void start(Nanos now_ns);
    void stop() { running_ = false; }

    // The group may prefill from now (idempotent).
    void onIdle(int group, Nanos now_ns);
    // An idle interval of the group ended (predicted mode feeds its pipeline).
    void observeIdle(int group, const sched::Interval& idle);

    bool chunkRunning(int group) const { return g_[static_cast<size_t>(group)].chunk_end != kNone; }
    Nanos chunkEnd(int group) const { return g_[static_cast<size_t>(group)].chunk_end; }

    void handle(const Event& e);

    // Totals at the end of the run (counts unfinished requests).
    PrefillStats finish();

  private:
    static constexpr Nanos kNone = -1;
    struct Request {
        Nanos arrival_ns = 0;
        int32_t tokens = 0;
        int32_t done = 0;
        int32_t group = -1;
    };
    struct GroupState {
        int32_t active = -1;  // request in progress on this group (KV cache here)
        Nanos chunk_end = kNone;
        int32_t chunk_tokens = 0;
        Nanos window_event_at = kNone;  // pending kWindowEvent time
        Nanos window_end = kNone;       // last known open window end (ready list)
        bool in_ready = false;
        size_t oracle_cursor = 0;
    };
    struct Window {
        bool open = false;
        Nanos end_ns = 0;
        Nanos next_start_ns = kNone;
    };

    Window window(int group, Nanos now_ns);
    void dispatch(int group, Nanos now_ns);
    void runChunk(int group, int32_t request, int64_t tokens, Nanos now_ns);
    void scheduleWindow(int group, Nanos at_ns);
    void onArrival(Nanos now_ns);
    void onChunkDone(int group, Nanos now_ns);
    int32_t drawTokens();
    int64_t minChunk(const Request& r) const;

    const BubbleTeaSpec spec_;
    PrefillCost cost_;
    EventQueue* queue_;
    PrefillHost* host_;
    const std::vector<std::vector<sched::Interval>>* oracle_;
    std::vector<GroupState> g_;
    std::vector<sched::BubblePipeline> pipelines_;  // one per group (predicted mode)
    uint32_t min_confidence_ppm_ = 0;
    std::vector<Request> requests_;
    std::deque<int32_t> queue_reqs_;
    std::vector<int32_t> ready_;
    Rng rng_;
    bool running_ = false;
    PrefillStats stats_;
};

}  // namespace atlas::sim
