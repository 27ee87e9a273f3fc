// The requests isend/irecv hand to NCCL, and the profiler events they carry.
//
// Every request NCCL sees is a PluginRequest from its comm's RequestPool: it wraps the
// transport's request and holds the NCCL profiler event of that transfer (NCCL 2.26+ passes
// a phandle to isend/irecv and a callback to init). NCCL never sees its address: it gets a
// token (plugin/handle_table.h's tag bits, kind kRequest) that names the comm's handle-table
// entry and the pool entry, so test() resolves it through the table and rejects one that is not
// an in-flight request of a live comm without reading the memory of a closed one:
//   bit 63      1
//   bits 60-62  HandleKind::kRequest
//   bits 25-59  check: (posting number + a per-comm salt) mod 2^35; the comm's 32 entries are
//               reused, so a token kept after test() reported it done (or one of an earlier
//               comm of the same table entry) matches only 2^35 posts later, or with
//               probability 2^-35 for another comm
//   bits 5-24   the comm's handle-table entry
//   bits 0-4    the pool entry
//
// Profiler events (docs/nccl-abi.md section 6): when NCCL gave a callback at init and a
// non-NULL phandle, isend/irecv start one atlasProfileRequest event (pluginId
// ATLAS_PROFILER_NET_ID) with {stream, op, length, nstreams, dev, seq}; test() closes it with
// UpdateAndStop carrying the bytes that moved (and the stream, now known for receives). A
// comm closed with requests in flight stops their events. Stream-level events (a reset or
// rejoin of one stream) hang under the oldest open request of their comm: the transport
// logs them (transport::StreamEventLog) and test() reports them (pollStreamEvents).
//
// Cost: without a profiler plugin NCCL's callback returns at its first check, so a request
// costs two indirect calls. Requests never allocate.
//
// Threads: a pool belongs to one comm and is used by the thread NCCL drives that comm with
// (isend/irecv/test are serialised per comm by NCCL's contract); close runs after that
// thread stopped using the comm.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "atlas/nccl/net.h"
#include "netstat/writer.h"

namespace atlas::transport {
class Request;
class StreamEventLog;
}  // namespace atlas::transport

namespace atlas::plugin {

class RequestPool;

struct PluginRequest {
    uint64_t token = 0;  // NCCL's handle while in flight, 0 when free
    transport::Request* inner = nullptr;
    void* event = nullptr;  // NCCL profiler event, nullptr when none was started
    RequestPool* pool = nullptr;
    uint64_t seq = 0;
    size_t length = 0;  // posted size (send) or capacity (receive)
};

// Which way the comm's transfers go, for the event descriptor.
enum class RequestOp : int { kSend = atlasProfileOpSend, kRecv = atlasProfileOpRecv };

// The process-wide callback NCCL handed to init (the same for every init of a process);
// nullptr: no events. Set before any comm exists; read on the data path (relaxed).
void setProfilerCallback(ncclProfilerCallback_t callback);
ncclProfilerCallback_t profilerCallback();

class RequestPool {
  public:
    static constexpr int kEntries = NCCL_NET_MAX_REQUESTS;
    static constexpr int kIndexBits = 5;
    static constexpr int kOwnerShift = kIndexBits;
    static constexpr int kCheckShift = kOwnerShift + 20;  // HandleTable::kIndexBits
    static constexpr int kCheckBits = 60 - kCheckShift;   // up to the kind bits

    // inline_bytes: the comm's inline threshold (transport::CommInfo), for the descriptor.
    RequestPool(RequestOp op, int dev, int nstreams, uint64_t inline_bytes);
    ~RequestPool();  // closes the events of requests still in flight
    RequestPool(const RequestPool&) = delete;
    RequestPool& operator=(const RequestPool&) = delete;

    // A free entry, or nullptr when kEntries requests are in flight (then the transport has no
    // free entry either: back-pressure).
    PluginRequest* reserve();
    // The transport had no room: the entry goes back unused.
    void unreserve(PluginRequest* r);
    // The transport accepted the request: record it and start its event.
    void posted(PluginRequest* r, transport::Request* inner, size_t length, void* phandle);
    // test() saw it done with `bytes` moved: stop its event and free the entry.
    void completed(PluginRequest* r, size_t bytes);

    // The comm's handle-table token: its requests' tokens name the comm's entry. Once, before
    // the first post.
    void bindHandles(const void* comm_token);
    // NCCL's handle for an in-flight request (after posted()).
    static void* handleOf(const PluginRequest* r) { return reinterpret_cast<void*>(r->token); }
    // The handle-table entry of the comm that a request token names; false when `handle` is
    // not shaped like one (NULL, a pointer, another kind). Reads nothing.
    static bool ownerIndex(const void* handle, uint32_t* index);
    // The in-flight request of this pool behind `handle`, else nullptr (reported done, or
    // never issued by this pool).
    PluginRequest* find(const void* handle);

    // Hook for stream-level events (issue 16: reset, rejoin): reported as an Update of the
    // oldest in-flight request's open event, with an atlasProfileStream descriptor; dropped
    // when no event is open (NCCL's profiler only takes events under a live parent). `kind`
    // is atlasStreamReset / atlasStreamRejoin. Same thread rule as the rest of the pool.
    void reportStreamEvent(int stream, int kind, uint64_t frames);
    // The comm's stream event log (transport/recovery.h); once, before the first post.
    void setStreamEvents(transport::StreamEventLog* log) { events_ = log; }
    // Reports what the log holds through reportStreamEvent, oldest first. Called by test()
    // on the comm's thread: one acquire load when nothing happened. The log is drained with
    // or without a profiler, so it never holds stale events.
    void pollStreamEvents();

    uint64_t posted_count() const { return next_seq_; }
    // The comm's stats record (plugin/comm_stats.h): completed() counts messages into it.
    // Set before the first post; nullptr: no stats.
    void setStatsRecord(netstat::CommRecord* record) { stats_ = record; }
    netstat::CommRecord* statsRecord() const { return stats_; }

  private:
    void fillRequest(atlasProfilerNetDescr_v1_t* d, const PluginRequest& r, size_t bytes) const;
    int streamOf(size_t bytes) const;

    RequestOp op_;
    int dev_;
    int nstreams_;
    uint64_t inline_bytes_;
    uint64_t next_seq_ = 0;
    uint32_t free_mask_ = ~0u;  // bit i: entries_[i] is free
    uint64_t token_base_ = 0;   // tag and owner bits of this pool's request tokens
    uint64_t salt_ = 0;         // added to the posting number in a token's check bits
    netstat::CommRecord* stats_ = nullptr;
    transport::StreamEventLog* events_ = nullptr;
    std::array<PluginRequest, kEntries> entries_;
};

}  // namespace atlas::plugin
