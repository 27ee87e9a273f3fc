#include "tests/abi/suites.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/abi/isolate.h"

namespace atlas::abi {

namespace {

constexpr size_t kCanary = 64;
constexpr uint64_t kJunkSeed = 0xdeadbeefcafef00dull;

// Closes the pair on every exit path; reports the close error only when nothing failed before.
class PairGuard {
  public:
    PairGuard(NetApi& net, CommPair* pair) : net_(net), pair_(pair) {}
    ~PairGuard() { (void)closePair(net_, pair_); }
    Status close() { return closePair(net_, pair_); }

  private:
    NetApi& net_;
    CommPair* pair_;
};

std::string sizeStr(size_t size) {
    return std::to_string(size) + " B";
}

Status annotate(const Status& st, const std::string& what) {
    return st.isOk() ? st : Status(st.code(), what + ": " + st.message());
}

// A source buffer holding messageSeed(size, index)'s pattern, and a destination of
// capacity + kCanary bytes pre-filled with junk.
struct MessageBuffers {
    MappedBuffer src;
    MappedBuffer dst;
};

Result<MessageBuffers> makeBuffers(size_t size, size_t capacity, size_t index) {
    Result<MappedBuffer> src = MappedBuffer::create(size);
    if (!src.isOk()) {
        return src.status();
    }
    Result<MappedBuffer> dst = MappedBuffer::create(capacity + kCanary);
    if (!dst.isOk()) {
        return dst.status();
    }
    fillPattern(src->data(), size, messageSeed(size, index));
    fillPattern(dst->data(), capacity + kCanary, kJunkSeed);
    return MessageBuffers{std::move(src).value(), std::move(dst).value()};
}

// Polls both requests (either may be NULL = already done) until done; returns the received
// size.
Result<size_t> waitBoth(NetApi& net, void* send_req, void* recv_req, const Deadline& deadline) {
    int recv_size = -1;
    Backoff backoff;
    while (send_req != nullptr || recv_req != nullptr) {
        bool progressed = false;
        if (send_req != nullptr) {
            int done = 0;
            int sz = 0;
            ATLAS_RETURN_IF_ERROR(ncclStatus(net.test(send_req, &done, &sz), "test(send)"));
            if (done != 0) {
                send_req = nullptr;
                progressed = true;
            }
        }
        if (recv_req != nullptr) {
            int done = 0;
            ATLAS_RETURN_IF_ERROR(ncclStatus(net.test(recv_req, &done, &recv_size), "test(recv)"));
            if (done != 0) {
                recv_req = nullptr;
                progressed = true;
            }
        }
        if (send_req == nullptr && recv_req == nullptr) {
            break;
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout, std::string("requests not done before the deadline:") +
                                              (send_req != nullptr ? " send" : "") +
                                              (recv_req != nullptr ? " recv" : ""));
        }
        if (progressed) {
            backoff.reset();
        } else {
            backoff.idle();
        }
    }
    return static_cast<size_t>(std::max(recv_size, 0));
}

}  // namespace

const std::vector<size_t>& coreSizes() {
    static const std::vector<size_t> sizes = {0,
                                              1,
                                              127,
                                              128,
                                              129,
                                              4095,
                                              4096,
                                              4097,
                                              64 * kKiB - 1,
                                              64 * kKiB,
                                              64 * kKiB + 1,
                                              512 * kKiB - 1,
                                              512 * kKiB,
                                              512 * kKiB + 1,
                                              kMiB,
                                              3 * kMiB + 7,
                                              17 * kMiB + 13};
    return sizes;
}

uint64_t messageSeed(size_t size, size_t index) {
    return (static_cast<uint64_t>(size) << 20) ^ (index * 0x9E37ull) ^ 0x5eedull;
}

Status checkReceived(const uint8_t* dst, size_t size, uint64_t seed, size_t tail,
                     uint64_t junk_seed) {
    std::string bad = describePatternMismatch(dst, size, seed);
    if (!bad.empty()) {
        return Status(Code::kInternal, "received data differs: " + bad);
    }
    for (size_t i = size; i < size + tail; ++i) {
        if (dst[i] != patternByteAt(junk_seed, i)) {
            return Status(Code::kInternal,
                          "byte " + std::to_string(i) + " past the received size was overwritten");
        }
    }
    return Status::ok();
}

Status sizesInProcess(NetApi& net, void* ctx, const std::vector<size_t>& sizes,
                      const Deadline& deadline) {
    CommPair pair;
    PairGuard guard(net, &pair);
    ATLAS_RETURN_IF_ERROR(connectInProcess(net, ctx, 0, &pair, deadline));
    for (size_t i = 0; i < sizes.size(); ++i) {
        size_t size = sizes[i];
        Result<MessageBuffers> b = makeBuffers(size, size, i);
        if (!b.isOk()) {
            return b.status();
        }
        Result<size_t> got =
            transferInProcess(net, pair, b->src.data(), size, b->dst.data(), size, deadline);
        if (!got.isOk()) {
            return annotate(got.status(), "transfer of " + sizeStr(size));
        }
        if (*got != size) {
            return Status(Code::kInternal,
                          "sent " + sizeStr(size) + ", test() reported " + sizeStr(*got));
        }
        ATLAS_RETURN_IF_ERROR(
            annotate(checkReceived(b->dst.data(), size, messageSeed(size, i), kCanary, kJunkSeed),
                     "transfer of " + sizeStr(size)));
    }
    return guard.close();
}

Status recvLargerThanSend(NetApi& net, void* ctx, const Deadline& deadline) {
    CommPair pair;
    PairGuard guard(net, &pair);
    ATLAS_RETURN_IF_ERROR(connectInProcess(net, ctx, 0, &pair, deadline));
    const size_t sizes[] = {0, 1, 100, 4097, kMiB + 3, 5 * kMiB + 1};
    for (size_t i = 0; i < std::size(sizes); ++i) {
        size_t size = sizes[i];
        size_t capacity = size * 2 + 4096;
        Result<MessageBuffers> b = makeBuffers(size, capacity, i);
        if (!b.isOk()) {
            return b.status();
        }
        Result<size_t> got =
            transferInProcess(net, pair, b->src.data(), size, b->dst.data(), capacity, deadline);
        if (!got.isOk()) {
            return annotate(got.status(), "send " + sizeStr(size) + " into " + sizeStr(capacity));
        }
        if (*got != size) {
            return Status(Code::kInternal, "sent " + sizeStr(size) + " into a " +
                                               sizeStr(capacity) + " receive; test() reported " +
                                               sizeStr(*got));
        }
        ATLAS_RETURN_IF_ERROR(annotate(checkReceived(b->dst.data(), size, messageSeed(size, i),
                                                     capacity - size + kCanary, kJunkSeed),
                                       "send " + sizeStr(size) + " into " + sizeStr(capacity)));
    }
    return guard.close();
}

Status truncation(NetApi& net, void* ctx, size_t send_size, size_t capacity, bool send_first,
                  const Deadline& deadline) {
    CommPair pair;
    PairGuard guard(net, &pair);
    ATLAS_RETURN_IF_ERROR(connectInProcess(net, ctx, 0, &pair, deadline));
    Result<MessageBuffers> b = makeBuffers(send_size, capacity, 0);
    if (!b.isOk()) {
        return b.status();
    }
    Result<Registration> smr = Registration::create(net, pair.send_comm, b->src.data(), send_size);
    Result<Registration> rmr = Registration::create(net, pair.recv_comm, b->dst.data(), capacity);
    if (!smr.isOk() || !rmr.isOk()) {
        return smr.isOk() ? rmr.status() : smr.status();
    }
    void* send_req = nullptr;
    if (send_first) {
        Result<void*> s =
            postSend(net, pair.send_comm, b->src.data(), send_size, smr->mhandle(), deadline);
        if (!s.isOk()) {
            return s.status();
        }
        send_req = *s;
    }
    // The receive must fail with ncclInvalidUsage, either at irecv (if the plugin already
    // knows the incoming size) or at test.
    Status recv_error;
    Result<void*> r =
        postRecv(net, pair.recv_comm, b->dst.data(), capacity, rmr->mhandle(), deadline);
    if (!r.isOk()) {
        recv_error = r.status();
    }
    if (!send_first) {
        Result<void*> s =
            postSend(net, pair.send_comm, b->src.data(), send_size, smr->mhandle(), deadline);
        if (!s.isOk()) {
            return annotate(s.status(), "isend after posting the short receive");
        }
        send_req = *s;
    }
    if (recv_error.isOk()) {
        Backoff backoff;
        while (true) {
            int done = 0;
            int size = -1;
            ncclResult_t rc = net.test(*r, &done, &size);
            if (rc != ncclSuccess) {
                recv_error = ncclStatus(rc, "test(recv)");
                break;
            }
            if (done != 0) {
                return Status(Code::kInternal,
                              "a " + sizeStr(send_size) + " send into a " + sizeStr(capacity) +
                                  " receive completed successfully with size " +
                                  std::to_string(size) + " (expected ncclInvalidUsage)");
            }
            if (deadline.expired()) {
                return Status(Code::kTimeout, "truncated receive neither failed nor completed");
            }
            // Keep the send side polled too, in case the plugin progresses inside test().
            int sdone = 0;
            int ssz = 0;
            if (send_req != nullptr && net.test(send_req, &sdone, &ssz) == ncclSuccess &&
                sdone != 0) {
                send_req = nullptr;
            }
            backoff.idle();
        }
    }
    if (ncclCodeOf(recv_error) != ncclInvalidUsage) {
        return Status(Code::kInternal,
                      "truncation: expected ncclInvalidUsage, got " + recv_error.toString());
    }
    // Nothing may hang afterwards: drop the receiver (as NCCL does after an error), then the
    // send must finish either way.
    (void)rmr->release();
    (void)net.closeRecv(pair.recv_comm);
    pair.recv_comm = nullptr;
    Backoff backoff;
    while (send_req != nullptr) {
        int done = 0;
        int size = 0;
        ncclResult_t rc = net.test(send_req, &done, &size);
        if (rc != ncclSuccess || done != 0) {
            break;
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout,
                          "after the receiver failed and closed, the send neither completed nor "
                          "failed before the deadline");
        }
        backoff.idle();
    }
    (void)smr->release();
    return guard.close();
}

Status outstandingRequests(NetApi& net, void* ctx, const Deadline& deadline) {
    CommPair pair;
    PairGuard guard(net, &pair);
    ATLAS_RETURN_IF_ERROR(connectInProcess(net, ctx, 0, &pair, deadline));
    constexpr int kMaxRequests = NCCL_NET_MAX_REQUESTS;
    constexpr int kMessages = kMaxRequests + 1;
    // Mixed sizes so inline, single-chunk and striped messages interleave; all distinct so the
    // reported sizes prove posting-order matching.
    std::vector<size_t> sizes(kMessages);
    for (int i = 0; i < kMessages; ++i) {
        switch (i % 4) {
            case 0:
                sizes[i] = static_cast<size_t>(i);
                break;
            case 1:
                sizes[i] = 37 * static_cast<size_t>(i) + 1;
                break;
            case 2:
                sizes[i] = 64 * kKiB + static_cast<size_t>(i);
                break;
            default:
                sizes[i] = 600 * kKiB + static_cast<size_t>(i);
                break;
        }
    }
    const size_t capacity = 700 * kKiB;
    std::vector<MessageBuffers> bufs;
    std::vector<Registration> smrs;
    std::vector<Registration> rmrs;
    for (int i = 0; i < kMessages; ++i) {
        Result<MessageBuffers> b = makeBuffers(sizes[i], capacity, i);
        if (!b.isOk()) {
            return b.status();
        }
        bufs.push_back(std::move(b).value());
        Result<Registration> s = Registration::create(net, pair.send_comm, bufs[i].src.data(),
                                                      std::max<size_t>(sizes[i], 1));
        Result<Registration> r =
            Registration::create(net, pair.recv_comm, bufs[i].dst.data(), capacity);
        if (!s.isOk() || !r.isOk()) {
            return s.isOk() ? r.status() : s.status();
        }
        smrs.push_back(std::move(s).value());
        rmrs.push_back(std::move(r).value());
    }
    std::vector<void*> rreq(kMessages, nullptr);
    std::vector<void*> sreq(kMessages, nullptr);
    // No test() calls while filling the pool, so no request can be recycled meanwhile: a NULL
    // request here means the plugin accepts fewer than 32 outstanding requests.
    for (int i = 0; i < kMaxRequests; ++i) {
        Result<void*> r = postRecv(net, pair.recv_comm, bufs[i].dst.data(), capacity,
                                   rmrs[i].mhandle(), deadline);
        if (!r.isOk()) {
            return annotate(r.status(), "irecv #" + std::to_string(i + 1) + " of 32");
        }
        rreq[i] = *r;
    }
    for (int i = 0; i < kMaxRequests; ++i) {
        Result<void*> s = postSend(net, pair.send_comm, bufs[i].src.data(), sizes[i],
                                   smrs[i].mhandle(), deadline);
        if (!s.isOk()) {
            return annotate(s.status(), "isend #" + std::to_string(i + 1) + " of 32");
        }
        sreq[i] = *s;
    }
    // The 33rd of each must be refused with a NULL request and no error.
    {
        void* req = nullptr;
        ncclResult_t rc = net.irecv(pair.recv_comm, bufs[kMaxRequests].dst.data(), capacity, 0,
                                    rmrs[kMaxRequests].mhandle(), &req);
        if (rc != ncclSuccess || req != nullptr) {
            return Status(
                Code::kInternal,
                std::string("33rd irecv: expected ncclSuccess with a NULL request, got ") +
                    ncclResultName(rc) + (req != nullptr ? " and a request" : ""));
        }
        rc = net.isend(pair.send_comm, bufs[kMaxRequests].src.data(), sizes[kMaxRequests], 0,
                       smrs[kMaxRequests].mhandle(), &req);
        if (rc != ncclSuccess || req != nullptr) {
            return Status(
                Code::kInternal,
                std::string("33rd isend: expected ncclSuccess with a NULL request, got ") +
                    ncclResultName(rc) + (req != nullptr ? " and a request" : ""));
        }
    }
    // Oldest first, as NCCL tests them.
    for (int i = 0; i < kMaxRequests; ++i) {
        Result<size_t> got = waitBoth(net, sreq[i], rreq[i], deadline);
        if (!got.isOk()) {
            return annotate(got.status(), "message #" + std::to_string(i));
        }
        if (*got != sizes[i]) {
            return Status(Code::kInternal, "message #" + std::to_string(i) + ": sent " +
                                               sizeStr(sizes[i]) + ", receive reported " +
                                               sizeStr(*got) + " (order or size lost)");
        }
        ATLAS_RETURN_IF_ERROR(annotate(
            checkReceived(bufs[i].dst.data(), sizes[i], messageSeed(sizes[i], i), 0, kJunkSeed),
            "message #" + std::to_string(i)));
        if (i == 0) {
            // A request is free again on both sides: the 33rd message must now be accepted.
            Result<void*> r = postRecv(net, pair.recv_comm, bufs[kMaxRequests].dst.data(), capacity,
                                       rmrs[kMaxRequests].mhandle(), deadline);
            Result<void*> s = postSend(net, pair.send_comm, bufs[kMaxRequests].src.data(),
                                       sizes[kMaxRequests], smrs[kMaxRequests].mhandle(), deadline);
            if (!r.isOk() || !s.isOk()) {
                return annotate(r.isOk() ? s.status() : r.status(),
                                "33rd message after a request was freed");
            }
            rreq[kMaxRequests] = *r;
            sreq[kMaxRequests] = *s;
        }
    }
    Result<size_t> got = waitBoth(net, sreq[kMaxRequests], rreq[kMaxRequests], deadline);
    if (!got.isOk()) {
        return annotate(got.status(), "33rd message");
    }
    if (*got != sizes[kMaxRequests]) {
        return Status(Code::kInternal, "33rd message: wrong size " + sizeStr(*got));
    }
    ATLAS_RETURN_IF_ERROR(checkReceived(bufs[kMaxRequests].dst.data(), sizes[kMaxRequests],
                                        messageSeed(sizes[kMaxRequests], kMaxRequests), 0,
                                        kJunkSeed));
    smrs.clear();
    rmrs.clear();
    return guard.close();
}

Status optionalRecvSentinel(NetApi& net, void* ctx, const Deadline& deadline) {
    CommPair pair;
    PairGuard guard(net, &pair);
    ATLAS_RETURN_IF_ERROR(connectInProcess(net, ctx, 0, &pair, deadline));
    const size_t sizes[] = {0, 8, 4097, kMiB};
    void* const sentinel = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);
    for (size_t i = 0; i < std::size(sizes); ++i) {
        size_t size = sizes[i];
        Result<MessageBuffers> b = makeBuffers(size, size, i);
        if (!b.isOk()) {
            return b.status();
        }
        Result<Registration> smr =
            Registration::create(net, pair.send_comm, b->src.data(), std::max<size_t>(size, 1));
        Result<Registration> rmr =
            Registration::create(net, pair.recv_comm, b->dst.data(), std::max<size_t>(size, 1));
        if (!smr.isOk() || !rmr.isOk()) {
            return smr.isOk() ? rmr.status() : smr.status();
        }
        Result<void*> r = postRecv(net, pair.recv_comm, b->dst.data(), size, rmr->mhandle(),
                                   deadline, 0, sentinel);
        if (!r.isOk()) {
            return annotate(r.status(), "irecv with *request = 0x1, " + sizeStr(size));
        }
        Result<void*> s =
            postSend(net, pair.send_comm, b->src.data(), size, smr->mhandle(), deadline);
        if (!s.isOk()) {
            return s.status();
        }
        Result<size_t> got = waitBoth(net, *s, *r, deadline);
        if (!got.isOk()) {
            return annotate(got.status(), "sentinel receive of " + sizeStr(size));
        }
        if (*got != size) {
            return Status(Code::kInternal, "sentinel receive reported " + sizeStr(*got) +
                                               " for a " + sizeStr(size) + " send");
        }
        ATLAS_RETURN_IF_ERROR(
            checkReceived(b->dst.data(), size, messageSeed(size, i), kCanary, kJunkSeed));
    }
    return guard.close();
}

Status nullSizes(NetApi& net, void* ctx, const Deadline& deadline) {
    CommPair pair;
    PairGuard guard(net, &pair);
    ATLAS_RETURN_IF_ERROR(connectInProcess(net, ctx, 0, &pair, deadline));
    const size_t sizes[] = {0, 100, kMiB};
    for (size_t i = 0; i < std::size(sizes); ++i) {
        size_t size = sizes[i];
        Result<MessageBuffers> b = makeBuffers(size, size, i);
        if (!b.isOk()) {
            return b.status();
        }
        Result<Registration> smr =
            Registration::create(net, pair.send_comm, b->src.data(), std::max<size_t>(size, 1));
        Result<Registration> rmr =
            Registration::create(net, pair.recv_comm, b->dst.data(), std::max<size_t>(size, 1));
        if (!smr.isOk() || !rmr.isOk()) {
            return smr.isOk() ? rmr.status() : smr.status();
        }
        Result<void*> r =
            postRecv(net, pair.recv_comm, b->dst.data(), size, rmr->mhandle(), deadline);
        Result<void*> s =
            postSend(net, pair.send_comm, b->src.data(), size, smr->mhandle(), deadline);
        if (!r.isOk() || !s.isOk()) {
            return r.isOk() ? s.status() : r.status();
        }
        // Alternate between the two with sizes=NULL until both are done.
        bool sdone = false;
        bool rdone = false;
        Backoff backoff;
        while (!sdone || !rdone) {
            int done = 0;
            if (!sdone) {
                ATLAS_RETURN_IF_ERROR(ncclStatus(net.test(*s, &done, nullptr), "test(send, NULL)"));
                sdone = done != 0;
            }
            if (!rdone) {
                done = 0;
                ATLAS_RETURN_IF_ERROR(ncclStatus(net.test(*r, &done, nullptr), "test(recv, NULL)"));
                rdone = done != 0;
            }
            if (deadline.expired()) {
                return Status(Code::kTimeout, "test(sizes=NULL) never reported done");
            }
            backoff.idle();
        }
        ATLAS_RETURN_IF_ERROR(
            checkReceived(b->dst.data(), size, messageSeed(size, i), kCanary, kJunkSeed));
    }
    return guard.close();
}

Status closeWithRequestsInFlight(NetApi& net, void* ctx, const Deadline& deadline) {
    // A: a 64 MiB send with no receive posted, closed while in flight.
    {
        CommPair pair;
        PairGuard guard(net, &pair);
        ATLAS_RETURN_IF_ERROR(connectInProcess(net, ctx, 0, &pair, deadline));
        Result<MappedBuffer> src = MappedBuffer::create(64 * kMiB);
        if (!src.isOk()) {
            return src.status();
        }
        fillPattern(src->data(), src->size(), 1);
        Result<Registration> mr =
            Registration::create(net, pair.send_comm, src->data(), src->size());
        if (!mr.isOk()) {
            return mr.status();
        }
        Result<void*> s =
            postSend(net, pair.send_comm, src->data(), src->size(), mr->mhandle(), deadline);
        if (!s.isOk()) {
            return s.status();
        }
        int done = 0;
        int size = 0;
        (void)net.test(*s, &done, &size);
        // NCCL's teardown order: deregister, then close.
        ATLAS_RETURN_IF_ERROR(mr->release());
        ATLAS_RETURN_IF_ERROR(annotate(guard.close(), "close with a 64 MiB isend in flight"));
        // Unmapping right after close: the plugin must no longer touch the buffer.
        src->reset();
    }
    // B: a receive posted with no matching send, closed while pending.
    {
        CommPair pair;
        PairGuard guard(net, &pair);
        ATLAS_RETURN_IF_ERROR(connectInProcess(net, ctx, 0, &pair, deadline));
        Result<MappedBuffer> dst = MappedBuffer::create(kMiB);
        if (!dst.isOk()) {
            return dst.status();
        }
        Result<Registration> mr = Registration::create(net, pair.recv_comm, dst->data(), kMiB);
        if (!mr.isOk()) {
            return mr.status();
        }
        Result<void*> r = postRecv(net, pair.recv_comm, dst->data(), kMiB, mr->mhandle(), deadline);
        if (!r.isOk()) {
            return r.status();
        }
        int done = 0;
        int size = 0;
        (void)net.test(*r, &done, &size);
        if (done != 0) {
            return Status(Code::kInternal, "a receive with no matching send reported done");
        }
        ATLAS_RETURN_IF_ERROR(mr->release());
        ATLAS_RETURN_IF_ERROR(annotate(guard.close(), "close with an irecv pending"));
        dst->reset();
    }
    // C: the plugin still works.
    return annotate(sizesInProcess(net, ctx, {kMiB + 1}, deadline), "transfer after the closes");
}

Status sizesReceiver(NetApi& net, void* ctx, int fd, const std::vector<size_t>& sizes,
                     const Deadline& deadline) {
    CommPair pair;
    PairGuard guard(net, &pair);
    ATLAS_RETURN_IF_ERROR(listenAndPublish(net, ctx, 0, fd, &pair.listen_comm, deadline));
    ATLAS_RETURN_IF_ERROR(acceptLoop(net, pair.listen_comm, &pair.recv_comm, deadline));
    for (size_t i = 0; i < sizes.size(); ++i) {
        size_t size = sizes[i];
        Result<MappedBuffer> dst = MappedBuffer::create(size + kCanary);
        if (!dst.isOk()) {
            return dst.status();
        }
        fillPattern(dst->data(), size + kCanary, kJunkSeed);
        Result<Registration> mr =
            Registration::create(net, pair.recv_comm, dst->data(), std::max<size_t>(size, 1));
        if (!mr.isOk()) {
            return mr.status();
        }
        Result<void*> r = postRecv(net, pair.recv_comm, dst->data(), size, mr->mhandle(), deadline);
        if (!r.isOk()) {
            return annotate(r.status(), "irecv " + sizeStr(size));
        }
        Result<size_t> got = waitDone(net, *r, deadline);
        if (!got.isOk()) {
            return annotate(got.status(), "receive of " + sizeStr(size));
        }
        if (*got != size) {
            return Status(Code::kInternal,
                          "receive of " + sizeStr(size) + " reported " + sizeStr(*got));
        }
        ATLAS_RETURN_IF_ERROR(
            annotate(checkReceived(dst->data(), size, messageSeed(size, i), kCanary, kJunkSeed),
                     "receive of " + sizeStr(size)));
        ATLAS_RETURN_IF_ERROR(mr->release());
    }
    ATLAS_RETURN_IF_ERROR(sendByte(fd, 1, deadline));
    return guard.close();
}

Status sizesSender(NetApi& net, void* ctx, int fd, const std::vector<size_t>& sizes,
                   const Deadline& deadline) {
    CommPair pair;
    PairGuard guard(net, &pair);
    ATLAS_RETURN_IF_ERROR(readHandleAndConnect(net, ctx, 0, fd, &pair.send_comm, deadline));
    for (size_t i = 0; i < sizes.size(); ++i) {
        size_t size = sizes[i];
        Result<MappedBuffer> src = MappedBuffer::create(size);
        if (!src.isOk()) {
            return src.status();
        }
        fillPattern(src->data(), size, messageSeed(size, i));
        Result<Registration> mr =
            Registration::create(net, pair.send_comm, src->data(), std::max<size_t>(size, 1));
        if (!mr.isOk()) {
            return mr.status();
        }
        Result<void*> s = postSend(net, pair.send_comm, src->data(), size, mr->mhandle(), deadline);
        if (!s.isOk()) {
            return annotate(s.status(), "isend " + sizeStr(size));
        }
        Result<size_t> got = waitDone(net, *s, deadline);
        if (!got.isOk()) {
            return annotate(got.status(), "send of " + sizeStr(size));
        }
        ATLAS_RETURN_IF_ERROR(mr->release());
    }
    // Close only after the receiver has everything (NCCL closes after the collective ended).
    Result<uint8_t> ack = recvByte(fd, deadline);
    if (!ack.isOk()) {
        return annotate(ack.status(), "waiting for the receiver's ack");
    }
    return guard.close();
}

void transferWithSenderFaults(const std::vector<size_t>& sizes, const Deadline& deadline,
                              const std::vector<std::string>& sender_log_must_have) {
    Result<ChildProcess> sender = ChildProcess::spawn([&](int fd) {
        return runPeer("sender", [&]() -> Status {
            Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
            if (!ep.isOk()) {
                return ep.status();
            }
            ATLAS_RETURN_IF_ERROR(sizesSender((*ep)->net(), (*ep)->ctx(), fd, sizes, deadline));
            for (const std::string& needle : sender_log_must_have) {
                if (!LogCapture::contains(needle)) {
                    return Status(Code::kInternal, "the sender's log lacks '" + needle + "'");
                }
            }
            return (*ep)->finalizeAndClose();
        });
    });
    ATLAS_ASSERT_OK(sender);
    Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
    ATLAS_ASSERT_OK(ep);
    ATLAS_EXPECT_OK(sizesReceiver((*ep)->net(), (*ep)->ctx(), sender->fd(), sizes, deadline));
    expectPeerSucceeded(*sender, deadline, "sender");
    ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
}

}  // namespace atlas::abi
