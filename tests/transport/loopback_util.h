// Helpers for transport tests over real loopback sockets: bring up a connected
// SendComm/RecvComm pair in one thread (the listener and connector are both non-blocking),
// and drive requests to completion with a deadline instead of hanging.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "transport/net.h"

namespace atlas::transport::testing {

inline TransportConfig loopbackConfig(IoBackend io = IoBackend::kAuto) {
    TransportConfig c;
    c.io = io;
    c.engine_threads = 2;
    c.timeout_ms = 5000;
    c.logger = Logger::stderrLogger(LogLevel::kWarn);
    return c;
}

struct Pair {
    std::unique_ptr<ListenComm> listen;
    std::unique_ptr<SendComm> send;
    std::unique_ptr<RecvComm> recv;
};

// Connects `from` to a listener of `to` (may be the same Transport).
inline Status connectPair(Transport& from, Transport& to, Pair* p,
                          std::chrono::milliseconds limit = std::chrono::milliseconds(10000)) {
    uint8_t handle[kHandleSize] = {};
    auto addr = SocketAddress::parse("127.0.0.1", 0);
    auto l = to.listen(addr.value(), handle);
    if (!l.isOk()) {
        return l.status();
    }
    p->listen = std::move(l.value());
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (p->send == nullptr || p->recv == nullptr) {
        if (p->send == nullptr) {
            ATLAS_RETURN_IF_ERROR(from.connect(handle, &p->send));
        }
        if (p->recv == nullptr) {
            ATLAS_RETURN_IF_ERROR(p->listen->accept(&p->recv));
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return {Code::kTimeout, "connectPair timed out"};
        }
    }
    return Status::ok();
}

// Polls until done or error or deadline.
inline Status waitFor(Request* r, size_t* size,
                      std::chrono::milliseconds limit = std::chrono::milliseconds(20000)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
        bool done = false;
        ATLAS_RETURN_IF_ERROR(test(r, &done, size));
        if (done) {
            return Status::ok();
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return {Code::kTimeout, "request did not complete in time"};
        }
        std::this_thread::yield();
    }
}

inline void fillPattern(std::vector<uint8_t>& b, uint64_t seed) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& v : b) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v = static_cast<uint8_t>(x);
    }
}

}  // namespace atlas::transport::testing
