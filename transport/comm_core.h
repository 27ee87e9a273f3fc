// CommCore: one unidirectional Atlas connection (a control stream plus N data streams) and
// its request slots. Shared by SendComm and RecvComm.
//
// Threads and ownership:
// - The poster (NCCL's thread for this comm) calls post() and reads request states; it never
//   touches sockets.
// - Everything else runs on the owner engine thread: the comm's sockets, IoOps and message
//   bookkeeping belong to that thread alone.
// - Hand-over: the poster fills a request slot, then publishes it by storing posted_seq_
//   (release); the engine reads posted_seq_ (acquire) before reading the slot. The engine
//   fills `result`, then publishes by storing state = kDone (release); test() reads state
//   (acquire) before `result`. A failure stores error_ before failed_ (release); readers
//   load failed_ (acquire) before error_.
//
// Data path (docs/protocol.md): messages up to inline_bytes (and every 0-byte message) travel
// as one frame on the control stream; larger ones are cut by the Striper into pieces spread
// over the data streams, each piece preceded by a 32-byte frame header {seq, offset, length,
// total}. The receiver reads each header and then the payload straight into the posted
// buffer, in any arrival order. A stream whose next frame belongs to a receive not yet posted
// stops reading (TCP back-pressure) until that receive is posted.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "atlas/admission.h"
#include "atlas/common/log.h"
#include "atlas/recv_observer.h"
#include "atlas/common/status.h"
#include "atlas/stream_stats.h"
#include "transport/net.h"
#include "transport/reactor.h"
#include "transport/socket_util.h"
#include "transport/striper.h"
#include "transport/wire.h"

namespace atlas::transport {

class CommCore;
class Engine;

// One of kMaxRequests slots per comm, addressed by seq % kMaxRequests.
class Request {
  public:
    enum State : uint32_t { kFree = 0, kPosted = 1, kDone = 2, kFailed = 3 };

  private:
    friend class CommCore;
    friend Status test(Request* req, bool* done, size_t* size);

    std::atomic<uint32_t> state_{kFree};
    CommCore* comm_ = nullptr;
    // Written by the poster before publication:
    uint8_t* data_ = nullptr;
    uint64_t size_ = 0;  // send: bytes; recv: capacity
    uint64_t seq_ = 0;
    // Written by the engine before kDone:
    uint64_t result_ = 0;
};

struct CommParams {
    enum class Role { kSend, kRecv };
    Role role = Role::kSend;
    uint64_t chunk_bytes = 512 * 1024;
    uint64_t inline_bytes = 4096;
    StripeMode stripe = StripeMode::kLoadAware;
    CommInfo info;
    Logger logger;
    const Clock* clock = &MonotonicClock::instance();
};

class CommCore final : public IoHandler {
  public:
    // `fds[0]` is the control stream, the rest are data streams, all connected and
    // handshaken. Call only from setup code; the comm starts moving data once adopted.
    CommCore(const CommParams& params, std::vector<Fd> fds, Engine* engine);
    ~CommCore();
    CommCore(const CommCore&) = delete;
    CommCore& operator=(const CommCore&) = delete;

    // ---- Poster side (one thread at a time) ----
    // Posts a send (data, size) or a receive (data, capacity). *out = nullptr when all slots
    // are busy (back-pressure). Returns the sticky error if the comm has failed.
    Status post(uint8_t* data, uint64_t size, Request** out);
    bool failed() const { return failed_.load(std::memory_order_acquire); }
    // Valid only after failed() returned true.
    const Status& error() const { return error_; }
    const CommInfo& info() const { return params_.info; }
    Engine* engine() const { return engine_; }
    // Poster side, before the first post: published to the engine by post()'s release store
    // (the engine reads gate_ only once a posted message waits for striping).
    void setGate(std::unique_ptr<FlowGate> gate) { gate_ = std::move(gate); }
    // Same publication rule as setGate (the engine first touches it for a posted receive).
    void setObserver(std::unique_ptr<RecvObserver> observer) { observer_ = std::move(observer); }
    // Poster side, once, any time before close (comm_stats.cc): from then on the owner engine
    // reports the comm's streams to `sink` every `interval_ns`, and once more when the comm
    // closes. Published by a release store the engine's acquire load pairs with.
    void setStatsSink(std::unique_ptr<CommStatsSink> sink, Nanos interval_ns);
    // Engine thread: samples when the interval is due (cheap when not).
    void maybeSample(Nanos now_ns);

    // ---- Engine thread only ----
    void onAdopt(Reactor& reactor);
    void onDoorbell();
    void beginClose();
    bool quiescent() const;  // no I/O op in flight
    void finishClose();      // unregisters and closes the sockets
    void onIoComplete(IoOp* op, int64_t result) override;

    // Doorbell plumbing owned by Engine (see engine.cc).
    std::atomic<bool> doorbell_pending_{false};
    CommCore* next_ready_ = nullptr;

  private:
    struct Segment {
        uint32_t slot = 0;
        uint32_t length = 0;  // payload bytes
        uint8_t header[wire::kFrameHeaderBytes]{};
        uint64_t offset = 0;
    };
    // Fixed-capacity FIFO; no allocation on the data path.
    struct SegmentRing {
        static constexpr uint32_t kCapacity = 64;
        std::array<Segment, kCapacity> items;
        uint32_t head = 0, size = 0;
        bool full() const { return size == kCapacity; }
        Segment& at(uint32_t i) { return items[(head + i) % kCapacity]; }
        Segment& pushBack() { return items[(head + size++) % kCapacity]; }
        void popFront() { head = (head + 1) % kCapacity, --size; }
    };
    enum class RecvPhase : uint8_t { kHeader, kPayload, kParked, kStopped };
    struct Stream {
        int index = 0;
        bool ctrl = false;
        Fd fd;
        // send path
        IoOp send_op;
        SegmentRing queue;
        uint32_t in_flight_segs = 0;
        uint64_t queued_bytes = 0;  // assigned and not yet accepted by the kernel
        // recv path (on a send comm only the control stream reads, to notice a dead peer)
        IoOp recv_op;
        RecvPhase phase = RecvPhase::kHeader;
        uint8_t header[wire::kFrameHeaderBytes]{};
        wire::FrameHeader frame;
        uint64_t frame_seq = 0;
        bool eof = false;
        uint64_t bytes = 0;  // payload bytes moved, for stats
    };
    // Engine-side bookkeeping per slot.
    struct SlotState {
        uint64_t unassigned = 0;  // send: bytes not yet given to a stream
        uint64_t done = 0;        // send: bytes accepted by the kernel; recv: bytes received
        uint64_t total = 0;       // recv: message size once the first frame arrived
        bool total_known = false;
        bool complete = true;
    };

    bool isSend() const { return params_.role == CommParams::Role::kSend; }
    Request& slot(uint64_t seq) { return reqs_[seq % kMaxRequests]; }
    SlotState& state(uint64_t seq) { return slots_[seq % kMaxRequests]; }

    void takePosted();
    void fail(Status st);
    void completeRequest(uint64_t seq, uint64_t result);
    // send side
    void enqueueInline(uint64_t seq);
    void pump();
    void startSend(Stream& s);
    void onSendComplete(Stream& s, int64_t result);
    // recv side
    void readHeader(Stream& s);
    void onHeader(Stream& s);
    void attach(Stream& s);
    void onPayload(Stream& s);
    void onRecvComplete(Stream& s, int64_t result);
    void onEof(Stream& s);
    void checkPeerGone();
    void unparkStreams();
    uint64_t pendingReceives() const { return engine_seq_ - oldest_; }

    bool admitted();  // engine: may striping continue now? (asks the gate)
    void sampleStats(CommStatsSink& sink, Nanos now_ns);  // engine (comm_stats.cc)

    CommParams params_;
    Engine* engine_;
    std::unique_ptr<FlowGate> gate_;  // null: not arbitrated
    std::unique_ptr<RecvObserver> observer_;  // null: receives not watched
    bool granted_ = false;            // engine: holding the gate's grant
    uint64_t granted_bytes_ = 0;      // striped under the current grant
    CommEngineCounters engine_counters_;  // engine: gate waits/grants, for the stats sink
    std::unique_ptr<CommStatsSink> stats_owned_;   // set once by the poster; freed with the comm
    std::atomic<CommStatsSink*> stats_{nullptr};   // the engine's view of stats_owned_
    Nanos stats_interval_ns_ = 0;                  // written before stats_ is published
    Nanos next_sample_ns_ = 0;                     // engine
    Reactor* reactor_ = nullptr;
    std::vector<std::unique_ptr<Stream>> streams_;  // [0] = control
    std::unique_ptr<Striper> striper_;
    std::vector<uint64_t> loads_;  // scratch for the striper

    // Poster side.
    uint64_t post_seq_ = 0;
    std::atomic<uint64_t> posted_seq_{0};
    std::array<Request, kMaxRequests> reqs_;

    // Failure (see the ordering contract above).
    std::atomic<bool> failed_{false};
    Status error_;

    // Engine side.
    std::array<SlotState, kMaxRequests> slots_;
    uint64_t engine_seq_ = 0;  // requests taken from the poster: [0, engine_seq_)
    uint64_t oldest_ = 0;      // lowest seq not yet complete
    std::array<uint64_t, kMaxRequests> assign_q_{};  // send: seqs waiting for the striper
    uint32_t assign_head_ = 0, assign_size_ = 0;
    int eof_streams_ = 0;
    bool closing_ = false;
};

}  // namespace atlas::transport
