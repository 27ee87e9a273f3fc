#include "perf/atlas-wanem/link_model.h"

#include <algorithm>
#include <cmath>

namespace atlas::wanem {

std::optional<double> LinkModel::admit(Nanos now_ns, uint32_t wire_bytes) {
    if (params_.rate_bps <= 0) {
        return static_cast<double>(now_ns);
    }
    const double now = static_cast<double>(now_ns);
    const double start = std::max(now, link_free_ns_);
    const double wait_ns = start - now;
    const double backlog = wait_ns * params_.rate_bps / 8e9;
    if (backlog + wire_bytes > static_cast<double>(params_.buffer_bytes)) {
        return std::nullopt;
    }
    const auto backlog_bytes = static_cast<uint64_t>(backlog);
    max_backlog_bytes_ = std::max(max_backlog_bytes_, backlog_bytes);
    max_queue_delay_ns_ = std::max(max_queue_delay_ns_, static_cast<Nanos>(wait_ns));
    link_free_ns_ = start + static_cast<double>(wire_bytes) * 8e9 / params_.rate_bps;
    return link_free_ns_;
}

Nanos LinkModel::deliveryTime(double departed_ns, double jitter_unit) {
    double deliver = departed_ns + static_cast<double>(params_.delay_ns);
    if (params_.jitter_ns > 0) {
        deliver += std::clamp(jitter_unit, -1.0, 1.0) * static_cast<double>(params_.jitter_ns);
    }
    const auto t = static_cast<Nanos>(std::ceil(deliver));
    last_deliver_ns_ = std::max(last_deliver_ns_, t);
    return last_deliver_ns_;
}

uint64_t LinkModel::backlogBytes(Nanos now_ns) const {
    if (params_.rate_bps <= 0) {
        return 0;
    }
    const double wait = link_free_ns_ - static_cast<double>(now_ns);
    return wait > 0 ? static_cast<uint64_t>(wait * params_.rate_bps / 8e9) : 0;
}

namespace {
uint64_t splitmix64(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}
}  // namespace

Rng::Rng(uint64_t seed) {
    for (auto& s : s_) {
        s = splitmix64(seed);
    }
}

uint64_t Rng::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

}  // namespace atlas::wanem
