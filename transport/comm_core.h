// CommCore: one unidirectional Atlas connection (a control stream plus N data streams) and
// its requests. Shared by SendComm and RecvComm.
//
// Threads and ownership:
// - The poster (NCCL's thread for this comm) calls post() and reads request states; it never
//   touches sockets.
// - Everything else runs on the owner engine thread: the comm's sockets, IoOps and message
//   bookkeeping belong to that thread alone.
// - Hand-over: the poster fills a request, then publishes it by storing posted_seq_
//   (release); the engine reads posted_seq_ (acquire) before reading the request. The engine
//   fills `result`, then publishes by storing state = kDone (release); test() reads state
//   (acquire) before `result`. A failure stores error_ before failed_ (release); readers
//   load failed_ (acquire) before error_.
// - Recovery counters (counters()) are relaxed atomics written by the engine, readable by
//   anyone.
//
// Data path (docs/protocol.md): messages up to inline_bytes (and every 0-byte message) travel
// as one frame, on the control stream by preference; larger ones are cut by the Striper into
// pieces spread over the data streams, each piece preceded by a 32-byte frame header {seq,
// offset, length, total}. The receiver reads each header and then the payload straight into
// the posted buffer, in any arrival order. A stream whose next frame belongs to a receive not
// yet posted stops reading (TCP back-pressure) until that receive is posted.
//
// Recovery (docs/protocol.md, "Confirmation and resend", "Rejoin"): the receiver confirms the
// frames it consumed per stream; the sender keeps every unconfirmed frame in its SendLedger
// (copying it into the bounded retransmit store when its message completes locally). A stream
// that fails (error, EOF, stall) is not a comm failure: its unconfirmed frames are resent on
// the others, and the sender redials it through the Rejoiner with backoff. Only a closed or
// gone peer, or no live stream for ATLAS_TIMEOUT_MS, fails the comm.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "atlas/admission.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "atlas/recv_observer.h"
#include "atlas/stream_stats.h"
#include "transport/auth.h"
#include "transport/faults.h"
#include "transport/net.h"
#include "transport/ranges.h"
#include "transport/reactor.h"
#include "transport/recovery.h"
#include "transport/rejoiner.h"
#include "transport/seal.h"
#include "transport/send_ledger.h"
#include "transport/socket_util.h"
#include "transport/striper.h"
#include "transport/train.h"
#include "transport/wire.h"

namespace atlas::transport {

class CommCore;
class Engine;

// One of kMaxRequests requests per comm, addressed by seq % kMaxRequests.
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
    // Recovery.
    AuthContext auth;                     // the session's setup nonces (rejoin MACs)
    SocketAddress rejoin_peer;            // send: the receiving process's rejoin listener
    uint64_t resend_bytes = 64ull << 20;  // retransmit store bound (ATLAS_RESEND_BYTES)
    Nanos timeout_ns = 30 * kNsPerSec;    // ATLAS_TIMEOUT_MS
    ConfirmCadence cadence;
    uint32_t notsent_lowat = 512 * 1024;  // data streams (send side), also for rejoined ones
    std::vector<FaultSpec> faults;        // test seam; empty in production
    Rejoiner* rejoiner = nullptr;
    // ATLAS_ENCRYPT: the session's direction secrets; null = frames in clear.
    std::shared_ptr<const seal::SessionSecrets> secrets;
};

class CommCore final {
  public:
    // `fds[0]` is the control stream, the rest are data streams, all connected and
    // handshaken. Call only from setup code; the comm starts moving data once adopted.
    CommCore(const CommParams& params, std::vector<Fd> fds, Engine* engine);
    ~CommCore();
    CommCore(const CommCore&) = delete;
    CommCore& operator=(const CommCore&) = delete;

    // ---- Poster side (one thread at a time) ----
    // Posts a send (data, size) or a receive (data, capacity). *out = nullptr when all requests
    // are busy (back-pressure). Returns the sticky error if the comm has failed.
    Status post(uint8_t* data, uint64_t size, Request** out);
    bool failed() const { return failed_.load(std::memory_order_acquire); }
    // Valid only after failed() returned true.
    const Status& error() const { return error_; }
    const CommInfo& info() const { return params_.info; }
    Engine* engine() const { return engine_; }
    const RecoveryCounters& counters() const { return counters_; }
    // Stream lost/rejoined events for the poster thread (drained by the plugin's profiler).
    StreamEventLog& streamEvents() { return stream_events_; }
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
    // Setup code, before adoption: the comm's registration with the rejoiner.
    void setRejoinToken(uint64_t token) { rejoin_token_ = token; }
    uint64_t rejoinToken() const { return rejoin_token_; }

    // ---- Engine thread only ----
    void onAdopt(Reactor& reactor);
    void onDoorbell();
    void beginClose();
    bool quiescent() const;           // no I/O op in flight
    void finishClose();               // unregisters and closes the sockets
    void onArrival(StreamArrival a);  // a rejoined stream, or a failed dial
    Nanos timerAt() const;            // earliest timer on the comm clock; -1: none
    void onTimer(Nanos now);
    Nanos clockNow() const { return params_.clock->nowNs(); }

    // Doorbell plumbing owned by Engine (see engine.cc).
    std::atomic<bool> doorbell_pending_{false};
    CommCore* next_ready_ = nullptr;

  private:
    static constexpr size_t kMaxPrefixBytes = seal::prefixBytes(wire::kFrameHeaderBytes);
    static constexpr uint64_t kMaxSealedPiece = 8ull << 20;
    // How long an end of stream waits for the peer's goodbye on another stream.
    static constexpr Nanos kEofGraceNs = 100 * kNsPerMs;
    // How often a stopped flow looks whether its streams' bytes are through (one TCP_INFO
    // per data stream each time): a stop's start errs up to this much late, i.e. short.
    static constexpr Nanos kStopProbeNs = 5 * kNsPerMs;
    enum class RecvPhase : uint8_t {
        kHeader,       // reading a frame header
        kPayload,      // reading a data frame's payload (in runs: into the buffer or drained)
        kBody,         // reading a confirmation body (send side)
        kParked,       // next frame's receive not posted yet: not reading
        kWaitOverlap,  // its frame overlaps another stream's read in flight: waits for it
        kEofWait,      // end of stream, no goodbye yet: one may still come on another stream
        kStopped,      // end of stream after the peer's goodbye
    };
    // One incarnation of one stream. Lost incarnations move to the graveyard until their
    // operations have completed; then their socket is closed with a reset.
    struct Stream final : IoHandler {
        CommCore* comm = nullptr;
        int index = 0;
        uint32_t epoch = 0;
        bool dead = false;
        Fd fd;
        IoOp send_op, recv_op;
        // Reading.
        RecvPhase phase = RecvPhase::kHeader;
        uint8_t header[kMaxPrefixBytes]{};  // the frame header (sealed: the whole prefix)
        wire::FrameHeader frame;
        uint64_t frame_seq = 0;
        uint64_t pos = 0;  // payload bytes of the frame consumed so far
        uint64_t run_len = 0;
        bool run_to_buffer = false;  // the read in flight writes into the posted buffer
        bool duplicate = false;      // the whole frame is a resend of delivered data
        bool held = false;           // recv op prepared but held by a stall fault (test seam)
        std::unique_ptr<uint8_t[]> scratch;  // drained duplicates / confirmation bodies
        uint64_t frames_in = 0;              // recv: frames consumed in this incarnation
        uint64_t frames_confirmed = 0;       // recv: the count last sent in a confirmation
        // Writing.
        uint32_t op_frames = 0;   // send: ledger frames in the send in flight
        uint64_t pace_bytes = 0;  // send: the SO_MAX_PACING_RATE set on fd, bytes/s (0: none)
        bool op_control = false;  // recv: a confirmation is in flight here
        uint8_t flip_byte = 0;    // fault seam: the flipped byte's private copy
        uint8_t flip_header[wire::kFrameHeaderBytes]{};
        // Sealing (ATLAS_ENCRYPT): one sealer for what this side writes, one opener for what it
        // reads, keyed for this incarnation's {stream, epoch}. Frames are sealed in the order
        // they go out, into `staging` (one send's frames: prefix, then ciphertext).
        std::optional<seal::StreamSealer> sealer;
        std::optional<seal::StreamOpener> opener;
        std::vector<uint8_t> staging;
        std::vector<std::pair<uint64_t, uint64_t>>
            sealed_runs;           // recv: written, not yet authenticated
        Nanos progress_at = 0;     // send: last advance of its confirmations (stall rule)
        uint64_t stall_acked = 0;  // send: TCP bytes_acked at the last stall check
        Nanos eof_at = 0;          // kEofWait: when the end of stream was read
        uint64_t bytes = 0;        // payload bytes moved in this incarnation

        void onIoComplete(IoOp* op, int64_t result) override {
            comm->onStreamIo(*this, op, result);
        }
    };
    // Per stream index: recovery state across incarnations.
    struct Lane {
        uint32_t epoch = 0;         // of the current (or last) incarnation
        Nanos lost_at = -1;         // -1: live
        uint64_t bytes_before = 0;  // payload bytes moved by its lost incarnations (stats)
        Nanos up_since = 0;         // when the current incarnation joined; -1 while lost
        int failed_dials = 0;       // backoff level (kept if the stream dies again soon)
        int dials = 0;              // attempts since the loss
        Nanos next_dial = -1;       // send: when to dial next; -1 none
        bool dialing = false;       // send: an attempt is with the rejoiner
        std::string cause;          // why it was lost (logged once, and at rejoin)
    };
    // Engine-side bookkeeping per request.
    struct RequestState {
        uint64_t unassigned = 0;  // send: bytes not yet cut into pieces
        uint64_t total = 0;       // recv: message size once the first frame arrived
        bool total_known = false;
        bool complete = true;
        bool store_wait = false;  // send: counted once in store_full_waits
        ReceivedRanges ranges;    // recv: bytes written into the posted buffer
    };

    bool isSend() const { return params_.role == CommParams::Role::kSend; }
    bool sealed() const { return params_.secrets != nullptr; }
    // Bytes in front of every payload on the wire: the header, sealed or not.
    size_t prefixBytes() const { return sealed() ? kMaxPrefixBytes : wire::kFrameHeaderBytes; }
    // A seal failure: counted, and the comm fails (altered, replayed, reordered or truncated
    // bytes never reach the caller).
    void failSeal(const Stream& s, const Status& st);
    // Seals one header-only frame (goodbye, abort) for a direct write; its length.
    size_t sealControl(Stream& s, wire::FrameType type, uint8_t* out);
    Request& request(uint64_t seq) { return reqs_[seq % kMaxRequests]; }
    RequestState& state(uint64_t seq) { return request_states_[seq % kMaxRequests]; }
    Stream* live(int index) const { return streams_[static_cast<size_t>(index)].get(); }
    int liveCount() const;

    void onStreamIo(Stream& s, IoOp* op, int64_t result);
    void takePosted();
    void fail(Status st);
    void completeRequest(uint64_t seq, uint64_t result);
    // recv, the message train (transport/train.h; docs/protocol.md "Confirmation"): the
    // first frame of message `seq` was read; open one if the rule lets it.
    void openTrain(uint64_t seq, uint64_t total, bool was_parked);
    // recv: payload was read: cut the open train into a sample when its part is due.
    void cutTrain();
    // recv: message `seq` completed: the train's last part, if it is that message's.
    void closeTrain(uint64_t seq, uint64_t result);
    TrainSpoilers trainSpoilers() const;
    uint64_t payloadBytes() const;
    // recv: a sample for the next confirmation (a newer one replaces one not yet sent).
    void reportTrain(const std::optional<TrainSample>& sample);
    // recv: bytes and out-of-order segments the kernel received on the data streams
    // (TCP_INFO tcpi_bytes_received and tcpi_rcv_ooopack, the one sampler of tcp_info.h),
    // nullopt when a stream is gone or unreadable. One getsockopt per data stream: only at a
    // train's ends and cuts.
    std::optional<KernelCount> kernelNow() const;
    std::unique_ptr<Stream> makeStream(int index, uint32_t epoch, Fd fd);
    // Stream `s` (live) failed: recovery, or comm failure when recovery cannot help.
    void loseStream(Stream& s, const std::string& cause);
    void installStream(int index, uint32_t epoch, Fd fd);
    void reapGraveyard();
    void checkOutage(Nanos now);
    void applyFaults(Stream& s, uint64_t bytes);
    void resetForFault(int index);
    bool sendGoodbye(wire::FrameType type);
    void readHeader(Stream& s);
    void submitRecv(Stream& s);
    // send side (comm_send.cc)
    void enqueueInline(uint64_t seq);
    void pump();
    bool placeUnplaced();
    bool safeFor(int index, uint64_t seq) const;
    void startSend(Stream& s);
    void onSendComplete(Stream& s, int64_t result);
    void tryCompletions();
    void onSenderHeader(Stream& s);
    void onConfirmBody(Stream& s);
    void scheduleDial(int index, Nanos now);
    void dialDue(Nanos now);
    void checkStalls(Nanos now);
    // A gate's stop mid-message starts for the receiver's train once the kernel has
    // delivered what the engine wrote (GateStalls): looks, and looks again later.
    void probeGateStop(Nanos now);
    // Splits the gate's pace (FlowGate::paceBps) over the data streams that hold the flow's
    // bytes, in proportion to them, before new bytes are written (told-rate streams only).
    void paceStreams();
    bool admitted();  // engine: may striping continue now? (asks the gate)
    void sampleStats(CommStatsSink& sink, Nanos now_ns);  // engine (comm_stats.cc)
    // recv side (comm_recv.cc)
    void onRecvComplete(Stream& s, int64_t result);
    void onHeader(Stream& s);
    void attach(Stream& s);
    void nextRun(Stream& s);
    void onPayload(Stream& s, uint64_t n);
    void frameDone(Stream& s);
    void creditPartial(Stream& s);
    void checkPeerGone();
    void unparkStreams();
    void noteConfirmable(Nanos now);
    void maybeConfirm(Nanos now);
    uint64_t pendingReceives() const { return engine_seq_ - oldest_; }

    CommParams params_;
    Engine* engine_;
    RecoveryPolicy policy_;
    std::unique_ptr<FlowGate> gate_;  // null: not arbitrated
    // The data streams run a congestion control that sends at SO_MAX_PACING_RATE
    // (kToldRateCongestionControl): only those are paced (paceStreams). Set at construction
    // from the first data stream; rejoined streams get the same socket options.
    bool told_rate_cc_ = false;
    std::vector<uint64_t> unsent_;            // paceStreams' scratch, per stream index
    std::unique_ptr<RecvObserver> observer_;  // null: receives not watched
    bool granted_ = false;                    // engine: holding the gate's grant
    uint64_t granted_bytes_ = 0;              // striped under the current grant
    bool refused_mid_message_ = false;        // engine: the gate's last answer held a message back
    GateStalls gate_stalls_;              // engine: the gate's stops mid-message (limited trains)
    Nanos stop_probe_at_ = -1;            // engine: when probeGateStop() looks again; -1: not
    CommEngineCounters engine_counters_;  // engine: gate waits/grants, for the stats sink
    std::unique_ptr<CommStatsSink> stats_owned_;  // set once by the poster; freed with the comm
    std::atomic<CommStatsSink*> stats_{nullptr};  // the engine's view of stats_owned_
    Nanos stats_interval_ns_ = 0;                 // written before stats_ is published
    Nanos next_sample_ns_ = 0;                    // engine
    Reactor* reactor_ = nullptr;
    std::vector<std::unique_ptr<Stream>> streams_;  // [0] = control; null while lost
    std::vector<std::unique_ptr<Stream>> graveyard_;
    std::vector<Lane> lanes_;
    std::unique_ptr<Striper> striper_;
    std::vector<uint64_t> loads_;            // scratch for the striper
    std::unique_ptr<SendLedger> ledger_;     // send side
    std::unique_ptr<FaultInjector> faults_;  // null: no faults planned (production)
    RecoveryCounters counters_;
    StreamEventLog stream_events_;
    uint64_t rejoin_token_ = 0;

    // Poster side.
    uint64_t post_seq_ = 0;
    std::atomic<uint64_t> posted_seq_{0};
    std::array<Request, kMaxRequests> reqs_;

    // Failure (see the ordering contract above).
    std::atomic<bool> failed_{false};
    Status error_;

    // Engine side.
    std::array<RequestState, kMaxRequests> request_states_;
    uint64_t engine_seq_ = 0;  // requests taken from the poster: [0, engine_seq_)
    uint64_t oldest_ = 0;      // lowest seq not yet complete
    std::array<uint64_t, kMaxRequests> assign_q_{};  // send: seqs waiting for the striper
    uint32_t assign_head_ = 0, assign_size_ = 0;
    uint64_t peer_posted_ = 0;  // send: the receiver's posted count, as last confirmed
    bool peer_closed_ = false;  // the peer said goodbye
    bool closing_ = false;
    Nanos all_lost_since_ = -1;  // -1: some stream is live
    int graveyard_sends_ = 0;    // graveyard streams with a send in flight (ledger held)
    Nanos stall_check_at_ = -1;  // send: next stall check
    bool reap_pending_ = false;  // a lost stream waits in the graveyard for onTimer()
    int overlap_waits_ = 0;      // recv: streams in kWaitOverlap
    // recv: confirmations.
    bool confirm_pending_ = false;
    Nanos confirm_first_ = 0;
    uint64_t confirm_bytes_ = 0;
    uint64_t unparks_ = 0;      // recv: frames attached from a parked stream (a backlog burst)
    MessageTrain train_;        // recv: the path-rate sample being measured
    uint64_t train_bytes_ = 0;  // recv: the latest train for the next confirmation (0: none)
    Nanos train_ns_ = 0;
    uint64_t confirmed_posted_ = 0;
    Stream* confirm_stream_ = nullptr;  // the stream a confirmation is being sent on
    uint8_t confirm_buf_[kMaxPrefixBytes + wire::kMaxConfirmBody]{};
    std::vector<wire::ConfirmEntry> final_confirms_;  // lost incarnations' last counts
    std::vector<wire::ConfirmEntry> confirm_sent_;    // entries of the confirmation in flight
};

}  // namespace atlas::transport
