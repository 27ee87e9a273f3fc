#include "perf/atlas-net-perf/bootstrap.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

namespace atlas::netperf {

namespace {

void putU32(uint8_t* p, uint32_t v) {
    std::memcpy(p, &v, 4);
}
uint32_t getU32(const uint8_t* p) {
    uint32_t v = 0;
    std::memcpy(&v, p, 4);
    return v;
}

Status protocolError(const std::string& what) {
    return Status(Code::kRemote, what);
}

}  // namespace

Result<FrameHeader> decodeFrameHeader(const uint8_t* bytes, size_t size) {
    if (size < kFrameHeaderSize) {
        return protocolError("bootstrap: short frame header");
    }
    if (getU32(bytes) != kFrameMagic) {
        return protocolError("bootstrap: bad magic (is the peer atlas-net-perf?)");
    }
    uint32_t type = getU32(bytes + 4);
    if (type < static_cast<uint32_t>(MsgType::kHello) ||
        type > static_cast<uint32_t>(MsgType::kDone)) {
        return protocolError("bootstrap: unknown frame type " + std::to_string(type));
    }
    uint32_t length = getU32(bytes + 8);
    if (length > kMaxFramePayload) {
        return protocolError("bootstrap: frame of " + std::to_string(length) + " B is too large");
    }
    return FrameHeader{static_cast<MsgType>(type), length};
}

std::string encodeFrame(MsgType type, const std::string& payload) {
    std::string out(kFrameHeaderSize, '\0');
    auto* p = reinterpret_cast<uint8_t*>(out.data());
    putU32(p, kFrameMagic);
    putU32(p + 4, static_cast<uint32_t>(type));
    putU32(p + 8, static_cast<uint32_t>(payload.size()));
    return out + payload;
}

std::string encodePlan(const Plan& plan) {
    nlohmann::json j;
    j["measure"] = plan.measure == Measure::kLatency ? "latency" : "bandwidth";
    j["kind"] = plan.kind == Kind::kRawTcp ? "raw-tcp" : "plugin";
    j["direction"] = directionName(plan.direction);
    j["sizes"] = plan.sizes;
    j["iters"] = plan.iters;
    j["warmup"] = plan.warmup;
    j["window"] = plan.window;
    j["raw_streams"] = plan.raw_streams;
    j["dev"] = plan.dev;
    j["check"] = plan.check;
    j["poll"] = pollName(plan.poll);
    return j.dump();
}

Result<Plan> decodePlan(const std::string& text) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
        return protocolError("bootstrap: the plan is not a JSON object");
    }
    Plan p;
    auto str = [&j](const char* key) -> std::string {
        auto it = j.find(key);
        return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    auto integer = [&j](const char* key, int64_t lo, int64_t hi, int64_t* out) -> bool {
        auto it = j.find(key);
        if (it == j.end() || !it->is_number_integer()) {
            return false;
        }
        int64_t v = it->get<int64_t>();
        if (v < lo || v > hi) {
            return false;
        }
        *out = v;
        return true;
    };
    std::string measure = str("measure");
    std::string kind = str("kind");
    std::string direction = str("direction");
    if (measure != "latency" && measure != "bandwidth") {
        return protocolError("bootstrap: plan.measure invalid");
    }
    if (kind != "plugin" && kind != "raw-tcp") {
        return protocolError("bootstrap: plan.kind invalid");
    }
    if (direction != "uni" && direction != "bidir") {
        return protocolError("bootstrap: plan.direction invalid");
    }
    p.measure = measure == "latency" ? Measure::kLatency : Measure::kBandwidth;
    p.kind = kind == "raw-tcp" ? Kind::kRawTcp : Kind::kPlugin;
    p.direction = direction == "bidir" ? Direction::kBidir : Direction::kUni;
    int64_t iters = 0, warmup = 0, window = 0, streams = 0, dev = 0;
    if (!integer("iters", 1, 100000000, &iters) || !integer("warmup", 0, 100000000, &warmup) ||
        !integer("window", 1, 32, &window) || !integer("raw_streams", 1, 64, &streams) ||
        !integer("dev", 0, 1024, &dev)) {
        return protocolError("bootstrap: plan has a missing or out-of-range number");
    }
    p.iters = static_cast<int>(iters);
    p.warmup = static_cast<int>(warmup);
    p.window = static_cast<int>(window);
    p.raw_streams = static_cast<int>(streams);
    p.dev = static_cast<int>(dev);
    const std::string poll = str("poll");
    if (poll == "spin") {
        p.poll = Poll::kSpin;
    } else if (poll == "sleep") {
        p.poll = Poll::kSleep;
    } else if (poll != "yield") {
        return protocolError("bootstrap: plan.poll invalid");
    }
    auto check = j.find("check");
    p.check = check != j.end() && check->is_boolean() && check->get<bool>();
    auto sizes = j.find("sizes");
    if (sizes == j.end() || !sizes->is_array() || sizes->empty() || sizes->size() > 256) {
        return protocolError("bootstrap: plan.sizes must hold 1..256 sizes");
    }
    for (const auto& s : *sizes) {
        if (!s.is_number_unsigned() || s.get<uint64_t>() > (uint64_t{1} << 30)) {
            return protocolError("bootstrap: plan.sizes holds an invalid size");
        }
        p.sizes.push_back(static_cast<size_t>(s.get<uint64_t>()));
    }
    return p;
}

Channel::~Channel() {
    if (fd_ >= 0) {
        close(fd_);
    }
}

Status Channel::send(MsgType type, const std::string& payload, const Deadline& deadline) {
    std::string frame = encodeFrame(type, payload);
    return abi::writeAll(fd_, frame.data(), frame.size(), deadline);
}

Result<std::string> Channel::recv(MsgType expected, const Deadline& deadline) {
    uint8_t hdr[kFrameHeaderSize];
    ATLAS_RETURN_IF_ERROR(abi::readAll(fd_, hdr, sizeof(hdr), deadline));
    Result<FrameHeader> h = decodeFrameHeader(hdr, sizeof(hdr));
    if (!h.isOk()) {
        return h.status();
    }
    std::string payload(h->length, '\0');
    ATLAS_RETURN_IF_ERROR(abi::readAll(fd_, payload.data(), payload.size(), deadline));
    if (h->type == MsgType::kError) {
        return Status(Code::kRemote, "peer reported: " + payload);
    }
    if (h->type != expected) {
        return protocolError("bootstrap: expected frame type " +
                             std::to_string(static_cast<uint32_t>(expected)) + ", got " +
                             std::to_string(static_cast<uint32_t>(h->type)));
    }
    return payload;
}

void Channel::sendError(const std::string& text) {
    (void)send(MsgType::kError, text.substr(0, 4096), Deadline::afterMs(500));
}

// ---------------------------------------------------------------------------------------------
// TCP

namespace {

Result<addrinfo*> resolve(const std::string& host, uint16_t port, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    addrinfo* res = nullptr;
    std::string port_text = std::to_string(port);
    int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port_text.c_str(), &hints, &res);
    if (rc != 0) {
        return Status(Code::kInvalidArgument, "cannot resolve '" + host + "': " + gai_strerror(rc));
    }
    return res;
}

}  // namespace

Result<int> tcpListen(const std::string& host, uint16_t port, int backlog) {
    Result<addrinfo*> res = resolve(host == "*" ? "" : host, port, true);
    if (!res.isOk()) {
        return res.status();
    }
    Status last(Code::kSystem, "no usable address for " + host);
    int fd = -1;
    for (addrinfo* ai = *res; ai != nullptr; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last = Status::fromErrno("socket", errno);
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, backlog) == 0) {
            break;
        }
        last = Status::fromErrno("bind/listen " + host + ":" + std::to_string(port), errno);
        close(fd);
        fd = -1;
    }
    freeaddrinfo(*res);
    if (fd < 0) {
        return last;
    }
    return fd;
}

Result<int> tcpAccept(int listen_fd, const Deadline& deadline) {
    while (true) {
        pollfd pfd{listen_fd, POLLIN, 0};
        int n = poll(&pfd, 1, deadline.remainingMsForPoll());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return Status::fromErrno("poll", errno);
        }
        if (n == 0) {
            return Status(Code::kTimeout, "no peer connected before the deadline");
        }
        int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            return fd;
        }
        if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
            return Status::fromErrno("accept", errno);
        }
    }
}

Result<int> tcpConnect(const std::string& host, uint16_t port, const Deadline& deadline) {
    Status last(Code::kTimeout, "connect " + host + ":" + std::to_string(port) + ": deadline");
    abi::Backoff backoff;
    while (!deadline.expired()) {
        Result<addrinfo*> res = resolve(host, port, false);
        if (!res.isOk()) {
            return res.status();
        }
        for (addrinfo* ai = *res; ai != nullptr; ai = ai->ai_next) {
            int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
            if (fd < 0) {
                last = Status::fromErrno("socket", errno);
                continue;
            }
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
                freeaddrinfo(*res);
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                return fd;
            }
            last = Status::fromErrno("connect " + host + ":" + std::to_string(port), errno,
                                     Code::kRemote);
            close(fd);
        }
        freeaddrinfo(*res);
        // The server may not be listening yet: retry in small steps until the deadline.
        for (int i = 0; i < 2000 && !deadline.expired(); ++i) {
            backoff.idle();
        }
    }
    return last;
}

Result<std::pair<std::string, uint16_t>> localAddress(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
        return Status::fromErrno("getsockname", errno);
    }
    char host[INET6_ADDRSTRLEN] = {};
    uint16_t port = 0;
    if (ss.ss_family == AF_INET) {
        auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
        inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
        port = ntohs(sin->sin_port);
    } else if (ss.ss_family == AF_INET6) {
        auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
        inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
        port = ntohs(sin6->sin6_port);
    } else {
        return Status(Code::kInternal, "not an IP socket");
    }
    return std::make_pair(std::string(host), port);
}

std::string interfaceAddress(const std::string& ifname_list) {
    ifaddrs* ifa = nullptr;
    if (getifaddrs(&ifa) != 0) {
        return "";
    }
    std::string found;
    size_t start = 0;
    while (found.empty() && start <= ifname_list.size()) {
        size_t comma = ifname_list.find(',', start);
        std::string prefix = ifname_list.substr(
            start, comma == std::string::npos ? std::string::npos : comma - start);
        bool exact = !prefix.empty() && prefix[0] == '=';
        if (exact) {
            prefix = prefix.substr(1);
        }
        if (!prefix.empty() && prefix[0] != '^') {
            for (ifaddrs* i = ifa; i != nullptr; i = i->ifa_next) {
                if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET ||
                    (i->ifa_flags & IFF_UP) == 0) {
                    continue;
                }
                std::string name = i->ifa_name;
                if (exact ? name == prefix : name.rfind(prefix, 0) == 0) {
                    char host[INET_ADDRSTRLEN] = {};
                    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, host,
                              sizeof(host));
                    found = host;
                    break;
                }
            }
        }
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    freeifaddrs(ifa);
    return found;
}

}  // namespace atlas::netperf
