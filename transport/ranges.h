// ReceivedRanges: which bytes of one message the receiver has written into the posted buffer.
// The receiver's duplicate bookkeeping: a resent piece (same {seq, offset} as a piece that
// arrived on another stream, or the rest of a piece cut off by a stream failure) is read only
// into the gaps; bytes already written are dropped, so every byte of the posted buffer is
// written once.
//
// Sorted, disjoint, non-adjacent half-open intervals. Pieces arrive about in offset order on
// each of N streams, so there are O(N) intervals; operations are O(log k) to find, O(k) to
// insert. Owned by one thread (the comm's engine); no allocation once the capacity reached
// its high-water mark.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace atlas::transport {

class ReceivedRanges {
  public:
    void clear() {
        iv_.clear();
        covered_ = 0;
    }
    // Marks [begin, end) received; returns the bytes that were not covered before.
    uint64_t insert(uint64_t begin, uint64_t end);
    // Bytes covered by the union of every inserted range.
    uint64_t covered() const { return covered_; }
    bool contains(uint64_t begin, uint64_t end) const;

    // The run that starts at `at` and ends no later than `end` (at < end): whether its bytes
    // are all received, and its length (the longest such run).
    struct Run {
        bool received = false;
        uint64_t length = 0;
    };
    Run runAt(uint64_t at, uint64_t end) const;
    size_t intervals() const { return iv_.size(); }

  private:
    // Index of the first interval whose end is > x (the one containing x, or the next).
    size_t firstEndingAfter(uint64_t x) const;

    std::vector<std::pair<uint64_t, uint64_t>> iv_;
    uint64_t covered_ = 0;
};

}  // namespace atlas::transport
