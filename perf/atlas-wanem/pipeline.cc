#include "perf/atlas-wanem/pipeline.h"

#include <cstring>
#include <utility>

#include "perf/atlas-wanem/flow_hash.h"
#include "perf/atlas-wanem/gso_split.h"

namespace atlas::wanem {
namespace {
// The largest frame TUN hands out with gso_max_size 65536, plus the vnet header.
constexpr uint32_t kMaxFrame = 65536 + 256;
}  // namespace

DirectionPipeline::DirectionPipeline(PipelineConfig config)
    : config_(std::move(config)),
      rate_step_due_ns_(config_.rate_step_at_ns),
      rng_(config_.rng_seed) {}

Result<std::unique_ptr<DirectionPipeline>> DirectionPipeline::create(PipelineConfig config) {
    if (config.paths.empty()) {
        return Status(Code::kInvalidArgument, "a direction needs at least one path");
    }
    if (config.ring_bytes.size() != config.paths.size()) {
        return Status(Code::kInvalidArgument, "ring_bytes needs one entry per path");
    }
    if (config.loss < 0 || config.loss > 1) {
        return Status(Code::kInvalidArgument, "loss must be in [0, 1]");
    }
    std::unique_ptr<DirectionPipeline> pipe(new DirectionPipeline(std::move(config)));
    const PipelineConfig& cfg = pipe->config_;
    for (size_t i = 0; i < cfg.paths.size(); ++i) {
        if (cfg.ring_bytes[i] < 2 * PacketRing::recordBytes(kMaxFrame)) {
            return Status(Code::kInvalidArgument,
                          "ring of path " + std::to_string(i) + " cannot hold two maximal frames");
        }
        auto ring = PacketRing::create(cfg.ring_bytes[i]);
        if (!ring) {
            return ring.status();
        }
        pipe->counters_.paths.push_back(std::make_unique<PathCounters>());
        pipe->paths_.push_back(Path{LinkModel(cfg.paths[i]), std::move(ring.value()),
                                    pipe->counters_.paths.back().get()});
    }
    return pipe;
}

double DirectionPipeline::jitterSample() {
    return rng_.uniform() * 2.0 - 1.0;
}

void DirectionPipeline::ingest(Nanos now_ns, std::span<const uint8_t> frame) {
    if (now_ns >= rate_step_due_ns_) {
        for (Path& path : paths_) {
            path.model.setRate(config_.rate_step_bps);
        }
        rate_step_due_ns_ = kNever;  // once
        counters_.rate_steps.add(1);
    }
    auto parsed = parseFrame(frame);
    if (!parsed) {
        counters_.malformed_frames.add(1);
        return;
    }
    const PacketInfo& info = parsed.value();
    if (info.kind == PacketKind::kOpaque) {
        counters_.opaque_frames.add(1);
    }
    Path& path =
        paths_[pathForPacket(info, static_cast<uint32_t>(paths_.size()), config_.hash_seed)];
    PathCounters& c = *path.counters;
    c.rx_frames.add(1);
    c.rx_segments.add(info.segments);
    c.rx_bytes.add(frame.size() - kVnetHdrLen);
    if (info.kind == PacketKind::kTcpGso && info.segments > 1) {
        ingestGso(path, now_ns, frame, info);
    } else {
        ingestUnit(path, now_ns, frame, info);
    }
}

void DirectionPipeline::ingestUnit(Path& path, Nanos now_ns, std::span<const uint8_t> frame,
                                   const PacketInfo& info) {
    PathCounters& c = *path.counters;
    const uint64_t bytes = frame.size() - kVnetHdrLen;
    if (rng_.bernoulli(config_.loss)) {
        c.loss_segments.add(info.segments);
        c.loss_bytes.add(bytes);
        return;
    }
    const uint64_t wire = bytes + config_.l2_overhead_bytes;
    const auto departed = path.model.admit(now_ns, static_cast<uint32_t>(wire));
    if (!departed) {
        c.queue_segments.add(info.segments);
        c.queue_bytes.add(bytes);
        return;
    }
    c.wire_bytes.add(wire);
    c.queue_max_bytes.set(path.model.maxBacklogBytes());
    c.queue_max_delay_ns.set(static_cast<uint64_t>(path.model.maxQueueDelayNs()));
    enqueue(path, path.model.deliveryTime(*departed, jitterSample()), frame, info.segments);
}

void DirectionPipeline::ingestGso(Path& path, Nanos now_ns, std::span<const uint8_t> frame,
                                  const PacketInfo& info) {
    PathCounters& c = *path.counters;
    const uint32_t n = info.segments;
    verdicts_.resize(n);
    departed_ns_.resize(n);
    bool any_drop = false;
    uint64_t wire_total = 0;
    for (uint32_t i = 0; i < n; ++i) {
        const uint32_t ip_bytes = info.segmentIpBytes(i);
        if (rng_.bernoulli(config_.loss)) {
            verdicts_[i] = kLoss;
            c.loss_segments.add(1);
            c.loss_bytes.add(ip_bytes);
            any_drop = true;
            continue;
        }
        const uint32_t wire = ip_bytes + config_.l2_overhead_bytes;
        const auto departed = path.model.admit(now_ns, wire);
        if (!departed) {
            verdicts_[i] = kQueue;
            c.queue_segments.add(1);
            c.queue_bytes.add(ip_bytes);
            any_drop = true;
            continue;
        }
        verdicts_[i] = kKeep;
        departed_ns_[i] = *departed;
        wire_total += wire;
    }
    c.wire_bytes.add(wire_total);
    c.queue_max_bytes.set(path.model.maxBacklogBytes());
    c.queue_max_delay_ns.set(static_cast<uint64_t>(path.model.maxQueueDelayNs()));

    const bool per_segment =
        config_.split == SplitMode::kSegments && (config_.loss > 0 || any_drop);
    if (!any_drop && !per_segment) {
        enqueue(path, path.model.deliveryTime(departed_ns_[n - 1], jitterSample()), frame, n);
        return;
    }
    bool counted_split = false;
    for (uint32_t i = 0; i < n;) {
        if (verdicts_[i] != kKeep) {
            ++i;
            continue;
        }
        uint32_t j = i + 1;
        while (j < n && verdicts_[j] == kKeep && !per_segment) {
            ++j;
        }
        const uint32_t count = j - i;
        const size_t len = runFrameLen(info, i, count);
        uint8_t* dst = path.ring.reserve(static_cast<uint32_t>(len));
        if (dst == nullptr) {
            c.ring_segments.add(count);
            c.ring_bytes.add(len - kVnetHdrLen);
        } else {
            buildRunFrame(frame, info, i, count, {dst, len});
            path.ring.commit(path.model.deliveryTime(departed_ns_[j - 1], jitterSample()),
                             static_cast<uint32_t>(len), count);
            if (!counted_split) {
                c.split_frames.add(1);
                counted_split = true;
            }
        }
        i = j;
    }
    c.in_flight_bytes.set(path.ring.usedBytes());
    c.ring_max_bytes.max(path.ring.usedBytes());
}

void DirectionPipeline::enqueue(Path& path, Nanos deliver_ns, std::span<const uint8_t> frame,
                                uint32_t segments) {
    PathCounters& c = *path.counters;
    uint8_t* dst = path.ring.reserve(static_cast<uint32_t>(frame.size()));
    if (dst == nullptr) {
        c.ring_segments.add(segments);
        c.ring_bytes.add(frame.size() - kVnetHdrLen);
        return;
    }
    std::memcpy(dst, frame.data(), frame.size());
    path.ring.commit(deliver_ns, static_cast<uint32_t>(frame.size()), segments);
    c.in_flight_bytes.set(path.ring.usedBytes());
    c.ring_max_bytes.max(path.ring.usedBytes());
}

Nanos DirectionPipeline::nextDeliveryNs() const {
    Nanos next = kNever;
    for (const Path& p : paths_) {
        if (!p.ring.empty() && p.ring.headDeliverNs() < next) {
            next = p.ring.headDeliverNs();
        }
    }
    return next;
}

int DirectionPipeline::dueFrontPath(Nanos now_ns) const {
    int best = -1;
    Nanos best_t = now_ns;
    for (size_t i = 0; i < paths_.size(); ++i) {
        const PacketRing& r = paths_[i].ring;
        if (!r.empty() && r.headDeliverNs() <= best_t) {
            // Ties keep the lower path index; strictly earlier heads win.
            if (best < 0 || r.headDeliverNs() < best_t) {
                best = static_cast<int>(i);
                best_t = r.headDeliverNs();
            }
        }
    }
    return best;
}

void DirectionPipeline::finishHead(int path, bool written) {
    Path& p = paths_[static_cast<size_t>(path)];
    PathCounters& c = *p.counters;
    const uint32_t segments = p.ring.headSegments();
    const uint64_t bytes = p.ring.headFrame().size() - kVnetHdrLen;
    if (written) {
        c.tx_frames.add(1);
        c.tx_segments.add(segments);
        c.tx_bytes.add(bytes);
    } else {
        c.write_error_frames.add(1);
        c.write_error_segments.add(segments);
    }
    p.ring.pop();
    c.in_flight_bytes.set(p.ring.usedBytes());
}

}  // namespace atlas::wanem
