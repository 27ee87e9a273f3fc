#include "transport/ranges.h"

#include <algorithm>

namespace atlas::transport {

size_t ReceivedRanges::firstEndingAfter(uint64_t x) const {
    size_t lo = 0, hi = iv_.size();
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (iv_[mid].second <= x) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

uint64_t ReceivedRanges::insert(uint64_t begin, uint64_t end) {
    if (begin >= end) {
        return 0;
    }
    // Intervals touching or overlapping [begin, end) merge into one: from the first whose end
    // reaches begin to the last whose start is at most end.
    size_t i = begin == 0 ? 0 : firstEndingAfter(begin - 1);
    size_t j = i;
    uint64_t lo = begin, hi = end, already = 0;
    while (j < iv_.size() && iv_[j].first <= end) {
        lo = std::min(lo, iv_[j].first);
        hi = std::max(hi, iv_[j].second);
        already += iv_[j].second - iv_[j].first;
        ++j;
    }
    const uint64_t added = (hi - lo) - already;
    if (i == j) {
        iv_.insert(iv_.begin() + static_cast<long>(i), {lo, hi});
    } else {
        iv_[i] = {lo, hi};
        iv_.erase(iv_.begin() + static_cast<long>(i) + 1, iv_.begin() + static_cast<long>(j));
    }
    covered_ += added;
    return added;
}

bool ReceivedRanges::contains(uint64_t begin, uint64_t end) const {
    if (begin >= end) {
        return true;
    }
    const size_t i = firstEndingAfter(begin);
    return i < iv_.size() && iv_[i].first <= begin && iv_[i].second >= end;
}

ReceivedRanges::Run ReceivedRanges::runAt(uint64_t at, uint64_t end) const {
    const size_t i = firstEndingAfter(at);
    if (i < iv_.size() && iv_[i].first <= at) {
        return {true, std::min(end, iv_[i].second) - at};
    }
    const uint64_t gap_end = i < iv_.size() ? std::min(end, iv_[i].first) : end;
    return {false, gap_end - at};
}

}  // namespace atlas::transport
