#include "plugin/bubbles.h"

#include <algorithm>
#include <chrono>

#include "atlas/bubble_channel.h"
#include "scheduler/interval_accuracy.h"

namespace atlas::plugin {

// ---------------------------------------------------------------- IdleRecorder

IdleRecorder::IdleRecorder() {
    for (size_t i = 0; i < kCapacity; ++i) {
        slots_[i].seq.store(i, std::memory_order_relaxed);  // slot i is free for position i
    }
}

void IdleRecorder::posted(uint64_t key, Nanos now_ns) noexcept {
    if (outstanding_.fetch_add(1, std::memory_order_acq_rel) == 0) {
        start_.store(now_ns, std::memory_order_relaxed);
        transfer_start_.store(0, std::memory_order_relaxed);
        transfer_bytes_.store(0, std::memory_order_relaxed);
        // Publishes start_ (pairs with the acquire load of leader_ in completed()).
        leader_.store(key + 1, std::memory_order_release);
    }
}

void IdleRecorder::arrived(uint64_t key, uint64_t bytes, Nanos now_ns) noexcept {
    // While this receive leads it cannot complete (its completed() runs after this, on this
    // thread), so no new wait can reset the fields under us.
    if (leader_.load(std::memory_order_acquire) == key + 1) {
        transfer_bytes_.store(bytes, std::memory_order_relaxed);
        // Publishes transfer_bytes_ to openWait() (pairs with its acquire load).
        transfer_start_.store(std::max(now_ns, start_.load(std::memory_order_relaxed)),
                              std::memory_order_release);
    }
}

void IdleRecorder::completed(uint64_t key, Nanos now_ns) noexcept {
    uint64_t leader = leader_.load(std::memory_order_acquire);
    // Read before the decrement: while this receive is outstanding no other post can open a
    // new interval and overwrite start_ or the transfer fields.
    const Nanos start = start_.load(std::memory_order_relaxed);
    const Nanos transfer_start = transfer_start_.load(std::memory_order_relaxed);
    const uint64_t transfer_bytes = transfer_bytes_.load(std::memory_order_relaxed);
    outstanding_.fetch_sub(1, std::memory_order_acq_rel);
    if (leader == key + 1 &&
        leader_.compare_exchange_strong(leader, 0, std::memory_order_acq_rel)) {
        const Nanos end = std::max(start, now_ns);
        ObservedWait w{{start, end}, 0, 0};
        if (transfer_start != 0 && transfer_bytes != 0) {
            w.transfer_start_ns = std::min(transfer_start, end);
            w.transfer_bytes = transfer_bytes;
        }
        push(w);
    }
}

OpenWait IdleRecorder::openWait() const noexcept {
    const uint64_t leader = leader_.load(std::memory_order_acquire);
    if (leader == 0) {
        return {};
    }
    OpenWait w;
    w.idle.start_ns = start_.load(std::memory_order_relaxed);
    // Pairs with the release store in arrived(): transfer_bytes_ is that arrival's.
    w.transfer_start_ns = transfer_start_.load(std::memory_order_acquire);
    w.transfer_bytes = transfer_bytes_.load(std::memory_order_relaxed);
    if (leader_.load(std::memory_order_acquire) != leader) {
        return {};  // it ended meanwhile; the next tick sees the new one
    }
    if (w.transfer_start_ns == 0 || w.transfer_bytes == 0) {
        w.transfer_start_ns = 0;
        w.transfer_bytes = 0;
    }
    return w;
}

void IdleRecorder::abandoned(uint64_t comm_id, int64_t pending) noexcept {
    uint64_t leader = leader_.load(std::memory_order_acquire);
    if (leader != 0 && ((leader - 1) >> 48) == comm_id) {
        // Its receive will never complete: the interval is dropped, not published.
        leader_.compare_exchange_strong(leader, 0, std::memory_order_acq_rel);
    }
    if (pending > 0) {
        outstanding_.fetch_sub(pending, std::memory_order_acq_rel);
    }
}

void IdleRecorder::push(const ObservedWait& wait) noexcept {
    uint64_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
        Slot& s = slots_[pos % kCapacity];
        // A slot is free for position `pos` when its sequence equals pos (initially the
        // index; the consumer advances it by kCapacity when it frees the slot).
        const uint64_t seq = s.seq.load(std::memory_order_acquire);
        const int64_t diff = static_cast<int64_t>(seq) - static_cast<int64_t>(pos);
        if (diff == 0) {
            if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
                s.wait = wait;
                // Publishes the wait to the consumer (pairs with its acquire load).
                s.seq.store(pos + 1, std::memory_order_release);
                return;
            }
        } else if (diff < 0) {
            dropped_.fetch_add(1, std::memory_order_relaxed);  // full: the publisher is behind
            return;
        } else {
            pos = tail_.load(std::memory_order_relaxed);
        }
    }
}

bool IdleRecorder::pop(ObservedWait* out) noexcept {
    Slot& s = slots_[head_ % kCapacity];
    if (s.seq.load(std::memory_order_acquire) != head_ + 1) {
        return false;
    }
    *out = s.wait;
    // Frees the slot for position head_ + kCapacity (pairs with the producers' acquire).
    s.seq.store(head_ + kCapacity, std::memory_order_release);
    ++head_;
    return true;
}

// ---------------------------------------------------------------- CommIdleObserver

void CommIdleObserver::posted(uint64_t seq, Nanos now_ns) noexcept {
    pending_.fetch_add(1, std::memory_order_relaxed);
    recorder_->posted(key(comm_id_, seq), now_ns);
}

void CommIdleObserver::arrived(uint64_t seq, uint64_t bytes, Nanos now_ns) noexcept {
    recorder_->arrived(key(comm_id_, seq), bytes, now_ns);
}

void CommIdleObserver::completed(uint64_t seq, Nanos now_ns) noexcept {
    pending_.fetch_sub(1, std::memory_order_relaxed);
    recorder_->completed(key(comm_id_, seq), now_ns);
}

void CommIdleObserver::closed(Nanos) noexcept {
    recorder_->abandoned(comm_id_, pending_.exchange(0, std::memory_order_relaxed));
}

// ---------------------------------------------------------------- BubblePublisher

namespace {

uint32_t toPpm(double x) {
    return static_cast<uint32_t>(std::clamp(x, 0.0, 1.0) * channel::kPpmOne + 0.5);
}

// How long the accuracy history reaches back.
constexpr size_t kMaxCommitted = 512;

}  // namespace

BubblePublisher::BubblePublisher(const BubbleConfig& config, IdleRecorder* recorder,
                                 const Clock& clock, Logger log, channel::ChannelWriter writer)
    : config_(config),
      recorder_(recorder),
      clock_(clock),
      log_(log),
      writer_(std::move(writer)),
      predictor_(config.predictor),
      open_wait_(config.open_wait) {
    writer_.setStatus(channel::PredictorState::kLearning, channel::StatusReason::kWarmup);
}

Result<std::unique_ptr<BubblePublisher>> BubblePublisher::manual(const BubbleConfig& config,
                                                                 IdleRecorder* recorder,
                                                                 const Clock& clock, Logger log) {
    ATLAS_RETURN_IF_ERROR(sched::validate(config.predictor));
    ATLAS_RETURN_IF_ERROR(sched::validate(config.open_wait));
    channel::WriterOptions opts;
    opts.clock = &clock;
    // Readable by a bubbletea sidecar running as another user of the node.
    opts.mode = 0644;
    auto w =
        channel::ChannelWriter::create(config.channel_name, channel::ChannelCapacities{}, opts);
    if (!w.isOk()) {
        return w.status();
    }
    return std::unique_ptr<BubblePublisher>(
        new BubblePublisher(config, recorder, clock, log, std::move(w.value())));
}

Result<std::unique_ptr<BubblePublisher>> BubblePublisher::start(const BubbleConfig& config,
                                                                IdleRecorder* recorder,
                                                                const Clock& clock, Logger log) {
    auto p = manual(config, recorder, clock, log);
    if (!p.isOk()) {
        return p;
    }
    BubblePublisher* raw = p.value().get();
    raw->thread_ = std::thread([raw] { raw->run(); });
    return p;
}

BubblePublisher::~BubblePublisher() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) {
        thread_.join();
    }
    writer_.setStatus(channel::PredictorState::kIdle, channel::StatusReason::kWriterShutdown);
    writer_.close();
}

void BubblePublisher::run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
        lock.unlock();
        step();
        lock.lock();
        cv_.wait_for(lock, std::chrono::nanoseconds(config_.publish_interval_ns),
                     [this] { return stop_; });
    }
}

void BubblePublisher::recordObserved(const sched::Interval& observed) {
    observed_history_.push_back(observed);
    if (observed_history_.size() > config_.accuracy_history) {
        observed_history_.erase(observed_history_.begin());
    }
}

void BubblePublisher::drain() {
    ObservedWait w;
    while (recorder_->pop(&w)) {
        const sched::Interval& iv = w.idle;
        if (first_ns_ == 0) {
            first_ns_ = iv.start_ns;
        }
        const auto est = predictor_.period(iv.start_ns);
        channel::IdleInterval rec{iv.start_ns, iv.end_ns, channel::kUnknownIteration};
        if (est.locked()) {
            rec.iteration = static_cast<uint64_t>(std::max<int64_t>(0, est.cycleOf(iv.start_ns)));
        }
        rec.transfer_start_ns = w.transfer_start_ns;
        rec.transfer_bytes = w.transfer_bytes;
        writer_.publishObserved(rec);
        idle_ns_ += iv.length();
        last_end_ns_ = std::max(last_end_ns_, iv.end_ns);
        recordObserved(iv);
        (void)predictor_.observe(iv);  // out-of-order starts are ignored by contract
        open_wait_.learn({iv.start_ns, iv.end_ns, w.transfer_start_ns, w.transfer_bytes});
    }
    const uint64_t dropped = recorder_->dropped();
    if (dropped != last_dropped_) {
        ATLAS_LOG_WARN(log_, "bubble publisher fell behind: %llu idle intervals dropped",
                       static_cast<unsigned long long>(dropped - last_dropped_));
        last_dropped_ = dropped;
    }
}

void BubblePublisher::step() {
    const Nanos now = clock_.nowNs();
    drain();

    // Windows of the set in force whose start has come are "committed": a consumer could
    // have acted on them. Only those count towards accuracy, from when they were published.
    for (const auto& w : published_) {
        if (w.start_ns > now) {
            continue;
        }
        auto it = std::find_if(committed_.begin(), committed_.end(),
                               [&](const Committed& c) { return c.window_start == w.start_ns; });
        if (it == committed_.end()) {
            committed_.push_back({w.start_ns, {std::max(w.start_ns, published_at_), w.end_ns}});
        } else {
            it->in_force.end_ns = std::max(it->in_force.end_ns, w.end_ns);
        }
    }
    if (committed_.size() > kMaxCommitted) {
        committed_.erase(committed_.begin(), committed_.end() - static_cast<long>(kMaxCommitted));
    }

    const OpenWait open = recorder_->openWait();
    predictor_.noteOpen(open.idle.start_ns);
    const sched::PredictionStatus status = predictor_.predict(now, &predicted_);
    if (status == sched::PredictionStatus::kOk && config_.predictor.confirm_open) {
        const auto est = predictor_.period(now);
        completeOpenWindow(
            open_wait_, {open.idle.start_ns, 0, open.transfer_start_ns, open.transfer_bytes}, false,
            config_.predictor.guard_ns, now, est.cycleOf(open.idle.start_ns), &predicted_);
    }
    std::vector<channel::PredictedWindow> next;
    next.reserve(predicted_.size());
    for (const auto& p : predicted_) {
        next.push_back(
            {p.start_ns, p.end_ns, toPpm(p.confidence),
             static_cast<uint64_t>(std::max<int64_t>(0, p.iteration)),
             p.open ? channel::WindowSource::kPredictorOpen : channel::WindowSource::kPredictor});
    }
    auto same = [](const channel::PredictedWindow& a, const channel::PredictedWindow& b) {
        return a.start_ns == b.start_ns && a.end_ns == b.end_ns &&
               a.confidence_ppm == b.confidence_ppm && a.source == b.source;
    };
    if (next.size() != published_.size() ||
        !std::equal(next.begin(), next.end(), published_.begin(), same)) {
        writer_.publishPredictions(next);
        published_ = std::move(next);
        published_at_ = now;
    }

    using channel::PredictorState;
    using channel::StatusReason;
    const auto est = predictor_.period(now);
    switch (status) {
        case sched::PredictionStatus::kOk:
            writer_.setStatus(PredictorState::kPredicting, StatusReason::kNone);
            break;
        case sched::PredictionStatus::kSearching:
        case sched::PredictionStatus::kWarmingUp:
            writer_.setStatus(PredictorState::kLearning, StatusReason::kWarmup);
            break;
        case sched::PredictionStatus::kLost:
            writer_.setStatus(PredictorState::kPeriodLost, est.reason == sched::LossReason::kPause
                                                               ? StatusReason::kNoTraffic
                                                               : StatusReason::kPeriodChanged);
            break;
        case sched::PredictionStatus::kStale:
            writer_.setStatus(PredictorState::kIdle, StatusReason::kNoTraffic);
            break;
    }

    channel::ChannelStats stats;
    if (est.period_ns > 0) {
        stats.period_ns = est.period_ns;
        stats.period_confidence_ppm = toPpm(est.confidence);
    }
    if (first_ns_ != 0 && now > first_ns_) {
        stats.idle_fraction_ppm =
            toPpm(static_cast<double>(idle_ns_) / static_cast<double>(now - first_ns_));
    }
    if (est.locked()) {
        stats.iteration = static_cast<uint64_t>(std::max<int64_t>(0, est.cycleOf(now)));
    }
    if (!committed_.empty() && !observed_history_.empty()) {
        std::vector<sched::Interval> windows;
        windows.reserve(committed_.size());
        for (const Committed& c : committed_) {
            windows.push_back(c.in_force);
        }
        // Score the span where both histories exist and the outcome is known.
        const Nanos from =
            std::max(committed_.front().in_force.start_ns, observed_history_.front().start_ns);
        const Nanos to = std::min(now, last_end_ns_);
        if (to > from) {
            const auto acc = sched::measureAccuracy(observed_history_, windows, {from, to});
            if (acc.observed_ns > 0) {
                stats.coverage_ppm = toPpm(acc.coverage);
            }
            if (acc.predicted_ns > 0) {
                stats.precision_ppm = toPpm(acc.precision);
            }
        }
    }
    writer_.setStats(stats);
}

}  // namespace atlas::plugin
