#include "plugin/wan/link_rate.h"

#include <algorithm>

namespace atlas::plugin::wan {

uint64_t MeasuredLinkRate::bitsPerSec(Nanos) const {
    const uint64_t m = measured_.load(std::memory_order_relaxed);
    if (m == 0) {
        return cap_bps_;
    }
    return cap_bps_ > 0 ? std::min(m, cap_bps_) : m;
}

void MeasuredLinkRate::addSample(uint64_t bytes, Nanos dispersion_ns, Nanos now_ns) {
    std::lock_guard<std::mutex> lock(mu_);
    // The sample's arrival time on our clock: it ended about when its confirmation left.
    path_.addMessage(bytes, now_ns - dispersion_ns, now_ns);
    const uint64_t bps = path_.bitsPerSec(now_ns);
    measured_.store(bps, std::memory_order_relaxed);
    // The trace: a tenth up or down, or known <-> unknown, at most once a second (a settled
    // estimate moves by less, so a steady link logs once; a change is followed line by line).
    const bool moved = (bps == 0) != (logged_bps_ == 0) || bps * 10 > logged_bps_ * 11 ||
                       bps * 10 < logged_bps_ * 9;
    if (moved && now_ns - logged_at_ >= kNsPerSec) {
        ATLAS_LOG_INFO(log_, "link %s: measured rate %.3f Gbit/s (%zu trains in %.1f s; last %.3f)",
                       link_.c_str(), static_cast<double>(bps) / 1e9, path_.samples(now_ns),
                       static_cast<double>(path_.config().window_ns) / kNsPerSec,
                       static_cast<double>(bytes) * 8 / static_cast<double>(dispersion_ns));
        logged_bps_ = bps;
        logged_at_ = now_ns;
    }
}

}  // namespace atlas::plugin::wan
