#include "bubbletea/daemon/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace atlas::bubbletea {
namespace {

void appendf(std::string* out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string* out, const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0) {
        out->append(buf, static_cast<size_t>(std::min<int>(n, sizeof(buf) - 1)));
    }
}

void header(std::string* out, const char* name, const char* type, const char* help) {
    appendf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void counter(std::string* out, const char* name, const char* help, double value) {
    header(out, name, "counter", help);
    appendf(out, "%s %.17g\n", name, value);
}

void gauge(std::string* out, const char* name, const char* help, double value) {
    header(out, name, "gauge", help);
    if (std::isnan(value)) {
        appendf(out, "%s NaN\n", name);
    } else {
        appendf(out, "%s %.17g\n", name, value);
    }
}

}  // namespace

void Histogram::observe(double seconds) {
    size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) {
        ++i;
    }
    counts_[i].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
    sum_ns_.fetch_add(static_cast<int64_t>(seconds * 1e9), std::memory_order_relaxed);
}

void Histogram::render(std::string* out, const char* name, const char* help) const {
    header(out, name, "histogram", help);
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kBounds.size(); ++i) {
        cumulative += counts_[i].load(std::memory_order_relaxed);
        appendf(out, "%s_bucket{le=\"%g\"} %llu\n", name, kBounds[i],
                static_cast<unsigned long long>(cumulative));
    }
    cumulative += counts_[kBounds.size()].load(std::memory_order_relaxed);
    appendf(out, "%s_bucket{le=\"+Inf\"} %llu\n", name,
            static_cast<unsigned long long>(cumulative));
    appendf(out, "%s_sum %.9f\n", name,
            static_cast<double>(sum_ns_.load(std::memory_order_relaxed)) / 1e9);
    appendf(out, "%s_count %llu\n", name,
            static_cast<unsigned long long>(count_.load(std::memory_order_relaxed)));
}

void Metrics::countRejection(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    ++rejections_[reason];
}

void Metrics::countResponse(int status) {
    std::lock_guard<std::mutex> lock(mu_);
    ++responses_[status];
}

uint64_t Metrics::rejections(const std::string& reason) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = rejections_.find(reason);
    return it == rejections_.end() ? 0 : it->second;
}

std::string Metrics::render(const SchedulerGauges& g) const {
    std::string out;
    out.reserve(8192);
    auto load = [](const std::atomic<uint64_t>& v) {
        return static_cast<double>(v.load(std::memory_order_relaxed));
    };
    counter(&out, "bubbletea_http_requests_total", "HTTP requests parsed.", load(http_requests));
    counter(&out, "bubbletea_connections_total", "TCP connections accepted.", load(connections));
    gauge(&out, "bubbletea_open_connections", "TCP connections open now.",
          static_cast<double>(open_connections.load(std::memory_order_relaxed)));
    {
        std::lock_guard<std::mutex> lock(mu_);
        header(&out, "bubbletea_responses_total", "counter", "HTTP responses by status code.");
        for (const auto& [status, n] : responses_) {
            appendf(&out, "bubbletea_responses_total{code=\"%d\"} %llu\n", status,
                    static_cast<unsigned long long>(n));
        }
        header(&out, "bubbletea_rejections_total", "counter",
               "Requests answered with an error, by reason.");
        for (const auto& [reason, n] : rejections_) {
            appendf(&out, "bubbletea_rejections_total{reason=\"%s\"} %llu\n", reason.c_str(),
                    static_cast<unsigned long long>(n));
        }
    }
    counter(&out, "bubbletea_completions_total", "Prefill requests completed successfully.",
            load(completions_ok));
    counter(&out, "bubbletea_forwarded_total", "Requests forwarded to --fallback-url.",
            load(forwarded));
    counter(&out, "bubbletea_prompt_tokens_total", "Prompt tokens prefilled (completed requests).",
            load(prompt_tokens));
    gauge(&out, "bubbletea_queue_depth", "Admitted requests not finished yet.",
          static_cast<double>(g.queue_depth));
    counter(&out, "bubbletea_chunks_total", "Prefill chunks completed.",
            static_cast<double>(g.chunks));
    counter(&out, "bubbletea_chunk_overruns_total", "Chunks that ended after their window's end.",
            static_cast<double>(g.overruns));
    counter(&out, "bubbletea_chunk_overrun_seconds_total",
            "Total time chunks ran past their window's end.", g.overrun_s_total);
    counter(&out, "bubbletea_chunks_cancelled_total",
            "Chunks cancelled because their window was withdrawn.",
            static_cast<double>(g.cancelled));
    counter(&out, "bubbletea_requests_expired_total",
            "Admitted requests dropped when their TTFT deadline passed.",
            static_cast<double>(g.expired));
    gauge(&out, "bubbletea_end_margin_seconds", "Current end margin before each window's end.",
          g.end_margin_s);
    counter(&out, "bubbletea_window_seconds_total", "Predicted window time that has elapsed.",
            g.window_s_total);
    counter(&out, "bubbletea_window_busy_seconds_total", "Prefill time inside predicted windows.",
            g.window_busy_s_total);
    gauge(&out, "bubbletea_window_fill_fraction",
          "Prefill time / predicted window time, over all elapsed windows.",
          g.window_s_total > 0 ? g.window_busy_s_total / g.window_s_total : std::nan(""));
    gauge(&out, "bubbletea_backlogged_window_fill_fraction",
          "Prefill time / window time, over windows that began with work queued.",
          g.backlogged_window_s_total > 0
              ? g.backlogged_window_busy_s_total / g.backlogged_window_s_total
              : std::nan(""));
    counter(&out, "bubbletea_backlogged_window_seconds_total",
            "Window time of windows that began with work queued.", g.backlogged_window_s_total);
    counter(&out, "bubbletea_backlogged_window_busy_seconds_total",
            "Prefill time inside windows that began with work queued.",
            g.backlogged_window_busy_s_total);
    gauge(&out, "bubbletea_windows_withdrawn", "1 while the window source withdrew predictions.",
          g.windows_withdrawn ? 1 : 0);
    gauge(&out, "bubbletea_cost_model_error_ratio",
          "EWMA of |measured - predicted| / measured chunk time.", g.cost_rel_error);
    gauge(&out, "bubbletea_cost_model_bias_ratio",
          "EWMA of (measured - predicted) / measured chunk time.", g.cost_bias);
    gauge(&out, "bubbletea_cost_model_scale",
          "Online speed scale applied to the profiled cost shape (1 = as profiled).", g.cost_scale);
    gauge(&out, "bubbletea_cost_model_a_seconds", "Cost model: fixed time per chunk.",
          g.cost_a_ns / 1e9);
    gauge(&out, "bubbletea_cost_model_b_seconds_per_token", "Cost model: time per token.",
          g.cost_b_ns_per_token / 1e9);
    gauge(&out, "bubbletea_cost_model_c_seconds_per_pair",
          "Cost model: time per attention (query, key) pair.", g.cost_c_ns_per_pair / 1e9);
    counter(&out, "bubbletea_kv_bytes_pushed_total", "KV cache bytes acknowledged by decode.",
            load(kv_bytes_pushed));
    counter(&out, "bubbletea_kv_pushes_total", "KV caches pushed and acknowledged.",
            load(kv_pushes));
    counter(&out, "bubbletea_kv_push_failures_total", "KV pushes that failed.",
            load(kv_push_failures));
    counter(&out, "bubbletea_kv_stored_total", "KV caches kept for pull.", load(kv_stored));
    counter(&out, "bubbletea_kv_pulled_total", "KV caches fetched with GET /v1/kv/{id}.",
            load(kv_pulled));
    counter(&out, "bubbletea_kv_expired_total", "Stored KV caches dropped unfetched (TTL).",
            load(kv_expired));
    ttft.render(&out, "bubbletea_ttft_seconds",
                "Time from admission to the response being ready (TTFT at the server).");
    queue_wait.render(&out, "bubbletea_queue_wait_seconds",
                      "Time from admission to the request's first chunk.");
    chunk_duration.render(&out, "bubbletea_chunk_seconds", "Measured prefill chunk time.");
    return out;
}

}  // namespace atlas::bubbletea
