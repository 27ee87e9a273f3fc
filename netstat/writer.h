// The writer of a stats segment (include/atlas/netstat.h): the NCCL plugin creates one per
// process, claims a comm record per comm, and hands the transport a StreamSink per comm.
//
// Threads: create/claim/release from any thread (internal mutex, never on the data path);
// completed() from the comm's progress thread only; StreamSink from the comm's engine only
// (the single-writer rules of netstat.h). The writer must outlive every sink and record.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "atlas/common/status.h"
#include "atlas/netstat.h"
#include "atlas/stream_stats.h"

namespace atlas::netstat {

struct WriterConfig {
    std::string dir = kDefaultSegmentDir;
    uint32_t comm_capacity = 256;
    uint32_t stream_capacity = kMaxStreamRecords;
    std::string name;  // empty: atlas-netstat-<uid>-<pid>
};

// What a comm is, written once when its record is claimed.
struct CommIdentity {
    uint64_t comm_id = 0;
    uint64_t session_id = 0;
    Role role = kRoleSend;
    int dev = 0;
    int nstreams = 0;
    Traffic traffic = kTrafficUnknown;
    int priority = 1;
    bool wan = false;
    uint64_t handshake_rtt_ns = 0;
    uint64_t open_ns = 0;
    std::string peer, local, link;
};

std::string defaultSegmentName();

// Removes the default-named segments (atlas-netstat-<uid>-<pid>) of this user in `dir` whose
// process is gone: a process killed with SIGKILL never removes its own. A name whose pid
// lives (any process: pids are reused) or that does not parse is left alone. Returns how
// many were removed. StatsWriter::create calls it before creating its own file. A process in
// another PID namespace sharing `dir` looks dead here (docs/netstat.md: give it its own dir).
size_t removeDeadSegments(const std::string& dir);

class StatsWriter {
  public:
    static Result<std::unique_ptr<StatsWriter>> create(const WriterConfig& config);
    // Marks the segment closed and removes it: readers that hold it see kSegmentClosed.
    ~StatsWriter();
    StatsWriter(const StatsWriter&) = delete;
    StatsWriter& operator=(const StatsWriter&) = delete;

    // A free record initialised with `id`, or nullptr when every record is in use (counted
    // in comms_dropped; the comm runs on without stats).
    CommRecord* claim(const CommIdentity& id);
    void release(CommRecord* record);

    StreamRecord* streams(CommRecord* record) const;
    uint32_t streamCapacity() const { return stream_capacity_; }
    SegmentHeader& header() const { return *header_; }
    const std::string& path() const { return path_; }

    // Progress thread of the record's comm: one message of `bytes` completed.
    static void completed(CommRecord& record, uint64_t bytes, uint64_t now_ns);
    // Any single thread per field: a relaxed single-writer store (netstat.h).
    static void setCounter(Word& w, uint64_t v) { w.store(v, std::memory_order_relaxed); }

  private:
    StatsWriter() = default;
    std::string path_;
    void* map_ = nullptr;
    size_t size_ = 0;
    SegmentHeader* header_ = nullptr;
    uint8_t* comms_ = nullptr;
    uint64_t stride_ = 0;
    uint32_t capacity_ = 0;
    uint32_t stream_capacity_ = 0;
    std::mutex mu_;
    std::vector<uint32_t> free_;  // guarded by mu_
};

// The transport's CommStatsSink for one comm record: stream samples and gate counters go
// into the record's stream records (engine thread).
class StreamSink final : public CommStatsSink {
  public:
    StreamSink(StatsWriter* writer, CommRecord* record) : writer_(writer), record_(record) {}
    void stream(const StreamSample& sample) noexcept override;
    void engine(const CommEngineCounters& counters, Nanos now_ns) noexcept override;

  private:
    StatsWriter* writer_;
    CommRecord* record_;
};

}  // namespace atlas::netstat
