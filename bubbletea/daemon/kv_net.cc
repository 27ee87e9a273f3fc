#include "bubbletea/daemon/kv_net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

namespace atlas::bubbletea::kv {
namespace {

int msUntil(Nanos deadline_ns) {
    const Nanos left = deadline_ns - monotonicNowNs();
    if (left <= 0) {
        return 0;
    }
    const Nanos ms = (left + kNsPerMs - 1) / kNsPerMs;
    return ms > 60000 ? 60000 : static_cast<int>(ms);
}

// poll() for `events` until the deadline; kTimeout when it passes.
Status waitFor(int fd, short events, Nanos deadline_ns, const char* what) {
    for (;;) {
        pollfd p{fd, events, 0};
        const int timeout = msUntil(deadline_ns);
        const int r = ::poll(&p, 1, timeout);
        if (r > 0) {
            return Status::ok();
        }
        if (r < 0 && errno != EINTR) {
            return Status::fromErrno(std::string("poll (") + what + ")", errno);
        }
        if (r == 0 && monotonicNowNs() >= deadline_ns) {
            return {Code::kTimeout, std::string(what) + " timed out"};
        }
    }
}

}  // namespace

Socket& Socket::operator=(Socket&& o) noexcept {
    if (this != &o) {
        reset();
        fd_ = o.release();
    }
    return *this;
}

Socket::~Socket() {
    reset();
}

void Socket::reset() {
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
}

Result<Socket> connectTcp(const std::string& host, uint16_t port, Nanos deadline_ns) {
    const std::string where = host + ":" + std::to_string(port);
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string port_text = std::to_string(port);
    const int gai = ::getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res);
    if (gai != 0) {
        return Status{Code::kRemote, "resolve " + where + ": " + ::gai_strerror(gai)};
    }
    Status last{Code::kRemote, "no address for " + where};
    for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        Socket s(::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!s.valid()) {
            last = Status::fromErrno("socket", errno);
            continue;
        }
        int one = 1;
        ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        if (::connect(s.get(), ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
            last = Status::fromErrno("connect " + where, errno, Code::kRemote);
            continue;
        }
        Status st = waitFor(s.get(), POLLOUT, deadline_ns, ("connect " + where).c_str());
        if (!st.isOk()) {
            last = st;
            continue;
        }
        int err = 0;
        socklen_t len = sizeof(err);
        ::getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
            last = Status::fromErrno("connect " + where, err, Code::kRemote);
            continue;
        }
        ::freeaddrinfo(res);
        return s;
    }
    ::freeaddrinfo(res);
    return last;
}

Result<Socket> listenTcp(const std::string& host, uint16_t port, int backlog) {
    auto addr = transport::SocketAddress::parse(host, port);
    if (!addr.isOk()) {
        return addr.status();
    }
    Socket s(::socket(addr.value().family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s.valid()) {
        return Status::fromErrno("socket", errno);
    }
    int one = 1;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(s.get(), reinterpret_cast<const sockaddr*>(&addr.value().storage),
               addr.value().len) != 0) {
        return Status::fromErrno("bind " + host + ":" + std::to_string(port), errno);
    }
    if (::listen(s.get(), backlog) != 0) {
        return Status::fromErrno("listen", errno);
    }
    return s;
}

uint16_t localPort(const Socket& s) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
        return 0;
    }
    if (ss.ss_family == AF_INET) {
        return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
    }
    if (ss.ss_family == AF_INET6) {
        return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
    }
    return 0;
}

Result<transport::SocketAddress> localAddress(const Socket& s) {
    transport::SocketAddress a;
    a.len = sizeof(a.storage);
    if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a.storage), &a.len) != 0) {
        return Status::fromErrno("getsockname", errno);
    }
    if (a.storage.ss_family == AF_INET) {
        reinterpret_cast<sockaddr_in*>(&a.storage)->sin_port = 0;
    } else if (a.storage.ss_family == AF_INET6) {
        reinterpret_cast<sockaddr_in6*>(&a.storage)->sin6_port = 0;
    }
    return a;
}

std::string peerName(const Socket& s) {
    transport::SocketAddress a;
    a.len = sizeof(a.storage);
    if (::getpeername(s.get(), reinterpret_cast<sockaddr*>(&a.storage), &a.len) != 0) {
        return "?";
    }
    return a.toString();
}

Status sendAll(const Socket& s, const void* data, size_t size, Nanos deadline_ns) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (size > 0) {
        const ssize_t n = ::send(s.get(), p, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            size -= static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            ATLAS_RETURN_IF_ERROR(waitFor(s.get(), POLLOUT, deadline_ns, "send"));
            continue;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        return Status::fromErrno("send", errno, Code::kRemote);
    }
    return Status::ok();
}

Status recvAll(const Socket& s, void* data, size_t size, Nanos deadline_ns, bool* eof_at_start) {
    auto* p = static_cast<uint8_t*>(data);
    size_t got = 0;
    if (eof_at_start != nullptr) {
        *eof_at_start = false;
    }
    while (got < size) {
        const ssize_t n = ::recv(s.get(), p + got, size - got, MSG_DONTWAIT);
        if (n > 0) {
            got += static_cast<size_t>(n);
            continue;
        }
        if (n == 0) {
            if (eof_at_start != nullptr && got == 0) {
                *eof_at_start = true;
            }
            return {Code::kRemote, "connection closed by peer"};
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            ATLAS_RETURN_IF_ERROR(waitFor(s.get(), POLLIN, deadline_ns, "receive"));
            continue;
        }
        if (errno == EINTR) {
            continue;
        }
        return Status::fromErrno("recv", errno, Code::kRemote);
    }
    return Status::ok();
}

bool waitReadable(const Socket& s, Nanos deadline_ns) {
    return waitFor(s.get(), POLLIN, deadline_ns, "wait").isOk();
}

void PollBackoff::pause() {
    if (spins_ < 64) {
        ++spins_;
        std::this_thread::yield();
        return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
    sleep_us_ = std::min(sleep_us_ * 2, 1000);
}

}  // namespace atlas::bubbletea::kv
