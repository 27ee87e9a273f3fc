// epoll backend: emulates completion semantics with non-blocking syscalls on readiness.
// Edge-triggered: an op is tried at once when submitted and again on each readiness edge
// until it would block, so no edge is ever lost.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "transport/reactor.h"
#include "transport/socket_util.h"

namespace atlas::transport {
namespace {

class EpollReactor final : public Reactor {
  public:
    Status init() {
        int ep = ::epoll_create1(EPOLL_CLOEXEC);
        if (ep < 0) {
            return Status::fromErrno("epoll_create1()", errno);
        }
        epoll_ = Fd(ep);
        int ev = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (ev < 0) {
            return Status::fromErrno("eventfd()", errno);
        }
        wake_fd_ = Fd(ev);
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.ptr = nullptr;  // nullptr marks the wake fd
        if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &e) != 0) {
            return Status::fromErrno("epoll_ctl(ADD eventfd)", errno);
        }
        return Status::ok();
    }

    IoBackend backend() const override { return IoBackend::kEpoll; }

    Status registerFd(int fd) override {
        auto rec = std::make_unique<FdRec>();
        rec->fd = fd;
        epoll_event e{};
        e.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
        e.data.ptr = rec.get();
        if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &e) != 0) {
            return Status::fromErrno("epoll_ctl(ADD)", errno);
        }
        fds_[fd] = std::move(rec);
        return Status::ok();
    }

    void unregisterFd(int fd) override {
        auto it = fds_.find(fd);
        if (it == fds_.end()) {
            return;
        }
        ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
        fds_.erase(it);
    }

    void submit(IoOp* op) override {
        op->in_flight = true;
        auto it = fds_.find(op->fd);
        if (it == fds_.end()) {
            done_.emplace_back(op, -EBADF);
            return;
        }
        FdRec* rec = it->second.get();
        (op->kind == IoOp::Kind::kSend ? rec->send : rec->recv) = op;
        tryOp(rec, op);
    }

    void cancelFd(int fd) override {
        auto it = fds_.find(fd);
        if (it == fds_.end()) {
            return;
        }
        FdRec* rec = it->second.get();
        for (IoOp** op : {&rec->send, &rec->recv}) {
            if (*op != nullptr) {
                done_.emplace_back(*op, -ECANCELED);
                *op = nullptr;
            }
        }
    }

    Status runOnce(Nanos timeout_ns, int* delivered) override {
        epoll_event events[64];
        timespec ts{};
        timespec* tsp = nullptr;
        if (!done_.empty()) {
            tsp = &ts;  // completions are waiting: just poll
        } else if (timeout_ns >= 0) {
            ts.tv_sec = timeout_ns / kNsPerSec;
            ts.tv_nsec = timeout_ns % kNsPerSec;
            tsp = &ts;
        }
        const int n = ::epoll_pwait2(epoll_.get(), events, 64, tsp, nullptr);
        if (n < 0 && errno != EINTR) {
            return Status::fromErrno("epoll_pwait2()", errno);
        }
        for (int i = 0; i < n; ++i) {
            auto* rec = static_cast<FdRec*>(events[i].data.ptr);
            if (rec == nullptr) {
                uint64_t v;
                while (::read(wake_fd_.get(), &v, sizeof(v)) > 0) {
                }
                continue;
            }
            const uint32_t ev = events[i].events;
            if ((ev & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) && rec->recv != nullptr) {
                tryOp(rec, rec->recv);
            }
            if ((ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && rec->send != nullptr) {
                tryOp(rec, rec->send);
            }
        }
        // Deliver this batch; ops completed by handlers' new submissions go out next round.
        std::vector<std::pair<IoOp*, int64_t>> batch;
        batch.swap(done_);
        *delivered = static_cast<int>(batch.size());
        for (auto& [op, result] : batch) {
            op->in_flight = false;
            op->handler->onIoComplete(op, result);
        }
        return Status::ok();
    }

    void wake() override {
        const uint64_t one = 1;
        ssize_t n = ::write(wake_fd_.get(), &one, sizeof(one));
        (void)n;
    }

  private:
    struct FdRec {
        int fd = -1;
        IoOp* send = nullptr;
        IoOp* recv = nullptr;
    };

    void finish(FdRec* rec, IoOp* op, int64_t result) {
        (op->kind == IoOp::Kind::kSend ? rec->send : rec->recv) = nullptr;
        done_.emplace_back(op, result);
    }

    // Moves bytes until the op is complete or the socket would block.
    void tryOp(FdRec* rec, IoOp* op) {
        for (;;) {
            if (op->kind == IoOp::Kind::kRecv) {
                ssize_t n = ::recv(rec->fd, op->buf + op->done, op->want - op->done, MSG_DONTWAIT);
                if (n > 0) {
                    op->done += static_cast<size_t>(n);
                    if (op->done >= op->want) {
                        finish(rec, op, static_cast<int64_t>(op->want));
                        return;
                    }
                    continue;
                }
                if (n == 0) {
                    finish(rec, op, 0);
                    return;
                }
            } else {
                msghdr msg{};
                msg.msg_iov = op->iov + op->iov_first;
                msg.msg_iovlen = static_cast<size_t>(op->iovcnt - op->iov_first);
                ssize_t n = ::sendmsg(rec->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n >= 0) {
                    op->done += static_cast<size_t>(n);
                    if (op->done >= op->total) {
                        finish(rec, op, static_cast<int64_t>(op->total));
                        return;
                    }
                    advanceIov(op, static_cast<size_t>(n));
                    continue;
                }
            }
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                return;  // wait for the next edge
            }
            finish(rec, op, -errno);
            return;
        }
    }

    Fd epoll_;
    Fd wake_fd_;
    std::unordered_map<int, std::unique_ptr<FdRec>> fds_;
    std::vector<std::pair<IoOp*, int64_t>> done_;
};

}  // namespace

Result<std::unique_ptr<Reactor>> makeEpollReactor() {
    auto r = std::make_unique<EpollReactor>();
    ATLAS_RETURN_IF_ERROR(r->init());
    return std::unique_ptr<Reactor>(std::move(r));
}

Result<std::unique_ptr<Reactor>> makeReactor(IoBackend want, const Logger& log) {
    if (want != IoBackend::kEpoll) {
        auto r = makeUringReactor();
        if (r.isOk() || want == IoBackend::kUring) {
            return r;
        }
        ATLAS_LOG_INFO(log, "io_uring unavailable (%s); using epoll", r.status().message().c_str());
    }
    return makeEpollReactor();
}

}  // namespace atlas::transport
