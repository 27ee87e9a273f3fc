// Helpers for transport tests over real loopback sockets: bring up a connected
// SendComm/RecvComm pair in one thread (the listener and connector are both non-blocking),
// and drive requests to completion with a deadline instead of hanging.
#pragma once

#include <gtest/gtest.h>
#include <sched.h>

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

// Pins the calling thread, and every thread it starts while pinned (a Transport's engines and
// rejoiner), to one CPU it may run on; restores its mask when destroyed. Create it before the
// Transport.
//
// Why: loopback TCP reorders a segment now and then when the sending thread moves between
// CPUs, since each CPU drains its own backlog queue. A message train that saw a segment out
// of order is lossy and, shorter than a second, no sample at all (transport/train.h), so a
// test that counts trains needs an in-order path. Measured with six TSan runs of
// ALongMessageIsCutIntoTrainsOfTheSpan at once on 2 cores: unpinned, 4 of 96 runs lost their
// train, each with one more TcpExtTCPOFOQueue; pinned, 0 of 192 and no out-of-order queueing.
class OneCpu {
  public:
    OneCpu() {
        if (sched_getaffinity(0, sizeof(saved_), &saved_) != 0) {
            return;  // unpinned: the test runs as before
        }
        cpu_set_t one;
        CPU_ZERO(&one);
        for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
            if (CPU_ISSET(cpu, &saved_)) {
                CPU_SET(cpu, &one);
                break;
            }
        }
        pinned_ = sched_setaffinity(0, sizeof(one), &one) == 0;
    }
    ~OneCpu() {
        if (pinned_) {
            sched_setaffinity(0, sizeof(saved_), &saved_);
        }
    }
    OneCpu(const OneCpu&) = delete;
    OneCpu& operator=(const OneCpu&) = delete;

  private:
    cpu_set_t saved_{};
    bool pinned_ = false;
};

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
