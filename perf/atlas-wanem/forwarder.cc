#include "perf/atlas-wanem/forwarder.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "perf/atlas-wanem/packet.h"

namespace atlas::wanem {
namespace {

bool fatalErrno(int err) {
    // The device was torn down under us (namespace deleted) or the fd is unusable.
    return err == EBADF || err == EBADFD || err == ENODEV || err == ENXIO;
}

}  // namespace

std::string applyThreadSettings(const ForwarderSettings& settings) {
    // Timer slack is per thread; the default 50 us would show up as delay error.
    prctl(PR_SET_TIMERSLACK, settings.timer_slack_ns, 0, 0, 0);
    if (settings.rt_priority == 0) {
        return "";
    }
    // A real link does not wait for the CPU: with SCHED_FIFO the thread wakes at its
    // deadline even while compilers or iperf3 keep both cores busy. It sleeps in ppoll()
    // between packets, and the kernel's RT throttling bounds a runaway.
    sched_param sp{};
    sp.sched_priority = static_cast<int>(settings.rt_priority);
    const int rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);
    if (rc != 0) {
        return std::string("cannot set SCHED_FIFO priority: ") + std::strerror(rc) +
               "; continuing with normal scheduling";
    }
    return "";
}

Status runDirection(DirectionPipeline& pipe, int in_fd, int out_fd, int stop_fd,
                    const ForwarderSettings& settings) {
    std::vector<uint8_t> buf(std::max<size_t>(65536, settings.mtu) + kVnetHdrLen + 256);
    const Nanos spin_ns = Nanos{settings.spin_us} * kNsPerUs;
    int write_errno = 0;
    auto sink = [&](std::span<const uint8_t> f) {
        const ssize_t w = write(out_fd, f.data(), f.size());
        if (w == static_cast<ssize_t>(f.size())) {
            return true;
        }
        write_errno = w < 0 ? errno : EIO;
        return false;
    };
    pollfd fds[2] = {{in_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    while (true) {
        Nanos now = monotonicNowNs();
        pipe.deliverDue(now, settings.batch, sink);
        if (write_errno != 0 && fatalErrno(write_errno)) {
            return Status::fromErrno("write to output TUN", write_errno);
        }
        write_errno = 0;

        const Nanos next = pipe.nextDeliveryNs();
        now = monotonicNowNs();
        timespec ts{};
        timespec* timeout = nullptr;
        if (next != DirectionPipeline::kNever) {
            Nanos wait = next > now ? next - now : 0;
            if (wait <= spin_ns) {
                wait = 0;  // busy-poll: check input and come straight back
            }
            ts.tv_sec = wait / kNsPerSec;
            ts.tv_nsec = wait % kNsPerSec;
            timeout = &ts;
        }
        const int rc = ppoll(fds, 2, timeout, nullptr);
        if (rc < 0) {
            if (errno == EINTR) {
                continue;
            }
            return Status::fromErrno("ppoll", errno);
        }
        if (fds[1].revents != 0) {
            return Status::ok();
        }
        if ((fds[0].revents & (POLLERR | POLLNVAL)) != 0) {
            return Status(Code::kSystem, "input TUN reported an error (device removed?)");
        }
        if ((fds[0].revents & POLLIN) == 0) {
            continue;
        }
        for (uint32_t i = 0; i < settings.batch; ++i) {
            const ssize_t n = read(in_fd, buf.data(), buf.size());
            if (n < 0) {
                const int err = errno;
                if (err == EAGAIN || err == EWOULDBLOCK) {
                    break;
                }
                if (err == EINTR) {
                    continue;
                }
                pipe.noteReadError();
                if (fatalErrno(err)) {
                    return Status::fromErrno("read from input TUN", err);
                }
                break;
            }
            const Nanos now_read = monotonicNowNs();
            pipe.ingest(now_read, {buf.data(), static_cast<size_t>(n)});
            // A burst of 64 KB reads takes a while: do not let due frames wait behind it.
            if (pipe.nextDeliveryNs() <= now_read) {
                pipe.deliverDue(now_read, settings.batch, sink);
            }
        }
    }
}

}  // namespace atlas::wanem
