#include "transport/striper.h"

#include <algorithm>

#include "transport/wire.h"

namespace atlas::transport {

Striper::Striper(StripeMode mode, int nstreams, uint64_t chunk_bytes,
                 uint64_t max_queued_per_stream, uint64_t even_min_piece, uint64_t max_piece)
    : mode_(mode),
      nstreams_(std::max(1, nstreams)),
      chunk_(std::max<uint64_t>(1, chunk_bytes)),
      max_queued_(std::max<uint64_t>(1, max_queued_per_stream)),
      even_min_piece_(std::max<uint64_t>(1, even_min_piece)),
      max_piece_(std::clamp<uint64_t>(max_piece, 1, wire::kMaxFrameLength)) {}

std::optional<StripeAssignment> Striper::next(uint64_t total, uint64_t remaining,
                                              std::span<const uint64_t> queued) noexcept {
    if (remaining == 0) {
        return std::nullopt;
    }
    if (mode_ == StripeMode::kEven) {
        const uint64_t per_stream = (total + nstreams_ - 1) / nstreams_;
        const uint64_t piece = std::min(std::max(even_min_piece_, per_stream), max_piece_);
        StripeAssignment a{cursor_, std::min(piece, remaining)};
        cursor_ = (cursor_ + 1) % nstreams_;
        return a;
    }
    // Least-loaded stream; ties go to the lowest index. A burst (a pipeline's activation, a
    // few chunks) then lands on the same first streams every time, whose congestion windows
    // stay open; spreading ties round-robin over many streams left every stream cold, and each
    // 512 KiB piece spent ~6 round trips in slow start (a 2.5 MiB message over 22 streams of a
    // 50 ms path took ~300 ms instead of ~21 ms; docs/protocol.md "Striping"). Within one burst
    // the loads rise as pieces are placed, so pieces still spread over streams.
    int best = -1;
    uint64_t best_load = 0;
    const int n = std::min<int>(nstreams_, static_cast<int>(queued.size()));
    for (int i = 0; i < n; ++i) {
        if (queued[i] >= max_queued_) {
            continue;
        }
        if (best < 0 || queued[i] < best_load) {
            best = i;
            best_load = queued[i];
        }
    }
    if (best < 0) {
        return std::nullopt;
    }
    return StripeAssignment{best, std::min({chunk_, remaining, max_piece_})};
}

}  // namespace atlas::transport
