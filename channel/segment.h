// Internal to channel/: owning a POSIX shm mapping, and validating a segment image
// against the ABI. Not part of the public API (the writer and reader headers are).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "atlas/bubble_channel.h"
#include "atlas/common/status.h"

namespace atlas::channel::detail {

// Which object a name pointed to when it was opened: a writer restart replaces the object,
// so a reader compares this to what the name points to now.
struct ObjectId {
    dev_t dev = 0;
    ino_t ino = 0;
    bool operator==(const ObjectId&) const = default;
};

// A shm object's fd and one mapping of it. Move-only; the destructor unmaps and closes.
// It never unlinks: the writer decides that. Not thread-safe.
class ShmMapping {
  public:
    ShmMapping() = default;
    ShmMapping(ShmMapping&& other) noexcept;
    ShmMapping& operator=(ShmMapping&& other) noexcept;
    ShmMapping(const ShmMapping&) = delete;
    ShmMapping& operator=(const ShmMapping&) = delete;
    ~ShmMapping();

    // Opens an existing object and maps all of it (read-only or read-write). Fails with
    // kUnavailable when the name does not exist, kSystem on other errors, and kRemote when
    // the object is smaller than a header or larger than kMaxSegmentBytes.
    static Result<ShmMapping> openExisting(const std::string& name, bool writable);
    // Creates a new object (O_EXCL) of `size` zero bytes with permission bits `mode`, mapped
    // read-write. Fails with kUnavailable when the name exists.
    static Result<ShmMapping> createExclusive(const std::string& name, size_t size, mode_t mode);
    // The object the name points to now (without mapping it).
    static Result<ObjectId> identify(const std::string& name);

    void* data() const { return data_; }
    size_t size() const { return size_; }
    ObjectId id() const { return id_; }
    bool valid() const { return data_ != nullptr; }
    void reset();

  private:
    int fd_ = -1;
    void* data_ = nullptr;
    size_t size_ = 0;
    ObjectId id_;
};

// Segments are bounded so a hostile size cannot make a reader map gigabytes.
inline constexpr uint64_t kMaxSegmentBytes = 1ull << 30;

// Checks everything a reader must check before touching rings: magic, version, clock id,
// record sizes, capacities in bounds, offsets and layout size equal to expectedLayout(),
// layout size <= image size, generation, pid and lifecycle. `name` only labels messages.
// Never reads outside [base, base + size). base must be 64-byte aligned.
Status validateSegment(const void* base, size_t size, std::string_view name);

}  // namespace atlas::channel::detail
