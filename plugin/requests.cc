#include "plugin/requests.h"

#include <bit>

namespace atlas::plugin {
namespace {

static_assert(RequestPool::kSlots == 32, "free_mask_ has one bit per slot");

std::atomic<ncclProfilerCallback_t> g_profiler{nullptr};

// NCCL's profiler entry points return ncclResult_t; a failing profiler must not fail the
// transfer, so results are ignored (NCCL's own transports do the same).
void emit(void** event, int type, void* phandle, void* descr) {
    ncclProfilerCallback_t cb = g_profiler.load(std::memory_order_relaxed);
    if (cb == nullptr) {
        return;
    }
    (void)cb(event, type, phandle, type == ncclProfilerNetEventStop ? 0 : ATLAS_PROFILER_NET_ID,
             descr);
}

}  // namespace

void setProfilerCallback(ncclProfilerCallback_t callback) {
    g_profiler.store(callback, std::memory_order_relaxed);
}

ncclProfilerCallback_t profilerCallback() {
    return g_profiler.load(std::memory_order_relaxed);
}

RequestPool::RequestPool(RequestOp op, int dev, int nstreams, uint64_t inline_bytes)
    : op_(op), dev_(dev), nstreams_(nstreams), inline_bytes_(inline_bytes) {
    for (PluginRequest& r : slots_) {
        r.magic = kFree;
        r.pool = this;
    }
}

RequestPool::~RequestPool() {
    for (PluginRequest& r : slots_) {
        if (r.magic == kInFlight && r.event != nullptr) {
            emit(&r.event, ncclProfilerNetEventStop, nullptr, nullptr);
        }
        r.magic = kFree;
        r.event = nullptr;
    }
}

PluginRequest* RequestPool::reserve() {
    if (free_mask_ == 0) {
        return nullptr;
    }
    // Prefer the slot after the last one used so a stale handle NCCL kept by mistake is
    // unlikely to alias the next request.
    const uint32_t start = static_cast<uint32_t>(next_seq_ % kSlots);
    const uint32_t rotated = std::rotr(free_mask_, static_cast<int>(start));
    const uint32_t i = (start + static_cast<uint32_t>(std::countr_zero(rotated))) % kSlots;
    free_mask_ &= ~(1u << i);
    return &slots_[i];
}

void RequestPool::unreserve(PluginRequest* r) {
    free_mask_ |= 1u << static_cast<uint32_t>(r - slots_.data());
}

int RequestPool::streamOf(size_t bytes) const {
    return (bytes == 0 || bytes <= inline_bytes_) ? ATLAS_PROFILER_STREAM_CONTROL
                                                  : ATLAS_PROFILER_STREAM_STRIPED;
}

void RequestPool::fillRequest(atlasProfilerNetDescr_v1_t* d, const PluginRequest& r,
                              size_t bytes) const {
    *d = {};
    d->type = atlasProfileRequest;
    d->req.stream = streamOf(bytes);
    d->req.op = static_cast<int>(op_);
    d->req.length = bytes;
    d->req.nstreams = nstreams_;
    d->req.dev = dev_;
    d->req.seq = r.seq;
}

void RequestPool::posted(PluginRequest* r, transport::Request* inner, size_t length,
                         void* phandle) {
    r->inner = inner;
    r->event = nullptr;
    r->seq = next_seq_++;
    r->length = length;
    r->magic = kInFlight;
    if (phandle != nullptr && g_profiler.load(std::memory_order_relaxed) != nullptr) {
        atlasProfilerNetDescr_v1_t d;
        // A receive's capacity says nothing about the stream when it exceeds the inline
        // threshold; the stop event carries the real one.
        fillRequest(&d, *r, length);
        emit(&r->event, ncclProfilerNetEventStart, phandle, &d);
    }
}

void RequestPool::completed(PluginRequest* r, size_t bytes) {
    if (stats_ != nullptr) {
        netstat::StatsWriter::completed(*stats_, bytes, static_cast<uint64_t>(monotonicNowNs()));
    }
    if (r->event != nullptr) {
        atlasProfilerNetDescr_v1_t d;
        fillRequest(&d, *r, bytes);
        emit(&r->event, ncclProfilerNetEventUpdateAndStop, nullptr, &d);
        r->event = nullptr;
    }
    r->inner = nullptr;
    r->magic = kFree;
    unreserve(r);
}

PluginRequest* RequestPool::fromHandle(void* handle) {
    auto* r = static_cast<PluginRequest*>(handle);
    return (r != nullptr && r->magic == kInFlight) ? r : nullptr;
}

void RequestPool::reportStreamEvent(int stream, int kind, uint64_t bytes) {
    if (g_profiler.load(std::memory_order_relaxed) == nullptr) {
        return;
    }
    const PluginRequest* parent = nullptr;
    for (const PluginRequest& r : slots_) {
        if (r.magic == kInFlight && r.event != nullptr &&
            (parent == nullptr || r.seq < parent->seq)) {
            parent = &r;
        }
    }
    if (parent == nullptr) {
        return;
    }
    atlasProfilerNetDescr_v1_t d{};
    d.type = atlasProfileStream;
    d.stream.stream = stream;
    d.stream.event = kind;
    d.stream.bytes = bytes;
    void* ev = parent->event;
    emit(&ev, ncclProfilerNetEventUpdate, nullptr, &d);
}

}  // namespace atlas::plugin
