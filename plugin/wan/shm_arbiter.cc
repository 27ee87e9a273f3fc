#include "plugin/wan/shm_arbiter.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "plugin/wan/shm_layout.h"

namespace atlas::plugin::wan {

namespace {
class ShmGate;

constexpr Nanos kForever = std::numeric_limits<Nanos>::max();

// Start time (field 22 of /proc/<pid>/stat, against pid reuse) and whether the process is a
// zombie or dead (state Z/X: killed but not yet reaped still answers kill(pid, 0)). 0 when
// unreadable.
uint64_t procStartTime(int pid, bool* dead = nullptr) {
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
    // Field 22 (starttime); fields are counted after the last ')' (comm may hold spaces).
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

long futexWait(std::atomic<uint32_t>* word, uint32_t expected, Nanos timeout_ns) {
    timespec ts{};
    ts.tv_sec = timeout_ns / kNsPerSec;
    ts.tv_nsec = timeout_ns % kNsPerSec;
    // Not FUTEX_PRIVATE: the word is shared between processes.
    return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr,
                   0);
}

void futexWakeAll(std::atomic<uint32_t>* word) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

bool validName(const std::string& n) {
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

}  // namespace

struct ShmArbiter::Impl {
    ~Impl() {
        if (seg != nullptr) {
            ::munmap(seg, sizeof(ShmSegment));
        }
    }

    // Takes the segment lock, repairing the table after a holder died inside it. False when
    // the mutex is unrecoverable (the caller fails open).
    bool lock(Nanos now);
    void unlock() { pthread_mutex_unlock(&seg->lock); }

    bool procAlive(int p) const;
    void freeProcLocked(int p);
    void grantNextLocked(Nanos now, std::vector<int>* wake);
    void checkHolderLocked(Nanos now, std::vector<int>* wake);
    void repairLocked(Nanos now, std::vector<int>* wake);
    void ring(const std::vector<int>& procs);
    void watch();
    void failOpenAll();
    void markBroken(const char* why);

    ShmConfig cfg;
    std::string path;
    ShmSegment* seg = nullptr;
    int me = -1;  // our index in seg->procs
    int pid = 0;
    std::atomic<bool> stop{false};
    std::atomic<bool> broken{false};  // fail open from now on
    bool stopped = false;             // guarded by the segment lock
    std::thread watcher;
    std::mutex join_mu;
    std::mutex reg_mu;  // order: reg_mu, then the segment lock
    std::set<ShmGate*> gates;
};

namespace {

class ShmGate final : public FlowGate {
  public:
    ShmGate(std::shared_ptr<ShmArbiter::Impl> a, int idx, std::function<void()> waker)
        : a_(std::move(a)), idx_(idx), waker_(std::move(waker)) {}

    ~ShmGate() override {
        {
            // After this the watcher cannot reach us: no waker call after the destructor.
            std::lock_guard<std::mutex> reg(a_->reg_mu);
            a_->gates.erase(this);
        }
        if (a_->broken.load(std::memory_order_acquire)) {
            return;
        }
        const Nanos now = monotonicNowNs();
        if (!a_->lock(now)) {
            return;
        }
        std::vector<int> wake;
        if (!a_->stopped) {
            ShmSegment& s = *a_->seg;
            if (s.holder == idx_) {
                s.holder = -1;
                a_->grantNextLocked(now, &wake);
            }
            s.flows[idx_].state = kShmFlowFree;
        }
        a_->unlock();
        a_->ring(wake);
    }

    bool acquire(uint64_t, Nanos now_ns) override {
        drain_due_.store(0, std::memory_order_relaxed);  // fast path below keeps a draining grant
        if (a_->broken.load(std::memory_order_acquire)) {
            openLocal();
            return true;
        }
        if (!a_->lock(now_ns)) {
            openLocal();
            return true;
        }
        if (a_->stopped) {
            a_->unlock();
            openLocal();
            return true;
        }
        ShmSegment& s = *a_->seg;
        ShmFlow& f = s.flows[idx_];
        std::vector<int> wake;
        if (s.holder == idx_ && f.slot_end_ns <= now_ns) {
            // Granted while the engine was busy, and the slot is already over: pass it on.
            s.holder = -1;
            f.state = kShmFlowIdle;
            holding_ = false;
            a_->grantNextLocked(now_ns, &wake);
        }
        if (s.holder < 0) {
            f.state = kShmFlowWaiting;
            f.seq = s.next_seq++;
            f.requested_ns = now_ns;
            a_->grantNextLocked(now_ns, &wake);  // FIFO: picks us unless others wait
        } else if (f.state != kShmFlowWaiting && s.holder != idx_) {
            f.state = kShmFlowWaiting;
            f.seq = s.next_seq++;
            f.requested_ns = now_ns;
            a_->checkHolderLocked(now_ns, &wake);
        } else if (s.holder != idx_) {
            a_->checkHolderLocked(now_ns, &wake);
        }
        const bool got = s.holder == idx_;
        if (got) {
            if (!holding_) {
                holding_ = true;  // a fresh grant; a resumed one keeps counting its bytes
                grant_start_ = now_ns;
                grant_bytes_ = 0;
            }
            waiting_.store(false, std::memory_order_relaxed);
            until_.store(f.slot_end_ns, std::memory_order_release);
        } else {
            holding_ = false;
            waiting_.store(true, std::memory_order_release);
        }
        a_->unlock();
        a_->ring(wake);
        return got;
    }

    bool holds(Nanos now_ns) const override {
        // Pairs with the release stores of acquire() and the watcher.
        return now_ns < until_.load(std::memory_order_acquire);
    }

    void release(uint64_t bytes, Nanos now_ns) override {
        waiting_.store(false, std::memory_order_relaxed);
        if (a_->broken.load(std::memory_order_acquire) || !a_->lock(now_ns)) {
            until_.store(0, std::memory_order_release);
            return;
        }
        std::vector<int> wake;
        if (!a_->stopped) {
            ShmSegment& s = *a_->seg;
            ShmFlow& f = s.flows[idx_];
            f.bytes += bytes;
            grant_bytes_ += bytes;
            const Nanos due = std::min(drainDueLocked(), f.slot_end_ns);
            if (s.holder == idx_ && due > now_ns) {
                // Keep the link until these bytes could have crossed it; the watcher
                // releases at `due` unless the next message resumes the grant first.
                drain_due_.store(due, std::memory_order_release);
                a_->unlock();
                a_->ring({a_->me});
                return;
            }
            releaseLocked(now_ns, &wake);
        }
        until_.store(0, std::memory_order_release);
        a_->unlock();
        a_->ring(wake);
    }

    // Watcher (reg_mu held): finish a drain whose time has come. Returns the pending due,
    // or max when there is none.
    Nanos drainIfDue(Nanos now_ns) {
        const Nanos due = drain_due_.load(std::memory_order_acquire);
        if (due == 0) {
            return kForever;
        }
        if (due > now_ns) {
            return due;
        }
        if (!a_->lock(now_ns)) {
            return kForever;
        }
        std::vector<int> wake;
        // Re-check under the lock: acquire() may have resumed the grant meanwhile.
        if (!a_->stopped && drain_due_.load(std::memory_order_acquire) == due) {
            drain_due_.store(0, std::memory_order_relaxed);
            until_.store(0, std::memory_order_release);
            releaseLocked(now_ns, &wake);
        }
        a_->unlock();
        a_->ring(wake);
        return kForever;
    }

    // Watcher, with reg_mu and the segment lock held: did our request get the link?
    bool pollGrantLocked() {
        if (!waiting_.load(std::memory_order_acquire)) {
            return false;
        }
        const ShmSegment& s = *a_->seg;
        if (s.holder != idx_) {
            return false;
        }
        waiting_.store(false, std::memory_order_relaxed);
        holding_ = true;
        grant_start_ = monotonicNowNs();
        grant_bytes_ = 0;
        until_.store(s.flows[idx_].slot_end_ns, std::memory_order_release);
        return true;
    }
    bool waiting() const { return waiting_.load(std::memory_order_acquire); }
    // Watcher, with reg_mu held: the segment is unusable, let the flow go.
    void failOpen() {
        const bool was_waiting = waiting_.exchange(false);
        openLocal();
        if (was_waiting) {
            waker_();
        }
    }
    void wake() { waker_(); }

  private:
    void openLocal() { until_.store(kForever, std::memory_order_release); }

    // Segment lock held.
    Nanos drainDueLocked() const {
        const uint64_t bps = a_->cfg.link_bps;
        if (bps == 0 || !holding_) {
            return 0;
        }
        const long double ns =
            static_cast<long double>(grant_bytes_) * 8.0L * 1e9L / static_cast<long double>(bps);
        return grant_start_ + static_cast<Nanos>(ns);
    }
    void releaseLocked(Nanos now_ns, std::vector<int>* wake) {
        ShmSegment& s = *a_->seg;
        ShmFlow& f = s.flows[idx_];
        holding_ = false;
        if (s.holder == idx_) {
            s.holder = -1;
            f.state = kShmFlowIdle;
            a_->grantNextLocked(now_ns, wake);
        } else if (f.state == kShmFlowGranted) {
            f.state = kShmFlowIdle;  // cannot happen with a consistent table
        }
    }

    std::shared_ptr<ShmArbiter::Impl> a_;
    const int idx_;
    const std::function<void()> waker_;
    std::atomic<Nanos> until_{0};
    std::atomic<bool> waiting_{false};
    std::atomic<Nanos> drain_due_{0};  // != 0: released by the engine, held until then
    // Guarded by the segment lock.
    bool holding_ = false;
    Nanos grant_start_ = 0;
    uint64_t grant_bytes_ = 0;
};

}  // namespace

bool ShmArbiter::Impl::lock(Nanos now) {
    const int rc = pthread_mutex_lock(&seg->lock);
    if (rc == 0) {
        return true;
    }
    if (rc == EOWNERDEAD) {
        std::vector<int> wake;
        repairLocked(now, &wake);
        pthread_mutex_consistent(&seg->lock);
        ATLAS_LOG_WARN(cfg.logger,
                       "node-local arbitration %s: a process died holding the segment lock; "
                       "table repaired",
                       path.c_str());
        // Wake the new holder after we are done; ring() needs no lock.
        unlock();
        ring(wake);
        return lock(now);
    }
    markBroken(rc == ENOTRECOVERABLE ? "the segment mutex is unrecoverable"
                                     : "pthread_mutex_lock failed");
    return false;
}

bool ShmArbiter::Impl::procAlive(int p) const {
    const int other = seg->procs[p].pid.load(std::memory_order_acquire);
    if (other <= 0) {
        return false;
    }
    if (other == pid) {
        return true;
    }
    if (::kill(other, 0) != 0 && errno == ESRCH) {
        return false;
    }
    bool dead = false;
    const uint64_t now_start = procStartTime(other, &dead);
    if (dead) {
        return false;  // killed, not reaped yet
    }
    const uint64_t recorded = seg->procs[p].start_time;
    if (recorded != 0 && now_start != 0 && now_start != recorded) {
        return false;  // the pid was reused by another process
    }
    return true;
}

void ShmArbiter::Impl::freeProcLocked(int p) {
    for (uint32_t i = 0; i < kShmMaxFlows; ++i) {
        ShmFlow& f = seg->flows[i];
        if (f.state != kShmFlowFree && f.proc == p) {
            if (seg->holder == static_cast<int32_t>(i)) {
                seg->holder = -1;
                ++seg->revocations;
            }
            f.state = kShmFlowFree;
        }
    }
    seg->procs[p].pid.store(0, std::memory_order_release);
}

void ShmArbiter::Impl::grantNextLocked(Nanos now, std::vector<int>* wake) {
    while (seg->holder < 0) {
        int best = -1;
        for (uint32_t i = 0; i < kShmMaxFlows; ++i) {
            const ShmFlow& f = seg->flows[i];
            if (f.state == kShmFlowWaiting && (best < 0 || f.seq < seg->flows[best].seq)) {
                best = static_cast<int>(i);
            }
        }
        if (best < 0) {
            return;
        }
        ShmFlow& f = seg->flows[best];
        if (!procAlive(f.proc)) {
            freeProcLocked(f.proc);  // its waiting flows go with it
            continue;
        }
        seg->holder = best;
        f.state = kShmFlowGranted;
        f.slot_end_ns = seg->slot_ns > 0 ? now + seg->slot_ns : kForever;
        f.grant_seq = seg->next_grant_seq++;
        ++seg->grants;
        wake->push_back(f.proc);
    }
}

void ShmArbiter::Impl::checkHolderLocked(Nanos now, std::vector<int>* wake) {
    if (seg->holder < 0) {
        grantNextLocked(now, wake);
        return;
    }
    const int p = seg->flows[seg->holder].proc;
    if (p == me) {
        return;
    }
    const Nanos alive = seg->procs[p].alive_ns.load(std::memory_order_acquire);
    if (now - alive <= seg->lease_ns) {
        return;
    }
    if (!procAlive(p)) {
        ATLAS_LOG_WARN(cfg.logger,
                       "node-local arbitration %s: holder process %d is gone; its grant is "
                       "revoked",
                       path.c_str(), seg->procs[p].pid.load());
        freeProcLocked(p);
    } else {
        // Alive but silent past the lease (stopped or starved): the link moves on; the
        // process sends unarbitrated until its own slot ends.
        ATLAS_LOG_WARN(cfg.logger,
                       "node-local arbitration %s: holder process %d silent for %.0f ms; its "
                       "grant is revoked",
                       path.c_str(), seg->procs[p].pid.load(),
                       static_cast<double>(now - alive) / 1e6);
        seg->flows[seg->holder].state = kShmFlowIdle;
        seg->holder = -1;
        ++seg->revocations;
    }
    grantNextLocked(now, wake);
}

void ShmArbiter::Impl::repairLocked(Nanos now, std::vector<int>* wake) {
    ++seg->recoveries;
    if (seg->holder < -1 || seg->holder >= static_cast<int32_t>(kShmMaxFlows) ||
        (seg->holder >= 0 && seg->flows[seg->holder].state != kShmFlowGranted)) {
        seg->holder = -1;
    }
    for (uint32_t p = 0; p < kShmMaxProcs; ++p) {
        if (seg->procs[p].pid.load() != 0 && !procAlive(static_cast<int>(p))) {
            freeProcLocked(static_cast<int>(p));
        }
    }
    for (uint32_t i = 0; i < kShmMaxFlows; ++i) {
        ShmFlow& f = seg->flows[i];
        const bool bad_state = f.state < kShmFlowFree || f.state > kShmFlowGranted;
        const bool bad_proc = f.state != kShmFlowFree &&
                              (f.proc < 0 || f.proc >= static_cast<int32_t>(kShmMaxProcs) ||
                               seg->procs[f.proc].pid.load() == 0);
        const bool stray_grant =
            f.state == kShmFlowGranted && static_cast<int32_t>(i) != seg->holder;
        if (bad_state || bad_proc) {
            if (seg->holder == static_cast<int32_t>(i)) {
                seg->holder = -1;
            }
            f.state = kShmFlowFree;
        } else if (stray_grant) {
            f.state = kShmFlowIdle;
        }
    }
    grantNextLocked(now, wake);
}

void ShmArbiter::Impl::ring(const std::vector<int>& procs) {
    for (int p : procs) {
        if (p < 0 || p >= static_cast<int>(kShmMaxProcs)) {
            continue;
        }
        // Pairs with the watcher's load before its futex wait: a bump after the load makes
        // the wait return at once.
        seg->procs[p].doorbell.fetch_add(1, std::memory_order_acq_rel);
        futexWakeAll(&seg->procs[p].doorbell);
    }
}

void ShmArbiter::Impl::markBroken(const char* why) {
    if (!broken.exchange(true)) {
        ATLAS_LOG_WARN(cfg.logger,
                       "node-local arbitration %s: %s; WAN flows on this link send unarbitrated",
                       path.c_str(), why);
    }
}

void ShmArbiter::Impl::failOpenAll() {
    std::lock_guard<std::mutex> reg(reg_mu);
    for (ShmGate* g : gates) {
        g->failOpen();
    }
}

void ShmArbiter::Impl::watch() {
    Nanos next_beat = 0;
    const Nanos beat = std::max<Nanos>(seg->lease_ns / 4, kNsPerMs);
    while (!stop.load(std::memory_order_acquire)) {
        Nanos now = monotonicNowNs();
        if (now >= next_beat) {
            seg->procs[me].alive_ns.store(now, std::memory_order_release);
            next_beat = now + beat;
        }
        const uint32_t seen = seg->procs[me].doorbell.load(std::memory_order_acquire);
        Nanos timeout = next_beat - now;
        if (!broken.load(std::memory_order_acquire)) {
            std::lock_guard<std::mutex> reg(reg_mu);
            for (ShmGate* g : gates) {
                const Nanos due = g->drainIfDue(now);
                if (due != kForever) {
                    timeout = std::min(timeout, std::max<Nanos>(due - now, 1000));
                }
            }
        }
        if (broken.load(std::memory_order_acquire)) {
            failOpenAll();
        } else {
            std::lock_guard<std::mutex> reg(reg_mu);
            bool any_waiting = false;
            for (ShmGate* g : gates) {
                any_waiting = any_waiting || g->waiting();
            }
            if (any_waiting && lock(now)) {
                std::vector<int> wake;
                std::vector<ShmGate*> granted;
                if (!stopped) {
                    checkHolderLocked(now, &wake);
                    for (ShmGate* g : gates) {
                        if (g->pollGrantLocked()) {
                            granted.push_back(g);
                        }
                    }
                    // Sleep no longer than the holder's liveness deadline.
                    if (seg->holder >= 0) {
                        const int p = seg->flows[seg->holder].proc;
                        if (p != me) {
                            const Nanos due = seg->procs[p].alive_ns.load() + seg->lease_ns + 1;
                            timeout = std::min(timeout, std::max<Nanos>(due - now, kNsPerMs));
                        }
                    }
                }
                unlock();
                ring(wake);
                for (ShmGate* g : granted) {
                    g->wake();
                }
            }
        }
        if (stop.load(std::memory_order_acquire)) {
            break;
        }
        futexWait(&seg->procs[me].doorbell, seen, std::max<Nanos>(timeout, kNsPerMs / 10));
    }
}

std::string shmNameForLink(const std::string& prefix, const std::string& link) {
    std::string out = prefix + ".";
    for (char c : link) {
        out += (c == '>' || c == '/' || c == ':') ? '_' : c;
    }
    return out;
}

Result<std::shared_ptr<ShmArbiter>> ShmArbiter::open(const ShmConfig& config) {
    if (!validName(config.name)) {
        return Status(Code::kInvalidUsage, "node-local segment name '" + config.name +
                                               "' must be 1..200 characters [A-Za-z0-9._-]");
    }
    if (config.lease_ns <= 0 || config.slot_ns < 0) {
        return Status(Code::kInvalidUsage, "node-local slot and lease must be positive");
    }
    auto impl = std::make_shared<Impl>();
    impl->cfg = config;
    impl->path = config.dir + "/" + config.name;
    impl->pid = static_cast<int>(::getpid());
    const std::string& path = impl->path;
    void* map = nullptr;
    for (int attempt = 0; attempt < 8 && map == nullptr; ++attempt) {
        int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
        if (fd >= 0) {
            struct stat st {};
            if (::fstat(fd, &st) != 0) {
                const int err = errno;
                ::close(fd);
                return Status::fromErrno("fstat " + path, err);
            }
            if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid()) {
                ::close(fd);
                return Status(Code::kInvalidUsage,
                              path + " is not a regular file owned by this user (uid " +
                                  std::to_string(st.st_uid) +
                                  "): refusing a foreign segment; set ATLAS_NODE_SHM");
            }
            const auto size = static_cast<size_t>(st.st_size);
            if (size != sizeof(ShmSegment)) {
                std::vector<uint8_t> head(std::min<size_t>(size, sizeof(ShmSegment)));
                const ssize_t got = ::pread(fd, head.data(), head.size(), 0);
                ::close(fd);
                head.resize(got > 0 ? static_cast<size_t>(got) : 0);
                Status why = validateSegmentHeader(head.data(), head.size());
                return Status(Code::kInvalidUsage,
                              path + ": " + (why.isOk() ? "unexpected size" : why.message()));
            }
            map = ::mmap(nullptr, sizeof(ShmSegment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            ::close(fd);
            if (map == MAP_FAILED) {
                return Status::fromErrno("mmap " + path, errno);
            }
            Status valid = validateSegmentHeader(map, sizeof(ShmSegment));
            if (!valid.isOk()) {
                ::munmap(map, sizeof(ShmSegment));
                return Status(Code::kInvalidUsage, path + ": " + valid.message());
            }
            break;
        }
        if (errno != ENOENT) {
            return Status::fromErrno("open " + path, errno);
        }
        // Build a complete segment under a private name, then publish it with link(): nobody
        // ever maps a half-initialised segment, and two creators cannot both win.
        const std::string tmp =
            path + ".tmp." + std::to_string(impl->pid) + "." + std::to_string(attempt);
        fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            return Status::fromErrno("create " + tmp, errno);
        }
        if (::ftruncate(fd, sizeof(ShmSegment)) != 0) {
            const int err = errno;
            ::close(fd);
            ::unlink(tmp.c_str());
            return Status::fromErrno("ftruncate " + tmp, err);
        }
        void* m = ::mmap(nullptr, sizeof(ShmSegment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        if (m == MAP_FAILED) {
            const int err = errno;
            ::unlink(tmp.c_str());
            return Status::fromErrno("mmap " + tmp, err);
        }
        auto* s = static_cast<ShmSegment*>(m);
        std::memset(static_cast<void*>(s), 0, sizeof(ShmSegment));
        s->magic = kShmMagic;
        s->version = kShmVersion;
        s->layout_size = sizeof(ShmSegment);
        s->max_procs = kShmMaxProcs;
        s->max_flows = kShmMaxFlows;
        s->slot_ns = config.slot_ns;
        s->lease_ns = config.lease_ns;
        pthread_mutexattr_t attr;
        pthread_mutexattr_init(&attr);
        pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&s->lock, &attr);
        pthread_mutexattr_destroy(&attr);
        s->holder = -1;
        s->next_seq = 1;
        s->next_grant_seq = 1;
        const int rc = ::link(tmp.c_str(), path.c_str());
        const int err = errno;
        ::unlink(tmp.c_str());
        if (rc == 0) {
            map = m;
            ATLAS_LOG_INFO(config.logger,
                           "node-local arbitration: created %s (slot %.0f ms, "
                           "lease %.0f ms)",
                           path.c_str(), static_cast<double>(config.slot_ns) / 1e6,
                           static_cast<double>(config.lease_ns) / 1e6);
            break;
        }
        ::munmap(m, sizeof(ShmSegment));
        if (err != EEXIST) {
            return Status::fromErrno("link " + tmp + " to " + path, err);
        }
        // Another process published first: attach to its segment.
    }
    if (map == nullptr) {
        return Status(Code::kUnavailable, "could not create or attach " + path);
    }
    impl->seg = static_cast<ShmSegment*>(map);
    ShmSegment& s = *impl->seg;
    const Nanos now = monotonicNowNs();
    if (!impl->lock(now)) {
        return Status(Code::kUnavailable, path + ": the segment mutex is unusable");
    }
    std::vector<int> wake;
    for (uint32_t p = 0; p < kShmMaxProcs; ++p) {
        if (s.procs[p].pid.load() != 0 && !impl->procAlive(static_cast<int>(p))) {
            impl->freeProcLocked(static_cast<int>(p));
        }
    }
    for (uint32_t p = 0; p < kShmMaxProcs && impl->me < 0; ++p) {
        if (s.procs[p].pid.load() == 0) {
            impl->me = static_cast<int>(p);
            s.procs[p].start_time = procStartTime(impl->pid);
            s.procs[p].alive_ns.store(now);
            s.procs[p].pid.store(impl->pid, std::memory_order_release);
        }
    }
    impl->grantNextLocked(now, &wake);
    impl->unlock();
    impl->ring(wake);
    if (impl->me < 0) {
        return Status(Code::kUnavailable, path + ": " + std::to_string(kShmMaxProcs) +
                                              " processes already use this link");
    }
    if (s.slot_ns != config.slot_ns || s.lease_ns != config.lease_ns) {
        ATLAS_LOG_INFO(config.logger,
                       "node-local arbitration %s: using the segment's slot %.0f ms and lease "
                       "%.0f ms (set by the process that created it)",
                       path.c_str(), static_cast<double>(s.slot_ns) / 1e6,
                       static_cast<double>(s.lease_ns) / 1e6);
    }
    Impl* raw = impl.get();
    impl->watcher = std::thread([raw] { raw->watch(); });
    return std::shared_ptr<ShmArbiter>(new ShmArbiter(std::move(impl)));
}

ShmArbiter::ShmArbiter(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

ShmArbiter::~ShmArbiter() {
    shutdown();
}

void ShmArbiter::shutdown() {
    Impl& a = *impl_;
    std::lock_guard<std::mutex> lock(a.join_mu);
    if (!a.watcher.joinable()) {
        return;
    }
    a.stop.store(true, std::memory_order_release);
    a.ring({a.me});
    a.watcher.join();
    const Nanos now = monotonicNowNs();
    if (!a.broken.load() && a.lock(now)) {
        std::vector<int> wake;
        a.stopped = true;
        a.freeProcLocked(a.me);
        a.grantNextLocked(now, &wake);
        a.unlock();
        a.ring(wake);
    }
    a.broken.store(true, std::memory_order_release);  // gates that outlive us send freely
    a.failOpenAll();
}

Result<std::unique_ptr<FlowGate>> ShmArbiter::makeGate(const arbiter::WireClass& cls,
                                                       std::function<void()> waker) {
    Impl& a = *impl_;
    if (a.broken.load()) {
        return Status(Code::kUnavailable, a.path + " is unusable");
    }
    const Nanos now = monotonicNowNs();
    if (!a.lock(now)) {
        return Status(Code::kUnavailable, a.path + " is unusable");
    }
    int idx = -1;
    if (!a.stopped) {
        for (uint32_t i = 0; i < kShmMaxFlows && idx < 0; ++i) {
            ShmFlow& f = a.seg->flows[i];
            if (f.state == kShmFlowFree) {
                idx = static_cast<int>(i);
                std::memset(static_cast<void*>(&f), 0, sizeof(f));
                f.state = kShmFlowIdle;
                f.proc = a.me;
                f.pipeline = cls.pipeline;
                f.stage = cls.stage;
                f.direction = cls.direction;
            }
        }
    }
    a.unlock();
    if (idx < 0) {
        return Status(Code::kUnavailable, a.path + ": all " + std::to_string(kShmMaxFlows) +
                                              " flow entries are in use");
    }
    auto gate = std::make_unique<ShmGate>(impl_, idx, std::move(waker));
    {
        std::lock_guard<std::mutex> reg(a.reg_mu);
        a.gates.insert(gate.get());
    }
    return std::unique_ptr<FlowGate>(std::move(gate));
}

ShmArbiter::Snapshot ShmArbiter::snapshot() {
    Impl& a = *impl_;
    Snapshot out;
    if (a.broken.load() || !a.lock(monotonicNowNs())) {
        return out;
    }
    const ShmSegment& s = *a.seg;
    out.holder_flow = s.holder;
    if (s.holder >= 0) {
        out.holder_pid = s.procs[s.flows[s.holder].proc].pid.load();
    }
    for (uint32_t i = 0; i < kShmMaxFlows; ++i) {
        out.waiting += s.flows[i].state == kShmFlowWaiting ? 1 : 0;
    }
    for (uint32_t p = 0; p < kShmMaxProcs; ++p) {
        out.procs += s.procs[p].pid.load() != 0 ? 1 : 0;
    }
    out.grants = s.grants;
    out.revocations = s.revocations;
    out.recoveries = s.recoveries;
    out.slot_ns = s.slot_ns;
    out.lease_ns = s.lease_ns;
    a.unlock();
    return out;
}

const std::string& ShmArbiter::path() const {
    return impl_->path;
}

}  // namespace atlas::plugin::wan
