#include "transport/engine.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>

#include "transport/comm_core.h"

namespace atlas::transport {

namespace {
// How often an engine looks at its comms' stats intervals; also the longest it sleeps while
// it owns comms, so an idle comm's TCP_INFO still refreshes.
constexpr Nanos kStatsTickNs = 50 * kNsPerMs;
}  // namespace

Result<std::unique_ptr<Engine>> Engine::start(int index, IoBackend backend, Nanos spin_ns,
                                              const Logger& log) {
    std::unique_ptr<Engine> e(new Engine(index, spin_ns, log));
    std::promise<Status> ready;
    auto fut = ready.get_future();
    Engine* raw = e.get();
    e->thread_ = std::thread([raw, backend, &ready] {
        // io_uring rings are single-issuer: the thread that drives the ring creates it.
        auto r = makeReactor(backend, raw->log_);
        if (!r.isOk()) {
            ready.set_value(r.status());
            return;
        }
        raw->reactor_ = std::move(r.value());
        raw->backend_ = raw->reactor_->backend();
        ready.set_value(Status::ok());
        raw->run();
    });
    Status st = fut.get();
    if (!st.isOk()) {
        e->thread_.join();
        return st;
    }
    return e;
}

Engine::~Engine() {
    stop_.store(true, std::memory_order_seq_cst);
    if (reactor_ != nullptr) {
        reactor_->wake();
    }
    if (thread_.joinable()) {
        thread_.join();
    }
}

void Engine::adopt(CommCore* comm) {
    comm_count_.fetch_add(1, std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> lock(mu_);
        commands_.push_back({Command::kAdopt, comm, nullptr, {}});
    }
    has_commands_.store(true, std::memory_order_seq_cst);
    wakeIfSleeping();
}

void Engine::ring(CommCore* comm) {
    // At most one entry per comm in the stack: the flag is cleared by the engine right
    // before it reads the comm's posted requests, so a later post rings again.
    if (comm->doorbell_pending_.exchange(true, std::memory_order_acq_rel)) {
        return;
    }
    CommCore* head = ready_head_.load(std::memory_order_relaxed);
    do {
        comm->next_ready_ = head;
    } while (!ready_head_.compare_exchange_weak(head, comm, std::memory_order_seq_cst,
                                                std::memory_order_relaxed));
    wakeIfSleeping();
}

void Engine::wakeIfSleeping() {
    // seq_cst: pairs with the engine's seq_cst store of sleeping_ followed by its loads of
    // the queues, so either the engine sees our push or we see it asleep.
    if (sleeping_.exchange(false, std::memory_order_seq_cst)) {
        reactor_->wake();
    }
}

void Engine::deliver(CommCore* comm, StreamArrival arrival) {
    {
        std::lock_guard<std::mutex> lock(mu_);
        commands_.push_back({Command::kArrival, comm, nullptr, std::move(arrival)});
    }
    has_commands_.store(true, std::memory_order_seq_cst);
    wakeIfSleeping();
}

Status Engine::release(CommCore* comm, Nanos timeout_ns) {
    auto rel = std::make_shared<Release>(Release{comm});
    {
        std::lock_guard<std::mutex> lock(mu_);
        commands_.push_back({Command::kRelease, comm, rel, {}});
    }
    has_commands_.store(true, std::memory_order_seq_cst);
    wakeIfSleeping();
    std::unique_lock<std::mutex> lock(mu_);
    // Bounded only as a last line of defence: the reactor contract guarantees every op of a
    // closing comm completes promptly, so this wait ends in microseconds.
    if (!cv_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), [&rel] { return rel->done; })) {
        return {Code::kTimeout, "engine did not release the comm within the timeout"};
    }
    return Status::ok();
}

void Engine::run() {
    Nanos last_activity = 0;
    while (true) {
        bool active = false;
        if (has_commands_.exchange(false, std::memory_order_seq_cst)) {
            processCommands();
            active = true;
        }
        active = processDoorbells() || active;
        processClosing();
        if (stop_.load(std::memory_order_acquire) && comms_.empty() && closing_.empty()) {
            break;
        }
        const Nanos now = monotonicNowNs();
        if (active) {
            last_activity = now;
        }
        // Stats sampling (comm_stats.cc): between I/O batches, never inside a completion; each
        // comm samples at its own interval, checked on a coarse tick.
        if (now >= next_stats_tick_ns_) {
            next_stats_tick_ns_ = now + kStatsTickNs;
            for (CommCore* c : comms_) {
                c->maybeSample(now);
            }
        }
        Nanos timeout = comms_.empty() ? -1 : kStatsTickNs;
        if (!closing_.empty()) {
            timeout = std::min<Nanos>(timeout < 0 ? kNsPerMs : timeout, kNsPerMs);  // drain ops
        }
        const Nanos next_timer = runTimers(now);
        if (next_timer >= 0) {
            const Nanos wait = std::max<Nanos>(0, next_timer - now);
            timeout = timeout < 0 ? wait : std::min(timeout, wait);
        }
        if (now - last_activity < spin_ns_) {
            timeout = 0;  // spinning: poll without sleeping; posters need not wake us
        } else {
            sleeping_.store(true, std::memory_order_seq_cst);
            if (has_commands_.load(std::memory_order_seq_cst) ||
                ready_head_.load(std::memory_order_seq_cst) != nullptr ||
                stop_.load(std::memory_order_seq_cst)) {
                timeout = 0;  // work arrived: flush submissions and reap, but don't block
            }
        }
        int delivered = 0;
        Status st = reactor_->runOnce(timeout, &delivered);
        sleeping_.store(false, std::memory_order_relaxed);
        if (delivered > 0) {
            last_activity = monotonicNowNs();
        }
        if (!st.isOk()) {
            ATLAS_LOG_WARN(log_, "engine %d: %s", index_, st.toString().c_str());
        }
    }
}

void Engine::processCommands() {
    std::vector<Command> cmds;
    {
        std::lock_guard<std::mutex> lock(mu_);
        cmds.swap(commands_);
    }
    for (Command& c : cmds) {
        if (c.kind == Command::kAdopt) {
            comms_.push_back(c.comm);
            c.comm->onAdopt(*reactor_);
        } else if (c.kind == Command::kArrival) {
            c.comm->onArrival(std::move(c.arrival));
        } else {
            c.comm->beginClose();
            closing_.push_back(c.release);
        }
    }
}

Nanos Engine::runTimers(Nanos now) {
    // Engine clock (monotonic) and comm clocks agree unless a test injected a clock; timers
    // are then compared on the comm's own clock.
    Nanos next = -1;
    for (CommCore* c : comms_) {
        const Nanos at = c->timerAt();
        if (at < 0) {
            continue;
        }
        const Nanos cnow = c->clockNow();
        if (at <= cnow) {
            c->onTimer(cnow);
            const Nanos again = c->timerAt();
            if (again < 0) {
                continue;
            }
            next = next < 0 ? now + std::max<Nanos>(0, again - cnow)
                            : std::min(next, now + std::max<Nanos>(0, again - cnow));
            continue;
        }
        const Nanos due = now + (at - cnow);
        next = next < 0 ? due : std::min(next, due);
    }
    return next;
}

bool Engine::processDoorbells() {
    CommCore* c = ready_head_.exchange(nullptr, std::memory_order_acquire);
    const bool any = c != nullptr;
    while (c != nullptr) {
        CommCore* next = c->next_ready_;
        // Cleared before reading the comm's requests: a post after this point rings again.
        c->doorbell_pending_.store(false, std::memory_order_seq_cst);
        c->onDoorbell();
        c = next;
    }
    return any;
}

void Engine::processClosing() {
    for (auto it = closing_.begin(); it != closing_.end();) {
        std::shared_ptr<Release> rel = *it;
        if (!rel->comm->quiescent()) {
            ++it;
            continue;
        }
        rel->comm->finishClose();
        comms_.erase(std::remove(comms_.begin(), comms_.end(), rel->comm), comms_.end());
        comm_count_.fetch_sub(1, std::memory_order_relaxed);
        it = closing_.erase(it);
        {
            std::lock_guard<std::mutex> lock(mu_);
            rel->done = true;
        }
        cv_.notify_all();
    }
}

}  // namespace atlas::transport
