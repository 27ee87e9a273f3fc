// The striper: which data stream carries the next piece of a message, and how big it is.
// A pure policy (no sockets), so it is unit-tested and benchmarked on its own; the engine
// feeds it each stream's queued bytes and obeys its answer.
//
// kLoadAware (Atlas default): pieces of chunk_bytes; each goes to the stream with the fewest
// queued (assigned but not yet accepted by the kernel) bytes, and only while that stream is
// below `max_queued_per_stream`. With TCP_NOTSENT_LOWAT the kernel accepts data only as fast
// as a stream drains, so queued bytes track each stream's real rate: fast streams take more
// pieces, a slow stream never gates a message. Returns "none" when every stream is full; the
// engine asks again when a send completes.
//
// kEven (NCCL socket baseline): each message is split into pieces of
// max(min_piece, ceil(size / nstreams)) assigned round-robin from a cursor that persists
// across messages, regardless of load, so the slowest stream gates every message.
// Pieces never exceed wire::kMaxFrameLength.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "transport/net.h"

namespace atlas::transport {

struct StripeAssignment {
    int stream = 0;
    uint64_t length = 0;
};

class Striper {
  public:
    // `max_piece`: no piece is longer (wire::kMaxFrameLength at most; sealed frames use less,
    // they pass through a staging buffer).
    Striper(StripeMode mode, int nstreams, uint64_t chunk_bytes, uint64_t max_queued_per_stream,
            uint64_t even_min_piece = 64 * 1024, uint64_t max_piece = 1ull << 30);

    // Next piece of a message of `total` bytes of which `remaining` (> 0) are unassigned.
    // `queued[i]` is stream i's queued bytes (the engine passes UINT64_MAX for a stream whose
    // queue cannot take another piece). kEven ignores loads and always answers.
    std::optional<StripeAssignment> next(uint64_t total, uint64_t remaining,
                                         std::span<const uint64_t> queued) noexcept;

    StripeMode mode() const { return mode_; }
    int nstreams() const { return nstreams_; }

  private:
    StripeMode mode_;
    int nstreams_;
    uint64_t chunk_;
    uint64_t max_queued_;
    uint64_t even_min_piece_;
    uint64_t max_piece_;
    int cursor_ = 0;  // kEven: round-robin position, persists across messages (as NCCL's)
};

}  // namespace atlas::transport
