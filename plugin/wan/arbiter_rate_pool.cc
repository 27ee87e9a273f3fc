// ArbiterRatePool (arbiter_session.h): the DC-wide rate pool of one link under atlas-arbiter.
#include "plugin/wan/arbiter_session.h"

namespace atlas::plugin::wan {

uint64_t ArbiterRatePool::add(uint64_t bytes, Nanos first_ns, Nanos last_ns, size_t* live) {
    local_.add(bytes, first_ns, last_ns, live);
    // What is too small or too short to be a sample here is not one at the arbiter either
    // (the same PathRateConfig): not sent. Only to a session that reads trains.
    if (!local_.config().admits(bytes, last_ns - first_ns)) {
        return estimate();
    }
    if (auto c = client_.lock();
        c && c->mode.load(std::memory_order_acquire) == ArbiterClient::Mode::kArbitrated &&
        c->version.load(std::memory_order_relaxed) >= 3) {
        c->post(arbiter::Train{link_, bytes, last_ns - first_ns});
        c->n_trains.fetch_add(1, std::memory_order_relaxed);
    }
    return estimate();
}

uint64_t ArbiterRatePool::estimate() const {
    const uint64_t dc = dc_bps_.load(std::memory_order_relaxed);
    return dc != 0 ? dc : local_.estimate();
}

}  // namespace atlas::plugin::wan
