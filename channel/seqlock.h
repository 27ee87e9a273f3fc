// Internal to channel/: the slot seqlock (protocol M2 in atlas/bubble_channel.h)
// shared by the window and idle rings. Writer side is wait-free (a fixed number of stores);
// reader side copies one slot once and says whether the copy is the record it asked for.
#pragma once

#include <atomic>
#include <cstdint>

namespace atlas::channel::detail {

// Seq value of a slot once record number n is complete in it (odd 2n+1 while writing).
inline constexpr uint64_t completeSeq(uint64_t n) {
    return 2 * n + 2;
}

// Writes record number n into `slot`. `fill(slot)` must only do relaxed stores to the
// record's fields. Only the segment's single writer may call this.
template <typename Record, typename Fill>
inline void writeSlot(Record& slot, uint64_t n, Fill&& fill) noexcept {
    slot.seq.store(2 * n + 1, std::memory_order_relaxed);
    // Release fence: orders the odd seq before the field stores below. Pairs with the
    // reader's acquire fence in readSlot(): a reader that copied any field value written
    // after this fence will load seq >= 2n+1 on its re-check and drop the copy.
    std::atomic_thread_fence(std::memory_order_release);
    fill(slot);
    // Release: pairs with the reader's acquire load of seq; a reader that sees 2n+2 sees
    // every field stored by fill().
    slot.seq.store(completeSeq(n), std::memory_order_release);
}

enum class SlotRead {
    kOk,           // the copy is record n, untorn
    kNotWritten,   // the slot holds an older record or n is mid-write: n is not complete
    kOverwritten,  // a later record took the slot before or while we copied: n is lost
};

// Copies record number n out of `slot` with `copy(slot)`, which must only do relaxed loads
// into the caller's memory. The result tells whether the copy may be used.
template <typename Record, typename Copy>
inline SlotRead readSlot(const Record& slot, uint64_t n, Copy&& copy) noexcept {
    const uint64_t want = completeSeq(n);
    // Acquire: pairs with the writer's release store of completeSeq(n).
    const uint64_t s1 = slot.seq.load(std::memory_order_acquire);
    if (s1 != want) {
        return s1 < want ? SlotRead::kNotWritten : SlotRead::kOverwritten;
    }
    copy(slot);
    // Acquire fence: pairs with the writer's release fence in writeSlot(); orders the field
    // loads above before the re-check of seq below.
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t s2 = slot.seq.load(std::memory_order_relaxed);
    return s2 == want ? SlotRead::kOk : SlotRead::kOverwritten;
}

}  // namespace atlas::channel::detail
