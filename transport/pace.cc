#include "transport/pace.h"

#include <algorithm>

namespace atlas::transport {

uint64_t streamPaceBytes(uint64_t pace_bps, uint64_t queued, uint64_t total) {
    if (pace_bps == 0 || queued == 0 || total == 0) {
        return 0;
    }
    queued = std::min(queued, total);
    // In 128 bits: bits/s x bytes overflows 64 bits above 16 EB x s.
    const unsigned __int128 share = static_cast<unsigned __int128>(pace_bps / 8) * queued / total;
    return std::max(static_cast<uint64_t>(share), kMinStreamPaceBytes);
}

bool paceChanged(uint64_t have, uint64_t want) {
    if (have == want) {
        return false;
    }
    if (have == 0 || want == 0) {
        return true;
    }
    return want + want / 8 < have || have + have / 8 < want;
}

}  // namespace atlas::transport
