// Internal to channel/: the cell seqlock (protocol M2 in atlas/bubble_channel.h)
// shared by the window and idle rings. Writer side is wait-free (a fixed number of stores);
// reader side copies one cell once and says whether the copy is the record it asked for.
#pragma once

#include <atomic>
#include <cstdint>

namespace atlas::channel::detail {

// Seq value of a cell once record number n is complete in it (odd 2n+1 while writing).
inline constexpr uint64_t completeSeq(uint64_t n) {
    return 2 * n + 2;
}

// Writes record number n into `cell`. `fill(cell)` must only do relaxed stores to the
// record's fields. Only the segment's single writer may call this.
template <typename Record, typename Fill>
inline void writeCell(Record& cell, uint64_t n, Fill&& fill) noexcept {
    cell.seq.store(2 * n + 1, std::memory_order_relaxed);
    // Release fence: orders the odd seq before the field stores below. Pairs with the
    // reader's acquire fence in readCell(): a reader that copied any field value written
    // after this fence will load seq >= 2n+1 on its re-check and drop the copy.
    std::atomic_thread_fence(std::memory_order_release);
    fill(cell);
    // Release: pairs with the reader's acquire load of seq; a reader that sees 2n+2 sees
    // every field stored by fill().
    cell.seq.store(completeSeq(n), std::memory_order_release);
}

enum class CellRead {
    kOk,           // the copy is record n, untorn
    kNotWritten,   // the cell holds an older record or n is mid-write: n is not complete
    kOverwritten,  // a later record took the cell before or while we copied: n is lost
};

// Copies record number n out of `cell` with `copy(cell)`, which must only do relaxed loads
// into the caller's memory. The result tells whether the copy may be used.
template <typename Record, typename Copy>
inline CellRead readCell(const Record& cell, uint64_t n, Copy&& copy) noexcept {
    const uint64_t want = completeSeq(n);
    // Acquire: pairs with the writer's release store of completeSeq(n).
    const uint64_t s1 = cell.seq.load(std::memory_order_acquire);
    if (s1 != want) {
        return s1 < want ? CellRead::kNotWritten : CellRead::kOverwritten;
    }
    copy(cell);
    // Acquire fence: pairs with the writer's release fence in writeCell(); orders the field
    // loads above before the re-check of seq below.
    std::atomic_thread_fence(std::memory_order_acquire);
    const uint64_t s2 = cell.seq.load(std::memory_order_relaxed);
    return s2 == want ? CellRead::kOk : CellRead::kOverwritten;
}

}  // namespace atlas::channel::detail
