#include "netstat/tool/serve.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "options/value.h"

namespace atlas::netstat {
namespace {

Status sysError(const std::string& what) {
    return Status(Code::kSystem, what + ": " + std::strerror(errno));
}

int64_t nowMs() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void sendAll(int fd, const std::string& data, int64_t deadline_ms) {
    size_t off = 0;
    while (off < data.size()) {
        pollfd p{fd, POLLOUT, 0};
        const int64_t left = deadline_ms - nowMs();
        if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
            return;
        }
        const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
        if (n <= 0) {
            return;
        }
        off += static_cast<size_t>(n);
    }
}

std::string response(int code, const char* reason, const char* type, const std::string& body) {
    return "HTTP/1.1 " + std::to_string(code) + " " + reason + "\r\nContent-Type: " + type +
           "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" +
           body;
}

void serveOne(int fd, const std::function<std::string()>& metrics) {
    const int64_t deadline = nowMs() + 5000;
    std::string req;
    while (req.find("\r\n\r\n") == std::string::npos && req.size() < 8192) {
        pollfd p{fd, POLLIN, 0};
        const int64_t left = deadline - nowMs();
        if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) {
            return;
        }
        char buf[2048];
        const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
        if (n <= 0) {
            return;
        }
        req.append(buf, static_cast<size_t>(n));
    }
    const size_t eol = req.find("\r\n");
    const std::string line = req.substr(0, eol);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = line.find(' ', sp1 == std::string::npos ? 0 : sp1 + 1);
    if (eol == std::string::npos || sp1 == std::string::npos || sp2 == std::string::npos) {
        sendAll(fd, response(400, "Bad Request", "text/plain", "bad request\n"), deadline);
        return;
    }
    const std::string method = line.substr(0, sp1);
    std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
    target = target.substr(0, target.find('?'));
    if (method != "GET" && method != "HEAD") {
        sendAll(fd, response(405, "Method Not Allowed", "text/plain", "GET only\n"), deadline);
    } else if (target == "/metrics") {
        std::string body = metrics();
        std::string r = response(200, "OK", "text/plain; version=0.0.4; charset=utf-8", body);
        if (method == "HEAD") {
            r.resize(r.size() - body.size());
        }
        sendAll(fd, r, deadline);
    } else {
        sendAll(fd, response(404, "Not Found", "text/plain", "try /metrics\n"), deadline);
    }
}

}  // namespace

Status serveMetrics(const std::string& addr, const std::function<std::string()>& metrics,
                    const std::atomic<bool>& stop, const std::function<void(int port)>& ready) {
    std::string host;
    std::string port;
    if (!addr.empty() && addr[0] == '[') {
        const size_t close = addr.find("]:");
        if (close == std::string::npos) {
            return Status(Code::kInvalidUsage, "--serve '" + addr + "': expected [V6]:PORT");
        }
        host = addr.substr(1, close - 1);
        port = addr.substr(close + 2);
    } else {
        const size_t colon = addr.rfind(':');
        if (colon == std::string::npos) {
            return Status(Code::kInvalidUsage, "--serve '" + addr + "': expected HOST:PORT");
        }
        host = addr.substr(0, colon);
        port = addr.substr(colon + 1);
    }
    const std::optional<uint64_t> port_number = options::parseUnsigned(port);
    if (!port_number || *port_number > 65535) {
        return Status(Code::kInvalidUsage, "--serve '" + addr + "': PORT must be 0..65535");
    }
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* res = nullptr;
    const int gai =
        ::getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &res);
    if (gai != 0) {
        return Status(Code::kInvalidUsage, "--serve '" + addr + "': " + ::gai_strerror(gai));
    }
    int lfd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) {
        ::freeaddrinfo(res);
        return sysError("socket");
    }
    const int one = 1;
    ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(lfd, res->ai_addr, res->ai_addrlen) != 0 || ::listen(lfd, 16) != 0) {
        Status st = sysError("bind/listen " + addr);
        ::freeaddrinfo(res);
        ::close(lfd);
        return st;
    }
    ::freeaddrinfo(res);
    sockaddr_storage bound{};
    socklen_t blen = sizeof(bound);
    ::getsockname(lfd, reinterpret_cast<sockaddr*>(&bound), &blen);
    const int bound_port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    ready(bound_port);
    while (!stop.load(std::memory_order_relaxed)) {
        pollfd p{lfd, POLLIN, 0};
        const int r = ::poll(&p, 1, 200);
        if (r < 0 && errno != EINTR) {
            Status st = sysError("poll");
            ::close(lfd);
            return st;
        }
        if (r <= 0) {
            continue;
        }
        const int cfd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (cfd < 0) {
            continue;
        }
        serveOne(cfd, metrics);
        ::close(cfd);
    }
    ::close(lfd);
    return Status::ok();
}

}  // namespace atlas::netstat
