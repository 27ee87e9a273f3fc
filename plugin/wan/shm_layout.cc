#include "plugin/wan/shm_layout.h"

#include <cstring>
#include <string>

namespace atlas::plugin::wan {

Status validateSegmentHeader(const void* base, size_t size) {
    if (size < offsetof(ShmSegment, lock)) {
        return {Code::kInvalidUsage,
                "not an Atlas arbitration segment (" + std::to_string(size) +
                    " bytes, too small): another program uses this name; choose another "
                    "ATLAS_NODE_SHM"};
    }
    // Read through memcpy: the bytes may come from anywhere (fuzzer, a foreign segment).
    uint64_t magic = 0;
    uint32_t version = 0;
    uint32_t layout_size = 0;
    uint32_t max_procs = 0;
    uint32_t max_flows = 0;
    int64_t slot_ns = 0;
    int64_t lease_ns = 0;
    int64_t max_wait_ns = 0;
    const auto* b = static_cast<const uint8_t*>(base);
    std::memcpy(&magic, b + offsetof(ShmSegment, magic), sizeof(magic));
    std::memcpy(&version, b + offsetof(ShmSegment, version), sizeof(version));
    std::memcpy(&layout_size, b + offsetof(ShmSegment, layout_size), sizeof(layout_size));
    std::memcpy(&max_procs, b + offsetof(ShmSegment, max_procs), sizeof(max_procs));
    std::memcpy(&max_flows, b + offsetof(ShmSegment, max_flows), sizeof(max_flows));
    std::memcpy(&slot_ns, b + offsetof(ShmSegment, slot_ns), sizeof(slot_ns));
    std::memcpy(&lease_ns, b + offsetof(ShmSegment, lease_ns), sizeof(lease_ns));
    std::memcpy(&max_wait_ns, b + offsetof(ShmSegment, max_wait_ns), sizeof(max_wait_ns));
    if (magic != kShmMagic) {
        return {Code::kInvalidUsage,
                "not an Atlas arbitration segment (bad magic): another program uses this name; "
                "choose another ATLAS_NODE_SHM"};
    }
    if (version != kShmVersion) {
        return {Code::kInvalidUsage,
                "arbitration segment version " + std::to_string(version) + ", this plugin speaks " +
                    std::to_string(kShmVersion) +
                    ": a different Atlas build is running on this host; use the same build "
                    "everywhere or another ATLAS_NODE_SHM"};
    }
    if (layout_size != sizeof(ShmSegment) || size != sizeof(ShmSegment) ||
        max_procs != kShmMaxProcs || max_flows != kShmMaxFlows) {
        return {Code::kInvalidUsage, "arbitration segment layout differs (size " +
                                         std::to_string(size) + "/" + std::to_string(layout_size) +
                                         ", expected " + std::to_string(sizeof(ShmSegment)) +
                                         "): a different Atlas build (or libc) created it"};
    }
    if (slot_ns < 0 || lease_ns <= 0 || max_wait_ns <= 0) {
        return {Code::kInvalidUsage, "arbitration segment has an invalid slot, lease or max wait"};
    }
    return Status::ok();
}

namespace {

bool usedFlowHasProcess(const ShmSegment& seg, uint32_t i) {
    const int32_t p = seg.flows[i].proc;
    return p >= 0 && p < static_cast<int32_t>(kShmMaxProcs) &&
           seg.procs[p].pid.load(std::memory_order_relaxed) != 0;
}

}  // namespace

Status validateSegmentTable(const ShmSegment& seg) {
    ATLAS_RETURN_IF_ERROR(sched::TemporalCore::view(seg.fifo, seg.entries).validate());
    for (uint32_t i = 0; i < kShmMaxFlows; ++i) {
        if (seg.entries[i].state != sched::kEntryUnused && !usedFlowHasProcess(seg, i)) {
            return {Code::kInternal, "flow " + std::to_string(i) + " names no registered process"};
        }
    }
    if (!seg.rate.consistent()) {
        return {Code::kInternal, "the pooled link rate's state is out of range"};
    }
    return Status::ok();
}

uint64_t addSegmentRateSample(ShmSegment& seg, uint64_t bytes, Nanos first_ns, Nanos last_ns,
                              size_t* live) {
    if (!seg.rate.consistent()) {
        seg.rate = sched::PathRate();
    }
    const uint64_t bps = seg.rate.addAndEstimate(bytes, first_ns, last_ns, live);
    seg.rate_bps.store(bps, std::memory_order_relaxed);
    return bps;
}

uint32_t repairSegmentTable(ShmSegment& seg) {
    ++seg.recoveries;
    seg.sweep = 1;
    sched::TemporalCore fifo = segmentFifo(seg);
    uint32_t fixes = fifo.repair();
    for (uint32_t i = 0; i < kShmMaxFlows; ++i) {
        if (seg.entries[i].state != sched::kEntryUnused && !usedFlowHasProcess(seg, i)) {
            fifo.close(i);
            ++fixes;
        }
    }
    if (!seg.rate.consistent()) {
        seg.rate = sched::PathRate();
        seg.rate_bps.store(0, std::memory_order_relaxed);
        ++fixes;
    }
    return fixes;
}

}  // namespace atlas::plugin::wan
