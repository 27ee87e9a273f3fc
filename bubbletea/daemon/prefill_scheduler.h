// PrefillScheduler: decides which prefill chunk runs when, so that prefill only ever runs
// inside predicted GPU idle windows ("bubbles") and requests meet their TTFT deadlines.
//
// Policy (a pure function of the queue, the window plan, the cost model and `now`):
//   - Queue order is earliest-deadline-first (ties: arrival order).
//   - A window [start, end) is usable up to end - margin; the end margin absorbs cost-model
//     error and timer slack. A chunk starts only inside a window, and only if its predicted
//     run time fits in what is left of the usable window: the chunk size is the largest
//     token count whose predicted time fits (capped by max_chunk_tokens and the tokens left
//     in the prompt). A chunk smaller than min_chunk_tokens is not started unless it
//     finishes the prompt; the request waits for the next window instead. So a long prompt
//     spans several windows, with its KV cache kept between chunks (chunked prefill).
//   - Admission simulates the EDF schedule over the upcoming windows (extended periodically
//     when the plan has a period). A request is rejected (kDeadline) when it would finish
//     after its deadline, or when admitting it would make a queued request that currently
//     meets its deadline miss it; kQueueFull when queue_limit requests are queued.
//   - A queued request whose deadline passes is expired (next() returns kExpire): its TTFT
//     is lost, so the client is told at once instead of after more work.
//   - Overruns (a chunk that ends after its window's end) are counted and raise the end
//     margin by twice the overrun, but by at most max(margin, end_margin_step_ns) per overrun (so a
//     one-off stall cannot push it past the windows), capped at max_end_margin_ns. Without overruns
//     its excess over the floor decays with time (half-life end_margin_half_life_ns), whether or
//     not chunks run: an end margin grown past the window length must come back, or nothing would
//     ever run again to prove it could. For the same reason the cost model's speed scale relaxes
//     towards the profile as time passes (CostModel::relax).
//
// Threads: not thread-safe, no I/O, no clock reads; time enters only as arguments. The
// daemon's worker owns one and guards it (and the CostModel it references) with one mutex.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "atlas/common/clock.h"
#include "bubbletea/daemon/cost_model.h"
#include "bubbletea/daemon/window_source.h"

namespace atlas::bubbletea {

using RequestId = uint64_t;

struct SchedulerConfig {
    size_t queue_limit = 64;               // queued (admitted, unfinished) requests
    int64_t min_chunk_tokens = 16;         // smallest chunk started unless it ends the prompt
    int64_t max_chunk_tokens = 2048;       // largest chunk (bounds memory and latency of a call)
    Nanos end_margin_ns = 300 * kNsPerUs;  // initial end margin and its floor
    Nanos max_end_margin_ns = 50 * kNsPerMs;
    Nanos end_margin_step_ns = kNsPerMs;  // largest rise per overrun while the margin is below it
    Nanos end_margin_half_life_ns = 10 * kNsPerSec;  // decay of the end margin's excess
    // A chunk must fit with its predicted time stretched by this many times the cost model's
    // recent relative error: the end margin is absolute, but timing noise (a contended core,
    // a cold cache) grows with the chunk, and a large chunk in a large window overruns by more
    // than any fixed band that small windows can afford.
    double error_margin = 2.0;
    // The admission simulation never looks further ahead than this.
    Nanos plan_horizon_ns = 120 * kNsPerSec;
};

enum class AdmitOutcome { kAccepted, kQueueFull, kDeadline };
const char* admitOutcomeName(AdmitOutcome outcome);

struct AdmitResult {
    AdmitOutcome outcome = AdmitOutcome::kAccepted;
    Nanos predicted_finish_ns = kForeverNs;  // the request's predicted completion
    Nanos retry_after_ns = 0;                // rejections: when trying again may succeed
    std::string reason;                      // rejections: for the client's error message
};

// One chunk the worker should run now.
struct ChunkPlan {
    RequestId id = 0;
    int64_t start_token = 0;  // == tokens already in the request's KV cache
    int64_t tokens = 0;
    bool last = false;  // the chunk ends the prompt
    Nanos predicted_ns = 0;
    Window window;  // the window it runs in (raw, before the end margin)
};

struct Decision {
    enum class Kind {
        kIdle,    // nothing queued
        kWait,    // nothing may start now; ask again at wake_ns or when windows change
        kRun,     // run `chunk` now
        kExpire,  // `expired` passed its deadline and was removed from the queue
    };
    Kind kind = Kind::kIdle;
    ChunkPlan chunk;
    RequestId expired = 0;
    Nanos wake_ns = kForeverNs;
};

struct ChunkOutcome {
    RequestId id = 0;
    int64_t tokens = 0;   // as planned
    int64_t context = 0;  // start_token of the chunk
    Nanos started_ns = 0;
    Nanos finished_ns = 0;
    Nanos window_end_ns = 0;  // raw end of the window it was planned in
    bool cancelled = false;   // the window was withdrawn; no progress was made
};

struct SchedulerStats {
    uint64_t admitted = 0;
    uint64_t rejected_queue_full = 0;
    uint64_t rejected_deadline = 0;
    uint64_t expired = 0;
    uint64_t chunks = 0;     // completed (not cancelled)
    uint64_t overruns = 0;   // chunks (completed or cancelled) that ended after their window
    uint64_t cancelled = 0;  // chunks cancelled because their window was withdrawn
    Nanos overrun_ns_total = 0;
};

class PrefillScheduler {
  public:
    // `model` must outlive the scheduler; the scheduler feeds it measured chunks.
    PrefillScheduler(SchedulerConfig config, CostModel& model);

    // Queues request `id` (unique) with `prompt_tokens` > 0 tokens if it fits (see above).
    AdmitResult admit(RequestId id, int64_t prompt_tokens, Nanos deadline_ns, Nanos now_ns,
                      const WindowPlan& plan);

    // What to do at `now_ns`. kExpire removes the request; call again for the next decision.
    Decision next(Nanos now_ns, const WindowPlan& plan);

    // Reports a chunk planned by next(). Completed chunks advance the request and feed the
    // cost model; cancelled ones make no progress. Both count as overruns (raising the end
    // margin) when they finished after their window's end.
    void chunkDone(const ChunkOutcome& outcome);

    // Removes a request (finished, failed or abandoned by its client). False if unknown.
    bool remove(RequestId id);

    size_t queueDepth() const { return queue_.size(); }
    bool contains(RequestId id) const;
    int64_t doneTokens(RequestId id) const;  // -1 if unknown
    std::vector<RequestId> edfOrder() const;
    Nanos endMarginNs() const { return end_margin_ns_; }
    const SchedulerStats& stats() const { return stats_; }
    const SchedulerConfig& config() const { return config_; }
    // Predicted completion of everything queued (kForeverNs if some request never
    // finishes within the plan), for Retry-After hints and /metrics.
    Nanos predictedDrainNs(Nanos now_ns, const WindowPlan& plan) const;

  private:
    // Factor on predicted chunk times: 1 + error_margin x the model's recent relative error.
    double stretch() const;
    struct Entry {
        RequestId id;
        Nanos deadline_ns;
        uint64_t seq;  // arrival order, breaks deadline ties
        int64_t total_tokens;
        int64_t done_tokens;
    };
    struct SimResult {
        std::vector<Nanos> finish_ns;  // per entry of the input order; kForeverNs: never
        std::vector<bool> meets;       // finish <= deadline
    };

    SimResult simulate(const std::vector<Entry>& edf, Nanos now_ns, const WindowPlan& plan) const;
    static bool edfLess(const Entry& a, const Entry& b);
    void decayEndMargin(Nanos now_ns);

    SchedulerConfig config_;
    CostModel& model_;
    std::vector<Entry> queue_;  // sorted by edfLess
    uint64_t next_seq_ = 0;
    Nanos end_margin_ns_;
    Nanos end_margin_updated_ns_ = INT64_MIN;  // last decayEndMargin() time
    SchedulerStats stats_;
};

}  // namespace atlas::bubbletea
