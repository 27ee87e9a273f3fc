// Reactor: completion-based socket I/O for one engine thread, with two backends behind one
// interface: io_uring (liburing; preferred) and epoll (fallback, or ATLAS_IO=epoll).
//
// Contract:
// - Every method except wake() runs on the owner engine thread only.
// - submit() never calls back; completions are delivered from runOnce(), so handlers may
//   submit again without re-entrancy.
// - A send completes when every byte of its iovecs is in the kernel (or on error); a recv
//   completes when exactly `want` bytes have arrived, on EOF, or on error. Short transfers
//   are resumed inside the reactor.
// - The IoOp memory belongs to the caller and must stay valid until its completion has been
//   delivered (after cancelFd() too: cancellation completes ops with an error, it does not
//   drop them).
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "transport/net.h"

namespace atlas::transport {

class IoHandler;

struct IoOp {
    static constexpr int kMaxIov = 34;
    enum class Kind : uint8_t { kSend, kRecv };

    Kind kind = Kind::kRecv;
    int fd = -1;
    // kSend: scatter list; the reactor advances it in place on short sends.
    iovec iov[kMaxIov]{};
    int iovcnt = 0;
    int iov_first = 0;  // first iovec not yet fully sent
    // kRecv: one destination buffer.
    uint8_t* buf = nullptr;
    size_t want = 0;
    size_t done = 0;   // bytes moved so far in this operation
    size_t total = 0;  // kSend: sum of iov lengths at submit
    IoHandler* handler = nullptr;
    int tag = 0;  // owner's index for dispatch (e.g. stream number)
    bool in_flight = false;
    msghdr msg{};  // backend scratch: io_uring reads it asynchronously, so it lives here
};

// Result delivered to the handler: > 0 bytes moved (the whole request), 0 = end of stream
// before `want` bytes (recv only), < 0 = -errno.
class IoHandler {
  public:
    virtual void onIoComplete(IoOp* op, int64_t result) = 0;

  protected:
    ~IoHandler() = default;
};

class Reactor {
  public:
    virtual ~Reactor() = default;
    virtual IoBackend backend() const = 0;

    // Start watching / stop watching a socket. Unregister only with no op in flight on it.
    virtual Status registerFd(int fd) = 0;
    virtual void unregisterFd(int fd) = 0;

    virtual void submit(IoOp* op) = 0;
    // Makes every in-flight op on `fd` complete soon with an error (used by close).
    virtual void cancelFd(int fd) = 0;

    // Flushes submissions, waits up to timeout_ns (< 0: forever; 0: just poll) for
    // completions or wake(), then delivers the completions; *delivered counts them.
    virtual Status runOnce(Nanos timeout_ns, int* delivered) = 0;
    // Any thread: makes a blocked runOnce() return.
    virtual void wake() = 0;
};

// After a short send of `sent` bytes: drops fully sent iovecs and trims the partial one.
inline void advanceIov(IoOp* op, size_t sent) {
    while (sent > 0 && op->iov_first < op->iovcnt) {
        iovec& v = op->iov[op->iov_first];
        if (sent >= v.iov_len) {
            sent -= v.iov_len;
            v.iov_len = 0;
            ++op->iov_first;
        } else {
            v.iov_base = static_cast<uint8_t*>(v.iov_base) + sent;
            v.iov_len -= sent;
            sent = 0;
        }
    }
}

// Creates the reactor for the calling thread (io_uring rings are single-issuer: the engine
// thread creates its own). kAuto/kUring try io_uring; kAuto falls back to epoll.
Result<std::unique_ptr<Reactor>> makeReactor(IoBackend want, const Logger& log);
// Whether io_uring with the opcodes Atlas needs is usable in this process (cheap probe).
Status probeUring();

Result<std::unique_ptr<Reactor>> makeUringReactor();
Result<std::unique_ptr<Reactor>> makeEpollReactor();

}  // namespace atlas::transport
