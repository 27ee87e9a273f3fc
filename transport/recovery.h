// Recovery policy: the rules that decide when the receiver confirms, when a lost stream is
// dialled again, when a silent stream counts as stalled, and when a comm that has lost every
// stream gives up. Pure functions of their inputs (state and `now` in, decisions out): the
// engine obeys them, tests drive them with a manual clock. docs/protocol.md ("Recovery")
// states the same rules and why.
//
// Units: nanoseconds (atlas::Nanos) and bytes.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "atlas/common/clock.h"
#include "transport/train.h"

namespace atlas::transport {

// When the receiver sends the next confirmation. A confirmation frees sender memory and
// reports the posted-receive watermark; nothing waits on it for completion, so it is batched:
// at once when `bytes` have been consumed since the last one, else `delay` after the first
// unconfirmed event (a consumed frame, a newly posted receive). At high rates the byte rule
// fires first, so the delay only ever holds `rate x delay` of small-rate traffic in the
// sender's store; a long delay keeps confirmations off the small-message latency path (at
// most 100 per second per comm). Measured cost in docs/protocol.md.
struct ConfirmCadence {
    Nanos delay_ns = 10 * kNsPerMs;
    uint64_t bytes = 4ull << 20;
    // A message train (docs/protocol.md "Confirmation", transport/train.h) longer than this
    // is cut into samples this long (0: one train per message).
    Nanos train_span_ns = kDefaultTrainSpanNs;

    // Time at which to send; -1: nothing to confirm. `first_pending_ns` is when the oldest
    // unconfirmed event happened.
    Nanos dueAt(bool pending, uint64_t pending_bytes, Nanos first_pending_ns) const {
        if (!pending) {
            return -1;
        }
        if (pending_bytes >= bytes) {
            return first_pending_ns;  // already due
        }
        return first_pending_ns + delay_ns;
    }
};

// Rejoin, stall and outage rules, derived from the comm's measured RTT and ATLAS_TIMEOUT_MS.
struct RecoveryPolicy {
    Nanos rtt_ns = 0;
    Nanos timeout_ns = 30 * kNsPerSec;  // ATLAS_TIMEOUT_MS: longest outage ridden through

    // Delay before dial attempt number `failed` + 1 of one stream (0 = the first, at once).
    // Doubles from 100 ms and stays at 1 s, so a path that returns is found within about a
    // second plus the handshake, for an outage of any length up to the bound.
    static Nanos retryDelay(int failed) {
        if (failed <= 0) {
            return 0;
        }
        Nanos d = 100 * kNsPerMs;
        for (int i = 1; i < failed && d < kNsPerSec; ++i) {
            d *= 2;
        }
        return d < kNsPerSec ? d : kNsPerSec;
    }

    // How long one dial attempt (TCP connect + rejoin handshake, 2 RTT) may take before it is
    // abandoned and redialled: a SYN lost in an outage would otherwise wait for the kernel's
    // 1 s, 3 s, 7 s retransmissions.
    Nanos attemptTimeout() const {
        Nanos t = 4 * rtt_ns + 250 * kNsPerMs;
        if (t > 2 * kNsPerSec) {
            t = 2 * kNsPerSec;
        }
        return t < timeout_ns ? t : timeout_ns;
    }

    // A stream whose oldest unconfirmed frame the receiver has posted, and whose
    // confirmations have not advanced for this long, is declared lost (stalled path or a
    // middlebox that silently dropped the flow): its frames are resent and it is rejoined.
    Nanos stallAfter() const {
        Nanos t = 10 * rtt_ns;
        if (t < 2 * kNsPerSec) {
            t = 2 * kNsPerSec;
        }
        return t < timeout_ns ? t : timeout_ns;
    }

    // With no live stream since `all_lost_since`, the comm fails at this time.
    Nanos giveUpAt(Nanos all_lost_since) const { return all_lost_since + timeout_ns; }
};

// One stream-level event of a comm, for NCCL's profiler (plugin/requests.h): a stream was
// lost, or a lost stream rejoined. `stream` is the transport's index (0 = control stream,
// 1..n = data streams); `epoch` the incarnation that was lost / that joined; `frames`, for a
// loss at the sender, the unconfirmed frames it will resend on the other streams (0 else).
struct StreamEvent {
    enum Kind : uint8_t { kLost = 1, kRejoined = 2 };
    int32_t stream = 0;
    Kind kind = kLost;
    uint32_t epoch = 0;
    uint64_t frames = 0;
};

// A comm's stream events on their way from its owner engine (the one producer) to the thread
// NCCL drives the comm with (the one consumer). Bounded and lossy: events are diagnostics,
// never flow control, so a full log drops the new event and counts it; nothing waits.
class StreamEventLog {
  public:
    static constexpr size_t kCapacity = 64;

    // Producer (engine thread).
    void push(const StreamEvent& e) noexcept {
        const uint64_t head = head_.load(std::memory_order_relaxed);
        if (head - tail_.load(std::memory_order_acquire) >= kCapacity) {
            dropped_.fetch_add(1, std::memory_order_relaxed);
            return;
        }
        ring_[head % kCapacity] = e;
        head_.store(head + 1, std::memory_order_release);
    }
    // Consumer: moves up to `max` events, oldest first, into out; returns how many.
    size_t drain(StreamEvent* out, size_t max) noexcept {
        const uint64_t tail = tail_.load(std::memory_order_relaxed);
        const uint64_t head = head_.load(std::memory_order_acquire);
        size_t n = static_cast<size_t>(head - tail);
        n = n < max ? n : max;
        for (size_t i = 0; i < n; ++i) {
            out[i] = ring_[(tail + i) % kCapacity];
        }
        tail_.store(tail + n, std::memory_order_release);
        return n;
    }
    // Consumer: whether drain() would return nothing (one acquire load; the data-path check).
    bool empty() const noexcept {
        return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_relaxed);
    }
    uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

  private:
    std::array<StreamEvent, kCapacity> ring_{};
    alignas(64) std::atomic<uint64_t> head_{0};
    alignas(64) std::atomic<uint64_t> tail_{0};
    std::atomic<uint64_t> dropped_{0};
};

// What recovery did, per comm. Written by the owner engine thread with relaxed atomic
// stores, readable from any thread at any time (metrics, tests, logs); each field is
// individually consistent, fields are not a snapshot of one instant.
struct RecoveryCounters {
    std::atomic<uint64_t> payload_bytes{0};    // send: accepted by the kernel, resends included;
                                               // recv: written into posted buffers
    std::atomic<uint64_t> stream_resets{0};    // streams declared lost (error, EOF, stall, fault)
    std::atomic<uint64_t> rejoins{0};          // lost streams re-established
    std::atomic<uint64_t> rejoin_failures{0};  // dial attempts that failed (sender)
    std::atomic<uint64_t> outages{0};          // times every stream was lost at once
    std::atomic<uint64_t> resent_frames{0};    // sender: frames sent again on another stream
    std::atomic<uint64_t> resent_bytes{0};
    std::atomic<uint64_t> duplicate_frames{0};  // receiver: resent frames already delivered
    std::atomic<uint64_t> duplicate_bytes{0};   // dropped, never written into the posted buffer
    std::atomic<uint64_t> seal_failures{0};     // frames that failed authentication (AEAD)
    std::atomic<uint64_t> confirms{0};          // confirmations sent (receiver) / applied (sender)
    std::atomic<uint64_t> confirm_lag_last_ns{0};  // sender: kernel acceptance -> confirmation
    std::atomic<uint64_t> confirm_lag_max_ns{0};
    std::atomic<uint64_t> store_bytes{0};  // sender: retransmit store held now
    std::atomic<uint64_t> store_peak_bytes{0};
    std::atomic<uint64_t> store_full_waits{0};  // sends held incomplete because the store was full

    static void add(std::atomic<uint64_t>& c, uint64_t v) {
        c.store(c.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
    }
    static void set(std::atomic<uint64_t>& c, uint64_t v) { c.store(v, std::memory_order_relaxed); }
    static void raise(std::atomic<uint64_t>& c, uint64_t v) {
        if (v > c.load(std::memory_order_relaxed)) {
            c.store(v, std::memory_order_relaxed);
        }
    }
};

}  // namespace atlas::transport
