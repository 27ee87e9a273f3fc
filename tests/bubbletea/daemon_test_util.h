// Helpers for the daemon's loopback tests: an in-process daemon on 127.0.0.1 with an
// ephemeral port, request helpers, and bounded polling (these tests use real time and real
// sockets; every wait has a deadline so nothing can hang).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bubbletea/daemon/config.h"
#include "bubbletea/daemon/daemon.h"
#include "bubbletea/daemon/http_client.h"
#include "bubbletea/daemon/worker.h"

namespace atlas::bubbletea::testutil {

using json = nlohmann::json;

// The null engine on the tiny shape, always-open windows, fast start-up.
inline DaemonConfig nullDaemonConfig() {
    DaemonConfig c;
    c.listen_host = "127.0.0.1";
    c.listen_port = 0;
    c.http_threads = 2;
    c.engine = EngineKind::kNull;
    c.random_weights = "tiny";
    c.model_name = "tiny";
    c.window_mode = WindowMode::kAlways;
    c.profile_tokens = {4, 16};
    c.profile_contexts = {0, 16};
    c.engine_id = "test-engine";
    c.kv_timeout_ns = 3 * kNsPerSec;
    c.drain_timeout_ns = 5 * kNsPerSec;
    return c;
}

class DaemonHarness {
  public:
    explicit DaemonHarness(const DaemonConfig& config) {
        auto d = Daemon::create(config, Logger::stderrLogger(LogLevel::kWarn));
        EXPECT_TRUE(d.isOk()) << d.status().toString();
        if (d.isOk()) {
            daemon_ = std::move(d.value());
            daemon_->start();
        }
    }
    ~DaemonHarness() { daemon_.reset(); }
    bool ok() const { return daemon_ != nullptr; }
    Daemon& daemon() { return *daemon_; }
    uint16_t port() const { return daemon_->port(); }
    std::unique_ptr<SyncHttpClient> client(Nanos timeout = 10 * kNsPerSec) const {
        return std::make_unique<SyncHttpClient>("127.0.0.1", daemon_->port(), timeout);
    }

  private:
    std::unique_ptr<Daemon> daemon_;
};

inline std::string completionBody(const std::vector<int32_t>& prompt, json extra = json::object()) {
    json body = {{"model", "tiny"}, {"prompt", prompt}, {"max_tokens", 1}};
    for (auto it = extra.begin(); it != extra.end(); ++it) {
        body[it.key()] = it.value();
    }
    return body.dump();
}

inline Result<ClientResponse> postCompletion(SyncHttpClient& c, const std::string& body) {
    return c.request("POST", "/v1/completions", body);
}

inline json parseJson(const std::string& text) {
    json j = json::parse(text, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << text;
    return j;
}

// Polls `pred` until true or `limit` passes.
inline bool waitUntil(const std::function<bool()>& pred,
                      std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
}

inline std::vector<int32_t> tokenRange(int n, int start = 1) {
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        v[static_cast<size_t>(i)] = (start + i * 7) % 256;
    }
    return v;
}

}  // namespace atlas::bubbletea::testutil
