// A decode-side KV receiver for the daemon's loopback tests: the code behind kv-sink,
// recording every transfer it sees.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <vector>

#include "bubbletea/daemon/kv_receiver.h"

namespace atlas::bubbletea::testutil {

// Records every transfer a receiver sees.
struct Sink {
    explicit Sink(KvReceiverConfig config = {}) {
        config.logger = Logger::stderrLogger(LogLevel::kWarn);
        auto r = KvReceiver::start(config, [this](const KvTransfer& t) {
            std::lock_guard<std::mutex> lock(mu);
            transfers.push_back(t);
        });
        EXPECT_TRUE(r.isOk()) << r.status().toString();
        if (r.isOk()) {
            receiver = std::move(r.value());
        }
    }
    std::vector<KvTransfer> snapshot() {
        std::lock_guard<std::mutex> lock(mu);
        return transfers;
    }
    uint16_t port() const { return receiver->port(); }

    std::mutex mu;
    std::vector<KvTransfer> transfers;
    std::unique_ptr<KvReceiver> receiver;
};

}  // namespace atlas::bubbletea::testutil
