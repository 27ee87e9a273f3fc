// One direction of an emulated link (for example A -> B), without any I/O: frames read from
// the input TUN go in through ingest(), frames whose delivery time has come go out through
// deliverDue(). The caller (atlas-wanem's direction thread) owns the file descriptors and
// the clock; unit tests drive the same object with synthetic frames and explicit times.
//
// Per frame: parse -> pick the path by flow hash -> per wire segment: Bernoulli loss, then the
// path's bottleneck (LinkModel) -> frames of surviving segments are queued on the path's
// PacketRing with their delivery time. GSO packets are cut (gso_split.h) only where a segment
// was dropped, or at every segment with SplitMode::kSegments while loss > 0.
//
// Threads: ingest/deliverDue/nextDeliveryNs belong to one owner thread. counters() may be
// read from any thread at any time (relaxed atomics; a snapshot is not a consistent cut).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"
#include "perf/atlas-wanem/link_model.h"
#include "perf/atlas-wanem/packet.h"
#include "perf/atlas-wanem/packet_ring.h"

namespace atlas::wanem {

enum class SplitMode : uint8_t {
    kRuns,      // cut GSO packets only at dropped segments; survivors stay GSO runs
    kSegments,  // while loss > 0, or after any drop, deliver every segment as its own frame
};

struct PipelineConfig {
    std::vector<LinkParams> paths;   // one entry per path (>= 1)
    std::vector<size_t> ring_bytes;  // delay-line capacity per path
    double loss = 0;                 // Bernoulli drop probability per wire segment
    SplitMode split = SplitMode::kRuns;
    uint32_t l2_overhead_bytes = 0;  // added to every segment's wire bytes (e.g. 38 for Ethernet)
    uint32_t hash_seed = 0;          // flow -> path assignment
    uint64_t rng_seed = 1;           // loss and jitter
    // A rate change: the first frame at or after rate_step_at_ns (monotonic; INT64_MAX: none)
    // sets every path's rate to rate_step_bps (0: no cap).
    Nanos rate_step_at_ns = INT64_MAX;
    double rate_step_bps = 0;
};

// A counter with a single writer and any number of readers.
class Counter {
  public:
    void add(uint64_t v) {
        v_.store(v_.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
    }
    void max(uint64_t v) {
        if (v > v_.load(std::memory_order_relaxed)) {
            v_.store(v, std::memory_order_relaxed);
        }
    }
    void set(uint64_t v) { v_.store(v, std::memory_order_relaxed); }
    uint64_t get() const { return v_.load(std::memory_order_relaxed); }

  private:
    std::atomic<uint64_t> v_{0};
};

// "bytes" are IP bytes (vnet headers excluded); "segments" are wire segments (a GSO frame of
// 44 MSS-sized segments counts 44); "wire_bytes" repeat the L3+L4 header per segment and
// add the configured L2 overhead, which is what the rate cap counts.
struct PathCounters {
    Counter rx_frames, rx_segments, rx_bytes;
    Counter tx_frames, tx_segments, tx_bytes;
    Counter wire_bytes;                                // admitted to the bottleneck
    Counter loss_segments, loss_bytes;                 // random loss
    Counter queue_segments, queue_bytes;               // drop-tail at the bottleneck
    Counter ring_segments, ring_bytes;                 // delay line full (emulator overload)
    Counter write_error_frames, write_error_segments;  // the output TUN refused the frame
    Counter split_frames;                              // GSO frames cut into several frames
    Counter queue_max_bytes;                           // deepest bottleneck backlog seen
    Counter queue_max_delay_ns;                        // longest bottleneck wait seen
    Counter ring_max_bytes;                            // fullest the delay line got
    Counter in_flight_bytes;                           // delay-line bytes now
};

struct DirectionCounters {
    Counter malformed_frames;  // shorter than a vnet header: dropped
    Counter opaque_frames;     // not parsed as IP/TCP: forwarded as one unit
    Counter read_errors;       // failed reads of the input TUN (kept by the I/O loop)
    Counter rate_steps;        // 1 once the configured rate change took effect
    std::vector<std::unique_ptr<PathCounters>> paths;
};

class DirectionPipeline {
  public:
    static constexpr Nanos kNever = INT64_MAX;

    static Result<std::unique_ptr<DirectionPipeline>> create(PipelineConfig config);

    // Handles one frame that arrived at `now_ns`. Never fails: problems become counters.
    void ingest(Nanos now_ns, std::span<const uint8_t> frame);

    // Earliest delivery time of any queued frame, or kNever.
    Nanos nextDeliveryNs() const;

    // Hands each frame due at `now_ns` to `sink(std::span<const uint8_t>) -> bool`, in
    // delivery order across paths, at most `max_frames`. `sink` returns false when the write
    // failed (counted, frame discarded). Returns the number of frames handed out.
    template <typename Sink>
    size_t deliverDue(Nanos now_ns, size_t max_frames, Sink&& sink) {
        size_t n = 0;
        while (n < max_frames) {
            const int p = dueFrontPath(now_ns);
            if (p < 0) {
                break;
            }
            PacketRing& ring = paths_[p].ring;
            const bool ok = sink(ring.headFrame());
            finishHead(p, ok);
            ++n;
        }
        return n;
    }

    // For the I/O loop, which owns the input fd: one failed read of the input device.
    void noteReadError() { counters_.read_errors.add(1); }

    const DirectionCounters& counters() const { return counters_; }
    const PipelineConfig& config() const { return config_; }

  private:
    struct Path {
        LinkModel model;
        PacketRing ring;
        PathCounters* counters;
    };
    enum Verdict : uint8_t { kKeep, kLoss, kQueue };

    explicit DirectionPipeline(PipelineConfig config);
    int dueFrontPath(Nanos now_ns) const;
    void finishHead(int path, bool written);
    void enqueue(Path& path, Nanos deliver_ns, std::span<const uint8_t> frame, uint32_t segments);
    void ingestUnit(Path& path, Nanos now_ns, std::span<const uint8_t> frame,
                    const PacketInfo& info);
    void ingestGso(Path& path, Nanos now_ns, std::span<const uint8_t> frame,
                   const PacketInfo& info);
    double jitterSample();

    PipelineConfig config_;  // read by counters' readers too: not changed after create()
    Nanos rate_step_due_ns_ = kNever;
    std::vector<Path> paths_;
    DirectionCounters counters_;
    Rng rng_;
    std::vector<Verdict> verdicts_;    // per segment of the frame being ingested
    std::vector<double> departed_ns_;  // per segment: when it left the bottleneck
};

}  // namespace atlas::wanem
