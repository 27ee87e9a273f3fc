#include "plugin/bubbles.h"

#include <algorithm>
#include <chrono>

#include "atlas/bubble_channel.h"

namespace atlas::plugin {

// ---------------------------------------------------------------- IdleRecorder

IdleRecorder::IdleRecorder() {
    for (size_t i = 0; i < kCapacity; ++i) {
        cells_[i].seq.store(i, std::memory_order_relaxed);  // cell i is free for position i
    }
}

void IdleRecorder::posted(uint64_t key, Nanos now_ns) noexcept {
    if (outstanding_.fetch_add(1, std::memory_order_acq_rel) == 0) {
        opened_.fetch_add(1, std::memory_order_relaxed);
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
    if (leader != key + 1) {
        return;
    }
    // This receive led the wait, which ends now. Clear the leader unless a post after the
    // decrement has already opened the next wait; either way this wait is published (it was
    // once lost here when that post won the race and the CAS failed).
    leader_.compare_exchange_strong(leader, 0, std::memory_order_acq_rel);
    const Nanos end = std::max(start, now_ns);
    ObservedWait w{{start, end}, 0, 0};
    if (transfer_start != 0 && transfer_bytes != 0) {
        w.transfer_start_ns = std::min(transfer_start, end);
        w.transfer_bytes = transfer_bytes;
    }
    push(w);
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
    if (leader != 0 && CommIdleObserver::commIdOf(leader - 1) == comm_id) {
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
        Cell& s = cells_[pos % kCapacity];
        // A cell is free for position `pos` when its sequence equals pos (initially the
        // index; the consumer advances it by kCapacity when it frees the cell).
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
    Cell& s = cells_[head_ % kCapacity];
    if (s.seq.load(std::memory_order_acquire) != head_ + 1) {
        return false;
    }
    *out = s.wait;
    // Frees the cell for position head_ + kCapacity (pairs with the producers' acquire).
    s.seq.store(head_ + kCapacity, std::memory_order_release);
    ++head_;
    return true;
}

// ---------------------------------------------------------------- CommIdleObserver

uint64_t CommIdleObserver::nextCommId() noexcept {
    static std::atomic<uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
}

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

BubblePublisher::BubblePublisher(const BubbleConfig& config, IdleRecorder* recorder,
                                 const Clock& clock, Logger log,
                                 std::unique_ptr<StepClock> step_clock,
                                 channel::ChannelWriter writer)
    : config_(config),
      recorder_(recorder),
      clock_(clock),
      log_(log),
      step_clock_(std::move(step_clock)),
      writer_(std::move(writer)),
      pipeline_(config.pipeline) {
    writer_.setStatus(channel::PredictorState::kLearning, channel::StatusReason::kWarmup);
}

Result<std::unique_ptr<BubblePublisher>> BubblePublisher::manual(const BubbleConfig& config,
                                                                 IdleRecorder* recorder,
                                                                 const Clock& clock, Logger log) {
    ATLAS_RETURN_IF_ERROR(sched::validate(config.pipeline));
    auto step_clock = std::make_unique<StepClock>(clock.nowNs());
    channel::WriterOptions opts;
    opts.clock = step_clock.get();
    // Readable by a bubbletea sidecar running as another user of the node.
    opts.mode = 0644;
    auto w =
        channel::ChannelWriter::create(config.channel_name, channel::ChannelCapacities{}, opts);
    if (!w.isOk()) {
        return w.status();
    }
    return std::unique_ptr<BubblePublisher>(new BubblePublisher(
        config, recorder, clock, log, std::move(step_clock), std::move(w.value())));
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
    step_clock_->set(clock_.nowNs());
    writer_.setStatus(channel::PredictorState::kIdle, channel::StatusReason::kWriterShutdown);
    writer_.close();
}

void BubblePublisher::run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
        lock.unlock();
        step();
        lock.lock();
        cv_.wait_for(lock, std::chrono::nanoseconds(config_.pipeline.step_interval_ns),
                     [this] { return stop_; });
    }
}

void BubblePublisher::drain(Nanos now_ns) {
    ObservedWait w;
    while (recorder_->pop(&w)) {
        const sched::TakenWait t = pipeline_.take(
            {w.idle.start_ns, w.idle.end_ns, w.transfer_start_ns, w.transfer_bytes}, now_ns);
        channel::IdleInterval rec{w.idle.start_ns, w.idle.end_ns, t.iteration};
        rec.transfer_start_ns = w.transfer_start_ns;
        rec.transfer_bytes = w.transfer_bytes;
        rec.taken_step_ns = t.trace.taken_ns;
        rec.open_from_step_ns = t.trace.open_from_ns;
        rec.open_to_step_ns = t.trace.open_to_ns;
        rec.transfer_seen_step_ns = t.trace.transfer_seen_ns;
        writer_.publishObserved(rec);
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
    step_clock_->set(now);
    drain(now);
    const OpenWait open = recorder_->openWait();
    const sched::PipelineDecision& d =
        pipeline_.decide(now, {open.idle.start_ns, 0, open.transfer_start_ns, open.transfer_bytes});
    if (d.publish) {
        published_.clear();
        for (const sched::PublishedWindow& p : d.windows) {
            published_.push_back({p.start_ns, p.end_ns, p.confidence_ppm, p.iteration,
                                  p.open ? channel::WindowSource::kPredictorOpen
                                         : channel::WindowSource::kPredictor});
        }
        writer_.publishPredictions(published_);
    }

    using channel::PredictorState;
    using channel::StatusReason;
    switch (d.status) {
        case sched::PredictionStatus::kOk:
            writer_.setStatus(PredictorState::kPredicting, StatusReason::kNone);
            break;
        case sched::PredictionStatus::kSearching:
        case sched::PredictionStatus::kWarmingUp:
            writer_.setStatus(PredictorState::kLearning, StatusReason::kWarmup);
            break;
        case sched::PredictionStatus::kLost:
            writer_.setStatus(PredictorState::kPeriodLost,
                              d.loss_reason == sched::LossReason::kPause
                                  ? StatusReason::kNoTraffic
                                  : StatusReason::kPeriodChanged);
            break;
        case sched::PredictionStatus::kStale:
            writer_.setStatus(PredictorState::kIdle, StatusReason::kNoTraffic);
            break;
    }

    const sched::PipelineStats st = pipeline_.stats(now);
    channel::ChannelStats stats;
    stats.period_ns = st.period_ns;
    stats.period_confidence_ppm = st.period_confidence_ppm;
    stats.idle_fraction_ppm = st.idle_fraction_ppm;
    stats.iteration = st.iteration;
    stats.coverage_ppm = st.coverage_ppm;
    stats.precision_ppm = st.precision_ppm;
    writer_.setStats(stats);
}

}  // namespace atlas::plugin
