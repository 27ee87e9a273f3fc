// SendLedger: the sender's record of every frame until the receiver confirms it, and the
// bounded retransmit store that lets a send complete locally before it is confirmed.
//
// Lifecycle of a frame (docs/protocol.md, "Confirmation and resend"):
//   add()       a piece of a posted message; its payload is read from the caller's buffer;
//   assign()    queued on a stream: appended to that stream's log, which keeps frames in the
//               order they go on the wire (frame index 0, 1, ... per stream incarnation);
//   startOp() / finishOp()   handed to the kernel / accepted by it;
//   confirm()   the receiver consumed the stream's frames below an index: those are forgotten;
//   lose()      the stream failed: every frame in its log goes to the resend list, and is
//               assign()ed again (to a surviving or rejoined stream) from there.
// A message completes locally (secure()) once each of its pieces was accepted by the kernel
// at least once and each unconfirmed piece is copied into the store: the caller's buffer is
// then free for reuse (NCCL reuses a request as soon as test() says done) while the copy serves
// any resend. Copies are made only at that moment and only of what is still unconfirmed, so
// on a short path (confirmations beat completion) nothing is copied at all. The store holds at
// most `store_limit` bytes: when a message's unconfirmed pieces do not fit, secure() refuses
// and the send stays incomplete until confirmations free room (back-pressure, never growth).
//
// Pure bookkeeping (no sockets, no threads, no clock reads): owned and driven by one comm's
// engine thread; unit-tested on its own.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"
#include "transport/net.h"
#include "transport/wire.h"

namespace atlas::transport {

class SendLedger {
  public:
    using Id = uint32_t;
    static constexpr Id kNone = ~Id{0};

    struct Frame {
        uint64_t seq = 0;
        uint64_t total = 0;
        uint64_t offset = 0;
        uint32_t length = 0;
        const uint8_t* src = nullptr;  // payload: the caller's buffer, then `copy`
        std::unique_ptr<uint8_t[]> copy;
        size_t copy_cap = 0;
        Nanos accepted_at = 0;  // first acceptance by the kernel (confirmation lag)
        int stream = -1;        // stream whose log holds it; -1 in the resend list
        uint32_t entry = 0;     // its message's entry: the request index
        bool accepted_once = false;
        bool in_op = false;     // part of a send the kernel is still taking
        bool in_entry = false;  // its message has not completed locally
        bool in_log = false;    // in a stream log or the resend list: not yet confirmed
        bool resent = false;
        Id next_in_entry = kNone;
        uint8_t header[wire::kFrameHeaderBytes]{};
    };

    struct ConfirmResult {
        uint64_t frames = 0;  // newly confirmed
        uint64_t bytes = 0;
        Nanos max_lag_ns = 0;  // acceptance -> confirmation of the oldest of them
    };

    // `nstreams`: streams of the comm (control included). `chunk_bytes`: the striping unit
    // (store buffers of that size are recycled).
    SendLedger(int nstreams, uint64_t store_limit, uint64_t chunk_bytes);
    SendLedger(const SendLedger&) = delete;
    SendLedger& operator=(const SendLedger&) = delete;

    // A new piece of message `seq` (request index `index`), payload at `src` (caller's buffer).
    Id add(uint32_t index, uint64_t seq, uint64_t total, uint64_t offset, uint32_t length,
           const uint8_t* src);
    // References stay valid until the frame is forgotten (confirmed and its message complete).
    Frame& frame(Id id) { return frames_[id]; }
    const Frame& frame(Id id) const { return frames_[id]; }

    // Appends a frame (new, or taken from the resend list) to `stream`'s log, unsent.
    void assign(Id id, int stream);

    // ---- per stream ----
    // Frames of the stream's log not yet handed to the kernel, and the i-th of them.
    size_t unsent(int stream) const;
    Id unsentAt(int stream, size_t i) const;
    // The first `n` unsent frames were handed to the kernel in one send.
    void startOp(int stream, size_t n);
    // That send completed: the kernel accepted them.
    void finishOp(int stream, Nanos now);
    // Payload bytes assigned to the stream and not yet accepted by the kernel (striper load).
    uint64_t queuedBytes(int stream) const { return logs_[stream].queued_bytes; }
    // Frames handed to the kernel on this incarnation (the most a confirmation may cover).
    uint64_t handedFrames(int stream) const;
    // Applies "the receiver consumed frames [0, upto) of this stream's current incarnation".
    // Fails (a malformed or hostile confirmation) when upto exceeds what was handed over.
    Status confirm(int stream, uint64_t upto, Nanos now, ConfirmResult* out);
    // The stream failed: its whole log moves to the resend list (ordered by seq, offset), and
    // its next incarnation starts at frame index 0. Returns the frames moved.
    size_t lose(int stream);
    // An upper bound of the highest seq among the stream's unconfirmed frames (-1: its log is
    // empty). The comm places a frame of message m on a stream only when m >= this, or this
    // is below the receiver's posted watermark: the receiver then never parks, in front of
    // that frame, on a message it will only post once m completes.
    int64_t topSeq(int stream) const { return logs_[static_cast<size_t>(stream)].top_seq; }
    // Frames handed to the kernel on this incarnation and not yet confirmed.
    size_t handedUnconfirmed(int stream) const {
        const Log& l = logs_[static_cast<size_t>(stream)];
        return l.accepted + l.in_op;
    }
    // Seq of the oldest frame the kernel has taken and the receiver not confirmed (-1: none).
    int64_t oldestHandedUnconfirmedSeq(int stream) const;

    // ---- resend list (frames waiting for a stream: resends, and frames no stream could take) ----
    // Puts a frame that is in no stream's log on the list, in (seq, offset) order.
    void unplace(Id id);
    bool hasResend() const { return !resend_.empty(); }
    Id resendFront() const { return resend_.back(); }
    void popResend() { resend_.pop_back(); }
    size_t resendCount() const { return resend_.size(); }

    // ---- entries (one per request index) ----
    // Every piece of the entry's message was accepted by the kernel at least once (`pieces`:
    // how many were added).
    bool allAccepted(uint32_t index) const {
        return entries_[index].accepted == entries_[index].pieces;
    }
    // Completes the entry's message locally if possible: false while a piece is inside a
    // send, or (counted in *store_full) when its unconfirmed pieces do not fit in the store.
    // On true the caller's buffer is no longer referenced.
    bool secure(uint32_t index, bool* store_full);

    // While held (a dead stream's send may still read frame memory), frames and copies that
    // are released are parked instead of freed; unhold() frees them.
    void hold() { ++holds_; }
    void unhold();

    uint64_t storeBytes() const { return store_bytes_; }
    uint64_t storeLimit() const { return store_limit_; }
    uint64_t unconfirmedBytes() const { return unconfirmed_bytes_; }
    size_t liveFrames() const { return frames_.size() - free_.size() - parked_.size(); }

  private:
    struct Log {
        std::deque<Id> ids;      // front = oldest unconfirmed
        size_t accepted = 0;     // ids[0, accepted): taken by the kernel
        size_t in_op = 0;        // ids[accepted, accepted + in_op): inside the current send
        uint64_t base = 0;       // frame index of ids[0] in this incarnation
        uint64_t confirmed = 0;  // the receiver's highest "consumed below" for this incarnation
        uint64_t queued_bytes = 0;
        int64_t top_seq = -1;
    };
    struct Entry {
        Id head = kNone;
        uint32_t pieces = 0;
        uint32_t accepted = 0;
    };

    void popConfirmed(int stream, Nanos now, ConfirmResult* out);
    void release(Id id);  // forget a frame (confirmed and its message complete)
    std::unique_ptr<uint8_t[]> takeBuffer(size_t len, size_t* cap);
    void giveBuffer(std::unique_ptr<uint8_t[]> buf, size_t cap);

    // A deque: frames never move, so the iovecs of a send in flight may point into them.
    std::deque<Frame> frames_;
    std::vector<Id> free_;
    std::vector<Id> parked_;
    std::vector<Log> logs_;
    std::array<Entry, kMaxRequests> entries_{};
    std::vector<Id> resend_;  // sorted by (seq, offset) descending: back() is the oldest
    uint64_t store_limit_;
    uint64_t chunk_bytes_;
    uint64_t store_bytes_ = 0;
    uint64_t unconfirmed_bytes_ = 0;
    int holds_ = 0;
    // Recycled store buffers of chunk_bytes_ capacity (at most kCachedBuffers).
    std::vector<std::unique_ptr<uint8_t[]>> cache_;
    static constexpr size_t kCachedBuffers = 16;
};

}  // namespace atlas::transport
