#include "plugin/requests.h"

#include <bit>
#include <iterator>

#include "plugin/handle_table.h"
#include "transport/recovery.h"

namespace atlas::plugin {
namespace {

static_assert(RequestPool::kEntries == 32, "free_mask_ has one bit per entry");
static_assert(RequestPool::kEntries == 1 << RequestPool::kIndexBits);
static_assert(RequestPool::kCheckShift == RequestPool::kOwnerShift + HandleTable::kIndexBits);
static_assert(RequestPool::kCheckShift + RequestPool::kCheckBits == HandleTable::kKindShift);
constexpr uint64_t kCheckMask = (1ull << RequestPool::kCheckBits) - 1;

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
    for (PluginRequest& r : entries_) {
        r.pool = this;
    }
}

RequestPool::~RequestPool() {
    for (PluginRequest& r : entries_) {
        if (r.token != 0 && r.event != nullptr) {
            emit(&r.event, ncclProfilerNetEventStop, nullptr, nullptr);
        }
        r.token = 0;
        r.event = nullptr;
    }
}

void RequestPool::bindHandles(const void* comm_token) {
    const auto t = reinterpret_cast<uint64_t>(comm_token);
    token_base_ = HandleTable::tagOf(HandleKind::kRequest) |
                  (static_cast<uint64_t>(HandleTable::indexOf(t)) << kOwnerShift);
    // The comm's serial, spread over the check bits: comms that reuse a table entry start
    // their posting numbers at unrelated points.
    salt_ = (t >> HandleTable::kIndexBits) * 0x9e3779b97f4a7c15ull;
}

bool RequestPool::ownerIndex(const void* handle, uint32_t* index) {
    const auto t = reinterpret_cast<uint64_t>(handle);
    if (HandleTable::kindOf(t) != HandleKind::kRequest) {
        return false;
    }
    *index = static_cast<uint32_t>((t >> kOwnerShift) & (HandleTable::kCapacity - 1));
    return true;
}

PluginRequest* RequestPool::find(const void* handle) {
    const auto t = reinterpret_cast<uint64_t>(handle);
    PluginRequest& r = entries_[t & (kEntries - 1)];
    return (t != 0 && r.token == t) ? &r : nullptr;
}

PluginRequest* RequestPool::reserve() {
    if (free_mask_ == 0) {
        return nullptr;
    }
    // Round-robin from the entry after the last one used. (A stale handle NCCL kept by
    // mistake cannot alias the next request of its entry anyway: tokens carry a check.)
    const uint32_t start = static_cast<uint32_t>(next_seq_ % kEntries);
    const uint32_t rotated = std::rotr(free_mask_, static_cast<int>(start));
    const uint32_t i = (start + static_cast<uint32_t>(std::countr_zero(rotated))) % kEntries;
    free_mask_ &= ~(1u << i);
    return &entries_[i];
}

void RequestPool::unreserve(PluginRequest* r) {
    free_mask_ |= 1u << static_cast<uint32_t>(r - entries_.data());
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
    r->token = token_base_ | (((r->seq + salt_) & kCheckMask) << kCheckShift) |
               static_cast<uint64_t>(r - entries_.data());
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
    r->token = 0;
    unreserve(r);
}

void RequestPool::reportStreamEvent(int stream, int kind, uint64_t frames) {
    if (g_profiler.load(std::memory_order_relaxed) == nullptr) {
        return;
    }
    const PluginRequest* parent = nullptr;
    for (const PluginRequest& r : entries_) {
        if (r.token != 0 && r.event != nullptr && (parent == nullptr || r.seq < parent->seq)) {
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
    d.stream.frames = frames;
    void* ev = parent->event;
    emit(&ev, ncclProfilerNetEventUpdate, nullptr, &d);
}

void RequestPool::pollStreamEvents() {
    if (events_ == nullptr || events_->empty()) {
        return;
    }
    transport::StreamEvent batch[8];
    size_t n = 0;
    while ((n = events_->drain(batch, std::size(batch))) > 0) {
        for (size_t i = 0; i < n; ++i) {
            const transport::StreamEvent& e = batch[i];
            reportStreamEvent(
                e.stream,
                e.kind == transport::StreamEvent::kLost ? atlasStreamReset : atlasStreamRejoin,
                e.frames);
        }
    }
}

}  // namespace atlas::plugin
