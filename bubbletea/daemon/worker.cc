#include "bubbletea/daemon/worker.h"

#include <cinttypes>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "options/kinds.h"

namespace atlas::bubbletea {
namespace {

using json = nlohmann::json;

ApiError serverError(int status, std::string message, std::string code, std::string reason) {
    ApiError e;
    e.status = status;
    e.message = std::move(message);
    e.type = "server_error";
    e.code = std::move(code);
    e.reason = std::move(reason);
    return e;
}

json parseObject(const std::string& text) {
    json j = json::parse(text, nullptr, false);
    return j.is_object() ? j : json::object();
}

json layoutJson(const KvLayout& l) {
    return {{"dtype", std::string(dtypeName(l.dtype))},
            {"num_layers", l.num_layers},
            {"num_tokens", l.num_tokens},
            {"num_kv_heads", l.num_kv_heads},
            {"head_dim", l.head_dim},
            {"order", "layer,kv,token,head,dim"}};
}

std::chrono::steady_clock::time_point steadyIn(Nanos ns) {
    return std::chrono::steady_clock::now() +
           std::chrono::nanoseconds(std::clamp<Nanos>(ns, 0, 3600 * kNsPerSec));
}

}  // namespace

Worker::Worker(WorkerConfig config, std::unique_ptr<Engine> engine, CostCoefficients initial_cost,
               std::unique_ptr<WindowSource> source, std::unique_ptr<WindowSource> watch_source,
               KvPusher* pusher, KvStore* store, Metrics& metrics, const Clock& clock,
               Logger logger)
    : config_(std::move(config)),
      engine_(std::move(engine)),
      model_config_(engine_->config()),
      source_(std::move(source)),
      watch_source_(std::move(watch_source)),
      pusher_(pusher),
      store_(store),
      metrics_(metrics),
      clock_(clock),
      logger_(logger),
      cost_(initial_cost),
      scheduler_(config_.scheduler, cost_),
      advertise_port_(config_.advertise_port) {
    plan_.withdrawn = true;
    plan_.note = "starting";
}

Worker::~Worker() {
    stop();
}

void Worker::start() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        if (started_) {
            return;
        }
        started_ = true;
        // Seed the admission plan before the first request can arrive.
        plan_ = source_->poll(clock_.nowNs());
    }
    thread_ = std::thread([this] { run(); });
    watcher_ = std::thread([this] { watch(); });
}

void Worker::setAdvertisedPort(uint16_t port) {
    std::lock_guard<std::mutex> lock(mu_);
    advertise_port_ = port;
}

SubmitResult Worker::submit(PrefillJob job) {
    SubmitResult out;
    const Nanos now = clock_.nowNs();
    std::lock_guard<std::mutex> lock(mu_);
    if (draining_ || stop_) {
        out.error = serverError(503, "the server is shutting down", "draining", "draining");
        out.error.retry_after_ns = kNsPerSec;
        return out;
    }
    const RequestId id = next_id_++;
    const AdmitResult admit =
        scheduler_.admit(id, static_cast<int64_t>(job.prompt.size()), job.deadline_ns, now, plan_);
    switch (admit.outcome) {
        case AdmitOutcome::kAccepted: {
            auto js = std::make_unique<JobState>();
            js->job = std::move(job);
            js->admitted_ns = now;
            jobs_.emplace(id, std::move(js));
            out.accepted = true;
            cv_.notify_one();
            return out;
        }
        case AdmitOutcome::kQueueFull:
            out.error = serverError(429, admit.reason, "queue_full", "queue_full");
            out.error.type = "rate_limit_error";
            break;
        case AdmitOutcome::kDeadline:
            out.error = serverError(503, admit.reason, "deadline_unmeetable", "deadline");
            break;
    }
    out.error.retry_after_ns = admit.retry_after_ns;
    out.may_forward = true;
    return out;
}

void Worker::beginDrain(DrainMode mode, Nanos deadline_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!draining_) {
        draining_ = true;
        drain_mode_ = mode;
        drain_deadline_ns_ = deadline_ns;
    }
    cv_.notify_all();
}

bool Worker::idle() const {
    std::lock_guard<std::mutex> lock(mu_);
    return jobs_.empty() && running_seq_ == 0 && handoffs_.load(std::memory_order_acquire) == 0;
}

void Worker::stop() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
        cv_.notify_all();
        watch_cv_.notify_all();
    }
    if (thread_.joinable()) {
        thread_.join();
    }
    if (watcher_.joinable()) {
        watcher_.join();
    }
    std::map<RequestId, std::unique_ptr<JobState>> left;
    {
        std::lock_guard<std::mutex> lock(mu_);
        left.swap(jobs_);
        for (const auto& [id, js] : left) {
            scheduler_.remove(id);
        }
    }
    for (auto& [id, js] : left) {
        fail(std::move(js), serverError(503, "the server shut down before the prefill ran",
                                        "shutdown", "shutdown"));
    }
}

std::unique_ptr<Worker::JobState> Worker::takeJobLocked(RequestId id) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
        return nullptr;
    }
    auto js = std::move(it->second);
    jobs_.erase(it);
    return js;
}

JobOutcome Worker::baseOutcome(const JobState& js) const {
    JobOutcome o;
    o.chunks = js.chunks;
    o.queue_ns = js.first_chunk_ns > 0 ? js.first_chunk_ns - js.admitted_ns : 0;
    o.prefill_ns = js.prefill_ns;
    o.ttft_ns = clock_.nowNs() - js.admitted_ns;
    return o;
}

void Worker::fail(std::unique_ptr<JobState> js, ApiError error) {
    JobOutcome o = baseOutcome(*js);
    o.ok = false;
    o.error = std::move(error);
    auto done = std::move(js->job.done);
    js.reset();  // free the KV cache before the callback
    if (done) {
        done(std::move(o));
    }
}

void Worker::trackWindowsLocked(const WindowPlan& plan, Nanos now_ns) {
    for (const Window& w : plan.windows) {
        if (w.end_ns >= kForeverNs / 2 || w.start_ns > now_ns || w.start_ns < last_tracked_end_) {
            continue;
        }
        tracked_.push_back({w, 0, scheduler_.queueDepth() > 0});
        last_tracked_end_ = w.end_ns;
    }
    while (!tracked_.empty() && tracked_.front().window.end_ns <= now_ns) {
        const TrackedWindow& t = tracked_.front();
        const double len = static_cast<double>(t.window.end_ns - t.window.start_ns) / 1e9;
        const double busy = static_cast<double>(t.busy_ns) / 1e9;
        window_s_ += len;
        busy_s_ += busy;
        if (t.backlogged) {
            backlog_window_s_ += len;
            backlog_busy_s_ += busy;
        }
        tracked_.pop_front();
    }
}

void Worker::addBusyLocked(Nanos t0, Nanos t1) {
    for (auto& t : tracked_) {
        const Nanos lo = std::max(t0, t.window.start_ns);
        const Nanos hi = std::min(t1, t.window.end_ns);
        if (hi > lo) {
            t.busy_ns += hi - lo;
        }
    }
}

void Worker::run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
        lock.unlock();
        const Nanos now = clock_.nowNs();
        WindowPlan plan = source_->poll(now);
        if (store_ != nullptr) {
            metrics_.kv_expired.fetch_add(store_->sweep(now), std::memory_order_relaxed);
        }
        lock.lock();
        if (stop_) {
            break;
        }
        plan_ = plan;
        trackWindowsLocked(plan, now);

        if (draining_ && !jobs_.empty() &&
            (drain_mode_ == DrainMode::kReject || now >= drain_deadline_ns_)) {
            std::vector<std::unique_ptr<JobState>> dropped;
            for (auto& [id, js] : jobs_) {
                scheduler_.remove(id);
                dropped.push_back(std::move(js));
            }
            jobs_.clear();
            lock.unlock();
            for (auto& js : dropped) {
                fail(std::move(js),
                     serverError(503, "the server is shutting down", "draining", "draining"));
            }
            lock.lock();
            continue;
        }

        // Decide on a fresh clock: polling the windows, sweeping the KV store and taking the
        // lock all take time (much of it under CPU contention), and a chunk judged to fit at
        // the earlier `now` may no longer fit.
        const Decision d = scheduler_.next(clock_.nowNs(), plan);
        if (d.kind == Decision::Kind::kExpire) {
            auto js = takeJobLocked(d.expired);
            lock.unlock();
            if (js) {
                fail(std::move(js),
                     serverError(503,
                                 "the TTFT deadline passed before the prefill could finish "
                                 "inside the predicted windows",
                                 "deadline_exceeded", "expired"));
            }
            lock.lock();
            continue;
        }
        if (d.kind == Decision::Kind::kIdle) {
            cv_.wait_until(lock, steadyIn(config_.idle_poll_ns));
            continue;
        }
        if (d.kind == Decision::Kind::kWait) {
            const Nanos wait = std::min(d.wake_ns - now, config_.poll_ns);
            cv_.wait_until(lock, steadyIn(wait));
            continue;
        }

        // kRun: the chunk runs with the lock released; only this thread erases jobs, so
        // the JobState stays valid.
        auto it = jobs_.find(d.chunk.id);
        if (it == jobs_.end()) {
            scheduler_.remove(d.chunk.id);
            continue;
        }
        JobState* js = it->second.get();
        running_seq_ = ++chunk_seq_;
        running_window_ = d.chunk.window;
        cancel_.store(false, std::memory_order_release);
        watch_cv_.notify_all();
        lock.unlock();

        Status failure;
        if (!js->kv) {
            auto kv = engine_->newSequence(js->job.prompt.size());
            if (kv.isOk()) {
                js->kv = std::move(kv.value());
            } else {
                failure = kv.status();
            }
        }
        Nanos t0 = clock_.nowNs();
        Nanos t1 = t0;
        Result<PrefillResult> result = Status{Code::kInternal, "not run"};
        if (failure.isOk()) {
            const std::span<const int32_t> tokens(js->job.prompt.data() + d.chunk.start_token,
                                                  static_cast<size_t>(d.chunk.tokens));
            result = engine_->prefillChunk(*js->kv, tokens, d.chunk.last, &cancel_);
            t1 = clock_.nowNs();
            if (!result.isOk()) {
                failure = result.status();
            }
        }
        const bool cancelled = !failure.isOk() && failure.code() == Code::kTimeout &&
                               cancel_.load(std::memory_order_acquire);

        ATLAS_LOG_TRACE(logger_,
                        "bubbletea: chunk %" PRIu64 " tokens %" PRId64 "+%" PRId64
                        ": ran %.3f..%.3f ms, predicted %.3f ms, window %.3f..%.3f ms%s",
                        d.chunk.id, d.chunk.start_token, d.chunk.tokens,
                        static_cast<double>(t0 - d.chunk.window.start_ns) / 1e6,
                        static_cast<double>(t1 - d.chunk.window.start_ns) / 1e6,
                        static_cast<double>(d.chunk.predicted_ns) / 1e6, 0.0,
                        static_cast<double>(d.chunk.window.end_ns - d.chunk.window.start_ns) / 1e6,
                        cancelled ? ", cancelled" : "");
        lock.lock();
        running_seq_ = 0;
        if (failure.isOk() || cancelled) {
            scheduler_.chunkDone({d.chunk.id, d.chunk.tokens, d.chunk.start_token, t0, t1,
                                  d.chunk.window.end_ns, cancelled});
            addBusyLocked(t0, t1);
            js->prefill_ns += t1 - t0;
            if (js->first_chunk_ns == 0) {
                js->first_chunk_ns = t0;
                metrics_.queue_wait.observe(static_cast<double>(t0 - js->admitted_ns) / 1e9);
            }
            if (!cancelled) {
                ++js->chunks;
                metrics_.chunk_duration.observe(static_cast<double>(t1 - t0) / 1e9);
            }
        }
        if (!failure.isOk() && !cancelled) {
            scheduler_.remove(d.chunk.id);
            auto owned = takeJobLocked(d.chunk.id);
            lock.unlock();
            ATLAS_LOG_WARN(logger_, "bubbletea: prefill of %s failed: %s",
                           owned->job.completion_id.c_str(), failure.toString().c_str());
            fail(std::move(owned), serverError(500, "prefill failed: " + failure.message(),
                                               "engine_error", "engine_error"));
            lock.lock();
            continue;
        }
        if (failure.isOk() && d.chunk.last) {
            scheduler_.remove(d.chunk.id);
            auto owned = takeJobLocked(d.chunk.id);
            const int32_t token = result.value().next_token;
            lock.unlock();
            finish(std::move(owned), token);
            lock.lock();
        }
    }
}

void Worker::watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
        if (running_seq_ == 0) {
            watch_cv_.wait(lock, [&] { return stop_ || running_seq_ != 0; });
            continue;
        }
        const uint64_t seq = running_seq_;
        lock.unlock();
        const Nanos now = clock_.nowNs();
        const WindowPlan plan = watch_source_->poll(now);
        bool inside = false;
        for (const Window& w : plan.windows) {
            inside = inside || (w.start_ns <= now && now < w.end_ns);
        }
        lock.lock();
        if (running_seq_ == seq && (plan.withdrawn || !inside)) {
            // Release: pairs with the engine's acquire load between layers.
            cancel_.store(true, std::memory_order_release);
        }
        watch_cv_.wait_until(lock, steadyIn(config_.poll_ns),
                             [&] { return stop_ || running_seq_ != seq; });
    }
}

void Worker::finish(std::unique_ptr<JobState> js, int32_t first_token) {
    JobOutcome outcome = baseOutcome(*js);
    outcome.ok = true;
    outcome.first_token = first_token;
    const PrefillJob& job = js->job;
    if (job.kv_mode == KvMode::kNone) {
        metrics_.completions_ok.fetch_add(1, std::memory_order_relaxed);
        metrics_.prompt_tokens.fetch_add(job.prompt.size(), std::memory_order_relaxed);
        auto done = std::move(js->job.done);
        js.reset();
        done(std::move(outcome));
        return;
    }
    std::vector<std::byte> bytes;
    KvLayout layout;
    Status st = engine_->exportKv(*js->kv, config_.kv_dtype, &bytes, &layout);
    js->kv.reset();  // the exported bytes are all that is needed from here on
    if (!st.isOk()) {
        fail(std::move(js),
             serverError(500, "KV export failed: " + st.message(), "engine_error", "engine_error"));
        return;
    }
    kv::KvHeader header;
    header.transfer_id = next_transfer_id_.fetch_add(1, std::memory_order_relaxed);
    header.num_tokens = static_cast<uint64_t>(layout.num_tokens);
    header.num_layers = static_cast<uint32_t>(layout.num_layers);
    header.num_kv_heads = static_cast<uint32_t>(layout.num_kv_heads);
    header.head_dim = static_cast<uint32_t>(layout.head_dim);
    header.first_token = first_token;
    header.dtype = layout.dtype;
    header.checksum_kind = config_.kv_checksum;
    header.model_id = config_.model_id;
    header.request_id = job.completion_id;
    header.engine_id = config_.engine_id;
    header.payload_bytes = bytes.size();

    json params = parseObject(job.kv_extra_json);
    params["do_remote_prefill"] = true;
    params["do_remote_decode"] = false;
    params["remote_engine_id"] = config_.engine_id;
    params["remote_request_id"] = job.completion_id;
    params["remote_block_ids"] = nullptr;
    // vLLM's NIXL connector sends its tensor-parallel size; the KV here is one unsharded
    // cache (kv_layout), which is tp_size 1.
    params["tp_size"] = 1;
    params["kv_layout"] = layoutJson(layout);

    if (job.kv_mode == KvMode::kStore) {
        header.checksum = kv::computeChecksum(header.checksum_kind, bytes);
        std::vector<uint8_t> head = kv::encodeHeader(header);
        std::string blob;
        blob.reserve(head.size() + bytes.size());
        blob.append(reinterpret_cast<const char*>(head.data()), head.size());
        blob.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
        const Nanos now = clock_.nowNs();
        uint16_t port = 0;
        {
            std::lock_guard<std::mutex> lock(mu_);
            port = advertise_port_;
        }
        if (store_ == nullptr || !store_->put(job.completion_id, std::move(blob), now)) {
            fail(std::move(js),
                 serverError(503, "no room to keep the KV cache for pull (--kv-store-bytes)",
                             "kv_store_full", "kv_store_full"));
            return;
        }
        metrics_.kv_stored.fetch_add(1, std::memory_order_relaxed);
        params["remote_host"] = config_.advertise_host;
        params["remote_port"] = port;
        params["kv_location"] = {
            {"mode", "pull"},
            {"kv_id", job.completion_id},
            {"url", "http://" + config_.advertise_host + ":" + std::to_string(port) + "/v1/kv/" +
                        job.completion_id},
            {"ttl_ms", store_->ttlNs() / kNsPerMs},
            {"bytes", header.payload_bytes},
            {"header_bytes", head.size()},
            {"checksum", kv::checksumText(header.checksum_kind, header.checksum)}};
        outcome.kv_transfer_params_json =
            params.dump(-1, ' ', false, json::error_handler_t::replace);
        metrics_.completions_ok.fetch_add(1, std::memory_order_relaxed);
        metrics_.prompt_tokens.fetch_add(job.prompt.size(), std::memory_order_relaxed);
        auto done = std::move(js->job.done);
        js.reset();
        done(std::move(outcome));
        return;
    }

    // kPush: the pusher thread computes the checksum, sends, waits for the ack and calls
    // back; the worker goes on with the next chunk meanwhile.
    if (pusher_ == nullptr) {
        fail(std::move(js), serverError(502, "KV push is not available in this daemon",
                                        "kv_transfer_failed", "kv_transfer_failed"));
        return;
    }
    handoffs_.fetch_add(1, std::memory_order_acq_rel);
    KvPushJob push;
    push.host = job.kv_host;
    push.port = job.kv_port;
    push.header = header;
    push.payload = std::move(bytes);
    const size_t prompt_tokens = job.prompt.size();
    auto done = std::move(js->job.done);
    push.done = [this, outcome, params, prompt_tokens, done = std::move(done),
                 admitted = js->admitted_ns](Result<KvPushReceipt> receipt) mutable {
        outcome.ttft_ns = clock_.nowNs() - admitted;
        if (receipt.isOk()) {
            const KvPushReceipt& r = receipt.value();
            // The endpoint the push went to, HOST:PORT (KvPushConfig), split strictly.
            const options::HostPort hp =
                options::parseHostPort(r.endpoint).value_or(options::HostPort{});
            params["remote_host"] = hp.host;
            params["remote_port"] = hp.port;
            params["kv_location"] = {{"mode", "push"},
                                     {"endpoint", r.endpoint},
                                     {"transfer_id", r.transfer_id},
                                     {"bytes", r.bytes},
                                     {"push_ms", static_cast<double>(r.elapsed_ns) / 1e6}};
            outcome.kv_transfer_params_json =
                params.dump(-1, ' ', false, json::error_handler_t::replace);
            metrics_.kv_pushes.fetch_add(1, std::memory_order_relaxed);
            metrics_.kv_bytes_pushed.fetch_add(r.bytes, std::memory_order_relaxed);
            metrics_.completions_ok.fetch_add(1, std::memory_order_relaxed);
            metrics_.prompt_tokens.fetch_add(prompt_tokens, std::memory_order_relaxed);
        } else {
            metrics_.kv_push_failures.fetch_add(1, std::memory_order_relaxed);
            outcome.ok = false;
            outcome.error = serverError(502, receipt.status().message(), "kv_transfer_failed",
                                        "kv_transfer_failed");
            outcome.error.type = "kv_transfer_error";
        }
        done(std::move(outcome));
        handoffs_.fetch_sub(1, std::memory_order_acq_rel);
    };
    js.reset();
    pusher_->push(std::move(push));
}

SchedulerGauges Worker::gauges() const {
    std::lock_guard<std::mutex> lock(mu_);
    SchedulerGauges g;
    const SchedulerStats& s = scheduler_.stats();
    const CostCoefficients c = cost_.coefficients();
    g.queue_depth = scheduler_.queueDepth();
    g.end_margin_s = static_cast<double>(scheduler_.endMarginNs()) / 1e9;
    g.cost_a_ns = c.a_ns;
    g.cost_b_ns_per_token = c.b_ns_per_token;
    g.cost_c_ns_per_pair = c.c_ns_per_pair;
    g.cost_scale = cost_.scale();
    g.cost_rel_error = cost_.relativeErrorEwma();
    g.cost_bias = cost_.biasEwma();
    g.chunks = s.chunks;
    g.overruns = s.overruns;
    g.cancelled = s.cancelled;
    g.expired = s.expired;
    g.overrun_s_total = static_cast<double>(s.overrun_ns_total) / 1e9;
    g.window_s_total = window_s_;
    g.window_busy_s_total = busy_s_;
    g.backlogged_window_s_total = backlog_window_s_;
    g.backlogged_window_busy_s_total = backlog_busy_s_;
    g.windows_withdrawn = plan_.withdrawn;
    return g;
}

std::string Worker::windowNote() const {
    std::lock_guard<std::mutex> lock(mu_);
    return plan_.note;
}

}  // namespace atlas::bubbletea
