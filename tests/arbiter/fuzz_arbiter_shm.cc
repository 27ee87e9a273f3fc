// libFuzzer target: a node-local arbitration segment image (plugin/wan/shm_layout.h), the
// bytes another process on the host wrote. The input is a prefix of the image (the rest is
// zero), optionally followed by a script of FIFO operations.
//  - The header check runs on the real input size and on the full image.
//  - When the header passes: the table check; the FIFO operations that engine threads and
//    watchers run (TemporalCore over the segment's state) must stay inside the segment
//    whatever the table holds; repairSegmentTable() must always end in a table that
//    validateSegmentTable() accepts; and the operations must keep it valid from there on.
//    The pooled rate (op 4) goes through addSegmentRateSample, which must never index outside
//    its ring whatever the segment held. A violation aborts (that is the finding).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "plugin/wan/shm_layout.h"

namespace {

using atlas::plugin::wan::kShmMaxFlows;
using atlas::plugin::wan::ShmSegment;

// Script: 3 bytes per operation {op, entry, time step}; an open takes its priority from the
// op byte's high bits (0..31: out-of-range values included, which open() clamps); op 4 adds
// a train of (entry + 1) x 64 KiB over (time step + 1) x 100 us to the pooled rate.
void runScript(ShmSegment& seg, const uint8_t* ops, size_t n, bool check) {
    atlas::sched::TemporalCore f = atlas::plugin::wan::segmentFifo(seg);
    atlas::Nanos now = 1'000'000;
    for (size_t i = 0; i + 3 <= n; i += 3) {
        const uint32_t e = ops[i + 1] % kShmMaxFlows;
        now += static_cast<atlas::Nanos>(ops[i + 2]) * 1000;
        switch (ops[i] % 5) {
            case 0:
                f.open(e, static_cast<uint8_t>(ops[i] >> 3));
                break;
            case 1:
                f.join(e, now);
                break;
            case 2:
                f.leave(e);
                break;
            case 3:
                f.close(e);
                break;
            default: {
                size_t live = 0;
                const atlas::Nanos dispersion =
                    (static_cast<atlas::Nanos>(ops[i + 2]) + 1) * 100'000;
                (void)atlas::plugin::wan::addSegmentRateSample(
                    seg, (static_cast<uint64_t>(e) + 1) << 16, now - dispersion, now, &live);
                if (check && !seg.rate.consistent()) {
                    std::abort();  // adding a sample broke the rate's invariants
                }
                break;
            }
        }
        f.decidePriority(now, seg.slot_ns, seg.max_wait_ns);
        (void)f.holder();
        (void)f.nextDecisionNs(now);
        if (check && !atlas::sched::TemporalCore::view(seg.fifo, seg.entries).validate().isOk()) {
            std::abort();  // the FIFO broke its own invariants
        }
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    (void)atlas::plugin::wan::validateSegmentHeader(data, size);
    // Aligned as a mapping is: the segment holds atomics and a mutex.
    alignas(64) static unsigned char image[sizeof(ShmSegment)];
    std::memset(image, 0, sizeof(image));
    if (size > 0) {  // an empty input may come with data == nullptr
        std::memcpy(image, data, std::min(size, sizeof(image)));
    }
    if (!atlas::plugin::wan::validateSegmentHeader(image, sizeof(image)).isOk()) {
        return 0;
    }
    auto* seg = std::launder(reinterpret_cast<ShmSegment*>(image));
    (void)atlas::plugin::wan::validateSegmentTable(*seg);
    const uint8_t* ops = size > sizeof(image) ? data + sizeof(image) : nullptr;
    const size_t nops = size > sizeof(image) ? size - sizeof(image) : 0;
    // Unvalidated state: memory-safe, nothing more promised.
    ShmSegment* raw = seg;
    alignas(64) static unsigned char copy[sizeof(ShmSegment)];
    std::memcpy(copy, image, sizeof(copy));
    runScript(*raw, ops, nops, false);
    // Repaired state: valid, and kept valid.
    std::memcpy(image, copy, sizeof(image));
    atlas::plugin::wan::repairSegmentTable(*seg);
    if (!atlas::plugin::wan::validateSegmentTable(*seg).isOk()) {
        std::abort();  // repair did not restore the invariants
    }
    runScript(*seg, ops, nops, true);
    return 0;
}
