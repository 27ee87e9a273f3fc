// ShmArbiter::ratePool(): the node segment's pooled PathRate behind the RatePool interface.
#include "plugin/wan/link_rate.h"
#include "plugin/wan/shm_arbiter.h"
#include "plugin/wan/shm_arbiter_impl.h"

namespace atlas::plugin::wan {
namespace {

class ShmRatePool final : public RatePool {
  public:
    explicit ShmRatePool(std::shared_ptr<ShmArbiter::Impl> impl) : impl_(std::move(impl)) {}

    uint64_t add(uint64_t bytes, Nanos first_ns, Nanos last_ns, size_t* live) override {
        ShmArbiter::Impl& a = *impl_;
        *live = 0;
        if (a.broken.load(std::memory_order_acquire) || !a.lock()) {
            return estimate();
        }
        const uint64_t bps = addSegmentRateSample(*a.seg, bytes, first_ns, last_ns, live);
        a.unlock();
        return bps;
    }

    uint64_t estimate() const override {
        return impl_->seg->rate_bps.load(std::memory_order_relaxed);
    }

    // The segment's config is its creator's (one build: versioned), this build's default.
    const sched::PathRateConfig& config() const override { return config_; }

  private:
    const std::shared_ptr<ShmArbiter::Impl> impl_;
    const sched::PathRateConfig config_{};
};

}  // namespace

std::shared_ptr<RatePool> ShmArbiter::ratePool() {
    return std::make_shared<ShmRatePool>(impl_);
}

}  // namespace atlas::plugin::wan
