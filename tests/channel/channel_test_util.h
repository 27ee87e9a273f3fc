// Helpers for the bubble channel tests: unique shm names that are always unlinked, and raw
// access to a segment's bytes for building corrupt images.
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace atlas::channel::testing {

// A shm name unique to this process and call, e.g. "/atlas-chtest-1234-7". Deliberately not
// under the "atlas-bubbles-" prefix, so `atlas-bubbles watch` never lists test segments.
inline std::string uniqueShmName(const char* tag = "t") {
    static std::atomic<int> counter{0};
    return "/atlas-chtest-" + std::string(tag) + "-" + std::to_string(::getpid()) + "-" +
           std::to_string(counter.fetch_add(1));
}

// Unlinks the name when the test ends, whatever the test did with it.
class ShmNameGuard {
  public:
    explicit ShmNameGuard(std::string name) : name_(std::move(name)) {}
    ~ShmNameGuard() { ::shm_unlink(name_.c_str()); }
    ShmNameGuard(const ShmNameGuard&) = delete;
    ShmNameGuard& operator=(const ShmNameGuard&) = delete;
    const std::string& name() const { return name_; }

  private:
    std::string name_;
};

// The current bytes of a shm object (empty if it does not exist).
inline std::vector<unsigned char> readShmBytes(const std::string& name) {
    std::vector<unsigned char> bytes;
    const int fd = ::shm_open(name.c_str(), O_RDONLY, 0);
    if (fd < 0) {
        return bytes;
    }
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
        bytes.resize(static_cast<size_t>(st.st_size));
        size_t done = 0;
        while (done < bytes.size()) {
            const ssize_t n =
                ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
            if (n <= 0) {
                break;
            }
            done += static_cast<size_t>(n);
        }
        bytes.resize(done);
    }
    ::close(fd);
    return bytes;
}

// Replaces (or creates) a shm object with exactly these bytes. Returns false on error.
inline bool writeShmBytes(const std::string& name, const std::vector<unsigned char>& bytes) {
    ::shm_unlink(name.c_str());
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) {
        return false;
    }
    bool ok = ::ftruncate(fd, static_cast<off_t>(bytes.size())) == 0;
    size_t done = 0;
    while (ok && done < bytes.size()) {
        const ssize_t n =
            ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
        ok = n > 0;
        done += ok ? static_cast<size_t>(n) : 0;
    }
    ::close(fd);
    return ok;
}

}  // namespace atlas::channel::testing
