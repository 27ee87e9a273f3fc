// Small blocking-with-deadline TCP helpers for the KV hand-off control connection. They are
// only called from the KV pusher's and receiver's own threads (never from an io_context
// handler), and every call is bounded by an absolute deadline on CLOCK_MONOTONIC.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"
#include "transport/net.h"

namespace atlas::bubbletea::kv {

// An owned file descriptor (closed on destruction).
class Socket {
  public:
    Socket() = default;
    explicit Socket(int fd) : fd_(fd) {}
    Socket(Socket&& o) noexcept : fd_(o.release()) {}
    Socket& operator=(Socket&& o) noexcept;
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;
    ~Socket();

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    int release() {
        const int fd = fd_;
        fd_ = -1;
        return fd;
    }
    void reset();

  private:
    int fd_ = -1;
};

// Resolves host (name or literal) and connects, failing with kTimeout past deadline_ns and
// kRemote when refused/unreachable. The message names host:port.
Result<Socket> connectTcp(const std::string& host, uint16_t port, Nanos deadline_ns);

// Listens on host:port (port 0: ephemeral) with SO_REUSEADDR.
Result<Socket> listenTcp(const std::string& host, uint16_t port, int backlog = 64);
uint16_t localPort(const Socket& s);
// The local address a connected socket uses (where the peer reached us), port 0.
Result<transport::SocketAddress> localAddress(const Socket& s);
std::string peerName(const Socket& s);

// Sends/receives exactly `size` bytes before deadline_ns. recvAll fails with kRemote
// "closed" on EOF (with *eof_at_start set when no byte at all was read, if non-null).
Status sendAll(const Socket& s, const void* data, size_t size, Nanos deadline_ns);
Status recvAll(const Socket& s, void* data, size_t size, Nanos deadline_ns,
               bool* eof_at_start = nullptr);
// Waits until `s` is readable (data or EOF) or the deadline; true when readable.
bool waitReadable(const Socket& s, Nanos deadline_ns);

// Back-off for polling transport requests (test() never blocks): yield a few times (a small
// message completes in microseconds), then sleep with growing intervals up to 1 ms so a
// long transfer does not burn a core that training or prefill may need.
class PollBackoff {
  public:
    void pause();

  private:
    int spins_ = 0;
    int sleep_us_ = 20;
};

}  // namespace atlas::bubbletea::kv
