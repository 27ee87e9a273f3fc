#include "channel/channel_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <new>
#include <utility>

#include "channel/channel_name.h"
#include "channel/seqlock.h"

namespace atlas::channel {

namespace {

constexpr std::align_val_t kImageAlign{64};

Status outOfMemory() {
    return {Code::kInternal, "out of memory"};
}

void copyWindow(const WindowRecord& r, WindowRecordView& v) {
    v.window.start_ns = r.start_ns.load(std::memory_order_relaxed);
    v.window.end_ns = r.end_ns.load(std::memory_order_relaxed);
    v.window.iteration = r.iteration.load(std::memory_order_relaxed);
    v.window.confidence_ppm = r.confidence_ppm.load(std::memory_order_relaxed);
    v.window.source = static_cast<WindowSource>(r.source.load(std::memory_order_relaxed));
    v.set_id = r.set_id.load(std::memory_order_relaxed);
    v.published_ns = r.published_ns.load(std::memory_order_relaxed);
    v.set_count = r.set_count.load(std::memory_order_relaxed);
    v.set_index = r.set_index.load(std::memory_order_relaxed);
}

void copyIdle(const IdleRecord& r, IdleInterval& v) {
    v.start_ns = r.start_ns.load(std::memory_order_relaxed);
    v.end_ns = r.end_ns.load(std::memory_order_relaxed);
    v.iteration = r.iteration.load(std::memory_order_relaxed);
    v.transfer_start_ns = r.transfer_start_ns.load(std::memory_order_relaxed);
    v.transfer_bytes = r.transfer_bytes.load(std::memory_order_relaxed);
    v.taken_step_ns = decodeStepTime(r.taken_step.load(std::memory_order_relaxed), v.end_ns);
    v.open_from_step_ns =
        decodeStepTime(r.open_from_step.load(std::memory_order_relaxed), v.start_ns);
    v.open_to_step_ns = decodeStepTime(r.open_to_step.load(std::memory_order_relaxed), v.end_ns);
    v.transfer_seen_step_ns =
        decodeStepTime(r.transfer_seen_step.load(std::memory_order_relaxed), v.transfer_start_ns);
}

bool validWindow(const WindowRecordView& v, uint32_t max_set) {
    if (v.set_count > max_set || v.set_id == 0) {
        return false;
    }
    if (v.set_count == 0) {
        return v.set_index == 0;
    }
    return v.set_index < v.set_count && v.window.end_ns >= v.window.start_ns &&
           v.window.confidence_ppm <= kPpmOne;
}

// Reads ring records [cursor.next, head) into batch (protocol M2/M3). Shared by both rings.
template <typename Record, typename View, typename Copy, typename Valid>
void readRing(const Record* cells, uint32_t capacity, uint64_t head, ReadCursor& cursor,
              size_t max_records, Batch<View>& batch, Copy copy, Valid valid) {
    const uint64_t oldest = head > capacity ? head - capacity : 0;
    if (cursor.next < oldest) {
        batch.lost += oldest - cursor.next;
        cursor.next = oldest;
    }
    const uint64_t available = head - cursor.next;
    const uint64_t count = std::min<uint64_t>(available, max_records);
    batch.records.reserve(static_cast<size_t>(std::min<uint64_t>(count, capacity)));
    for (uint64_t n = cursor.next; n < cursor.next + count; ++n) {
        View v{};
        switch (detail::readCell(cells[n % capacity], n, [&](const Record& r) { copy(r, v); })) {
            case detail::CellRead::kOk:
                if (valid(v)) {
                    batch.records.push_back(v);
                } else {
                    ++batch.invalid;
                }
                break;
            case detail::CellRead::kOverwritten:
                // The writer lapped this reader while it was reading: the record is gone.
                ++batch.lost;
                break;
            case detail::CellRead::kNotWritten:
                // Below head but never completed: only a corrupt segment does this.
                ++batch.invalid;
                break;
        }
    }
    cursor.next += count;
}

}  // namespace

const char* refreshOutcomeName(RefreshOutcome outcome) {
    switch (outcome) {
        case RefreshOutcome::kUnchanged:
            return "unchanged";
        case RefreshOutcome::kRestarted:
            return "restarted";
        case RefreshOutcome::kWriterClosed:
            return "writer closed";
        case RefreshOutcome::kWriterDead:
            return "writer dead";
        case RefreshOutcome::kGone:
            return "gone";
    }
    return "unknown";
}

void ChannelReader::AlignedFree::operator()(std::byte* p) const {
    ::operator delete(p, kImageAlign);
}

Result<ChannelReader> ChannelReader::open(const std::string& name, ReaderOptions options) noexcept {
    try {
        ATLAS_RETURN_IF_ERROR(validateChannelName(name));
        auto mapping = detail::ShmMapping::openExisting(name, /*writable=*/false);
        if (!mapping.isOk()) {
            return mapping.status();
        }
        ChannelReader r;
        r.name_ = name;
        r.options_ = options;
        const void* base = mapping.value().data();
        const size_t size = mapping.value().size();
        ATLAS_RETURN_IF_ERROR(r.attach(std::move(mapping.value()), base, size));
        return r;
    } catch (...) {
        return outOfMemory();
    }
}

Result<ChannelReader> ChannelReader::fromImage(const void* data, size_t size,
                                               ReaderOptions options) noexcept {
    try {
        if (size > detail::kMaxSegmentBytes) {
            return Status(Code::kRemote, "bubble channel image: " + std::to_string(size) +
                                             " bytes is more than any valid channel");
        }
        ChannelReader r;
        r.options_ = options;
        // A private, 64-byte aligned copy: the atomics need alignment the caller's buffer
        // may not have, and a snapshot cannot change under validation.
        const size_t alloc = std::max<size_t>(size, 1);
        r.image_.reset(static_cast<std::byte*>(::operator new(alloc, kImageAlign)));
        if (size > 0) {
            std::memcpy(r.image_.get(), data, size);
        }
        ATLAS_RETURN_IF_ERROR(r.attach(detail::ShmMapping(), r.image_.get(), size));
        return r;
    } catch (...) {
        return outOfMemory();
    }
}

Status ChannelReader::attach(detail::ShmMapping mapping, const void* base, size_t size) {
    ATLAS_RETURN_IF_ERROR(detail::validateSegment(base, size, name_));
    mapping_ = std::move(mapping);
    const auto* bytes = static_cast<const std::byte*>(base);
    header_ = reinterpret_cast<const SegmentHeader*>(bytes);
    windows_ = reinterpret_cast<const WindowRecord*>(bytes + header_->windows_offset);
    idle_ = reinterpret_cast<const IdleRecord*>(bytes + header_->idle_offset);
    info_.name = name_;
    info_.generation = header_->generation;
    info_.writer_pid = header_->writer_pid;
    info_.writer_start_ns = header_->writer_start_ns;
    info_.window_capacity = header_->window_capacity;
    info_.idle_capacity = header_->idle_capacity;
    info_.layout_size = header_->layout_size;
    info_.mapped_size = size;
    return Status::ok();
}

Lifecycle ChannelReader::lifecycle() const noexcept {
    // Acquire (M5): pairs with the writer's release store of kClosed/kRetired.
    return static_cast<Lifecycle>(header_->lifecycle.load(std::memory_order_acquire));
}

bool ChannelReader::writerAlive() const noexcept {
    if (image_ != nullptr) {
        return true;
    }
    // EPERM: alive but owned by another user.
    return ::kill(info_.writer_pid, 0) == 0 || errno == EPERM;
}

WriterCounters ChannelReader::writerCounters() const noexcept {
    WriterCounters c;
    c.window_records = header_->window_head.load(std::memory_order_relaxed);
    c.idle_records = header_->idle_head.load(std::memory_order_relaxed);
    c.prediction_sets = header_->prediction_sets.load(std::memory_order_relaxed);
    c.rejected_records = header_->rejected_records.load(std::memory_order_relaxed);
    c.last_write_ns = header_->last_write_ns.load(std::memory_order_relaxed);
    return c;
}

void ChannelReader::followRetirement() noexcept {
    if (image_ != nullptr || lifecycle() != Lifecycle::kRetired) {
        return;
    }
    // The successor may not exist yet or may still be initialising: then keep reading the
    // retired segment (its data stays valid) and try again on the next read.
    auto outcome = refresh();
    (void)outcome;
}

bool ChannelReader::cursorIsCurrent(const ReadCursor& cursor) const {
    return cursor.generation == info_.generation && cursor.writer_start_ns == info_.writer_start_ns;
}

void ChannelReader::resetCursor(ReadCursor& cursor, uint64_t head, uint32_t capacity) const {
    cursor.generation = info_.generation;
    cursor.writer_start_ns = info_.writer_start_ns;
    cursor.next = head > capacity ? head - capacity : 0;
}

Result<PredictionSet> ChannelReader::readPredictions() noexcept {
    try {
        followRetirement();
        const uint32_t capacity = info_.window_capacity;
        const uint32_t max_set = maxPredictionSet(capacity);
        PredictionSet set;
        set.generation = info_.generation;
        for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
            // Acquire (M3): pairs with the writer's release store of window_head, which
            // published the newest set in one step.
            const uint64_t head = header_->window_head.load(std::memory_order_acquire);
            if (head == 0) {
                return set;
            }
            const uint64_t last = head - 1;
            WindowRecordView tail{};
            const auto r = detail::readCell(windows_[last % capacity], last,
                                            [&](const WindowRecord& w) { copyWindow(w, tail); });
            if (r == detail::CellRead::kOverwritten) {
                continue;  // two sets went by while we looked; try the newest
            }
            if (r == detail::CellRead::kNotWritten || !validWindow(tail, max_set) ||
                (tail.set_count != 0 && tail.set_index != tail.set_count - 1) ||
                tail.set_count > head) {
                ++counters_.invalid;
                return Status(Code::kRemote, "bubble channel '" + name_ +
                                                 "': corrupt prediction ring at record " +
                                                 std::to_string(last));
            }
            set.set_id = tail.set_id;
            set.published_ns = tail.published_ns;
            set.windows.clear();
            if (tail.set_count == 0) {
                return set;
            }
            const uint64_t first = head - tail.set_count;
            bool torn = false;
            for (uint64_t n = first; n <= last && !torn; ++n) {
                WindowRecordView v{};
                const auto rr = detail::readCell(windows_[n % capacity], n,
                                                 [&](const WindowRecord& w) { copyWindow(w, v); });
                if (rr == detail::CellRead::kOverwritten) {
                    torn = true;
                } else if (rr == detail::CellRead::kNotWritten || !validWindow(v, max_set) ||
                           v.set_id != tail.set_id || v.set_index != n - first ||
                           v.set_count != tail.set_count) {
                    ++counters_.invalid;
                    return Status(Code::kRemote, "bubble channel '" + name_ +
                                                     "': corrupt prediction set " +
                                                     std::to_string(tail.set_id));
                } else {
                    set.windows.push_back(v.window);
                }
            }
            if (!torn) {
                return set;
            }
        }
        ++counters_.busy;
        return Status(Code::kUnavailable,
                      "bubble channel '" + name_ + "': writer busy (prediction set changed in " +
                          std::to_string(options_.max_attempts) + " read attempts)");
    } catch (...) {
        return outOfMemory();
    }
}

Result<ObservedBatch> ChannelReader::readObservedSince(ReadCursor& cursor,
                                                       size_t max_records) noexcept {
    try {
        followRetirement();
        ObservedBatch batch;
        batch.generation = info_.generation;
        // Acquire (M3): pairs with the writer's release store of idle_head.
        const uint64_t head = header_->idle_head.load(std::memory_order_acquire);
        if (!cursorIsCurrent(cursor) || cursor.next > head) {
            batch.resynced = cursor.generation != 0;
            resetCursor(cursor, head, info_.idle_capacity);
        }
        readRing(idle_, info_.idle_capacity, head, cursor, max_records, batch, copyIdle,
                 validIdleInterval);
        counters_.lost += batch.lost;
        counters_.invalid += batch.invalid;
        return batch;
    } catch (...) {
        return outOfMemory();
    }
}

Result<WindowBatch> ChannelReader::readWindowsSince(ReadCursor& cursor,
                                                    size_t max_records) noexcept {
    try {
        followRetirement();
        WindowBatch batch;
        batch.generation = info_.generation;
        const uint32_t max_set = maxPredictionSet(info_.window_capacity);
        // Acquire (M3): pairs with the writer's release store of window_head.
        const uint64_t head = header_->window_head.load(std::memory_order_acquire);
        if (!cursorIsCurrent(cursor) || cursor.next > head) {
            batch.resynced = cursor.generation != 0;
            resetCursor(cursor, head, info_.window_capacity);
        }
        readRing(windows_, info_.window_capacity, head, cursor, max_records, batch, copyWindow,
                 [&](const WindowRecordView& v) { return validWindow(v, max_set); });
        counters_.lost += batch.lost;
        counters_.invalid += batch.invalid;
        return batch;
    } catch (...) {
        return outOfMemory();
    }
}

Result<StateSnapshot> ChannelReader::readState() noexcept {
    try {
        followRetirement();
        const SegmentHeader* h = header_;
        for (int attempt = 0; attempt < options_.max_attempts; ++attempt) {
            // Acquire: pairs with the writer's release store of the even state_seq (M4).
            const uint64_t s1 = h->state_seq.load(std::memory_order_acquire);
            if (s1 % 2 != 0) {
                continue;
            }
            StateSnapshot s;
            s.state = static_cast<PredictorState>(h->state.load(std::memory_order_relaxed));
            s.reason = static_cast<StatusReason>(h->reason.load(std::memory_order_relaxed));
            s.since_ns = h->state_since_ns.load(std::memory_order_relaxed);
            s.stats_updated_ns = h->stats_updated_ns.load(std::memory_order_relaxed);
            s.stats.period_ns = h->period_ns.load(std::memory_order_relaxed);
            s.stats.period_confidence_ppm =
                h->period_confidence_ppm.load(std::memory_order_relaxed);
            s.stats.idle_fraction_ppm = h->idle_fraction_ppm.load(std::memory_order_relaxed);
            s.stats.iteration = h->iteration.load(std::memory_order_relaxed);
            s.stats.coverage_ppm = h->coverage_ppm.load(std::memory_order_relaxed);
            s.stats.precision_ppm = h->precision_ppm.load(std::memory_order_relaxed);
            // Acquire fence: pairs with the writer's release fence after it made the seq
            // odd; orders the copies above before the re-check.
            std::atomic_thread_fence(std::memory_order_acquire);
            if (h->state_seq.load(std::memory_order_relaxed) == s1) {
                return s;
            }
        }
        ++counters_.busy;
        return Status(Code::kUnavailable,
                      "bubble channel '" + name_ + "': writer busy (state changed in " +
                          std::to_string(options_.max_attempts) + " read attempts)");
    } catch (...) {
        return outOfMemory();
    }
}

Result<RefreshOutcome> ChannelReader::refresh() noexcept {
    try {
        if (image_ != nullptr) {
            return RefreshOutcome::kUnchanged;
        }
        auto now_named = detail::ShmMapping::identify(name_);
        if (!now_named.isOk()) {
            if (now_named.status().code() != Code::kUnavailable) {
                return now_named.status();
            }
            return RefreshOutcome::kGone;
        }
        const Lifecycle current = lifecycle();
        if (now_named.value() == mapping_.id() && current != Lifecycle::kRetired) {
            if (current == Lifecycle::kClosed) {
                return RefreshOutcome::kWriterClosed;
            }
            return writerAlive() ? RefreshOutcome::kUnchanged : RefreshOutcome::kWriterDead;
        }
        // The name points to another object (or ours was retired): switch to it.
        auto mapping = detail::ShmMapping::openExisting(name_, /*writable=*/false);
        if (!mapping.isOk()) {
            if (mapping.status().code() == Code::kUnavailable) {
                return RefreshOutcome::kGone;
            }
            return mapping.status();
        }
        if (mapping.value().id() == mapping_.id()) {
            // Retired but not yet replaced (the successor is between unlink and create).
            return RefreshOutcome::kGone;
        }
        const uint64_t old_generation = info_.generation;
        const Nanos old_start = info_.writer_start_ns;
        const void* base = mapping.value().data();
        const size_t size = mapping.value().size();
        // attach() validates before it changes anything: a successor that is still
        // initialising leaves this reader on its current segment.
        ATLAS_RETURN_IF_ERROR(attach(std::move(mapping.value()), base, size));
        if (info_.generation != old_generation || info_.writer_start_ns != old_start) {
            ++counters_.restarts;
        }
        return RefreshOutcome::kRestarted;
    } catch (...) {
        return outOfMemory();
    }
}

}  // namespace atlas::channel
