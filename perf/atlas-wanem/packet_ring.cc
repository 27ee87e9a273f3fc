#include "perf/atlas-wanem/packet_ring.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace atlas::wanem {

size_t PacketRing::recordBytes(uint32_t len) {
    return (sizeof(RecordHeader) + size_t{len} + 7) & ~size_t{7};
}

PacketRing::~PacketRing() {
    if (base_ != nullptr) {
        munmap(base_, cap_);
    }
}

PacketRing::PacketRing(PacketRing&& other) noexcept {
    *this = std::move(other);
}

PacketRing& PacketRing::operator=(PacketRing&& other) noexcept {
    if (this != &other) {
        if (base_ != nullptr) {
            munmap(base_, cap_);
        }
        base_ = std::exchange(other.base_, nullptr);
        cap_ = std::exchange(other.cap_, 0);
        head_ = std::exchange(other.head_, 0);
        tail_ = std::exchange(other.tail_, 0);
        used_ = std::exchange(other.used_, 0);
        reserved_at_ = std::exchange(other.reserved_at_, 0);
        reserved_wrap_ = std::exchange(other.reserved_wrap_, false);
    }
    return *this;
}

Result<PacketRing> PacketRing::create(size_t capacity_bytes) {
    const size_t cap = (capacity_bytes + 7) & ~size_t{7};
    if (cap < 2 * sizeof(RecordHeader)) {
        return Status(Code::kInvalidArgument, "packet ring capacity too small");
    }
    void* mem = mmap(nullptr, cap, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mem == MAP_FAILED) {
        return Status::fromErrno("mmap of " + std::to_string(cap) + " ring bytes", errno);
    }
    PacketRing ring;
    ring.base_ = static_cast<uint8_t*>(mem);
    ring.cap_ = cap;
    return ring;
}

uint8_t* PacketRing::reserve(uint32_t len) {
    const size_t need = recordBytes(len);
    if (used_ == 0) {
        head_ = tail_ = 0;
    }
    reserved_wrap_ = false;
    if (used_ == 0 || tail_ > head_) {
        // Data occupies [head_, tail_); free space is [tail_, cap_) then [0, head_).
        if (cap_ - tail_ >= need) {
            reserved_at_ = tail_;
        } else if (head_ >= need) {
            reserved_at_ = 0;
            reserved_wrap_ = true;
        } else {
            return nullptr;
        }
    } else {
        // Wrapped: data occupies [head_, cap_) and [0, tail_); free space is [tail_, head_).
        if (head_ - tail_ >= need) {
            reserved_at_ = tail_;
        } else {
            return nullptr;
        }
    }
    return base_ + reserved_at_ + sizeof(RecordHeader);
}

void PacketRing::commit(Nanos deliver_ns, uint32_t len, uint32_t segments) {
    if (reserved_wrap_) {
        // The rest of the ring after tail_ is waste until the reader passes it.
        if (cap_ - tail_ >= sizeof(RecordHeader)) {
            RecordHeader marker{0, 0, kWrapMarker};
            std::memcpy(base_ + tail_, &marker, sizeof(marker));
        }
        used_ += cap_ - tail_;
        tail_ = 0;
        reserved_wrap_ = false;
    }
    RecordHeader h{deliver_ns, len, segments};
    std::memcpy(base_ + reserved_at_, &h, sizeof(h));
    const size_t bytes = recordBytes(len);
    tail_ = reserved_at_ + bytes;
    used_ += bytes;
    if (tail_ == cap_) {
        tail_ = 0;
    }
}

const PacketRing::RecordHeader* PacketRing::headRecord() const {
    return reinterpret_cast<const RecordHeader*>(base_ + head_);
}

Nanos PacketRing::headDeliverNs() const {
    return headRecord()->deliver_ns;
}
uint32_t PacketRing::headSegments() const {
    return headRecord()->segments;
}

std::span<const uint8_t> PacketRing::headFrame() const {
    return {base_ + head_ + sizeof(RecordHeader), headRecord()->len};
}

void PacketRing::skipWrap() {
    if (used_ == 0) {
        head_ = tail_ = 0;
        return;
    }
    const bool short_tail = cap_ - head_ < sizeof(RecordHeader);
    if (short_tail || headRecord()->segments == kWrapMarker) {
        used_ -= cap_ - head_;
        head_ = 0;
    }
    if (used_ == 0) {
        head_ = tail_ = 0;
    }
}

void PacketRing::pop() {
    const size_t bytes = recordBytes(headRecord()->len);
    head_ += bytes;
    used_ -= bytes;
    if (head_ == cap_) {
        head_ = 0;
    }
    skipWrap();
}

}  // namespace atlas::wanem
