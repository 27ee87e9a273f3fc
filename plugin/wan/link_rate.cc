#include "plugin/wan/link_rate.h"

#include <algorithm>

namespace atlas::plugin::wan {

uint64_t LocalRatePool::add(uint64_t bytes, Nanos first_ns, Nanos last_ns, size_t* live) {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t bps = path_.addAndEstimate(bytes, first_ns, last_ns, live);
    estimate_.store(bps, std::memory_order_relaxed);
    return bps;
}

MeasuredLinkRate::MeasuredLinkRate(uint64_t cap_bps, std::string link, Logger log,
                                   std::shared_ptr<RatePool> pool, Nanos handoff_lead_ns)
    : LinkRate(handoff_lead_ns),
      cap_bps_(cap_bps),
      link_(std::move(link)),
      log_(log),
      pool_(pool ? std::move(pool) : std::make_shared<LocalRatePool>()) {}

uint64_t MeasuredLinkRate::bitsPerSec(Nanos) const {
    const uint64_t m = pool_->estimate();
    if (m == 0) {
        return cap_bps_;
    }
    return cap_bps_ > 0 ? std::min(m, cap_bps_) : m;
}

void MeasuredLinkRate::addSample(uint64_t bytes, Nanos dispersion_ns, Nanos now_ns,
                                 Nanos stalled_ns) {
    // What the sample counts with: the dispersion, less the gate's wait when that was long.
    const Nanos counted =
        sched::gateLimitedSample(bytes, dispersion_ns, stalled_ns, pool_->estimate());
    if (counted <= 0) {
        ATLAS_LOG_TRACE(log_,
                        "link %s: train %.2f MiB over %.2f ms spans a %.2f ms wait for the link: "
                        "not a sample",
                        link_.c_str(), static_cast<double>(bytes) / (1 << 20),
                        static_cast<double>(dispersion_ns) / 1e6,
                        static_cast<double>(stalled_ns) / 1e6);
        return;
    }
    // The sample's arrival time on our clock: it ended about when its confirmation left.
    size_t live = 0;
    const uint64_t bps = pool_->add(bytes, now_ns - counted, now_ns, &live);
    // Every input, at trace level: what an estimate that looks wrong was made of.
    ATLAS_LOG_TRACE(log_, "link %s: train %.2f MiB over %.2f ms = %.3f Gbit/s at %.3f s -> %.3f",
                    link_.c_str(), static_cast<double>(bytes) / (1 << 20),
                    static_cast<double>(counted) / 1e6,
                    static_cast<double>(bytes) * 8 / static_cast<double>(counted),
                    static_cast<double>(now_ns) / 1e9, static_cast<double>(bps) / 1e9);
    std::lock_guard<std::mutex> lock(mu_);
    // The trace: a tenth up or down, or known <-> unknown, at most once a second (a settled
    // estimate moves by less, so a steady link logs once; a change is followed line by line).
    const bool moved = (bps == 0) != (logged_bps_ == 0) || bps * 10 > logged_bps_ * 11 ||
                       bps * 10 < logged_bps_ * 9;
    if (moved && now_ns - logged_at_ >= kNsPerSec) {
        ATLAS_LOG_INFO(log_, "link %s: measured rate %.3f Gbit/s (%zu trains in %.1f s; last %.3f)",
                       link_.c_str(), static_cast<double>(bps) / 1e9, live,
                       static_cast<double>(pool_->config().window_ns) / kNsPerSec,
                       static_cast<double>(bytes) * 8 / static_cast<double>(counted));
        logged_bps_ = bps;
        logged_at_ = now_ns;
    }
}

}  // namespace atlas::plugin::wan
