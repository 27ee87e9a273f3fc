#include "perf/atlas-wanem/stats.h"

#include <algorithm>

namespace atlas::wanem {
namespace {

using nlohmann::json;

struct Totals {
    uint64_t rx_frames = 0, rx_segments = 0, rx_bytes = 0;
    uint64_t tx_frames = 0, tx_segments = 0, tx_bytes = 0, wire_bytes = 0;
    uint64_t loss_segments = 0, loss_bytes = 0, queue_segments = 0, queue_bytes = 0;
    uint64_t ring_segments = 0, ring_bytes = 0, werr_frames = 0, werr_segments = 0;
    uint64_t split_frames = 0, queue_max_bytes = 0, queue_max_delay_ns = 0;
    uint64_t in_flight_bytes = 0, ring_max_bytes = 0;

    void add(const PathCounters& c) {
        rx_frames += c.rx_frames.get();
        rx_segments += c.rx_segments.get();
        rx_bytes += c.rx_bytes.get();
        tx_frames += c.tx_frames.get();
        tx_segments += c.tx_segments.get();
        tx_bytes += c.tx_bytes.get();
        wire_bytes += c.wire_bytes.get();
        loss_segments += c.loss_segments.get();
        loss_bytes += c.loss_bytes.get();
        queue_segments += c.queue_segments.get();
        queue_bytes += c.queue_bytes.get();
        ring_segments += c.ring_segments.get();
        ring_bytes += c.ring_bytes.get();
        werr_frames += c.write_error_frames.get();
        werr_segments += c.write_error_segments.get();
        split_frames += c.split_frames.get();
        queue_max_bytes = std::max(queue_max_bytes, c.queue_max_bytes.get());
        queue_max_delay_ns = std::max(queue_max_delay_ns, c.queue_max_delay_ns.get());
        in_flight_bytes += c.in_flight_bytes.get();
        ring_max_bytes = std::max(ring_max_bytes, c.ring_max_bytes.get());
    }

    json toJson() const {
        return {
            {"rx", {{"frames", rx_frames}, {"segments", rx_segments}, {"bytes", rx_bytes}}},
            {"tx", {{"frames", tx_frames}, {"segments", tx_segments}, {"bytes", tx_bytes}}},
            {"wire_bytes", wire_bytes},
            {"drops",
             {{"loss", {{"segments", loss_segments}, {"bytes", loss_bytes}}},
              {"queue", {{"segments", queue_segments}, {"bytes", queue_bytes}}},
              {"ring_full", {{"segments", ring_segments}, {"bytes", ring_bytes}}},
              {"write_error", {{"frames", werr_frames}, {"segments", werr_segments}}}}},
            {"split_frames", split_frames},
            {"queue_max_bytes", queue_max_bytes},
            {"queue_max_ms", static_cast<double>(queue_max_delay_ns) / 1e6},
            {"in_flight_bytes", in_flight_bytes},
            {"ring_max_bytes", ring_max_bytes},
        };
    }
};

}  // namespace

json directionJson(const DirectionPipeline& dir) {
    const DirectionCounters& dc = dir.counters();
    const PipelineConfig& cfg = dir.config();
    Totals all;
    json paths = json::array();
    for (size_t i = 0; i < dc.paths.size(); ++i) {
        Totals t;
        t.add(*dc.paths[i]);
        all.add(*dc.paths[i]);
        json p = t.toJson();
        const LinkParams& lp = cfg.paths[i];
        p["path"] = i;
        p["rate_mbit"] = lp.rate_bps / 1e6;
        p["delay_ms"] = static_cast<double>(lp.delay_ns) / 1e6;
        p["jitter_ms"] = static_cast<double>(lp.jitter_ns) / 1e6;
        p["buffer_bytes"] = lp.buffer_bytes;
        p["ring_capacity_bytes"] = cfg.ring_bytes[i];
        paths.push_back(std::move(p));
    }
    json j = all.toJson();
    j["drops"]["malformed"] = {{"frames", dc.malformed_frames.get()}};
    j["opaque_frames"] = dc.opaque_frames.get();
    j["read_errors"] = dc.read_errors.get();
    if (cfg.rate_step_at_ns != DirectionPipeline::kNever) {
        j["rate_step"] = {{"mbit", cfg.rate_step_bps / 1e6}, {"applied", dc.rate_steps.get()}};
    }
    j["loss_probability"] = cfg.loss;
    j["paths"] = std::move(paths);
    return j;
}

json statsJson(const StatsHeader& header, const Options& o,
               const std::array<const DirectionPipeline*, 2>& dirs) {
    json j;
    j["tool"] = "atlas-wanem";
    j["seq"] = header.seq;
    j["final"] = header.final;
    j["pid"] = header.pid;
    j["uptime_s"] = header.uptime_s;
    j["seed"] = header.rng_seed;
    j["config"] = {
        {"ns_a", o.ns_a},
        {"ns_b", o.ns_b},
        {"dev_a", o.dev_a},
        {"dev_b", o.dev_b},
        {"paths", o.paths},
        {"split", o.split == SplitMode::kRuns ? "runs" : "segments"},
        {"l2_overhead", o.l2_overhead},
        {"hash_seed", o.hash_seed},
        {"mtu", o.mtu},
        {"rt_priority", o.rt_priority},
    };
    j["directions"] = json::object();
    for (int d = 0; d < 2; ++d) {
        if (dirs[d] != nullptr) {
            j["directions"][kDirName[d]] = directionJson(*dirs[d]);
        }
    }
    return j;
}

}  // namespace atlas::wanem
