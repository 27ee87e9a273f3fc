// The daemon's counters, gauges and histograms, rendered for GET /metrics in the Prometheus
// text exposition format (version 0.0.4). Names start with "bubbletea_".
//
// Threads: every method may be called from any thread. Hot counters are relaxed atomics;
// labelled counters (rejections by reason, responses by status) take a small mutex, since
// they are only touched on error paths and per response.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "atlas/common/clock.h"

namespace atlas::bubbletea {

// A histogram with fixed upper bounds in seconds (cumulative buckets when rendered).
class Histogram {
  public:
    static constexpr std::array<double, 16> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                       0.05,   0.1,   0.25,   0.5,   1.0,  2.5,
                                                       5.0,    10.0,  30.0,   60.0};
    void observe(double seconds);
    void render(std::string* out, const char* name, const char* help) const;

  private:
    std::array<std::atomic<uint64_t>, kBounds.size() + 1> counts_{};  // last: +Inf
    std::atomic<uint64_t> count_{0};
    std::atomic<int64_t> sum_ns_{0};
};

// Values the worker publishes for /metrics (copied under its lock on each scrape).
struct SchedulerGauges {
    uint64_t queue_depth = 0;
    double end_margin_s = 0;
    double cost_a_ns = 0;
    double cost_b_ns_per_token = 0;
    double cost_c_ns_per_pair = 0;
    double cost_scale = 1;      // online speed scale over the profiled shape
    double cost_rel_error = 0;  // EWMA of |measured - predicted| / measured
    double cost_bias = 0;
    uint64_t chunks = 0;
    uint64_t overruns = 0;
    uint64_t cancelled = 0;
    uint64_t expired = 0;
    double overrun_s_total = 0;
    // Window accounting (windows that have ended since start): predicted window time, the
    // prefill time inside it, and the same two restricted to windows that began with work
    // queued (the fill a saturated daemon achieves).
    double window_s_total = 0;
    double window_busy_s_total = 0;
    double backlogged_window_s_total = 0;
    double backlogged_window_busy_s_total = 0;
    bool windows_withdrawn = false;
};

class Metrics {
  public:
    std::atomic<uint64_t> http_requests{0};    // every HTTP request parsed
    std::atomic<uint64_t> completions_ok{0};   // successful prefills
    std::atomic<uint64_t> forwarded{0};        // sent to --fallback-url
    std::atomic<uint64_t> prompt_tokens{0};    // tokens prefilled by successful requests
    std::atomic<uint64_t> kv_bytes_pushed{0};  // KV payload bytes acked by decode endpoints
    std::atomic<uint64_t> kv_pushes{0};
    std::atomic<uint64_t> kv_push_failures{0};
    std::atomic<uint64_t> kv_stored{0};  // caches kept for pull
    std::atomic<uint64_t> kv_pulled{0};
    std::atomic<uint64_t> kv_expired{0};
    std::atomic<uint64_t> connections{0};  // accepted
    std::atomic<int64_t> open_connections{0};
    Histogram ttft;            // request accepted -> response ready
    Histogram queue_wait;      // accepted -> first chunk starts
    Histogram chunk_duration;  // measured chunk run time

    void countRejection(const std::string& reason);
    void countResponse(int status);
    uint64_t rejections(const std::string& reason) const;

    // Renders everything; `gauges` comes from the worker.
    std::string render(const SchedulerGauges& gauges) const;

  private:
    mutable std::mutex mu_;
    std::map<std::string, uint64_t> rejections_;  // guarded by mu_
    std::map<int, uint64_t> responses_;           // guarded by mu_
};

}  // namespace atlas::bubbletea
