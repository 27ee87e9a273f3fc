#include "bubbletea/daemon/daemon.h"

#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "bubbletea/daemon/api.h"
#include "bubbletea/daemon/engine_profile.h"
#include "bubbletea/daemon/http_client.h"
#include "bubbletea/daemon/http_server.h"
#include "bubbletea/daemon/kv_push.h"
#include "bubbletea/daemon/kv_store.h"
#include "bubbletea/daemon/worker.h"
#include "bubbletea/engine/engine.h"
#include "channel/channel_name.h"

namespace atlas::bubbletea {

namespace net = boost::asio;
using json = nlohmann::json;

namespace {

HttpResponse errorResponse(const ApiError& e) {
    HttpResponse r;
    r.status = e.status;
    r.body = errorJson(e);
    if (e.retry_after_ns > 0) {
        r.headers.emplace_back("Retry-After", std::to_string(retryAfterSeconds(e.retry_after_ns)));
    }
    return r;
}

std::string hostName() {
    char buf[256] = {};
    if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') {
        return "localhost";
    }
    return buf;
}

bool safeId(const std::string& s) {
    if (s.empty() || s.size() > 128) {
        return false;
    }
    for (char c : s) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
        if (!ok) {
            return false;
        }
    }
    return true;
}

int64_t unixNow() {
    return static_cast<int64_t>(std::time(nullptr));
}

}  // namespace

struct Daemon::Impl final : HttpHandler {
    DaemonConfig config;
    Logger logger;
    Metrics metrics;
    std::string model_name;
    std::string engine_id;
    std::string id_prefix;
    std::atomic<uint64_t> next_id{1};
    ModelLimits limits;
    std::shared_ptr<const Tokenizer> tokenizer;  // limits.tokenizer points into it
    CostCoefficients initial_cost;
    std::optional<HttpUrl> fallback;
    std::string decode_host;
    uint16_t decode_port = 0;
    std::string engine_name;

    std::unique_ptr<KvPusher> pusher;
    std::unique_ptr<KvStore> store;
    std::unique_ptr<Worker> worker;

    net::io_context ioc;
    std::optional<net::executor_work_guard<net::io_context::executor_type>> guard;
    std::unique_ptr<HttpServer> server;
    std::optional<net::signal_set> signals;
    std::optional<net::steady_timer> drain_timer;
    std::vector<std::thread> threads;
    uint16_t port = 0;
    std::atomic<bool> draining{false};
    Nanos drain_deadline_ns = 0;

    void handle(HttpRequest request, Responder respond) override;
    void handleCompletion(HttpRequest& request, Responder respond);
    void handleTokenize(const HttpRequest& request, const Responder& respond);
    void handleDetokenize(const HttpRequest& request, const Responder& respond);
    void handleHealth(const Responder& respond);
    void reject(const ApiError& e, const Responder& respond) {
        metrics.countRejection(e.reason.empty() ? "error" : e.reason);
        respond(errorResponse(e));
    }
    void beginDrain();
    void pollDrain();
    void finishStop();
};

void Daemon::Impl::handle(HttpRequest request, Responder respond) {
    const RouteMatch route = classifyRoute(request.method, request.target);
    switch (route.route) {
        case Route::kCompletions:
            handleCompletion(request, std::move(respond));
            return;
        case Route::kTokenize:
            handleTokenize(request, respond);
            return;
        case Route::kDetokenize:
            handleDetokenize(request, respond);
            return;
        case Route::kModels: {
            HttpResponse r;
            r.body = modelsJson(limits.model_names, unixNow(), limits.max_prompt_tokens);
            respond(std::move(r));
            return;
        }
        case Route::kHealth:
            handleHealth(respond);
            return;
        case Route::kMetrics: {
            HttpResponse r;
            r.content_type = "text/plain; version=0.0.4; charset=utf-8";
            r.body = metrics.render(worker->gauges());
            respond(std::move(r));
            return;
        }
        case Route::kKvPull: {
            auto blob = store->take(route.kv_id, monotonicNowNs());
            if (!blob.has_value()) {
                ApiError e;
                e.status = 404;
                e.message = "no KV cache with id '" + route.kv_id +
                            "' (unknown, expired or "
                            "already fetched)";
                e.param = "kv_id";
                e.code = "kv_not_found";
                e.reason = "kv_not_found";
                reject(e, respond);
                return;
            }
            metrics.kv_pulled.fetch_add(1, std::memory_order_relaxed);
            HttpResponse r;
            r.content_type = "application/octet-stream";
            r.body = std::move(*blob);
            respond(std::move(r));
            return;
        }
        case Route::kBadMethod: {
            ApiError e;
            e.status = 405;
            e.message = "method " + request.method + " is not allowed here; use " + route.allow;
            e.code = "method_not_allowed";
            e.reason = "method_not_allowed";
            HttpResponse r = errorResponse(e);
            r.headers.emplace_back("Allow", route.allow);
            metrics.countRejection(e.reason);
            respond(std::move(r));
            return;
        }
        case Route::kNotFound: {
            ApiError e;
            e.status = 404;
            e.message = "no route for " + request.method + " " + request.target.substr(0, 200);
            e.code = "not_found";
            e.reason = "not_found";
            reject(e, respond);
            return;
        }
    }
}

// Tokenizing runs on the HTTP thread: it takes microseconds per KB of text (tokenizer_bench)
// and a body is at most --body-limit-bytes.
void Daemon::Impl::handleTokenize(const HttpRequest& request, const Responder& respond) {
    auto parsed = parseTokenizeRequest(request.body, limits);
    if (std::holds_alternative<ApiError>(parsed)) {
        reject(std::get<ApiError>(parsed), respond);
        return;
    }
    HttpResponse r;
    r.body = tokenizeJson(std::get<TokenizeResult>(parsed), limits);
    respond(std::move(r));
}

void Daemon::Impl::handleDetokenize(const HttpRequest& request, const Responder& respond) {
    auto parsed = parseDetokenizeRequest(request.body, limits);
    if (std::holds_alternative<ApiError>(parsed)) {
        reject(std::get<ApiError>(parsed), respond);
        return;
    }
    HttpResponse r;
    r.body = detokenizeJson(std::get<std::string>(parsed));
    respond(std::move(r));
}

void Daemon::Impl::handleHealth(const Responder& respond) {
    const SchedulerGauges g = worker->gauges();
    json j = {{"status", draining ? "draining" : "ok"},
              {"model", model_name},
              {"engine", engine_name},
              {"engine_id", engine_id},
              {"tokenizer", tokenizer ? json(tokenizer->describe()) : json(nullptr)},
              {"windows", worker->windowNote()},
              {"windows_withdrawn", g.windows_withdrawn},
              {"queue_depth", g.queue_depth},
              {"end_margin_us", g.end_margin_s * 1e6}};
    HttpResponse r;
    r.status = draining ? 503 : 200;
    r.body = j.dump(-1, ' ', false, json::error_handler_t::replace);
    respond(std::move(r));
}

void Daemon::Impl::handleCompletion(HttpRequest& request, Responder respond) {
    auto parsed = parseCompletionRequest(request.body, limits);
    if (std::holds_alternative<ApiError>(parsed)) {
        reject(std::get<ApiError>(parsed), respond);
        return;
    }
    CompletionRequest& cr = std::get<CompletionRequest>(parsed);
    std::string id;
    if (safeId(cr.request_id)) {
        id = "cmpl-" + cr.request_id;
    } else if (safeId(request.request_id)) {
        id = "cmpl-" + request.request_id;
    } else {
        id = id_prefix + std::to_string(next_id.fetch_add(1, std::memory_order_relaxed));
    }
    const Nanos now = monotonicNowNs();
    PrefillJob job;
    job.completion_id = id;
    job.prompt = std::move(cr.prompt);
    const Nanos ttft = cr.ttft_deadline_ms.has_value()
                           ? static_cast<Nanos>(*cr.ttft_deadline_ms * 1e6)
                           : config.default_ttft_ns;
    job.deadline_ns = now + ttft;
    if (cr.kv.present && cr.kv.do_remote_decode) {
        job.kv_extra_json = cr.kv.extra_json;
        if (!cr.kv.remote_host.empty()) {
            job.kv_mode = KvMode::kPush;
            job.kv_host = cr.kv.remote_host;
            job.kv_port = static_cast<uint16_t>(cr.kv.remote_port);
        } else if (decode_port != 0) {
            job.kv_mode = KvMode::kPush;
            job.kv_host = decode_host;
            job.kv_port = decode_port;
        } else {
            job.kv_mode = KvMode::kStore;
        }
    }
    const int64_t prompt_tokens = static_cast<int64_t>(job.prompt.size());
    job.done = [this, respond, id, prompt_tokens](JobOutcome o) {
        if (!o.ok) {
            reject(o.error, respond);
            return;
        }
        metrics.ttft.observe(static_cast<double>(o.ttft_ns) / 1e9);
        CompletionResult r;
        r.id = id;
        r.model = model_name;
        r.created_unix_s = unixNow();
        r.first_token = o.first_token;
        if (tokenizer) {
            // An id the engine produced outside the vocabulary cannot happen (the model's vocab
            // fits the tokenizer, checked at start-up); if it did, the decimal id is kept.
            auto text = tokenizer->decode(std::span<const int32_t>(&o.first_token, 1), true);
            if (text.isOk()) {
                r.first_token_text = std::move(text.value());
            }
        }
        r.prompt_tokens = prompt_tokens;
        r.kv_transfer_params_json = o.kv_transfer_params_json;
        r.queue_ms = static_cast<double>(o.queue_ns) / 1e6;
        r.prefill_ms = static_cast<double>(o.prefill_ns) / 1e6;
        r.ttft_ms = static_cast<double>(o.ttft_ns) / 1e6;
        r.chunks = o.chunks;
        HttpResponse resp;
        resp.body = completionJson(r);
        respond(std::move(resp));
    };
    SubmitResult sub = worker->submit(std::move(job));
    if (sub.accepted) {
        return;
    }
    if (!sub.may_forward || !fallback.has_value()) {
        reject(sub.error, respond);
        return;
    }
    // Forward the untouched body; the fallback decides on its own.
    forwardHttp(
        ioc, *fallback, std::move(request.body), config.read_timeout_ns + config.default_ttft_ns,
        [this, respond, err = sub.error](Result<ClientResponse> r) {
            if (!r.isOk()) {
                ApiError e = err;
                e.status = 503;
                e.message =
                    err.message + "; forwarding to --fallback-url failed: " + r.status().message();
                e.code = "fallback_failed";
                e.reason = "fallback_failed";
                reject(e, respond);
                return;
            }
            metrics.forwarded.fetch_add(1, std::memory_order_relaxed);
            HttpResponse resp;
            resp.status = r.value().status;
            const std::string type = r.value().header("content-type");
            resp.content_type = type.empty() ? "application/json" : type;
            resp.body = std::move(r.value().body);
            resp.headers.emplace_back("X-Bubbletea-Forwarded", err.reason);
            respond(std::move(resp));
        });
}

void Daemon::Impl::beginDrain() {
    if (draining.exchange(true)) {
        return;
    }
    ATLAS_LOG_INFO(logger, "bubbletea: draining (%s queued work, up to %.1f s)",
                   config.drain_mode == DrainMode::kFinish ? "finishing" : "rejecting",
                   static_cast<double>(config.drain_timeout_ns) / 1e9);
    drain_deadline_ns = monotonicNowNs() + config.drain_timeout_ns;
    server->beginDrain();
    worker->beginDrain(config.drain_mode, drain_deadline_ns);
    drain_timer.emplace(ioc);
    pollDrain();
}

void Daemon::Impl::pollDrain() {
    // Grace after the drain deadline for failed jobs' responses to be written.
    const bool late = monotonicNowNs() > drain_deadline_ns + 5 * kNsPerSec;
    if ((worker->idle() && server->openSessions() == 0) || late) {
        if (late) {
            ATLAS_LOG_WARN(logger, "bubbletea: drain timed out; stopping anyway");
        }
        finishStop();
        return;
    }
    drain_timer->expires_after(std::chrono::milliseconds(10));
    drain_timer->async_wait([this](const boost::system::error_code& ec) {
        if (!ec) {
            pollDrain();
        }
    });
}

void Daemon::Impl::finishStop() {
    if (signals) {
        boost::system::error_code ec;
        signals->cancel(ec);
    }
    guard.reset();
    ioc.stop();
}

Daemon::Daemon(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Result<std::unique_ptr<Daemon>> Daemon::create(const DaemonConfig& config, Logger logger) {
    ATLAS_RETURN_IF_ERROR(validateDaemonConfig(config));
    auto impl = std::make_unique<Impl>();
    impl->config = config;
    impl->logger = logger;
    impl->engine_id = config.engine_id.empty()
                          ? "bubbletea-" + hostName() + "-" + std::to_string(::getpid())
                          : config.engine_id;
    {
        std::random_device rd;
        char buf[32];
        std::snprintf(buf, sizeof(buf), "cmpl-%08x-", rd());
        impl->id_prefix = buf;
    }
    if (!config.fallback_url.empty()) {
        auto url = parseHttpUrl(config.fallback_url);
        if (!url.isOk()) {
            return url.status();
        }
        if (url.value().path == "/") {
            url.value().path = "/v1/completions";
        }
        impl->fallback = url.value();
    }
    if (!config.decode_url.empty()) {
        ATLAS_RETURN_IF_ERROR(
            parseHostPort(config.decode_url, &impl->decode_host, &impl->decode_port));
    }

    auto tokenizer = loadTokenizerFromConfig(config);
    if (!tokenizer.isOk()) {
        return tokenizer.status();
    }
    impl->tokenizer = tokenizer.value();
    if (impl->tokenizer) {
        ATLAS_LOG_INFO(logger, "bubbletea: tokenizer %s", impl->tokenizer->describe().c_str());
    }
    auto engine = makeEngineFromConfig(config, &impl->model_name,
                                       impl->tokenizer ? impl->tokenizer->vocabSize() : 0);
    if (!engine.isOk()) {
        return engine.status();
    }
    impl->engine_name = engine.value()->name();
    const ModelConfig& mc = engine.value()->config();
    impl->limits.model_names = {impl->model_name};
    impl->limits.vocab_size = mc.vocab_size;
    impl->limits.max_model_len = mc.max_position_embeddings;
    impl->limits.tokenizer = impl->tokenizer.get();
    impl->limits.max_prompt_tokens =
        config.max_prompt_tokens > 0
            ? std::min<int64_t>(config.max_prompt_tokens, mc.max_position_embeddings)
            : mc.max_position_embeddings;
    ATLAS_LOG_INFO(logger,
                   "bubbletea: model '%s' on engine %s (%lld layers, hidden %lld, "
                   "context %lld)",
                   impl->model_name.c_str(), impl->engine_name.c_str(),
                   static_cast<long long>(mc.num_hidden_layers),
                   static_cast<long long>(mc.hidden_size),
                   static_cast<long long>(mc.max_position_embeddings));

    if (config.cost_model.size() == 3) {  // --cost-model, validated by the options table
        impl->initial_cost = {config.cost_model[0], config.cost_model[1], config.cost_model[2]};
    } else {
        ProfilePlan plan;
        plan.chunk_tokens = config.profile_tokens;
        plan.contexts = config.profile_contexts;
        plan.budget_ns = config.profile_budget_ns;
        auto samples = profileEngine(*engine.value(), plan, MonotonicClock::instance(), logger);
        if (!samples.isOk()) {
            return Status{samples.status().code(),
                          "start-up profiling failed: " + samples.status().message()};
        }
        auto fit = CostModel::fit(samples.value());
        impl->initial_cost = fit.isOk() ? fit.value() : CostCoefficients{};
        for (const auto& s : samples.value()) {
            ATLAS_LOG_INFO(logger, "bubbletea: profile chunk %lld tokens at context %lld: %.3f ms",
                           static_cast<long long>(s.tokens), static_cast<long long>(s.context),
                           static_cast<double>(s.time_ns) / 1e6);
        }
    }
    ATLAS_LOG_INFO(logger, "bubbletea: cost model %s", impl->initial_cost.toString().c_str());

    std::unique_ptr<WindowSource> source;
    std::unique_ptr<WindowSource> watch_source;
    switch (config.window_mode) {
        case WindowMode::kAlways:
            source = makeAlwaysOpenSource();
            watch_source = makeAlwaysOpenSource();
            break;
        case WindowMode::kDuty: {
            const Nanos origin = monotonicNowNs() + config.duty_offset_ns;
            source = makeDutyCycleSource(config.duty_period_ns, config.duty_open_ns, origin);
            watch_source = makeDutyCycleSource(config.duty_period_ns, config.duty_open_ns, origin);
            break;
        }
        case WindowMode::kChannel: {
            auto name = channel::resolveChannelName(
                config.channel.empty() ? nullptr : config.channel.c_str(),
                config.local_rank < 0 ? 0 : config.local_rank);
            if (!name.isOk()) {
                return name.status();
            }
            ChannelSourceOptions o;
            o.name = name.value();
            o.min_confidence_ppm = config.min_confidence_ppm;
            o.logger = logger;
            source = makeChannelSource(o);
            o.logger = Logger();  // the worker's source logs attach/detach once
            watch_source = makeChannelSource(o);
            break;
        }
    }
    ATLAS_LOG_INFO(logger, "bubbletea: windows from %s", source->describe().c_str());

    KvPushConfig pc;
    pc.timeout_ns = config.kv_timeout_ns;
    pc.auth_key = config.auth_key;
    pc.transport_streams = config.transport_streams;
    pc.logger = logger;
    auto pusher = KvPusher::create(pc);
    if (!pusher.isOk()) {
        return pusher.status();
    }
    impl->pusher = std::move(pusher.value());
    impl->store = std::make_unique<KvStore>(config.kv_store_bytes, config.kv_ttl_ns);

    WorkerConfig wc;
    wc.scheduler.queue_limit = config.queue_limit;
    wc.scheduler.min_chunk_tokens = config.min_chunk_tokens;
    wc.scheduler.max_chunk_tokens = config.max_chunk_tokens;
    wc.scheduler.end_margin_ns = config.end_margin_ns;
    wc.scheduler.max_end_margin_ns = config.max_end_margin_ns;
    wc.scheduler.end_margin_half_life_ns = config.end_margin_half_life_ns;
    wc.scheduler.error_margin = config.error_margin;
    wc.poll_ns = config.poll_ns;
    wc.kv_dtype = config.kv_dtype;
    wc.kv_checksum = config.kv_checksum;
    wc.model_id = impl->model_name;
    wc.engine_id = impl->engine_id;
    wc.advertise_host = (config.listen_host == "0.0.0.0" || config.listen_host == "::")
                            ? hostName()
                            : config.listen_host;
    impl->worker = std::make_unique<Worker>(wc, std::move(engine.value()), impl->initial_cost,
                                            std::move(source), std::move(watch_source),
                                            impl->pusher.get(), impl->store.get(), impl->metrics,
                                            MonotonicClock::instance(), logger);

    HttpServerConfig hc;
    hc.body_limit_bytes = config.body_limit_bytes;
    hc.read_timeout_ns = config.read_timeout_ns;
    hc.idle_timeout_ns = config.idle_timeout_ns;
    hc.max_connections = config.max_connections;
    impl->server = std::make_unique<HttpServer>(impl->ioc, hc, *impl, impl->metrics);
    auto port = impl->server->listen(config.listen_host, config.listen_port);
    if (!port.isOk()) {
        return port.status();
    }
    impl->port = port.value();
    impl->worker->setAdvertisedPort(impl->port);
    return std::unique_ptr<Daemon>(new Daemon(std::move(impl)));
}

Daemon::~Daemon() {
    stop();
    wait();
    impl_->server.reset();
    impl_->worker->stop();
    impl_->pusher->stop();
}

void Daemon::start() {
    Impl& d = *impl_;
    d.worker->start();
    d.guard.emplace(net::make_work_guard(d.ioc));
    for (int i = 0; i < std::max(1, d.config.http_threads); ++i) {
        d.threads.emplace_back([&d] { d.ioc.run(); });
    }
    ATLAS_LOG_INFO(d.logger, "bubbletea: listening on %s:%u (%d HTTP threads)",
                   d.config.listen_host.c_str(), d.port, d.config.http_threads);
    if (!d.config.port_file.empty()) {
        // Write-then-rename so a watcher never reads a partial file.
        const std::string tmp = d.config.port_file + ".tmp";
        {
            std::ofstream out(tmp);
            out << d.port << "\n";
        }
        std::error_code ec;
        std::filesystem::rename(tmp, d.config.port_file, ec);
    }
}

void Daemon::handleSignals() {
    Impl& d = *impl_;
    d.signals.emplace(d.ioc, SIGTERM, SIGINT);
    d.signals->async_wait([&d](const boost::system::error_code& ec, int signo) {
        if (!ec) {
            ATLAS_LOG_INFO(d.logger, "bubbletea: signal %d", signo);
            d.beginDrain();
        }
    });
}

void Daemon::wait() {
    for (auto& t : impl_->threads) {
        if (t.joinable()) {
            t.join();
        }
    }
    impl_->threads.clear();
}

void Daemon::requestDrain() {
    Impl* d = impl_.get();
    net::post(d->ioc, [d] { d->beginDrain(); });
}

void Daemon::stop() {
    Impl* d = impl_.get();
    d->server->beginDrain();
    d->guard.reset();
    d->ioc.stop();
}

uint16_t Daemon::port() const {
    return impl_->port;
}
const std::string& Daemon::modelName() const {
    return impl_->model_name;
}
const std::string& Daemon::engineId() const {
    return impl_->engine_id;
}
const CostCoefficients& Daemon::initialCost() const {
    return impl_->initial_cost;
}
Metrics& Daemon::metrics() {
    return impl_->metrics;
}
Worker& Daemon::worker() {
    return *impl_->worker;
}

}  // namespace atlas::bubbletea
