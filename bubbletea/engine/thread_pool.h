// A fixed pool of worker threads for data-parallel loops (the CPU engine's GEMMs and
// attention). Owned by one engine; the threads live until the pool is destroyed (joined,
// never detached).
//
// Thread-safety: parallelFor is called by one thread at a time (the engine's caller) and is
// not reentrant (a task must not call parallelFor).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace atlas::bubbletea {

class ThreadPool {
  public:
    // `threads` workers in total including the caller of parallelFor; values < 1 mean 1.
    explicit ThreadPool(int threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool&) = delete;
    ThreadPool& operator=(const ThreadPool&) = delete;

    int size() const { return static_cast<int>(workers_.size()) + 1; }

    // Runs fn(task, worker) for every task in [0, num_tasks), spread over the pool, and
    // blocks until all have returned. `worker` is in [0, size()) and is unique among
    // concurrently running tasks, so it can index per-worker scratch memory. Tasks are
    // handed out dynamically in increasing order.
    void parallelFor(size_t num_tasks, const std::function<void(size_t task, int worker)>& fn);

  private:
    void workerLoop(int worker);
    void runTasks(int worker);

    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable start_cv_;  // workers wait here for a new generation
    std::condition_variable done_cv_;   // the caller waits here for workers to finish
    uint64_t generation_ = 0;           // guarded by mu_
    int busy_workers_ = 0;              // guarded by mu_
    bool stopping_ = false;             // guarded by mu_
    // The current loop; written by the caller before a generation starts (under mu_), read
    // by workers after they observe the new generation (under mu_), so plain fields suffice.
    const std::function<void(size_t, int)>* fn_ = nullptr;
    size_t num_tasks_ = 0;
    std::atomic<size_t> next_task_{0};
};

}  // namespace atlas::bubbletea
