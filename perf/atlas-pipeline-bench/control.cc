#include "perf/atlas-pipeline-bench/control.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace atlas::pipebench {
namespace {

Status writeAll(int fd, const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
        const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return Status::fromErrno("control channel send", errno, Code::kRemote);
        }
        p += w;
        n -= static_cast<size_t>(w);
    }
    return Status::ok();
}

Status readAll(int fd, void* data, size_t n, Nanos deadline_ns) {
    auto* p = static_cast<uint8_t*>(data);
    while (n > 0) {
        const Nanos now = monotonicNowNs();
        if (now >= deadline_ns) {
            return {Code::kTimeout, "control channel: timed out"};
        }
        pollfd pfd{fd, POLLIN, 0};
        const int ms = static_cast<int>(std::min<Nanos>((deadline_ns - now) / kNsPerMs + 1, 1000));
        const int rc = ::poll(&pfd, 1, ms);
        if (rc < 0 && errno != EINTR) {
            return Status::fromErrno("control channel poll", errno);
        }
        if (rc <= 0) {
            continue;
        }
        const ssize_t r = ::recv(fd, p, n, 0);
        if (r == 0) {
            return {Code::kRemote, "control channel closed by the peer"};
        }
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            return Status::fromErrno("control channel recv", errno, Code::kRemote);
        }
        p += r;
        n -= static_cast<size_t>(r);
    }
    return Status::ok();
}

}  // namespace

Status sendFrame(int fd, Msg type, const std::string& payload) {
    uint32_t hdr[2] = {static_cast<uint32_t>(type), static_cast<uint32_t>(payload.size())};
    ATLAS_RETURN_IF_ERROR(writeAll(fd, hdr, sizeof(hdr)));
    return writeAll(fd, payload.data(), payload.size());
}

Result<Frame> recvFrame(int fd, Nanos deadline_ns) {
    uint32_t hdr[2] = {};
    ATLAS_RETURN_IF_ERROR(readAll(fd, hdr, sizeof(hdr), deadline_ns));
    if (hdr[0] < static_cast<uint32_t>(Msg::kHandles) ||
        hdr[0] > static_cast<uint32_t>(Msg::kError) || hdr[1] > kMaxFrame) {
        return Status(Code::kRemote, "control channel: bad frame");
    }
    Frame f;
    f.type = static_cast<Msg>(hdr[0]);
    f.payload.resize(hdr[1]);
    ATLAS_RETURN_IF_ERROR(readAll(fd, f.payload.data(), hdr[1], deadline_ns));
    return f;
}

}  // namespace atlas::pipebench
