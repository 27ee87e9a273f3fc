#include "plugin/wan/shm_arbiter.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "plugin/wan/shm_arbiter_impl.h"
#include "plugin/wan/shm_gate.h"
#include "scheduler/link_policy.h"

namespace atlas::plugin::wan {

using sched::kNever;

bool ShmArbiter::Impl::lock() {
    const int rc = pthread_mutex_lock(&seg->lock);
    if (rc == 0) {
        return true;
    }
    if (rc == EOWNERDEAD) {
        repairSegmentTable(*seg);
        pthread_mutex_consistent(&seg->lock);
        repaired = "a process died holding the segment lock";
        return true;
    }
    markBroken(rc == ENOTRECOVERABLE ? "the segment mutex is unrecoverable"
                                     : "pthread_mutex_lock failed");
    return false;
}

void ShmArbiter::Impl::unlock() {
    const char* why = repaired;
    repaired = nullptr;
    pthread_mutex_unlock(&seg->lock);
    if (why != nullptr) {
        ATLAS_LOG_WARN(cfg.logger, "node-local arbitration %s: %s; table repaired", path.c_str(),
                       why);
    }
}

void ShmArbiter::Impl::decideLocked(Nanos now, Doorbells* ring) {
    sched::TemporalCore f = fifo();
    if (f.decidePriority(now, seg->slot_ns, seg->max_wait_ns)) {
        ring->add(procOf(f.holder()));
    }
}

bool ShmArbiter::Impl::freeProcLocked(int p) {
    sched::TemporalCore f = fifo();
    bool held = false;
    for (uint32_t i = 0; i < kShmMaxFlows; ++i) {
        if (seg->entries[i].state != sched::kEntryUnused && seg->flows[i].proc == p) {
            held = held || f.holder() == i;
            f.close(i);
        }
    }
    seg->procs[p].pid.store(0, std::memory_order_release);
    return held;
}

void ShmArbiter::Impl::ring(const Doorbells& d) {
    for (int i = 0; i < d.n; ++i) {
        const int p = d.procs[i];
        if (p < 0 || p >= static_cast<int>(kShmMaxProcs)) {
            continue;
        }
        // Pairs with the watcher's load before its futex wait: a bump after the load makes
        // the wait return at once.
        seg->procs[p].doorbell.fetch_add(1, std::memory_order_acq_rel);
        futexWakeAll(&seg->procs[p].doorbell);
    }
}

void ShmArbiter::Impl::ringSelf() {
    Doorbells d;
    d.add(me);
    ring(d);
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

void ShmArbiter::Impl::sweep(uint64_t mask, bool all, Nanos now) {
    struct Gone {
        int p;
        int pid;
        uint64_t start;
    };
    std::vector<Gone> gone;
    for (int p = 0; p < static_cast<int>(kShmMaxProcs); ++p) {
        if (p == me || (mask & (1ull << p)) == 0) {
            continue;
        }
        // Lock-free reads; an entry re-registered meanwhile is caught by the check below.
        const int other = seg->procs[p].pid.load(std::memory_order_acquire);
        const uint64_t start = seg->procs[p].start_time.load(std::memory_order_acquire);
        if (other > 0 && !cfg.probe->alive(other, start)) {
            gone.push_back({p, other, start});
        }
    }
    if (gone.empty() && !all) {
        return;
    }
    if (!lock()) {
        return;
    }
    Doorbells bells;
    std::vector<int> freed;
    if (!stopped) {
        for (const Gone& g : gone) {
            ShmProc& pr = seg->procs[g.p];
            if (pr.pid.load(std::memory_order_relaxed) == g.pid &&
                pr.start_time.load(std::memory_order_relaxed) == g.start) {
                seg->revocations += freeProcLocked(g.p) ? 1 : 0;
                freed.push_back(g.pid);
            }
        }
        if (all) {
            seg->sweep = 0;
        }
        decideLocked(now, &bells);
    }
    unlock();
    ring(bells);
    for (int dead : freed) {
        ATLAS_LOG_WARN(cfg.logger,
                       "node-local arbitration %s: process %d is gone; its flows are dropped "
                       "and its grant is revoked",
                       path.c_str(), dead);
    }
}

void ShmArbiter::Impl::revokeSilentHolder(uint32_t entry, int p, int holder_pid, uint64_t start,
                                          Nanos now) {
    const bool alive = cfg.probe->alive(holder_pid, start);  // kill(), /proc: outside the lock
    if (!lock()) {
        return;
    }
    Doorbells bells;
    bool revoked = false;
    Nanos silent = 0;
    if (!stopped) {
        sched::TemporalCore f = fifo();
        ShmProc& pr = seg->procs[p];
        silent = now - pr.alive_ns.load(std::memory_order_acquire);
        // Still the same holder, process and silence: the decision stands.
        if (f.holder() == entry && seg->flows[entry].proc == p &&
            pr.pid.load(std::memory_order_relaxed) == holder_pid &&
            pr.start_time.load(std::memory_order_relaxed) == start && silent > seg->lease_ns) {
            if (alive) {
                // Alive but silent (stopped, starved): the link moves on; the process sends
                // unarbitrated until its own slot ends, then asks again.
                f.leave(entry);
            } else {
                freeProcLocked(p);  // its waiting flows go with it
            }
            ++seg->revocations;
            revoked = true;
            decideLocked(now, &bells);
        }
    }
    unlock();
    ring(bells);
    if (!revoked) {
        return;
    }
    if (alive) {
        ATLAS_LOG_WARN(cfg.logger,
                       "node-local arbitration %s: holder process %d silent for %.0f ms; its "
                       "grant is revoked",
                       path.c_str(), holder_pid, static_cast<double>(silent) / 1e6);
    } else {
        ATLAS_LOG_WARN(cfg.logger,
                       "node-local arbitration %s: holder process %d is gone; its grant is "
                       "revoked",
                       path.c_str(), holder_pid);
    }
}

bool ShmArbiter::Impl::observe(Nanos now, bool decide, LinkView* v) {
    if (!lock()) {
        return false;  // broken: the next round fails every gate open
    }
    if (stopped) {
        unlock();
        return false;
    }
    if (!validateSegmentTable(*seg).isOk()) {
        // Not our protocol's doing (a stray write by some process): restore the invariants,
        // and look for dead processes, as after EOWNERDEAD.
        repairSegmentTable(*seg);
        repaired = "the table broke an invariant (a write outside the protocol)";
    }
    Doorbells bells;
    sched::TemporalCore f = fifo();
    if (decide) {
        decideLocked(now, &bells);  // an expired lease goes to the next waiter
    }
    v->holder = f.holder();
    v->lease_end = f.leaseEndNs();
    if (v->holder != sched::TemporalCore::kNone && procOf(v->holder) >= 0) {
        v->hp = procOf(v->holder);
        const ShmProc& pr = seg->procs[v->hp];
        v->holder_pid = pr.pid.load(std::memory_order_relaxed);
        v->holder_start = pr.start_time.load(std::memory_order_relaxed);
        v->holder_alive = pr.alive_ns.load(std::memory_order_acquire);
    }
    for (uint32_t i = 0; i < kShmMaxFlows; ++i) {
        const uint32_t st = seg->entries[i].state;
        if ((st == sched::kEntryWaiting || st == sched::kEntryHolding) && procOf(i) >= 0) {
            v->contenders |= 1ull << procOf(i);
        }
    }
    v->sweep_all = seg->sweep != 0;
    unlock();
    ring(bells);
    return true;
}

Nanos ShmArbiter::Impl::watchStep(Nanos now) {
    if (now >= next_beat) {
        seg->procs[me].alive_ns.store(now, std::memory_order_release);
        next_beat = now + beat_ns;
    }
    Nanos next = next_beat;
    if (broken.load(std::memory_order_acquire)) {
        failOpenAll();
        return next;
    }
    bool any_waiting = false;
    LinkView v;
    {
        std::lock_guard<std::mutex> reg(reg_mu);
        for (ShmGate* g : gates) {
            next = std::min(next, g->finishDrain(now));
            any_waiting = any_waiting || g->waiting();
        }
        if (!observe(now, any_waiting, &v)) {
            return next;
        }
        if (v.hp == me) {
            for (ShmGate* g : gates) {
                if (g->index() == v.holder) {
                    g->pollGrant(now);
                }
            }
        }
    }
    // Liveness checks (kill(), /proc reads) below run with no lock held: neither the
    // segment's nor the registry's, which a gate's destructor takes on an engine thread.
    const bool silent = v.hp >= 0 && v.hp != me && now - v.holder_alive > seg->lease_ns;
    if (any_waiting && v.hp >= 0) {
        next = std::min(next, v.lease_end);  // preempt at the lease end for our waiter
        if (v.hp != me && !silent) {
            next = std::min(next, v.holder_alive + seg->lease_ns + 1);  // its liveness deadline
        }
    }
    if (any_waiting && silent) {
        revokeSilentHolder(v.holder, v.hp, v.holder_pid, v.holder_start, now);
        next = now;  // look at the new holder at once
    }
    if (v.sweep_all || (any_waiting && now >= next_sweep)) {
        // Dead waiters ahead of ours would each get the link for a lease: drop them now.
        sweep(v.sweep_all ? ~0ull : v.contenders, v.sweep_all, now);
        next_sweep = now + beat_ns;
    }
    return next;
}

void ShmArbiter::Impl::watch() {
    while (!stop.load(std::memory_order_acquire)) {
        // Read before the work: a ring during it makes the wait return at once.
        const uint32_t seen = seg->procs[me].doorbell.load(std::memory_order_acquire);
        const Nanos next = watchStep(cfg.clock->nowNs());
        if (stop.load(std::memory_order_acquire)) {
            break;
        }
        const Nanos wait = std::clamp<Nanos>(next - cfg.clock->nowNs(), 100 * kNsPerUs, beat_ns);
        futexWait(&seg->procs[me].doorbell, seen, wait);
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
    if (!validSegmentName(config.name)) {
        return Status(Code::kInvalidUsage, "node-local segment name '" + config.name +
                                               "' must be 1..200 characters [A-Za-z0-9._-]");
    }
    if (config.lease_ns <= 0 || config.slot_ns < 0 || config.max_wait_ns < 0) {
        return Status(Code::kInvalidUsage, "node-local slot, lease and max wait must be positive");
    }
    if (config.clock == nullptr || config.probe == nullptr) {
        return Status(Code::kInvalidUsage, "node-local arbitration needs a clock and a probe");
    }
    auto impl = std::make_shared<Impl>();
    impl->cfg = config;
    impl->path = config.dir + "/" + config.name;
    impl->pid = static_cast<int>(::getpid());
    bool created = false;
    sched::PolicyConfig aging;
    aging.max_slot_ns = config.slot_ns;
    aging.max_wait_ns = config.max_wait_ns;
    const Nanos max_wait_ns = sched::agingBoundNs(aging);
    auto mapped = mapSegment(impl->path, config.slot_ns, config.lease_ns, max_wait_ns, &created);
    if (!mapped) {
        return mapped.status();
    }
    impl->seg = mapped.value();
    ShmSegment& s = *impl->seg;
    if (created) {
        ATLAS_LOG_INFO(config.logger,
                       "node-local arbitration: created %s (slot %.0f ms, lease %.0f ms, max "
                       "wait %.0f ms)",
                       impl->path.c_str(), static_cast<double>(config.slot_ns) / 1e6,
                       static_cast<double>(config.lease_ns) / 1e6,
                       static_cast<double>(max_wait_ns) / 1e6);
    }
    impl->beat_ns = std::max<Nanos>(s.lease_ns / 4, kNsPerMs);
    const Nanos now = config.clock->nowNs();
    // Entries of processes that are gone become free (probed outside the lock), then we take one.
    impl->sweep(~0ull, false, now);
    const uint64_t my_start = config.probe->startTime(impl->pid);
    if (!impl->lock()) {
        return Status(Code::kUnavailable, impl->path + ": the segment mutex is unusable");
    }
    Doorbells bells;
    for (uint32_t p = 0; p < kShmMaxProcs && impl->me < 0; ++p) {
        if (s.procs[p].pid.load(std::memory_order_relaxed) == 0) {
            impl->me = static_cast<int>(p);
            s.procs[p].start_time.store(my_start, std::memory_order_relaxed);
            s.procs[p].alive_ns.store(now, std::memory_order_relaxed);
            s.procs[p].pid.store(impl->pid, std::memory_order_release);  // after start_time
        }
    }
    impl->decideLocked(now, &bells);
    impl->unlock();
    impl->ring(bells);
    if (impl->me < 0) {
        return Status(Code::kUnavailable, impl->path + ": " + std::to_string(kShmMaxProcs) +
                                              " processes already use this link");
    }
    impl->next_beat = now + impl->beat_ns;
    if (s.slot_ns != config.slot_ns || s.lease_ns != config.lease_ns ||
        s.max_wait_ns != max_wait_ns) {
        ATLAS_LOG_INFO(config.logger,
                       "node-local arbitration %s: using the segment's slot %.0f ms, lease "
                       "%.0f ms and max wait %.0f ms (set by the process that created it)",
                       impl->path.c_str(), static_cast<double>(s.slot_ns) / 1e6,
                       static_cast<double>(s.lease_ns) / 1e6,
                       static_cast<double>(s.max_wait_ns) / 1e6);
    }
    if (config.watcher_thread) {
        Impl* raw = impl.get();
        impl->watcher = std::thread([raw] { raw->watch(); });
    }
    return std::shared_ptr<ShmArbiter>(new ShmArbiter(std::move(impl)));
}

ShmArbiter::ShmArbiter(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

ShmArbiter::~ShmArbiter() {
    shutdown();
}

void ShmArbiter::shutdown() {
    Impl& a = *impl_;
    std::lock_guard<std::mutex> lock(a.join_mu);
    if (a.shut) {
        return;
    }
    a.shut = true;
    a.stop.store(true, std::memory_order_release);
    if (a.watcher.joinable()) {
        a.ringSelf();
        a.watcher.join();
    }
    if (!a.broken.load() && a.lock()) {
        Doorbells bells;
        a.stopped = true;
        a.freeProcLocked(a.me);
        a.decideLocked(a.cfg.clock->nowNs(), &bells);
        a.unlock();
        a.ring(bells);
    }
    a.broken.store(true, std::memory_order_release);  // gates that outlive us send freely
    a.failOpenAll();
}

Nanos ShmArbiter::runWatcher(Nanos now_ns) {
    return impl_->watchStep(now_ns);
}

Result<std::unique_ptr<FlowGate>> ShmArbiter::makeGate(const arbiter::WireClass& cls,
                                                       std::function<void()> waker,
                                                       std::shared_ptr<LinkRate> rate) {
    Impl& a = *impl_;
    if (a.broken.load() || !a.lock()) {
        return Status(Code::kUnavailable, a.path + " is unusable");
    }
    int idx = -1;
    if (!a.stopped) {
        for (uint32_t i = 0; i < kShmMaxFlows && idx < 0; ++i) {
            if (a.fifo().open(i, cls.priority)) {
                idx = static_cast<int>(i);
                ShmFlow& f = a.seg->flows[i];
                std::memset(static_cast<void*>(&f), 0, sizeof(f));
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
    auto gate = std::make_unique<ShmGate>(impl_, static_cast<uint32_t>(idx), std::move(waker),
                                          std::move(rate));
    {
        std::lock_guard<std::mutex> reg(a.reg_mu);
        a.gates.insert(gate.get());
    }
    return std::unique_ptr<FlowGate>(std::move(gate));
}

ShmArbiter::Snapshot ShmArbiter::snapshot() {
    Impl& a = *impl_;
    Snapshot out;
    if (a.broken.load() || !a.lock()) {
        return out;
    }
    const ShmSegment& s = *a.seg;
    const uint32_t h = a.fifo().holder();
    if (h != sched::TemporalCore::kNone) {
        out.holder_flow = static_cast<int>(h);
        out.holder_pid = a.procOf(h) >= 0 ? s.procs[a.procOf(h)].pid.load() : 0;
    }
    out.waiting = s.fifo.waiting;
    for (uint32_t p = 0; p < kShmMaxProcs; ++p) {
        out.procs += s.procs[p].pid.load() != 0 ? 1 : 0;
    }
    out.grants = s.fifo.grants;
    out.revocations = s.revocations;
    out.recoveries = s.recoveries;
    out.slot_ns = s.slot_ns;
    out.lease_ns = s.lease_ns;
    out.max_wait_ns = s.max_wait_ns;
    a.unlock();
    return out;
}

const std::string& ShmArbiter::path() const {
    return impl_->path;
}

}  // namespace atlas::plugin::wan
