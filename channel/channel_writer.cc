#include "channel/channel_writer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <utility>

#include "channel/channel_name.h"
#include "channel/seqlock.h"

namespace atlas::channel {

namespace {

bool pidAlive(pid_t pid) {
    // EPERM: the process exists but belongs to someone else.
    return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

Status validateCapacities(const ChannelCapacities& c) {
    if (c.windows < kMinWindowCapacity || c.windows > kMaxWindowCapacity) {
        return {Code::kInvalidArgument, "window capacity " + std::to_string(c.windows) +
                                            " out of bounds [" +
                                            std::to_string(kMinWindowCapacity) + ", " +
                                            std::to_string(kMaxWindowCapacity) + "]"};
    }
    if (c.idle < kMinIdleCapacity || c.idle > kMaxIdleCapacity) {
        return {Code::kInvalidArgument, "idle capacity " + std::to_string(c.idle) +
                                            " out of bounds [" + std::to_string(kMinIdleCapacity) +
                                            ", " + std::to_string(kMaxIdleCapacity) + "]"};
    }
    return Status::ok();
}

// Looks at what the name points to now. Returns the generation to continue from (0 if
// there is no valid predecessor) after retiring a valid predecessor and unlinking the name.
Result<uint64_t> retirePredecessor(const std::string& name, bool take_over) {
    uint64_t previous_generation = 0;
    auto existing = detail::ShmMapping::openExisting(name, /*writable=*/true);
    if (existing.isOk()) {
        const detail::ShmMapping& m = existing.value();
        if (detail::validateSegment(m.data(), m.size(), name).isOk()) {
            auto* old = static_cast<SegmentHeader*>(m.data());
            previous_generation = old->generation;
            const auto lifecycle =
                static_cast<Lifecycle>(old->lifecycle.load(std::memory_order_acquire));
            const pid_t pid = old->writer_pid;
            if (lifecycle == Lifecycle::kLive && pid != ::getpid() && pidAlive(pid) && !take_over) {
                return Status(Code::kInvalidUsage,
                              "bubble channel '" + name + "' is in use by live writer pid " +
                                  std::to_string(pid) +
                                  " (two processes with the same local rank? set "
                                  "ATLAS_BUBBLE_CHANNEL per process, or take over)");
            }
            // Release (M5): old readers that see kRetired reopen the name; nothing else in
            // the old segment changes after this.
            old->lifecycle.store(static_cast<uint32_t>(Lifecycle::kRetired),
                                 std::memory_order_release);
        }
        // Invalid contents (garbage, or a crashed writer's half-initialised segment): no
        // generation to continue; the unlink below discards it.
    } else if (existing.status().code() != Code::kUnavailable &&
               existing.status().code() != Code::kRemote) {
        // Permission denied or similar: we could not replace it either.
        return existing.status();
    }
    if (::shm_unlink(name.c_str()) != 0 && errno != ENOENT) {
        return Status::fromErrno("bubble channel '" + name + "': shm_unlink of the old segment",
                                 errno);
    }
    return previous_generation;
}

}  // namespace

Result<ChannelWriter> ChannelWriter::create(const std::string& name, ChannelCapacities capacities,
                                            WriterOptions options) noexcept {
    try {
        ATLAS_RETURN_IF_ERROR(validateChannelName(name));
        ATLAS_RETURN_IF_ERROR(validateCapacities(capacities));
        auto previous = retirePredecessor(name, options.take_over);
        if (!previous.isOk()) {
            return previous.status();
        }
        const SegmentLayout layout = expectedLayout(capacities.windows, capacities.idle);
        auto mapping = detail::ShmMapping::createExclusive(name, layout.layout_size, options.mode);
        if (!mapping.isOk()) {
            return mapping.status();
        }

        ChannelWriter w;
        w.name_ = name;
        w.options_ = options;
        if (w.options_.clock == nullptr) {
            w.options_.clock = &MonotonicClock::instance();
        }
        w.mapping_ = std::move(mapping.value());
        auto* base = static_cast<std::byte*>(w.mapping_.data());
        w.header_ = reinterpret_cast<SegmentHeader*>(base);
        w.windows_ = reinterpret_cast<WindowRecord*>(base + layout.windows_offset);
        w.idle_ = reinterpret_cast<IdleRecord*>(base + layout.idle_offset);
        w.window_capacity_ = capacities.windows;
        w.idle_capacity_ = capacities.idle;
        w.max_set_ = channel::maxPredictionSet(capacities.windows);
        w.generation_ = previous.value() + 1;
        const Nanos now = w.options_.clock->nowNs();
        w.since_ns_ = now;

        // The object is fresh and zero-filled (ftruncate), so every ring seq, head and
        // counter already reads 0 and every cell reads "never written". Nobody can trust
        // these fields before magic is published below.
        SegmentHeader* h = w.header_;
        h->abi_version = kAbiVersion;
        h->header_size = static_cast<uint32_t>(kHeaderSize);
        h->layout_size = layout.layout_size;
        h->clock_id = kClockIdMonotonic;
        h->flags = 0;
        h->window_capacity = capacities.windows;
        h->window_record_size = sizeof(WindowRecord);
        h->idle_capacity = capacities.idle;
        h->idle_record_size = sizeof(IdleRecord);
        h->windows_offset = layout.windows_offset;
        h->idle_offset = layout.idle_offset;
        h->generation = w.generation_;
        h->writer_start_ns = now;
        h->writer_pid = static_cast<int32_t>(::getpid());
        h->lifecycle.store(static_cast<uint32_t>(Lifecycle::kLive), std::memory_order_relaxed);
        h->last_write_ns.store(now, std::memory_order_relaxed);
        w.writeStateBlock();
        // Release (M1): pairs with the reader's acquire load of magic in validateSegment();
        // a reader that sees the magic sees the whole initialised header.
        h->magic.store(kMagic, std::memory_order_release);
        return w;
    } catch (...) {
        // Only allocation can throw here; the literal fits std::string's inline buffer.
        return Status(Code::kInternal, "out of memory");
    }
}

ChannelWriter::ChannelWriter(ChannelWriter&& other) noexcept {
    *this = std::move(other);
}

ChannelWriter& ChannelWriter::operator=(ChannelWriter&& other) noexcept {
    if (this != &other) {
        close();
        name_ = std::move(other.name_);
        options_ = other.options_;
        mapping_ = std::move(other.mapping_);
        header_ = std::exchange(other.header_, nullptr);
        windows_ = std::exchange(other.windows_, nullptr);
        idle_ = std::exchange(other.idle_, nullptr);
        window_capacity_ = other.window_capacity_;
        idle_capacity_ = other.idle_capacity_;
        max_set_ = other.max_set_;
        generation_ = other.generation_;
        window_head_ = other.window_head_;
        idle_head_ = other.idle_head_;
        set_id_ = other.set_id_;
        rejected_ = other.rejected_;
        state_seq_ = other.state_seq_;
        state_ = other.state_;
        reason_ = other.reason_;
        since_ns_ = other.since_ns_;
        stats_updated_ns_ = other.stats_updated_ns_;
        stats_ = other.stats_;
    }
    return *this;
}

ChannelWriter::~ChannelWriter() {
    close();
}

bool ChannelWriter::publishObserved(const IdleInterval& interval) noexcept {
    if (header_ == nullptr) {
        return false;
    }
    if (!validIdleInterval(interval)) {
        header_->rejected_records.store(++rejected_, std::memory_order_relaxed);
        return false;
    }
    const uint64_t n = idle_head_;
    detail::writeCell(idle_[n % idle_capacity_], n, [&](IdleRecord& r) {
        r.start_ns.store(interval.start_ns, std::memory_order_relaxed);
        r.end_ns.store(interval.end_ns, std::memory_order_relaxed);
        r.iteration.store(interval.iteration, std::memory_order_relaxed);
        r.transfer_start_ns.store(interval.transfer_start_ns, std::memory_order_relaxed);
        r.transfer_bytes.store(interval.transfer_bytes, std::memory_order_relaxed);
        r.taken_step.store(encodeStepTime(interval.taken_step_ns, interval.end_ns),
                           std::memory_order_relaxed);
        r.open_from_step.store(encodeStepTime(interval.open_from_step_ns, interval.start_ns),
                               std::memory_order_relaxed);
        r.open_to_step.store(encodeStepTime(interval.open_to_step_ns, interval.end_ns),
                             std::memory_order_relaxed);
        r.transfer_seen_step.store(
            encodeStepTime(interval.transfer_seen_step_ns, interval.transfer_start_ns),
            std::memory_order_relaxed);
    });
    idle_head_ = n + 1;
    // Release (M3): pairs with the reader's acquire load of idle_head; record n is complete.
    header_->idle_head.store(idle_head_, std::memory_order_release);
    // An interval is published as soon as it ends, so its end is a good enough heartbeat,
    // and it spares the hottest call a clock read.
    header_->last_write_ns.store(interval.end_ns, std::memory_order_relaxed);
    return true;
}

size_t ChannelWriter::publishPredictions(std::span<const PredictedWindow> windows) noexcept {
    if (header_ == nullptr) {
        return 0;
    }
    size_t count = 0;
    for (const PredictedWindow& w : windows) {
        if (w.end_ns >= w.start_ns && ++count == max_set_) {
            break;
        }
    }
    const Nanos now = options_.clock->nowNs();
    const uint64_t set_id = ++set_id_;
    const uint64_t first = window_head_;
    auto fill = [&](WindowRecord& r, const PredictedWindow* w, size_t index) {
        r.start_ns.store(w != nullptr ? w->start_ns : now, std::memory_order_relaxed);
        r.end_ns.store(w != nullptr ? w->end_ns : now, std::memory_order_relaxed);
        r.iteration.store(w != nullptr ? w->iteration : kUnknownIteration,
                          std::memory_order_relaxed);
        r.set_id.store(set_id, std::memory_order_relaxed);
        r.published_ns.store(now, std::memory_order_relaxed);
        r.confidence_ppm.store(w != nullptr ? std::min(w->confidence_ppm, kPpmOne) : 0,
                               std::memory_order_relaxed);
        r.source.store(static_cast<uint16_t>(w != nullptr ? w->source : WindowSource::kPredictor),
                       std::memory_order_relaxed);
        r.set_count.store(static_cast<uint16_t>(count), std::memory_order_relaxed);
        r.set_index.store(static_cast<uint16_t>(index), std::memory_order_relaxed);
    };
    uint64_t n = first;
    if (count == 0) {
        // An empty set is one placeholder record with set_count 0.
        detail::writeCell(windows_[n % window_capacity_], n,
                          [&](WindowRecord& r) { fill(r, nullptr, 0); });
        ++n;
    } else {
        size_t index = 0;
        for (const PredictedWindow& w : windows) {
            if (index == count) {
                break;
            }
            if (w.end_ns < w.start_ns) {
                continue;
            }
            detail::writeCell(windows_[n % window_capacity_], n,
                              [&](WindowRecord& r) { fill(r, &w, index); });
            ++n;
            ++index;
        }
    }
    window_head_ = n;
    // Release (M3): one head store publishes the whole set; pairs with the reader's acquire
    // load of window_head.
    header_->window_head.store(window_head_, std::memory_order_release);
    header_->prediction_sets.store(set_id, std::memory_order_relaxed);
    header_->last_write_ns.store(now, std::memory_order_relaxed);
    return count;
}

void ChannelWriter::setStatus(PredictorState state, StatusReason reason) noexcept {
    if (header_ == nullptr) {
        return;
    }
    if (state != state_ || reason != reason_) {
        state_ = state;
        reason_ = reason;
        since_ns_ = options_.clock->nowNs();
    }
    writeStateBlock();
}

void ChannelWriter::setStats(const ChannelStats& stats) noexcept {
    if (header_ == nullptr) {
        return;
    }
    stats_ = stats;
    stats_updated_ns_ = options_.clock->nowNs();
    writeStateBlock();
}

void ChannelWriter::writeStateBlock() noexcept {
    SegmentHeader* h = header_;
    // M4: odd while the block is being rewritten.
    h->state_seq.store(++state_seq_, std::memory_order_relaxed);
    // Release fence: pairs with the reader's acquire fence in readState(); a reader that
    // copied any field stored below sees the odd (or a later) seq on its re-check.
    std::atomic_thread_fence(std::memory_order_release);
    h->state.store(static_cast<uint32_t>(state_), std::memory_order_relaxed);
    h->reason.store(static_cast<uint32_t>(reason_), std::memory_order_relaxed);
    h->state_since_ns.store(since_ns_, std::memory_order_relaxed);
    h->stats_updated_ns.store(stats_updated_ns_, std::memory_order_relaxed);
    h->period_ns.store(stats_.period_ns, std::memory_order_relaxed);
    h->period_confidence_ppm.store(stats_.period_confidence_ppm, std::memory_order_relaxed);
    h->idle_fraction_ppm.store(stats_.idle_fraction_ppm, std::memory_order_relaxed);
    h->iteration.store(stats_.iteration, std::memory_order_relaxed);
    h->coverage_ppm.store(stats_.coverage_ppm, std::memory_order_relaxed);
    h->precision_ppm.store(stats_.precision_ppm, std::memory_order_relaxed);
    // Release: pairs with the reader's acquire load of state_seq; even = block complete.
    h->state_seq.store(++state_seq_, std::memory_order_release);
}

bool ChannelWriter::retired() const noexcept {
    return header_ != nullptr && header_->lifecycle.load(std::memory_order_relaxed) ==
                                     static_cast<uint32_t>(Lifecycle::kRetired);
}

void ChannelWriter::close() noexcept {
    if (header_ == nullptr) {
        return;
    }
    uint32_t expected = static_cast<uint32_t>(Lifecycle::kLive);
    // Release (M5): readers that see kClosed have seen every record published before.
    // A CAS, not a store: a newer writer that retired this segment must stay visible.
    header_->lifecycle.compare_exchange_strong(expected, static_cast<uint32_t>(Lifecycle::kClosed),
                                               std::memory_order_release,
                                               std::memory_order_relaxed);
    if (!options_.keep_on_close) {
        try {
            // Unlink only our own object: after a take-over the name is the new writer's.
            auto now_named = detail::ShmMapping::identify(name_);
            if (now_named.isOk() && now_named.value() == mapping_.id()) {
                ::shm_unlink(name_.c_str());
            }
        } catch (...) {
            // Out of memory building an error message: leave the name; the next writer
            // replaces it.
        }
    }
    header_ = nullptr;
    windows_ = nullptr;
    idle_ = nullptr;
    mapping_.reset();
}

}  // namespace atlas::channel
