// Engine: one progress thread owning a Reactor and the comms assigned to it. A Transport
// runs a small fixed pool of engines (ATLAS_ENGINE_THREADS); each comm lives on one engine
// for its whole life, so its sockets are only ever touched by that thread.
//
// Cross-thread entry points (adopt, ring, release) only enqueue and wake; they never run comm
// code on the caller's thread. The wake protocol avoids a syscall per post: the engine sets
// sleeping_ before blocking and re-checks its queues; a poster pushes its doorbell first and
// then wakes the reactor only if it clears sleeping_ (both seq_cst, a Dekker-style pairing).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "transport/net.h"
#include "transport/reactor.h"
#include "transport/rejoiner.h"

namespace atlas::transport {

class CommCore;

class Engine {
  public:
    // Starts the thread, which creates its reactor; returns once the reactor is up (or failed).
    // `spin_ns`: after any activity the engine keeps polling (no sleep, no wakeup needed) for
    // this long before blocking; trades a bounded amount of CPU for small-message latency.
    static Result<std::unique_ptr<Engine>> start(int index, IoBackend backend, Nanos spin_ns,
                                                 const Logger& log);
    // Stops and joins the thread. Every adopted comm must have been released.
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    IoBackend backend() const { return backend_; }
    int index() const { return index_; }

    // Any thread: the engine takes over `comm` (starts its I/O).
    void adopt(CommCore* comm);
    // Any thread (the comm's poster): new requests were posted on `comm`.
    void ring(CommCore* comm);
    // Any thread (the rejoiner): the outcome of a rejoin for `comm`, handed to it on this
    // engine's thread (CommCore::onArrival). Must be called before `comm`'s release() is.
    void deliver(CommCore* comm, StreamArrival arrival);
    // Any thread but the engine's: stops the comm's I/O and waits until the engine holds no
    // reference to it. Returns kTimeout if the engine did not finish within `timeout_ns`; the
    // comm must then be leaked rather than freed.
    Status release(CommCore* comm, Nanos timeout_ns);

    int commCount() const { return comm_count_.load(std::memory_order_relaxed); }

  private:
    Engine(int index, Nanos spin_ns, const Logger& log)
        : index_(index), spin_ns_(spin_ns), log_(log) {}
    void run();
    void processCommands();
    bool processDoorbells();  // true if any comm was rung
    void processClosing();
    void wakeIfSleeping();

    struct Release {
        CommCore* comm;
        bool done = false;
    };
    struct Command {
        enum Kind { kAdopt, kRelease, kArrival } kind;
        CommCore* comm;
        std::shared_ptr<Release> release;  // shared: a timed-out waiter may leave first
        StreamArrival arrival;             // kArrival
    };
    // Runs the comms' due timers; returns the earliest pending timer (-1: none).
    Nanos runTimers(Nanos now);

    const int index_;
    const Nanos spin_ns_;
    Logger log_;
    IoBackend backend_ = IoBackend::kEpoll;
    std::unique_ptr<Reactor> reactor_;
    std::thread thread_;

    std::atomic<bool> stop_{false};
    std::atomic<bool> sleeping_{false};
    std::atomic<CommCore*> ready_head_{nullptr};  // Treiber stack of rung comms
    std::atomic<bool> has_commands_{false};
    std::mutex mu_;
    std::condition_variable cv_;     // signals Release::done
    std::vector<Command> commands_;  // guarded by mu_
    std::atomic<int> comm_count_{0};

    // Engine thread only.
    std::vector<CommCore*> comms_;
    std::vector<std::shared_ptr<Release>> closing_;
    Nanos next_stats_tick_ns_ = 0;  // comms' stats sampling is checked on this tick
};

}  // namespace atlas::transport
