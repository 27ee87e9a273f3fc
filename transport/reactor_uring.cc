// io_uring backend (liburing). One ring per engine thread.
#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "transport/reactor.h"
#include "transport/socket_util.h"

namespace atlas::transport {
namespace {

// user_data values that are not IoOp pointers (IoOps are aligned, so never 1 or 2).
constexpr uint64_t kWakeTag = 1;
constexpr uint64_t kIgnoreTag = 2;

// Ring sizes: the SQ holds one op per stream direction plus wake/cancel entries; the CQ is
// larger so it never overflows even when every op of every comm completes in one pass
// ("never overflow the CQ ring", liburing examples/proxy.c).
constexpr unsigned kSqEntries = 512;
constexpr unsigned kCqEntries = 4096;

Status initRing(io_uring* ring) {
    // Preferred flags, newest first: SINGLE_ISSUER (only the engine thread submits) and
    // DEFER_TASKRUN (completions run when the engine asks for them, not by interrupting it);
    // then COOP_TASKRUN; then none. Each step is a fallback for older kernels.
    const unsigned flag_sets[] = {
#if defined(IORING_SETUP_DEFER_TASKRUN) && defined(IORING_SETUP_SINGLE_ISSUER)
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
#endif
#ifdef IORING_SETUP_COOP_TASKRUN
        IORING_SETUP_COOP_TASKRUN,
#endif
        0u,
    };
    int rc = -EINVAL;
    for (unsigned flags : flag_sets) {
        io_uring_params p{};
        p.flags = flags | IORING_SETUP_CQSIZE;
        p.cq_entries = kCqEntries;
        rc = io_uring_queue_init_params(kSqEntries, ring, &p);
        if (rc == 0) {
            return Status::ok();
        }
        if (rc != -EINVAL) {
            break;
        }
    }
    return Status::fromErrno("io_uring_queue_init_params", -rc, Code::kUnavailable);
}

class UringReactor final : public Reactor {
  public:
    ~UringReactor() override {
        if (ring_ok_) {
            io_uring_queue_exit(&ring_);
        }
    }

    Status init() {
        ATLAS_RETURN_IF_ERROR(initRing(&ring_));
        ring_ok_ = true;
        int fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (fd < 0) {
            return Status::fromErrno("eventfd()", errno);
        }
        wake_fd_ = Fd(fd);
        return Status::ok();
    }

    IoBackend backend() const override { return IoBackend::kUring; }
    Status registerFd(int) override { return Status::ok(); }
    void unregisterFd(int) override {}

    void submit(IoOp* op) override {
        op->in_flight = true;
        prep(op);
    }

    void cancelFd(int fd) override {
        io_uring_sqe* sqe = getSqe();
        io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
        io_uring_sqe_set_data64(sqe, kIgnoreTag);
    }

    Status runOnce(Nanos timeout_ns, int* delivered) override {
        *delivered = 0;
        armWake();
        io_uring_cqe* cqe = nullptr;
        int rc;
        if (timeout_ns == 0) {
            // Polling (the engine is spinning): submit and run pending task work without
            // waiting (needed under DEFER_TASKRUN, where completions run only on request).
            rc = io_uring_submit_and_get_events(&ring_);
        } else if (timeout_ns < 0) {
            rc = io_uring_submit_and_wait(&ring_, 1);
        } else {
            __kernel_timespec ts{};
            ts.tv_sec = timeout_ns / kNsPerSec;
            ts.tv_nsec = timeout_ns % kNsPerSec;
            rc = io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
        }
        if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EBUSY) {
            return Status::fromErrno("io_uring_submit_and_wait", -rc);
        }
        // Handlers may prep new SQEs while we walk the CQ; those are submitted next round.
        while (io_uring_peek_cqe(&ring_, &cqe) == 0) {
            const uint64_t tag = io_uring_cqe_get_data64(cqe);
            const int res = cqe->res;
            io_uring_cqe_seen(&ring_, cqe);
            if (tag == kWakeTag) {
                wake_armed_ = false;
            } else if (tag != kIgnoreTag) {
                ++*delivered;
                onCqe(reinterpret_cast<IoOp*>(tag), res);
            }
        }
        return Status::ok();
    }

    void wake() override {
        const uint64_t one = 1;
        // A full counter (EAGAIN) still means "a wakeup is pending", which is all we need.
        ssize_t n = ::write(wake_fd_.get(), &one, sizeof(one));
        (void)n;
    }

  private:
    io_uring_sqe* getSqe() {
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        while (sqe == nullptr) {
            io_uring_submit(&ring_);  // SQ full: flush and retry
            sqe = io_uring_get_sqe(&ring_);
        }
        return sqe;
    }

    void armWake() {
        if (wake_armed_) {
            return;
        }
        io_uring_sqe* sqe = getSqe();
        io_uring_prep_read(sqe, wake_fd_.get(), &wake_buf_, sizeof(wake_buf_), 0);
        io_uring_sqe_set_data64(sqe, kWakeTag);
        wake_armed_ = true;
    }

    void prep(IoOp* op) {
        io_uring_sqe* sqe = getSqe();
        if (op->kind == IoOp::Kind::kSend) {
            op->msg = msghdr{};
            op->msg.msg_iov = op->iov + op->iov_first;
            op->msg.msg_iovlen = static_cast<size_t>(op->iovcnt - op->iov_first);
            // MSG_WAITALL: the kernel retries short sends itself; MSG_NOSIGNAL: a reset peer
            // is an error code, not SIGPIPE in NCCL's process.
            io_uring_prep_sendmsg(sqe, op->fd, &op->msg, MSG_NOSIGNAL | MSG_WAITALL);
        } else {
            io_uring_prep_recv(sqe, op->fd, op->buf + op->done, op->want - op->done, MSG_WAITALL);
        }
        io_uring_sqe_set_data(sqe, op);
    }

    void complete(IoOp* op, int64_t result) {
        op->in_flight = false;
        op->handler->onIoComplete(op, result);
    }

    void onCqe(IoOp* op, int res) {
        if (res == -EINTR || res == -EAGAIN) {
            prep(op);
            return;
        }
        if (res < 0) {
            complete(op, res);
            return;
        }
        if (op->kind == IoOp::Kind::kRecv) {
            if (res == 0) {
                complete(op, 0);
                return;
            }
            op->done += static_cast<size_t>(res);
            if (op->done >= op->want) {
                complete(op, static_cast<int64_t>(op->want));
            } else {
                prep(op);
            }
            return;
        }
        if (res == 0) {
            complete(op, -EPIPE);
            return;
        }
        op->done += static_cast<size_t>(res);
        if (op->done >= op->total) {
            complete(op, static_cast<int64_t>(op->total));
            return;
        }
        advanceIov(op, static_cast<size_t>(res));  // short send: resume after the sent bytes
        prep(op);
    }

    io_uring ring_{};
    bool ring_ok_ = false;
    Fd wake_fd_;
    uint64_t wake_buf_ = 0;
    bool wake_armed_ = false;
};

}  // namespace

Status probeUring() {
    io_uring ring{};
    Status st = initRing(&ring);
    if (!st.isOk()) {
        return st;
    }
    io_uring_probe* probe = io_uring_get_probe_ring(&ring);
    Status result = Status::ok();
    if (probe == nullptr) {
        result = Status(Code::kUnavailable, "io_uring opcode probe failed");
    } else {
        const int needed[] = {IORING_OP_SENDMSG, IORING_OP_RECV, IORING_OP_READ,
                              IORING_OP_ASYNC_CANCEL};
        for (int opcode : needed) {
            if (!io_uring_opcode_supported(probe, opcode)) {
                result =
                    Status(Code::kUnavailable, "io_uring lacks opcode " + std::to_string(opcode));
                break;
            }
        }
        io_uring_free_probe(probe);
    }
    io_uring_queue_exit(&ring);
    return result;
}

Result<std::unique_ptr<Reactor>> makeUringReactor() {
    auto r = std::make_unique<UringReactor>();
    ATLAS_RETURN_IF_ERROR(r->init());
    return std::unique_ptr<Reactor>(std::move(r));
}

}  // namespace atlas::transport
