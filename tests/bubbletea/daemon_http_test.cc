// The real daemon on 127.0.0.1: success paths with the null and the CPU engine, every error
// class, keep-alive, concurrent clients, fallback forwarding and channel-driven windows.
#include <unistd.h>

#include <atomic>
#include <future>

#include "bubbletea/daemon/cost_model.h"
#include "bubbletea/daemon/null_engine.h"
#include "bubbletea/engine/model_writer.h"
#include "bubbletea/engine/weights.h"
#include "channel/channel_writer.h"
#include "daemon_test_util.h"
#include "engine_test_util.h"

namespace atlas::bubbletea {
namespace {

using testutil::completionBody;
using testutil::DaemonHarness;
using testutil::json;
using testutil::nullDaemonConfig;
using testutil::parseJson;
using testutil::postCompletion;
using testutil::tokenRange;
using testutil::waitUntil;

TEST(DaemonHttp, NullEngineAnswersLikeAPrefillServer) {
    DaemonHarness h(nullDaemonConfig());
    ASSERT_TRUE(h.ok());
    auto c = h.client();
    const auto prompt = tokenRange(10);
    auto r = postCompletion(*c, completionBody(prompt));
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_EQ(r.value().status, 200) << r.value().body;
    const json j = parseJson(r.value().body);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["model"], "tiny");
    const int32_t expected = nullEngineToken(prompt, 256);
    EXPECT_EQ(j["choices"][0]["token_ids"][0], expected);
    EXPECT_EQ(j["choices"][0]["text"], std::to_string(expected));
    EXPECT_EQ(j["usage"]["prompt_tokens"], 10);
    EXPECT_TRUE(j["kv_transfer_params"].is_null());  // no remote decode was asked for
    EXPECT_GE(j["bubbletea"]["chunks"].get<int>(), 1);

    auto models = c->request("GET", "/v1/models");
    ASSERT_TRUE(models.isOk());
    EXPECT_EQ(models.value().status, 200);
    EXPECT_EQ(parseJson(models.value().body)["data"][0]["id"], "tiny");
    auto health = c->request("GET", "/healthz");
    ASSERT_TRUE(health.isOk());
    EXPECT_EQ(health.value().status, 200);
    EXPECT_EQ(parseJson(health.value().body)["status"], "ok");
}

TEST(DaemonHttp, MetricsAreServedInPrometheusFormat) {
    DaemonHarness h(nullDaemonConfig());
    ASSERT_TRUE(h.ok());
    auto c = h.client();
    ASSERT_TRUE(postCompletion(*c, completionBody(tokenRange(5))).isOk());
    ASSERT_TRUE(postCompletion(*c, "{bad json").isOk());
    auto m = c->request("GET", "/metrics");
    ASSERT_TRUE(m.isOk());
    EXPECT_EQ(m.value().status, 200);
    EXPECT_NE(m.value().header("content-type").find("text/plain"), std::string::npos);
    const std::string& text = m.value().body;
    for (const char* needle :
         {"bubbletea_http_requests_total", "bubbletea_completions_total 1",
          "bubbletea_rejections_total{reason=\"bad_request\"} 1", "bubbletea_queue_depth 0",
          "bubbletea_chunks_total", "bubbletea_chunk_overruns_total 0",
          "bubbletea_window_fill_fraction", "bubbletea_ttft_seconds_bucket{le=\"+Inf\"} 1",
          "bubbletea_ttft_seconds_count 1", "bubbletea_kv_bytes_pushed_total 0",
          "bubbletea_cost_model_error_ratio", "bubbletea_end_margin_seconds",
          "# TYPE bubbletea_ttft_seconds histogram"}) {
        EXPECT_NE(text.find(needle), std::string::npos) << needle << "\n" << text;
    }
}

TEST(DaemonHttp, ErrorsAreOpenAiObjectsWithTheRightStatus) {
    DaemonConfig config = nullDaemonConfig();
    config.max_prompt_tokens = 64;
    config.body_limit_bytes = 4096;
    DaemonHarness h(config);
    ASSERT_TRUE(h.ok());
    auto c = h.client();
    struct Case {
        std::string method, target, body;
        int status;
        const char* param;
    };
    const std::vector<Case> cases = {
        {"POST", "/v1/completions", "{\"model\": \"tiny\", \"prompt\": [1,", 400, ""},
        {"POST", "/v1/completions", R"({"prompt":[1]})", 400, "model"},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":"text"})", 400, "prompt"},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":[1],"max_tokens":5})", 400,
         "max_tokens"},
        {"POST", "/v1/completions", R"({"model":"tiny","prompt":[1],"stream":true})", 400,
         "stream"},
        {"POST", "/v1/completions", R"({"model":"llama","prompt":[1]})", 404, "model"},
        {"POST", "/v1/completions", completionBody(tokenRange(65)), 413, "prompt"},
        {"GET", "/v1/nothing", "", 404, ""},
    };
    for (const auto& k : cases) {
        auto r = c->request(k.method, k.target, k.body);
        ASSERT_TRUE(r.isOk()) << k.body << ": " << r.status().toString();
        EXPECT_EQ(r.value().status, k.status) << k.body << " -> " << r.value().body;
        const json j = parseJson(r.value().body);
        ASSERT_TRUE(j.contains("error")) << r.value().body;
        EXPECT_FALSE(j["error"]["message"].get<std::string>().empty());
        EXPECT_TRUE(j["error"].contains("type"));
        EXPECT_TRUE(j["error"].contains("code"));
        if (*k.param) {
            EXPECT_EQ(j["error"]["param"], k.param) << r.value().body;
        }
    }
    // Wrong method: 405 with Allow.
    auto r = c->request("GET", "/v1/completions");
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 405);
    EXPECT_EQ(r.value().header("allow"), "POST");
    // Body over the limit: 413 and the connection is closed.
    r = c->request("POST", "/v1/completions", std::string(8192, ' '));
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r.value().status, 413);
    // Malformed HTTP: 400, and the daemon keeps serving.
    auto raw = h.client();
    auto bad = raw->raw("THIS IS NOT HTTP\r\n\r\n");
    ASSERT_TRUE(bad.isOk()) << bad.status().toString();
    EXPECT_EQ(bad.value().status, 400);
    auto fresh = h.client();
    auto ok = postCompletion(*fresh, completionBody(tokenRange(3)));
    ASSERT_TRUE(ok.isOk());
    EXPECT_EQ(ok.value().status, 200);
}

TEST(DaemonHttp, HostileBytesNeverStallTheServer) {
    DaemonConfig config = nullDaemonConfig();
    config.read_timeout_ns = 300 * kNsPerMs;
    DaemonHarness h(config);
    ASSERT_TRUE(h.ok());
    // A request that never finishes its header is cut off by the read timeout.
    auto slow = h.client(5 * kNsPerSec);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(slow->rawExpectClose("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
    // Garbage, binary and truncated requests, each on its own connection.
    const std::vector<std::string> junk = {
        std::string("\x00\x01\x02\xff\r\n\r\n", 8),
        "GET / HTTP/9.9\r\n\r\n",
        "POST /v1/completions HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        std::string(20000, 'A') + "\r\n\r\n",
    };
    for (const auto& bytes : junk) {
        auto c = h.client(5 * kNsPerSec);
        EXPECT_TRUE(c->rawExpectClose(bytes)) << "the server kept a broken connection open";
    }
    auto c = h.client();
    auto r = postCompletion(*c, completionBody(tokenRange(4)));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 200);
}

TEST(DaemonHttp, KeepAliveServesManyRequestsOnOneConnection) {
    DaemonHarness h(nullDaemonConfig());
    ASSERT_TRUE(h.ok());
    auto c = h.client();
    const uint64_t before = h.daemon().metrics().connections.load();
    for (int i = 0; i < 10; ++i) {
        const auto prompt = tokenRange(5 + i, i);
        auto r = postCompletion(*c, completionBody(prompt));
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        ASSERT_EQ(r.value().status, 200);
        EXPECT_TRUE(r.value().keep_alive);
        EXPECT_EQ(parseJson(r.value().body)["choices"][0]["token_ids"][0],
                  nullEngineToken(prompt, 256));
    }
    EXPECT_EQ(h.daemon().metrics().connections.load() - before, 1u);
}

TEST(DaemonHttp, ConcurrentClients) {
    DaemonConfig config = nullDaemonConfig();
    config.http_threads = 3;
    DaemonHarness h(config);
    ASSERT_TRUE(h.ok());
    std::atomic<int> good{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            auto c = h.client();
            for (int i = 0; i < 15; ++i) {
                const auto prompt = tokenRange(1 + (t * 15 + i) % 40, t);
                auto r = postCompletion(*c, completionBody(prompt));
                if (r.isOk() && r.value().status == 200 &&
                    parseJson(r.value().body)["choices"][0]["token_ids"][0] ==
                        nullEngineToken(prompt, 256)) {
                    good.fetch_add(1);
                }
            }
        });
    }
    for (auto& t : threads) {
        t.join();
    }
    EXPECT_EQ(good.load(), 8 * 15);
}

// Windows far apart (a 1 ms window every 60 s, the first 30 s after start-up): admitted
// requests wait in the queue, so the queue-full and deadline paths are deterministic.
DaemonConfig sparseWindowConfig() {
    DaemonConfig c = nullDaemonConfig();
    c.window_mode = WindowMode::kDuty;
    c.duty_period_ns = 60 * kNsPerSec;
    c.duty_open_ns = kNsPerMs;
    c.duty_offset_ns = 30 * kNsPerSec;
    c.queue_limit = 2;
    c.default_ttft_ns = 60 * kNsPerSec;
    c.drain_mode = DrainMode::kReject;
    return c;
}

TEST(DaemonHttp, QueueFullIs429AndAnUnmeetableDeadlineIs503WithRetryAfter) {
    DaemonHarness h(sparseWindowConfig());
    ASSERT_TRUE(h.ok());
    // Two requests fill the queue (they wait for the window ~30 s away).
    std::vector<std::future<Result<ClientResponse>>> queued;
    for (int i = 0; i < 2; ++i) {
        queued.push_back(std::async(std::launch::async, [&h, i] {
            auto c = h.client(20 * kNsPerSec);
            return postCompletion(*c, completionBody(tokenRange(4, i)));
        }));
    }
    ASSERT_TRUE(waitUntil([&] { return h.daemon().worker().gauges().queue_depth == 2; }));
    auto c = h.client();
    auto full = postCompletion(*c, completionBody(tokenRange(4)));
    ASSERT_TRUE(full.isOk());
    EXPECT_EQ(full.value().status, 429) << full.value().body;
    EXPECT_FALSE(full.value().header("retry-after").empty());
    EXPECT_GE(std::stoi(full.value().header("retry-after")), 1);
    EXPECT_EQ(parseJson(full.value().body)["error"]["code"], "queue_full");

    // Drain in reject mode: the queued requests get 503 promptly instead of hanging.
    h.daemon().requestDrain();
    for (auto& f : queued) {
        auto r = f.get();
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        EXPECT_EQ(r.value().status, 503) << r.value().body;
    }

    // An empty queue, but the request asks for a 100 ms TTFT and the next window is ~30 s
    // away: 503 at once, with a Retry-After hint.
    DaemonHarness h2(sparseWindowConfig());
    ASSERT_TRUE(h2.ok());
    auto c2 = h2.client();
    auto r = postCompletion(*c2, completionBody(tokenRange(4), {{"ttft_deadline_ms", 100}}));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 503) << r.value().body;
    EXPECT_EQ(parseJson(r.value().body)["error"]["code"], "deadline_unmeetable");
    EXPECT_FALSE(r.value().header("retry-after").empty());
}

TEST(DaemonHttp, UnservableRequestsAreForwardedToTheFallback) {
    DaemonHarness fallback(nullDaemonConfig());
    ASSERT_TRUE(fallback.ok());
    DaemonConfig config = sparseWindowConfig();
    config.fallback_url = "http://127.0.0.1:" + std::to_string(fallback.port());
    DaemonHarness h(config);
    ASSERT_TRUE(h.ok());
    auto c = h.client();
    const auto prompt = tokenRange(6);
    auto r = postCompletion(*c, completionBody(prompt, {{"ttft_deadline_ms", 100}}));
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    ASSERT_EQ(r.value().status, 200) << r.value().body;
    EXPECT_EQ(r.value().header("x-bubbletea-forwarded"), "deadline");
    EXPECT_EQ(parseJson(r.value().body)["choices"][0]["token_ids"][0],
              nullEngineToken(prompt, 256));
    EXPECT_EQ(h.daemon().metrics().forwarded.load(), 1u);
    EXPECT_EQ(fallback.daemon().metrics().completions_ok.load(), 1u);

    // A dead fallback: 503 naming both reasons, quickly.
    DaemonConfig dead = sparseWindowConfig();
    dead.fallback_url = "http://127.0.0.1:1";
    DaemonHarness h2(dead);
    ASSERT_TRUE(h2.ok());
    auto c2 = h2.client();
    r = postCompletion(*c2, completionBody(prompt, {{"ttft_deadline_ms", 100}}));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 503);
    EXPECT_EQ(parseJson(r.value().body)["error"]["code"], "fallback_failed");
}

// A tiny random model written to disk in the Hugging Face format.
class TinyModelDir {
  public:
    TinyModelDir() {
        auto cfg = shapePreset("tiny");
        EXPECT_TRUE(cfg.isOk());
        EXPECT_TRUE(writeRandomModel(dir_.path(), cfg.value(), DType::kBF16, 11).isOk());
    }
    std::string path() const { return dir_.path().string(); }

  private:
    testutil::TempDir dir_;
};

TEST(DaemonHttp, CpuEngineFirstTokenMatchesADirectEngineRun) {
    TinyModelDir model;
    DaemonConfig config = nullDaemonConfig();
    config.engine = EngineKind::kCpu;
    config.random_weights.clear();
    config.model_dir = model.path();
    config.engine_threads = 2;
    config.max_chunk_tokens = 24;  // forces chunked prefill of the longer prompt
    config.min_chunk_tokens = 8;
    DaemonHarness h(config);
    ASSERT_TRUE(h.ok());

    auto weights = loadModelDir(model.path());
    ASSERT_TRUE(weights.isOk());
    auto engine = makeCpuEngine(weights.value(), 1);
    ASSERT_TRUE(engine.isOk());
    auto c = h.client(30 * kNsPerSec);
    for (int n : {5, 100}) {
        const auto prompt = testutil::tokenRange(n, 3);
        auto kv = engine.value()->newSequence(prompt.size());
        ASSERT_TRUE(kv.isOk());
        auto direct = engine.value()->prefillChunk(*kv.value(), prompt, true);
        ASSERT_TRUE(direct.isOk());
        auto r = postCompletion(*c, completionBody(prompt));
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        ASSERT_EQ(r.value().status, 200) << r.value().body;
        const json j = parseJson(r.value().body);
        EXPECT_EQ(j["choices"][0]["token_ids"][0], direct.value().next_token) << "n=" << n;
        if (n == 100) {
            EXPECT_GE(j["bubbletea"]["chunks"].get<int>(), 5);  // 100 tokens / 24 per chunk
        }
    }
    // Profiled at start-up: the fit predicts a positive time. Which coefficients carry it
    // depends on noisy timings (the non-negative fit may zero any one of them).
    const CostModel profiled(h.daemon().initialCost());
    EXPECT_GT(profiled.predict(16, 0), 0) << h.daemon().initialCost().toString();
    EXPECT_GE(profiled.predict(64, 512), profiled.predict(16, 0));
}

TEST(DaemonHttp, ChannelWindowsGateThePrefill) {
    const std::string name = "/atlas-bubbles-daemon-test-" + std::to_string(::getpid());
    auto writer = channel::ChannelWriter::create(name, {}, {});
    ASSERT_TRUE(writer.isOk()) << writer.status().toString();
    // Windows of 40 ms every 50 ms for the next 10 s.
    const Nanos now = monotonicNowNs();
    std::vector<channel::PredictedWindow> windows;
    for (int i = 0; i < 200; ++i) {
        channel::PredictedWindow w;
        w.start_ns = now + i * 50 * kNsPerMs;
        w.end_ns = w.start_ns + 40 * kNsPerMs;
        w.confidence_ppm = 900000;
        windows.push_back(w);
    }
    const size_t published = writer.value().publishPredictions(windows);
    ASSERT_GT(published, 10u);
    writer.value().setStatus(channel::PredictorState::kPredicting,
                             channel::StatusReason::kSynthetic);
    channel::ChannelStats stats;
    stats.period_ns = 50 * kNsPerMs;
    writer.value().setStats(stats);

    DaemonConfig config = nullDaemonConfig();
    config.window_mode = WindowMode::kChannel;
    config.channel = name;
    DaemonHarness h(config);
    ASSERT_TRUE(h.ok());
    auto c = h.client();
    ASSERT_TRUE(waitUntil([&] { return !h.daemon().worker().gauges().windows_withdrawn; }));
    auto r = postCompletion(*c, completionBody(tokenRange(8)));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 200) << r.value().body;

    // The predictor loses the period: predictions are withdrawn, nothing may run.
    writer.value().setStatus(channel::PredictorState::kPeriodLost,
                             channel::StatusReason::kPeriodChanged);
    ASSERT_TRUE(waitUntil([&] { return h.daemon().worker().gauges().windows_withdrawn; }));
    r = postCompletion(*c, completionBody(tokenRange(8), {{"ttft_deadline_ms", 200}}));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 503) << r.value().body;
    EXPECT_NE(parseJson(r.value().body)["error"]["message"].get<std::string>().find("period-lost"),
              std::string::npos)
        << r.value().body;
    auto health = c->request("GET", "/healthz");
    ASSERT_TRUE(health.isOk());
    EXPECT_EQ(parseJson(health.value().body)["windows_withdrawn"], true);
}

}  // namespace
}  // namespace atlas::bubbletea
