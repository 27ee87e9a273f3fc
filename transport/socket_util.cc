#include "transport/socket_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sockios.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace atlas::transport {

const char* ioBackendName(IoBackend b) {
    switch (b) {
        case IoBackend::kAuto:
            return "auto";
        case IoBackend::kUring:
            return "io_uring";
        case IoBackend::kEpoll:
            return "epoll";
    }
    return "?";
}

const char* stripeModeName(StripeMode m) {
    return m == StripeMode::kEven ? "even" : "load";
}

Result<SocketAddress> SocketAddress::parse(const std::string& host, uint16_t port) {
    SocketAddress a;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&a.storage);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        a.len = sizeof(sockaddr_in);
        return a;
    }
    std::string h = host;
    if (h.size() > 2 && h.front() == '[' && h.back() == ']') {
        h = h.substr(1, h.size() - 2);
    }
    if (inet_pton(AF_INET6, h.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        a.len = sizeof(sockaddr_in6);
        return a;
    }
    return Status(Code::kInvalidArgument, "not a numeric IPv4/IPv6 address: '" + host + "'");
}

std::string SocketAddress::toString() const {
    char buf[INET6_ADDRSTRLEN] = "?";
    if (family() == AF_INET) {
        const auto* v4 = reinterpret_cast<const sockaddr_in*>(&storage);
        inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
        return std::string(buf) + ":" + std::to_string(ntohs(v4->sin_port));
    }
    if (family() == AF_INET6) {
        const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&storage);
        inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
        return "[" + std::string(buf) + "]:" + std::to_string(ntohs(v6->sin6_port));
    }
    return "<unset>";
}

uint16_t SocketAddress::port() const {
    if (family() == AF_INET) {
        return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
    }
    if (family() == AF_INET6) {
        return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
    }
    return 0;
}

Result<Fd> makeTcpSocket(int family) {
    int fd = ::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0) {
        return Status::fromErrno("socket()", errno);
    }
    return Fd(fd);
}

namespace {

Status setInt(int fd, int level, int opt, int value, const char* name) {
    if (::setsockopt(fd, level, opt, &value, sizeof(value)) != 0) {
        return Status::fromErrno(std::string("setsockopt(") + name + ")", errno);
    }
    return Status::ok();
}

// Explicit buffer sizes are capped by net.core.{w,r}mem_max, which is global and read-only
// inside a network namespace; as root (CAP_NET_ADMIN) the *FORCE variants bypass that cap.
// Explicit sizes also switch off the kernel's autotuning for that socket, which is why the
// default (0) leaves them alone.
Status setBuffer(int fd, int opt, int force_opt, size_t bytes, const char* name) {
    const int v = static_cast<int>(std::min<size_t>(bytes, INT32_MAX / 2));
    if (::setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof(v)) == 0) {
        return Status::ok();
    }
    return setInt(fd, SOL_SOCKET, opt, v, name);
}

}  // namespace

Status applyStreamOptions(int fd, const SocketOptions& opts) {
    // Frames are written whole (header + payload in one sendmsg); Nagle would only add delay
    // to the small inline messages that share the control stream.
    ATLAS_RETURN_IF_ERROR(setInt(fd, IPPROTO_TCP, TCP_NODELAY, 1, "TCP_NODELAY"));
    // Dead-peer bound. A killed peer process resets/closes its sockets at once; a vanished
    // host or a partition is caught by keepalive (idle connections) and TCP_USER_TIMEOUT
    // (unacknowledged data), both derived from ATLAS_TIMEOUT_MS so no request waits forever.
    const int timeout_s = std::max(1, opts.timeout_ms / 1000);
    const int idle_s = std::max(1, timeout_s / 3);
    const int intvl_s = std::max(1, timeout_s / 6);
    const int cnt = std::max(1, (timeout_s - idle_s) / intvl_s);
    ATLAS_RETURN_IF_ERROR(setInt(fd, SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE"));
    ATLAS_RETURN_IF_ERROR(setInt(fd, IPPROTO_TCP, TCP_KEEPIDLE, idle_s, "TCP_KEEPIDLE"));
    ATLAS_RETURN_IF_ERROR(setInt(fd, IPPROTO_TCP, TCP_KEEPINTVL, intvl_s, "TCP_KEEPINTVL"));
    ATLAS_RETURN_IF_ERROR(setInt(fd, IPPROTO_TCP, TCP_KEEPCNT, cnt, "TCP_KEEPCNT"));
    ATLAS_RETURN_IF_ERROR(
        setInt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, opts.timeout_ms, "TCP_USER_TIMEOUT"));
    if (opts.sockbuf_bytes > 0) {
        ATLAS_RETURN_IF_ERROR(
            setBuffer(fd, SO_SNDBUF, SO_SNDBUFFORCE, opts.sockbuf_bytes, "SO_SNDBUF"));
        ATLAS_RETURN_IF_ERROR(
            setBuffer(fd, SO_RCVBUF, SO_RCVBUFFORCE, opts.sockbuf_bytes, "SO_RCVBUF"));
    }
    if (!opts.congestion_control.empty()) {
        // Not an error: Transport::create tried this name once and warned if the kernel
        // refused it; a stream the kernel refuses it later keeps the default.
        (void)setCongestionControl(fd, opts.congestion_control);
    }
    return Status::ok();
}

SocketOptions socketOptions(const TransportConfig& cfg) {
    return SocketOptions{cfg.sockbuf_bytes, cfg.timeout_ms, cfg.congestion_control};
}

int setCongestionControl(int fd, const std::string& name) {
    return ::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(),
                        static_cast<socklen_t>(name.size())) == 0
               ? 0
               : errno;
}

std::string congestionControl(int fd) {
    char name[32] = {};  // TCP_CA_NAME_MAX is 16
    socklen_t len = sizeof(name) - 1;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len) != 0) {
        return {};
    }
    return std::string(name, ::strnlen(name, len));
}

int pollConnected(int fd) {
    pollfd p{fd, POLLOUT, 0};
    int rc = ::poll(&p, 1, 0);
    if (rc == 0) {
        return 0;
    }
    if (rc < 0) {
        return errno == EINTR ? 0 : -errno;
    }
    int err = 0;
    socklen_t len = sizeof(err);
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        return -errno;
    }
    return err == 0 ? 1 : -err;
}

Result<Fd> startConnect(const SocketAddress& peer, const SocketOptions& opts) {
    auto fd = makeTcpSocket(peer.family());
    if (!fd.isOk()) {
        return fd.status();
    }
    ATLAS_RETURN_IF_ERROR(applyStreamOptions(fd->get(), opts));
    if (::connect(fd->get(), reinterpret_cast<const sockaddr*>(&peer.storage), peer.len) != 0 &&
        errno != EINPROGRESS) {
        return Status::fromErrno("connect to " + peer.toString(), errno, Code::kRemote);
    }
    return std::move(fd.value());
}

Status setNotsentLowat(int fd, uint32_t bytes) {
    return setInt(fd, IPPROTO_TCP, TCP_NOTSENT_LOWAT, static_cast<int>(bytes), "TCP_NOTSENT_LOWAT");
}

Status setMaxPacingRate(int fd, uint64_t bytes_per_sec) {
    // The option's unsigned long form (Linux 4.20+): rates beyond 32 bits (34 Gbit/s) too.
    // ~0UL is "no cap", which is also what tells atlas_rate that no rate is told.
    static_assert(sizeof(unsigned long) == sizeof(uint64_t), "64-bit only");
    const unsigned long v = bytes_per_sec == 0 ? ~0UL : static_cast<unsigned long>(bytes_per_sec);
    if (::setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &v, sizeof(v)) != 0) {
        return Status::fromErrno("setsockopt(SO_MAX_PACING_RATE)", errno);
    }
    return Status::ok();
}

uint64_t kernelUnsentBytes(int fd) {
    int n = 0;
    return ::ioctl(fd, SIOCOUTQNSD, &n) == 0 && n > 0 ? static_cast<uint64_t>(n) : 0;
}

Nanos tcpInfoRttNs(int fd) {
    TcpStats s;
    return tcpStats(fd, &s) ? s.rtt_ns : 0;
}

bool tcpStats(int fd, TcpStats* out) {
    tcp_info info{};
    socklen_t len = sizeof(info);
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) {
        return false;
    }
    out->rtt_ns = static_cast<Nanos>(info.tcpi_rtt) * kNsPerUs;
    out->retransmits = info.tcpi_total_retrans;
    out->snd_cwnd = info.tcpi_snd_cwnd;
    return true;
}

namespace {
Result<SocketAddress> sockName(int fd, bool peer) {
    SocketAddress a;
    a.len = sizeof(a.storage);
    int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len)
                  : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a.storage), &a.len);
    if (rc != 0) {
        return Status::fromErrno(peer ? "getpeername()" : "getsockname()", errno);
    }
    return a;
}

size_t readThirdField(const char* path, size_t fallback) {
    FILE* f = std::fopen(path, "re");
    if (f == nullptr) {
        return fallback;
    }
    unsigned long long a = 0, b = 0, c = 0;
    const int n = std::fscanf(f, "%llu %llu %llu", &a, &b, &c);
    std::fclose(f);
    return n == 3 && c > 0 ? static_cast<size_t>(c) : fallback;
}

size_t readOne(const char* path, size_t fallback) {
    FILE* f = std::fopen(path, "re");
    if (f == nullptr) {
        return fallback;
    }
    unsigned long long a = 0;
    const int n = std::fscanf(f, "%llu", &a);
    std::fclose(f);
    return n == 1 && a > 0 ? static_cast<size_t>(a) : fallback;
}
}  // namespace

Result<SocketAddress> localAddress(int fd) {
    return sockName(fd, false);
}
Result<SocketAddress> peerAddress(int fd) {
    return sockName(fd, true);
}

KernelTcpLimits readKernelTcpLimits() {
    KernelTcpLimits l;
    l.wmem_max = readThirdField("/proc/sys/net/ipv4/tcp_wmem", l.wmem_max);
    l.rmem_max = readThirdField("/proc/sys/net/ipv4/tcp_rmem", l.rmem_max);
    l.core_wmem_max = readOne("/proc/sys/net/core/wmem_max", l.core_wmem_max);
    l.core_rmem_max = readOne("/proc/sys/net/core/rmem_max", l.core_rmem_max);
    return l;
}

}  // namespace atlas::transport
