#include "plugin/wan/shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace atlas::plugin::wan {
namespace {

// Start time (field 22 of /proc/<pid>/stat, against pid reuse) and whether the process is a
// zombie or dead (state Z/X: killed but not yet reaped still answers kill(pid, 0)). 0 when
// unreadable.
uint64_t procStartTime(int pid, bool* dead) {
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE* f = std::fopen(path, "re");
    if (f == nullptr) {
        return 0;
    }
    char buf[1024];
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
    std::fclose(f);
    buf[n] = 0;
    // Fields are counted after the last ')' (comm may hold spaces and parentheses).
    const char* p = std::strrchr(buf, ')');
    if (p == nullptr) {
        return 0;
    }
    if (dead != nullptr && p[1] == ' ') {
        *dead = p[2] == 'Z' || p[2] == 'X' || p[2] == 'x';
    }
    int field = 2;
    for (++p; *p != 0 && field < 22; ++p) {
        if (*p == ' ') {
            ++field;
        }
    }
    return std::strtoull(p, nullptr, 10);
}

class SystemProbe final : public ProcessProbe {
  public:
    bool alive(int pid, uint64_t recorded) const override {
        if (pid <= 0) {
            return false;
        }
        if (pid == static_cast<int>(::getpid())) {
            return true;
        }
        if (::kill(pid, 0) != 0 && errno == ESRCH) {
            return false;
        }
        bool dead = false;
        const uint64_t now_start = procStartTime(pid, &dead);
        if (dead) {
            return false;  // killed, not reaped yet
        }
        return recorded == 0 || now_start == 0 || now_start == recorded;  // else: pid reused
    }
    uint64_t startTime(int pid) const override { return procStartTime(pid, nullptr); }
};

void initSegment(ShmSegment* s, Nanos slot_ns, Nanos lease_ns, Nanos max_wait_ns) {
    std::memset(static_cast<void*>(s), 0, sizeof(ShmSegment));
    s->magic = kShmMagic;
    s->version = kShmVersion;
    s->layout_size = sizeof(ShmSegment);
    s->max_procs = kShmMaxProcs;
    s->max_flows = kShmMaxFlows;
    s->slot_ns = slot_ns;
    s->lease_ns = lease_ns;
    s->max_wait_ns = max_wait_ns;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&s->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    sched::TemporalCore::reset(s->fifo);  // entries are zero: unused
    s->rate = sched::PathRate();          // no samples: unknown (rate_bps is zero)
}

// Opens an existing segment file: nullptr with *st ok when there is none (ENOENT).
ShmSegment* attach(const std::string& path, Status* st) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno != ENOENT) {
            *st = Status::fromErrno("open " + path, errno);
        }
        return nullptr;
    }
    struct stat sb {};
    if (::fstat(fd, &sb) != 0) {
        *st = Status::fromErrno("fstat " + path, errno);
        ::close(fd);
        return nullptr;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_uid != ::geteuid()) {
        ::close(fd);
        *st = Status(Code::kInvalidUsage, path + " is not a regular file owned by this user (uid " +
                                              std::to_string(sb.st_uid) +
                                              "): refusing a foreign segment; set ATLAS_NODE_SHM");
        return nullptr;
    }
    const auto size = static_cast<size_t>(sb.st_size);
    if (size != sizeof(ShmSegment)) {
        std::vector<uint8_t> head(std::min<size_t>(size, sizeof(ShmSegment)));
        const ssize_t got = ::pread(fd, head.data(), head.size(), 0);
        ::close(fd);
        head.resize(got > 0 ? static_cast<size_t>(got) : 0);
        const Status why = validateSegmentHeader(head.data(), head.size());
        *st = Status(Code::kInvalidUsage,
                     path + ": " + (why.isOk() ? "unexpected size" : why.message()));
        return nullptr;
    }
    void* map = ::mmap(nullptr, sizeof(ShmSegment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) {
        *st = Status::fromErrno("mmap " + path, errno);
        return nullptr;
    }
    const Status valid = validateSegmentHeader(map, sizeof(ShmSegment));
    if (!valid.isOk()) {
        ::munmap(map, sizeof(ShmSegment));
        *st = Status(Code::kInvalidUsage, path + ": " + valid.message());
        return nullptr;
    }
    return static_cast<ShmSegment*>(map);
}

// Builds a segment under a private name and links it to `path`. nullptr with *st ok when
// another process published first (EEXIST: attach to theirs).
ShmSegment* create(const std::string& path, const std::string& tmp, Nanos slot_ns, Nanos lease_ns,
                   Nanos max_wait_ns, Status* st) {
    const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        *st = Status::fromErrno("create " + tmp, errno);
        return nullptr;
    }
    if (::ftruncate(fd, sizeof(ShmSegment)) != 0) {
        *st = Status::fromErrno("ftruncate " + tmp, errno);
        ::close(fd);
        ::unlink(tmp.c_str());
        return nullptr;
    }
    void* m = ::mmap(nullptr, sizeof(ShmSegment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) {
        *st = Status::fromErrno("mmap " + tmp, errno);
        ::unlink(tmp.c_str());
        return nullptr;
    }
    auto* s = static_cast<ShmSegment*>(m);
    initSegment(s, slot_ns, lease_ns, max_wait_ns);
    const int rc = ::link(tmp.c_str(), path.c_str());
    const int err = errno;
    ::unlink(tmp.c_str());
    if (rc == 0) {
        return s;
    }
    ::munmap(m, sizeof(ShmSegment));
    if (err != EEXIST) {
        *st = Status::fromErrno("link " + tmp + " to " + path, err);
    }
    return nullptr;
}

}  // namespace

const ProcessProbe& systemProcessProbe() {
    static const SystemProbe probe;
    return probe;
}

bool validSegmentName(const std::string& n) {
    if (n.empty() || n.size() > 200) {
        return false;
    }
    for (char c : n) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!ok) {
            return false;
        }
    }
    return n[0] != '.';
}

Result<ShmSegment*> mapSegment(const std::string& path, Nanos slot_ns, Nanos lease_ns,
                               Nanos max_wait_ns, bool* created) {
    const std::string tmp_base = path + ".tmp." + std::to_string(::getpid()) + ".";
    for (int attempt = 0; attempt < 8; ++attempt) {
        Status st = Status::ok();
        if (ShmSegment* s = attach(path, &st)) {
            *created = false;
            return s;
        }
        if (!st.isOk()) {
            return st;
        }
        if (ShmSegment* s = create(path, tmp_base + std::to_string(attempt), slot_ns, lease_ns,
                                   max_wait_ns, &st)) {
            *created = true;
            return s;
        }
        if (!st.isOk()) {
            return st;
        }
        // Another process published first: attach to its segment.
    }
    return Status(Code::kUnavailable, "could not create or attach " + path);
}

void unmapSegment(ShmSegment* seg) {
    if (seg != nullptr) {
        ::munmap(seg, sizeof(ShmSegment));
    }
}

void futexWait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout_ns) {
    timespec ts{};
    ts.tv_sec = timeout_ns / kNsPerSec;
    ts.tv_nsec = timeout_ns % kNsPerSec;
    // Not FUTEX_PRIVATE: the word is shared between processes.
    (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr,
                  0);
}

void futexWakeAll(std::atomic<uint32_t>* word) {
    (void)syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr,
                  nullptr, 0);
}

}  // namespace atlas::plugin::wan
