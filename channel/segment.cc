#include "channel/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <utility>

namespace atlas::channel::detail {

namespace {

std::string label(std::string_view name) {
    return name.empty() ? std::string("bubble channel image")
                        : "bubble channel '" + std::string(name) + "'";
}

std::string hex64(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof(buf), "0x%016" PRIx64, v);
    return buf;
}

Status invalid(std::string_view name, const std::string& what) {
    return {Code::kRemote, label(name) + ": " + what};
}

}  // namespace

ShmMapping::ShmMapping(ShmMapping&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      id_(other.id_) {}

ShmMapping& ShmMapping::operator=(ShmMapping&& other) noexcept {
    if (this != &other) {
        reset();
        fd_ = std::exchange(other.fd_, -1);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        id_ = other.id_;
    }
    return *this;
}

ShmMapping::~ShmMapping() {
    reset();
}

void ShmMapping::reset() {
    if (data_ != nullptr) {
        ::munmap(data_, size_);
        data_ = nullptr;
    }
    if (fd_ >= 0) {
        ::close(fd_);
        fd_ = -1;
    }
    size_ = 0;
}

Result<ShmMapping> ShmMapping::openExisting(const std::string& name, bool writable) {
    ShmMapping m;
    m.fd_ = ::shm_open(name.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
    if (m.fd_ < 0) {
        const int err = errno;
        if (err == ENOENT) {
            return Status(Code::kUnavailable,
                          label(name) + " does not exist (no writer has created it yet)");
        }
        return Status::fromErrno(label(name) + ": shm_open", err);
    }
    struct stat st {};
    if (::fstat(m.fd_, &st) != 0) {
        return Status::fromErrno(label(name) + ": fstat", errno);
    }
    m.id_ = {st.st_dev, st.st_ino};
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size < kHeaderSize) {
        return Status(Code::kRemote, label(name) + ": segment too small: " + std::to_string(size) +
                                         " bytes, a header needs " + std::to_string(kHeaderSize) +
                                         " (truncated, or a writer still initialising it)");
    }
    if (size > kMaxSegmentBytes) {
        return Status(Code::kRemote, label(name) + ": segment is " + std::to_string(size) +
                                         " bytes, more than any valid channel (" +
                                         std::to_string(kMaxSegmentBytes) + ")");
    }
    const int prot = writable ? (PROT_READ | PROT_WRITE) : PROT_READ;
    void* p = ::mmap(nullptr, size, prot, MAP_SHARED, m.fd_, 0);
    if (p == MAP_FAILED) {
        return Status::fromErrno(label(name) + ": mmap", errno);
    }
    m.data_ = p;
    m.size_ = size;
    return m;
}

Result<ShmMapping> ShmMapping::createExclusive(const std::string& name, size_t size, mode_t mode) {
    ShmMapping m;
    m.fd_ = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (m.fd_ < 0) {
        const int err = errno;
        if (err == EEXIST) {
            return Status(Code::kUnavailable,
                          label(name) + " was created by someone else at the same time");
        }
        return Status::fromErrno(label(name) + ": shm_open(O_CREAT|O_EXCL)", err);
    }
    // shm_open applies the umask; set the requested bits explicitly so readers running as
    // other users get exactly what the writer asked for.
    if (::fchmod(m.fd_, mode) != 0) {
        const int err = errno;
        ::shm_unlink(name.c_str());
        return Status::fromErrno(label(name) + ": fchmod", err);
    }
    if (::ftruncate(m.fd_, static_cast<off_t>(size)) != 0) {
        const int err = errno;
        ::shm_unlink(name.c_str());
        return Status::fromErrno(label(name) + ": ftruncate", err);
    }
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd_, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        ::shm_unlink(name.c_str());
        return Status::fromErrno(label(name) + ": mmap", err);
    }
    struct stat st {};
    if (::fstat(m.fd_, &st) == 0) {
        m.id_ = {st.st_dev, st.st_ino};
    }
    m.data_ = p;
    m.size_ = size;
    return m;
}

Result<ObjectId> ShmMapping::identify(const std::string& name) {
    const int fd = ::shm_open(name.c_str(), O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        const int err = errno;
        if (err == ENOENT) {
            return Status(Code::kUnavailable, label(name) + " does not exist");
        }
        return Status::fromErrno(label(name) + ": shm_open", err);
    }
    struct stat st {};
    const int rc = ::fstat(fd, &st);
    const int err = errno;
    ::close(fd);
    if (rc != 0) {
        return Status::fromErrno(label(name) + ": fstat", err);
    }
    return ObjectId{st.st_dev, st.st_ino};
}

Status validateSegment(const void* base, size_t size, std::string_view name) {
    if (base == nullptr || size < kHeaderSize) {
        return invalid(name, "segment too small: " + std::to_string(size) +
                                 " bytes, a header needs " + std::to_string(kHeaderSize));
    }
    if (reinterpret_cast<uintptr_t>(base) % alignof(SegmentHeader) != 0) {
        return {Code::kInternal, label(name) + ": image is not 64-byte aligned"};
    }
    const auto* h = static_cast<const SegmentHeader*>(base);
    // M1: acquire pairs with the writer's release store of magic after initialisation.
    const uint64_t magic = h->magic.load(std::memory_order_acquire);
    if (magic == 0) {
        return {Code::kUnavailable,
                label(name) +
                    ": segment not initialised (magic is 0: a writer is starting, "
                    "or this is not a channel)"};
    }
    if (magic == kMagicByteSwapped) {
        return invalid(name, "segment written with the other byte order");
    }
    if (magic != kMagic) {
        return invalid(name, "foreign segment: magic " + hex64(magic) + " is not " + hex64(kMagic) +
                                 " (\"ATLSBUBL\")");
    }
    if (h->abi_version != kAbiVersion) {
        return invalid(name, "unsupported ABI version " + std::to_string(h->abi_version) +
                                 " (this reader speaks version " + std::to_string(kAbiVersion) +
                                 ")");
    }
    if (h->header_size != kHeaderSize) {
        return invalid(name, "header_size " + std::to_string(h->header_size) + ", expected " +
                                 std::to_string(kHeaderSize));
    }
    if (h->clock_id != kClockIdMonotonic) {
        return invalid(name, "clock id " + std::to_string(h->clock_id) +
                                 " is not CLOCK_MONOTONIC (" + std::to_string(kClockIdMonotonic) +
                                 ")");
    }
    if (h->flags != 0) {
        return invalid(name, "unknown flags " + std::to_string(h->flags));
    }
    if (h->window_record_size != sizeof(WindowRecord) ||
        h->idle_record_size != sizeof(IdleRecord)) {
        return invalid(name, "record sizes " + std::to_string(h->window_record_size) + "/" +
                                 std::to_string(h->idle_record_size) + ", expected " +
                                 std::to_string(sizeof(WindowRecord)) + "/" +
                                 std::to_string(sizeof(IdleRecord)));
    }
    if (h->window_capacity < kMinWindowCapacity || h->window_capacity > kMaxWindowCapacity) {
        return invalid(name, "window capacity " + std::to_string(h->window_capacity) +
                                 " out of bounds [" + std::to_string(kMinWindowCapacity) + ", " +
                                 std::to_string(kMaxWindowCapacity) + "]");
    }
    if (h->idle_capacity < kMinIdleCapacity || h->idle_capacity > kMaxIdleCapacity) {
        return invalid(name, "idle capacity " + std::to_string(h->idle_capacity) +
                                 " out of bounds [" + std::to_string(kMinIdleCapacity) + ", " +
                                 std::to_string(kMaxIdleCapacity) + "]");
    }
    const SegmentLayout want = expectedLayout(h->window_capacity, h->idle_capacity);
    if (h->windows_offset != want.windows_offset || h->idle_offset != want.idle_offset ||
        h->layout_size != want.layout_size) {
        return invalid(name, "offsets/layout_size (" + std::to_string(h->windows_offset) + ", " +
                                 std::to_string(h->idle_offset) + ", " +
                                 std::to_string(h->layout_size) +
                                 ") do not match the capacities (expected " +
                                 std::to_string(want.windows_offset) + ", " +
                                 std::to_string(want.idle_offset) + ", " +
                                 std::to_string(want.layout_size) + ")");
    }
    if (h->layout_size > size) {
        return invalid(name, "truncated: header says layout_size " +
                                 std::to_string(h->layout_size) + " but the segment has " +
                                 std::to_string(size) + " bytes");
    }
    if (h->generation == 0) {
        return invalid(name, "generation 0 (never valid for an initialised segment)");
    }
    if (h->writer_pid <= 0) {
        return invalid(name, "writer pid " + std::to_string(h->writer_pid) + " is not a pid");
    }
    const uint32_t lifecycle = h->lifecycle.load(std::memory_order_relaxed);
    if (lifecycle < static_cast<uint32_t>(Lifecycle::kLive) ||
        lifecycle > static_cast<uint32_t>(Lifecycle::kRetired)) {
        return invalid(name, "unknown lifecycle value " + std::to_string(lifecycle));
    }
    return Status::ok();
}

}  // namespace atlas::channel::detail
