#include "transport/stream_plan.h"

#include <algorithm>
#include <cmath>

#include "transport/wire.h"

namespace atlas::transport {

namespace {
constexpr double kHeadroom = 1.25;
constexpr double kCpuBpsPerStream = 25e9;
// Fractions of the autotuning ceilings one stream really keeps in flight: the send buffer
// also holds unacknowledged data bookkeeping (~85% usable, measured 3.5 MB of 4 MiB at
// 50 ms), and the advertised receive window is about half of tcp_rmem.
constexpr double kSendUsable = 0.85;
constexpr double kRecvUsable = 0.5;
}  // namespace

StreamPlan planStreams(const StreamPlanInput& in) {
    StreamPlan plan;
    const int cap = std::clamp(in.max_streams, 1, wire::kMaxStreams);
    if (in.sockbuf_bytes > 0) {
        plan.window_bytes = in.sockbuf_bytes;
    } else {
        plan.window_bytes =
            static_cast<uint64_t>(std::min(kSendUsable * static_cast<double>(in.limits.wmem_max),
                                           kRecvUsable * static_cast<double>(in.limits.rmem_max)));
    }
    plan.window_bytes = std::max<uint64_t>(plan.window_bytes, 64 * 1024);
    plan.measured = in.measured_bps > 0;
    plan.path_bps = plan.measured && in.link_bps > 0 ? std::min(in.measured_bps, in.link_bps)
                    : plan.measured                  ? in.measured_bps
                                                     : in.link_bps;
    const double rtt_s = static_cast<double>(std::max<Nanos>(in.rtt_ns, 0)) / 1e9;
    plan.bdp_bytes = static_cast<uint64_t>(static_cast<double>(plan.path_bps) / 8.0 * rtt_s);

    if (in.requested > 0) {
        plan.nstreams = std::min(in.requested, wire::kMaxStreams);
        plan.reason = "ATLAS_NSTREAMS=" + std::to_string(in.requested);
        return plan;
    }
    const double n_bdp =
        std::ceil(kHeadroom * static_cast<double>(plan.bdp_bytes) / plan.window_bytes);
    const double n_cpu = std::ceil(static_cast<double>(plan.path_bps) / kCpuBpsPerStream);
    const double n = std::max({n_bdp, n_cpu, 1.0});
    plan.nstreams = static_cast<int>(std::min<double>(n, cap));
    plan.reason = "auto: rtt " + std::to_string(in.rtt_ns / 1000) + " us, link " +
                  std::to_string(plan.path_bps / 1000000) + " Mbit/s" +
                  (plan.measured ? " (measured)" : "") + ", BDP " + std::to_string(plan.bdp_bytes) +
                  " B, window/stream " + std::to_string(plan.window_bytes) + " B -> " +
                  std::to_string(plan.nstreams) + (n > cap ? " (capped by ATLAS_MAX_STREAMS)" : "");
    return plan;
}

}  // namespace atlas::transport
