// A FIFO of frames waiting for their delivery time, stored back to back in one byte ring.
//
// Delivery times on one path never decrease (constant delay, jitter clamped), so a FIFO is
// all the delay line needs: no heap, no timer wheel. Records are {deliver_ns, len, segments}
// headers followed by the frame, 8-byte aligned; a record that does not fit before the end
// wraps to the start. The memory is an anonymous MAP_NORESERVE mapping, so capacity that is
// never reached costs no RAM.
//
// Not thread-safe: one direction thread both pushes and pops.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"

namespace atlas::wanem {

class PacketRing {
  public:
    PacketRing() = default;
    ~PacketRing();
    PacketRing(PacketRing&& other) noexcept;
    PacketRing& operator=(PacketRing&& other) noexcept;
    PacketRing(const PacketRing&) = delete;
    PacketRing& operator=(const PacketRing&) = delete;

    // Maps `capacity_bytes` (rounded up to 8) of ring memory.
    static Result<PacketRing> create(size_t capacity_bytes);

    // Space for a frame of up to `len` bytes, or nullptr when the ring is full. The space is
    // only queued by commit(); a later reserve() without commit() reuses it.
    uint8_t* reserve(uint32_t len);
    // Queues the frame written into the last reserve()d space. `len` <= the reserved length.
    void commit(Nanos deliver_ns, uint32_t len, uint32_t segments);

    bool empty() const { return used_ == 0; }
    size_t usedBytes() const { return used_; }
    size_t capacity() const { return cap_; }

    // The oldest frame. Only valid when !empty().
    Nanos headDeliverNs() const;
    uint32_t headSegments() const;
    std::span<const uint8_t> headFrame() const;
    void pop();

    // Bytes a record of `len` frame bytes occupies (header + padding).
    static size_t recordBytes(uint32_t len);

  private:
    struct RecordHeader {
        int64_t deliver_ns;
        uint32_t len;
        uint32_t segments;  // kWrapMarker: skip to the start of the ring
    };
    static constexpr uint32_t kWrapMarker = 0xffffffffu;

    const RecordHeader* headRecord() const;
    void skipWrap();

    uint8_t* base_ = nullptr;
    size_t cap_ = 0;
    size_t head_ = 0;  // offset of the oldest record
    size_t tail_ = 0;  // offset where the next record goes
    size_t used_ = 0;  // bytes between head_ and tail_, counting wrap waste
    size_t reserved_at_ = 0;
    bool reserved_wrap_ = false;
};

}  // namespace atlas::wanem
