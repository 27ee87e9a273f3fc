// Socket helpers shared by setup and the engines: RAII fd, address parsing, and the socket
// options Atlas relies on (each documented where it is set, in socket_util.cc).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"
#include "transport/net.h"

namespace atlas::transport {

// Owns one file descriptor.
class Fd {
  public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    Fd& operator=(Fd&& o) noexcept {
        if (this != &o) {
            reset();
            fd_ = std::exchange(o.fd_, -1);
        }
        return *this;
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;

    int get() const { return fd_; }
    bool valid() const { return fd_ >= 0; }
    int release() { return std::exchange(fd_, -1); }
    void reset() {
        if (fd_ >= 0) {
            ::close(fd_);
            fd_ = -1;
        }
    }

  private:
    int fd_ = -1;
};

// Per-socket settings derived from TransportConfig.
struct SocketOptions {
    size_t sockbuf_bytes = 0;        // 0: leave autotuning on
    int timeout_ms = 30000;          // keepalive + TCP_USER_TIMEOUT bound
    std::string congestion_control;  // TCP_CONGESTION; empty: the kernel's default
};
// The options every stream of a transport with this configuration gets.
SocketOptions socketOptions(const TransportConfig& cfg);

// A non-blocking, close-on-exec TCP socket of the given family.
Result<Fd> makeTcpSocket(int family);
// Starts a non-blocking connect of a new stream socket (options applied first); the
// connection completes later (pollConnected).
Result<Fd> startConnect(const SocketAddress& peer, const SocketOptions& opts);
// Zero-timeout check of a non-blocking connect: 1 connected, 0 pending, -errno failed.
int pollConnected(int fd);
// Options every Atlas stream gets (before connect/listen so buffer sizes shape the window).
Status applyStreamOptions(int fd, const SocketOptions& opts);
// Back-pressure: keep at most `bytes` of not-yet-sent data in the kernel, so per-stream queues
// stay in user space where the striper can see them.
Status setNotsentLowat(int fd, uint32_t bytes);
// TCP_CONGESTION: sets the socket's congestion control by name (0, or the errno that says why
// the kernel refused it: ENOENT no such module, EPERM not allowed), or reads it (empty when
// the kernel does not say).
int setCongestionControl(int fd, const std::string& name);
std::string congestionControl(int fd);
// Caps how fast the kernel sends on the socket (SO_MAX_PACING_RATE, bytes/s; TCP paces
// internally once it is set). 0: no cap.
Status setMaxPacingRate(int fd, uint64_t bytes_per_sec);
// Bytes the kernel took on a TCP socket and has not sent yet (SIOCOUTQNSD); 0 if unknown.
uint64_t kernelUnsentBytes(int fd);
// The kernel's smoothed RTT estimate for a connected TCP socket (TCP_INFO), 0 if unknown.
Nanos tcpInfoRttNs(int fd);
// Bytes sent/unacked/retransmitted for diagnostics. Returns false if unavailable.
struct TcpStats {
    uint32_t retransmits = 0;
    uint32_t snd_cwnd = 0;
    Nanos rtt_ns = 0;
};
bool tcpStats(int fd, TcpStats* out);

// The local address a connected socket uses / the peer address.
Result<SocketAddress> localAddress(int fd);
Result<SocketAddress> peerAddress(int fd);

// Kernel limits that bound one stream's window (read from this network namespace).
struct KernelTcpLimits {
    size_t wmem_max = 4u << 20;         // net.ipv4.tcp_wmem[2]: autotuning ceiling, send side
    size_t rmem_max = 6u << 20;         // net.ipv4.tcp_rmem[2]: autotuning ceiling, receive side
    size_t core_wmem_max = 208 * 1024;  // net.core.wmem_max: ceiling for explicit SO_SNDBUF
    size_t core_rmem_max = 208 * 1024;
};
KernelTcpLimits readKernelTcpLimits();

}  // namespace atlas::transport
