// Buffers, the Endpoint, comm setup and data movement through a NetApi.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "plugin_host/plugin_host.h"

namespace atlas::abi {

// ---------------------------------------------------------------------------------------------
// Memory

Result<MappedBuffer> MappedBuffer::create(size_t size) {
    size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    size_t mapped = std::max(page, (size + page - 1) / page * page);
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        return Status::fromErrno("mmap(" + std::to_string(mapped) + ")", errno);
    }
    MappedBuffer b;
    b.data_ = static_cast<uint8_t*>(p);
    b.size_ = size;
    b.mapped_ = mapped;
    return b;
}

MappedBuffer::MappedBuffer(MappedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

MappedBuffer& MappedBuffer::operator=(MappedBuffer&& other) noexcept {
    if (this != &other) {
        reset();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        mapped_ = std::exchange(other.mapped_, 0);
    }
    return *this;
}

MappedBuffer::~MappedBuffer() {
    reset();
}

void MappedBuffer::reset() {
    if (data_ != nullptr) {
        munmap(data_, mapped_);
    }
    data_ = nullptr;
    size_ = 0;
    mapped_ = 0;
}

namespace {

inline uint64_t patternWord(uint64_t seed, uint64_t index) {
    // splitmix64 of (seed, word index): cheap, and every 8-byte word differs.
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + index + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

inline uint8_t patternByte(uint64_t seed, size_t i) {
    return static_cast<uint8_t>(patternWord(seed, i / 8) >> (8 * (i % 8)));
}

}  // namespace

uint8_t patternByteAt(uint64_t seed, size_t i) {
    return patternByte(seed, i);
}

void fillPattern(void* data, size_t size, uint64_t seed) {
    auto* p = static_cast<uint8_t*>(data);
    size_t words = size / 8;
    for (size_t w = 0; w < words; ++w) {
        uint64_t v = patternWord(seed, w);
        std::memcpy(p + w * 8, &v, 8);
    }
    for (size_t i = words * 8; i < size; ++i) {
        p[i] = patternByte(seed, i);
    }
}

size_t findPatternMismatch(const void* data, size_t size, uint64_t seed) {
    const auto* p = static_cast<const uint8_t*>(data);
    size_t words = size / 8;
    for (size_t w = 0; w < words; ++w) {
        uint64_t v = patternWord(seed, w);
        if (std::memcmp(p + w * 8, &v, 8) != 0) {
            for (size_t i = w * 8; i < w * 8 + 8; ++i) {
                if (p[i] != patternByte(seed, i)) {
                    return i;
                }
            }
        }
    }
    for (size_t i = words * 8; i < size; ++i) {
        if (p[i] != patternByte(seed, i)) {
            return i;
        }
    }
    return size;
}

std::string describePatternMismatch(const void* data, size_t size, uint64_t seed) {
    size_t at = findPatternMismatch(data, size, seed);
    if (at == size) {
        return "";
    }
    char buf[160];
    std::snprintf(buf, sizeof(buf), "mismatch at offset %zu of %zu (got 0x%02x, want 0x%02x)", at,
                  size, static_cast<const uint8_t*>(data)[at], patternByte(seed, at));
    return buf;
}

// ---------------------------------------------------------------------------------------------
// Endpoint

Result<std::unique_ptr<Endpoint>> Endpoint::open(const std::string& path, int version,
                                                 const InitOptions& opts) {
    Result<std::unique_ptr<PluginLibrary>> lib = PluginLibrary::open(path);
    if (!lib.isOk()) {
        return lib.status();
    }
    std::unique_ptr<Endpoint> ep(new Endpoint());
    ep->lib_ = std::move(lib).value();
    ep->net_ = makeNetApi(*ep->lib_, version);
    if (ep->net_ == nullptr) {
        ep->finalized_ = true;
        return Status(Code::kUnavailable,
                      path + " exports no ncclNetPlugin_v" + std::to_string(version));
    }
    ncclResult_t rc = ep->net_->init(&ep->ctx_, captureLogger, opts);
    if (rc != ncclSuccess) {
        // NCCL calls finalize even after a failed init; do the same.
        (void)ep->net_->finalize(ep->ctx_);
        ep->finalized_ = true;
        return ncclStatus(rc, "init");
    }
    rc = ep->net_->devices(&ep->ndev_);
    if (rc != ncclSuccess || ep->ndev_ <= 0) {
        Status st = rc != ncclSuccess
                        ? ncclStatus(rc, "devices")
                        : Status(Code::kUnavailable,
                                 "devices() reported " + std::to_string(ep->ndev_) + " devices");
        (void)ep->finalizeAndClose();
        return st;
    }
    return ep;
}

Endpoint::~Endpoint() {
    (void)finalizeAndClose();
}

Status Endpoint::finalize() {
    if (finalized_ || net_ == nullptr) {
        return Status::ok();
    }
    finalized_ = true;
    return ncclStatus(net_->finalize(ctx_), "finalize");
}

Status Endpoint::finalizeAndClose() {
    Status st = finalize();
    net_.reset();
    if (lib_ != nullptr) {
        Status c = lib_->close();
        if (st.isOk()) {
            st = c;
        }
    }
    return st;
}

// ---------------------------------------------------------------------------------------------
// Comm setup

Status connectInProcess(NetApi& net, void* ctx, int dev, CommPair* out, const Deadline& deadline) {
    Handle handle{};
    ATLAS_RETURN_IF_ERROR(
        ncclStatus(net.listen(ctx, dev, handle.data(), &out->listen_comm), "listen"));
    if (out->listen_comm == nullptr) {
        return Status(Code::kInternal, "listen succeeded but returned a NULL listenComm");
    }
    return connectAcceptInProcess(net, ctx, dev, &handle, out, deadline);
}

Status connectAcceptInProcess(NetApi& net, void* ctx, int dev, Handle* handle, CommPair* out,
                              const Deadline& deadline) {
    Backoff backoff;
    while (out->send_comm == nullptr || out->recv_comm == nullptr) {
        bool progressed = false;
        if (out->send_comm == nullptr) {
            // NCCL calls connect again with the same handle buffer: state may live inside it.
            ATLAS_RETURN_IF_ERROR(
                ncclStatus(net.connect(ctx, dev, handle->data(), &out->send_comm), "connect"));
            progressed |= out->send_comm != nullptr;
        }
        if (out->recv_comm == nullptr) {
            ATLAS_RETURN_IF_ERROR(
                ncclStatus(net.accept(out->listen_comm, &out->recv_comm), "accept"));
            progressed |= out->recv_comm != nullptr;
        }
        if (out->send_comm != nullptr && out->recv_comm != nullptr) {
            break;
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout,
                          std::string("connect/accept loop: no ") +
                              (out->send_comm == nullptr ? "sendComm" : "recvComm") +
                              " before the deadline");
        }
        if (progressed) {
            backoff.reset();
        } else {
            backoff.idle();
        }
    }
    return Status::ok();
}

Status closePair(NetApi& net, CommPair* pair) {
    Status first;
    auto keep = [&first](Status s) {
        if (first.isOk() && !s.isOk()) {
            first = std::move(s);
        }
    };
    if (pair->send_comm != nullptr) {
        keep(ncclStatus(net.closeSend(pair->send_comm), "closeSend"));
        pair->send_comm = nullptr;
    }
    if (pair->recv_comm != nullptr) {
        keep(ncclStatus(net.closeRecv(pair->recv_comm), "closeRecv"));
        pair->recv_comm = nullptr;
    }
    if (pair->listen_comm != nullptr) {
        keep(ncclStatus(net.closeListen(pair->listen_comm), "closeListen"));
        pair->listen_comm = nullptr;
    }
    return first;
}

Status listenAndPublish(NetApi& net, void* ctx, int dev, int fd, void** listen_comm,
                        const Deadline& deadline) {
    Handle handle{};
    ATLAS_RETURN_IF_ERROR(ncclStatus(net.listen(ctx, dev, handle.data(), listen_comm), "listen"));
    if (*listen_comm == nullptr) {
        return Status(Code::kInternal, "listen succeeded but returned a NULL listenComm");
    }
    return writeAll(fd, handle.data(), handle.size(), deadline);
}

Status connectLoop(NetApi& net, void* ctx, int dev, Handle* handle, void** send_comm,
                   const Deadline& deadline) {
    Backoff backoff;
    *send_comm = nullptr;
    while (true) {
        // NCCL calls connect again with the same handle buffer: state may live inside it.
        ATLAS_RETURN_IF_ERROR(
            ncclStatus(net.connect(ctx, dev, handle->data(), send_comm), "connect"));
        if (*send_comm != nullptr) {
            return Status::ok();
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout, "connect: no sendComm before the deadline");
        }
        backoff.idle();
    }
}

Status readHandleAndConnect(NetApi& net, void* ctx, int dev, int fd, void** send_comm,
                            const Deadline& deadline) {
    Handle handle{};
    ATLAS_RETURN_IF_ERROR(readAll(fd, handle.data(), handle.size(), deadline));
    return connectLoop(net, ctx, dev, &handle, send_comm, deadline);
}

Status acceptLoop(NetApi& net, void* listen_comm, void** recv_comm, const Deadline& deadline) {
    Backoff backoff;
    *recv_comm = nullptr;
    while (true) {
        ATLAS_RETURN_IF_ERROR(ncclStatus(net.accept(listen_comm, recv_comm), "accept"));
        if (*recv_comm != nullptr) {
            return Status::ok();
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout, "accept: no recvComm before the deadline");
        }
        backoff.idle();
    }
}

// ---------------------------------------------------------------------------------------------
// Registration

Result<Registration> Registration::create(NetApi& net, void* comm, void* data, size_t size) {
    Registration r;
    ncclResult_t rc = net.regMr(comm, data, size, NCCL_PTR_HOST, &r.mhandle_);
    if (rc != ncclSuccess) {
        return ncclStatus(rc, "regMr(NCCL_PTR_HOST, " + std::to_string(size) + " B)");
    }
    r.net_ = &net;
    r.comm_ = comm;
    return r;
}

Registration::Registration(Registration&& other) noexcept
    : net_(std::exchange(other.net_, nullptr)),
      comm_(std::exchange(other.comm_, nullptr)),
      mhandle_(std::exchange(other.mhandle_, nullptr)) {}

Registration& Registration::operator=(Registration&& other) noexcept {
    if (this != &other) {
        (void)release();
        net_ = std::exchange(other.net_, nullptr);
        comm_ = std::exchange(other.comm_, nullptr);
        mhandle_ = std::exchange(other.mhandle_, nullptr);
    }
    return *this;
}

Registration::~Registration() {
    (void)release();
}

Status Registration::release() {
    if (net_ == nullptr) {
        return Status::ok();
    }
    NetApi* net = std::exchange(net_, nullptr);
    return ncclStatus(net->deregMr(comm_, mhandle_), "deregMr");
}

// ---------------------------------------------------------------------------------------------
// Data movement

Result<void*> postSend(NetApi& net, void* send_comm, const void* data, size_t size, void* mhandle,
                       const Deadline& deadline, int tag) {
    Backoff backoff;
    while (true) {
        void* req = nullptr;
        ATLAS_RETURN_IF_ERROR(ncclStatus(
            net.isend(send_comm, const_cast<void*>(data), size, tag, mhandle, &req), "isend"));
        if (req != nullptr) {
            return req;
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout, "isend kept returning a NULL request (back-pressure)");
        }
        backoff.idle();
    }
}

Result<void*> postRecv(NetApi& net, void* recv_comm, void* data, size_t capacity, void* mhandle,
                       const Deadline& deadline, int tag, void* preset) {
    Backoff backoff;
    while (true) {
        void* req = preset;
        ATLAS_RETURN_IF_ERROR(
            ncclStatus(net.irecv(recv_comm, data, capacity, tag, mhandle, &req), "irecv"));
        if (preset != nullptr && req == preset) {
            return Status(Code::kInternal,
                          "irecv left the preset sentinel in *request (must return a real "
                          "request or NULL)");
        }
        if (req != nullptr) {
            return req;
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout, "irecv kept returning a NULL request (back-pressure)");
        }
        backoff.idle();
    }
}

Result<size_t> waitDone(NetApi& net, void* request, const Deadline& deadline, bool want_size) {
    Backoff backoff;
    while (true) {
        int done = 0;
        int size = -1;
        ATLAS_RETURN_IF_ERROR(
            ncclStatus(net.test(request, &done, want_size ? &size : nullptr), "test"));
        if (done != 0) {
            if (!want_size) {
                return size_t{0};
            }
            if (size < 0) {
                return Status(Code::kInternal,
                              "test reported done with size " + std::to_string(size));
            }
            return static_cast<size_t>(size);
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout, "test: request not done before the deadline");
        }
        backoff.idle();
    }
}

Result<size_t> transferInProcess(NetApi& net, const CommPair& pair, const void* src, size_t size,
                                 void* dst, size_t capacity, const Deadline& deadline) {
    Result<Registration> smr = Registration::create(net, pair.send_comm, const_cast<void*>(src),
                                                    std::max<size_t>(size, 1));
    if (!smr.isOk()) {
        return smr.status();
    }
    Result<Registration> rmr =
        Registration::create(net, pair.recv_comm, dst, std::max<size_t>(capacity, 1));
    if (!rmr.isOk()) {
        return rmr.status();
    }
    Result<void*> rreq = postRecv(net, pair.recv_comm, dst, capacity, rmr->mhandle(), deadline);
    if (!rreq.isOk()) {
        return rreq.status();
    }
    Result<void*> sreq = postSend(net, pair.send_comm, src, size, smr->mhandle(), deadline);
    if (!sreq.isOk()) {
        return sreq.status();
    }
    bool send_done = false;
    bool recv_done = false;
    int recv_size = -1;
    Backoff backoff;
    while (!send_done || !recv_done) {
        bool progressed = false;
        if (!send_done) {
            int done = 0;
            int sz = 0;
            ATLAS_RETURN_IF_ERROR(ncclStatus(net.test(*sreq, &done, &sz), "test(send)"));
            send_done = done != 0;
            progressed |= send_done;
        }
        if (!recv_done) {
            int done = 0;
            ATLAS_RETURN_IF_ERROR(ncclStatus(net.test(*rreq, &done, &recv_size), "test(recv)"));
            recv_done = done != 0;
            progressed |= recv_done;
        }
        if (send_done && recv_done) {
            break;
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout, std::string("transfer of ") + std::to_string(size) +
                                              " B: " + (send_done ? "" : "send ") +
                                              (recv_done ? "" : "recv ") +
                                              "not done before the deadline");
        }
        if (progressed) {
            backoff.reset();
        } else {
            backoff.idle();
        }
    }
    ATLAS_RETURN_IF_ERROR(smr->release());
    ATLAS_RETURN_IF_ERROR(rmr->release());
    if (recv_size < 0) {
        return Status(Code::kInternal,
                      "receiver's test reported size " + std::to_string(recv_size));
    }
    return static_cast<size_t>(recv_size);
}

}  // namespace atlas::abi
