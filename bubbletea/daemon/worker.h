// Worker: the prefill side of the daemon. Owns the Engine (only its thread calls it), the
// PrefillScheduler and its CostModel, the window sources, and the jobs admitted so far.
//
// Threads:
//   - submit(), beginDrain(), gauges() ... : any thread (HTTP handlers). They take mu_ for a
//     few microseconds (admission simulates the EDF schedule over the queue) and never wait
//     for prefill.
//   - the worker thread: polls its WindowSource, asks the scheduler for a decision, runs the
//     chunk with mu_ released, reports it, and finishes jobs (KV export, hand-off).
//   - the watcher thread: while a chunk runs, polls a second WindowSource every poll_ns and
//     sets the chunk's cancel flag when its window is withdrawn (channel period lost, writer
//     gone) or has ended (the engine stops at its next layer boundary): prefill never keeps
//     the GPU past a predicted window by more than one layer. A cancelled chunk makes no
//     progress and is retried in a later window.
// Job callbacks (PrefillJob::done) run on the worker thread, or on the KV pusher's thread
// for pushed caches; they must not block.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "bubbletea/daemon/api.h"
#include "bubbletea/daemon/config.h"
#include "bubbletea/daemon/cost_model.h"
#include "bubbletea/daemon/kv_push.h"
#include "bubbletea/daemon/kv_store.h"
#include "bubbletea/daemon/metrics.h"
#include "bubbletea/daemon/prefill_scheduler.h"
#include "bubbletea/daemon/window_source.h"
#include "bubbletea/engine/engine.h"

namespace atlas::bubbletea {

enum class KvMode {
    kNone,   // no remote decode requested: no KV leaves the daemon
    kPush,   // push to kv_host:kv_port
    kStore,  // keep for pull (GET /v1/kv/{id})
};

struct JobOutcome {
    bool ok = false;
    ApiError error;  // when !ok
    int32_t first_token = -1;
    int chunks = 0;
    Nanos queue_ns = 0;                   // admission -> first chunk start
    Nanos prefill_ns = 0;                 // sum of chunk run times (incl. cancelled ones)
    Nanos ttft_ns = 0;                    // admission -> outcome ready
    std::string kv_transfer_params_json;  // filled-in params ("" when no KV hand-off)
};

struct PrefillJob {
    std::string completion_id;  // "cmpl-...": also the KV request id and pull id
    std::vector<int32_t> prompt;
    Nanos deadline_ns = 0;  // absolute, on the worker's clock
    KvMode kv_mode = KvMode::kNone;
    std::string kv_host;
    uint16_t kv_port = 0;
    std::string kv_extra_json = "{}";      // request's other kv_transfer_params, echoed
    std::function<void(JobOutcome)> done;  // exactly once (unless submit() rejects)
};

struct SubmitResult {
    bool accepted = false;
    ApiError error;            // when rejected: 429 queue full, 503 deadline or draining
    bool may_forward = false;  // a --fallback-url could take it instead
};

struct WorkerConfig {
    SchedulerConfig scheduler;
    Nanos poll_ns = kNsPerMs;            // window poll / watcher period while busy
    Nanos idle_poll_ns = 10 * kNsPerMs;  // window poll when nothing is queued
    DType kv_dtype = DType::kBF16;
    ChecksumKind kv_checksum = ChecksumKind::kCrc32c;
    std::string model_id;
    std::string engine_id;
    // Where pullers reach this daemon (for kv_transfer_params of stored caches).
    std::string advertise_host = "127.0.0.1";
    uint16_t advertise_port = 0;
};

class Worker {
  public:
    // `pusher` and `store` may be null (push / pull then fail with 502 / are unavailable).
    // They, `metrics` and `clock` must outlive the worker.
    Worker(WorkerConfig config, std::unique_ptr<Engine> engine, CostCoefficients initial_cost,
           std::unique_ptr<WindowSource> source, std::unique_ptr<WindowSource> watch_source,
           KvPusher* pusher, KvStore* store, Metrics& metrics, const Clock& clock, Logger logger);
    ~Worker();  // stop()
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    void start();
    void setAdvertisedPort(uint16_t port);

    // Admits the job (then its done callback fires later) or rejects it (done is dropped).
    SubmitResult submit(PrefillJob job);

    // SIGTERM: stop admitting; kFinish runs queued jobs until `deadline_ns` and fails the
    // rest, kReject fails them now. Idempotent.
    void beginDrain(DrainMode mode, Nanos deadline_ns);
    // Nothing queued, running or being handed off.
    bool idle() const;
    // Fails whatever is left (503), joins the threads. Idempotent.
    void stop();

    SchedulerGauges gauges() const;
    std::string windowNote() const;
    const ModelConfig& modelConfig() const { return model_config_; }

  private:
    struct JobState {
        PrefillJob job;
        Nanos admitted_ns = 0;
        Nanos first_chunk_ns = 0;
        Nanos prefill_ns = 0;
        int chunks = 0;
        std::unique_ptr<KvCache> kv;
    };
    struct TrackedWindow {
        Window window;
        Nanos busy_ns = 0;
        bool backlogged = false;
    };

    void run();
    void watch();
    void finish(std::unique_ptr<JobState> js, int32_t first_token);
    void fail(std::unique_ptr<JobState> js, ApiError error);
    void trackWindowsLocked(const WindowPlan& plan, Nanos now_ns);
    void addBusyLocked(Nanos t0, Nanos t1);
    std::unique_ptr<JobState> takeJobLocked(RequestId id);
    JobOutcome baseOutcome(const JobState& js) const;

    const WorkerConfig config_;
    std::unique_ptr<Engine> engine_;  // worker thread only
    const ModelConfig model_config_;
    std::unique_ptr<WindowSource> source_;        // worker thread only
    std::unique_ptr<WindowSource> watch_source_;  // watcher thread only
    KvPusher* pusher_;
    KvStore* store_;
    Metrics& metrics_;
    const Clock& clock_;
    Logger logger_;

    mutable std::mutex mu_;
    std::condition_variable cv_;        // worker: new job, drain, stop
    std::condition_variable watch_cv_;  // watcher: chunk started, stop
    CostModel cost_;                    // guarded by mu_
    PrefillScheduler scheduler_;        // guarded by mu_
    WindowPlan plan_;                   // guarded by mu_: latest plan, for admission
    std::map<RequestId, std::unique_ptr<JobState>> jobs_;  // guarded by mu_
    RequestId next_id_ = 1;                                // guarded by mu_
    bool draining_ = false;                                // guarded by mu_
    DrainMode drain_mode_ = DrainMode::kFinish;            // guarded by mu_
    Nanos drain_deadline_ns_ = 0;                          // guarded by mu_
    bool stop_ = false;                                    // guarded by mu_
    bool started_ = false;                                 // guarded by mu_
    uint16_t advertise_port_ = 0;                          // guarded by mu_
    // The chunk in flight: its sequence number (0 = none) and window; guarded by mu_.
    uint64_t running_seq_ = 0;
    uint64_t chunk_seq_ = 0;
    Window running_window_;
    std::atomic<bool> cancel_{false};  // set by the watcher, read by the engine (acquire)
    // Window accounting for the fill metrics; guarded by mu_.
    std::deque<TrackedWindow> tracked_;
    Nanos last_tracked_end_ = 0;
    double window_s_ = 0, busy_s_ = 0, backlog_window_s_ = 0, backlog_busy_s_ = 0;
    std::atomic<int> handoffs_{0};  // KV pushes in flight
    std::atomic<uint64_t> next_transfer_id_{1};

    std::thread thread_;
    std::thread watcher_;
};

}  // namespace atlas::bubbletea
