#include "bubbletea/engine/thread_pool.h"

namespace atlas::bubbletea {

ThreadPool::ThreadPool(int threads) {
    for (int i = 1; i < threads; ++i) {
        workers_.emplace_back([this, i] { workerLoop(i); });
    }
}

ThreadPool::~ThreadPool() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stopping_ = true;
    }
    start_cv_.notify_all();
    for (std::thread& t : workers_) {
        t.join();
    }
}

void ThreadPool::runTasks(int worker) {
    // relaxed: the counter only partitions task indices; the task data was published by the
    // mutex handoff that started this generation.
    for (size_t task = next_task_.fetch_add(1, std::memory_order_relaxed); task < num_tasks_;
         task = next_task_.fetch_add(1, std::memory_order_relaxed)) {
        (*fn_)(task, worker);
    }
}

void ThreadPool::workerLoop(int worker) {
    uint64_t seen = 0;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(mu_);
            start_cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
            if (stopping_) {
                return;
            }
            seen = generation_;
        }
        runTasks(worker);
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (--busy_workers_ == 0) {
                done_cv_.notify_one();
            }
        }
    }
}

void ThreadPool::parallelFor(size_t num_tasks,
                             const std::function<void(size_t task, int worker)>& fn) {
    if (num_tasks == 0) {
        return;
    }
    if (workers_.empty() || num_tasks == 1) {
        for (size_t t = 0; t < num_tasks; ++t) {
            fn(t, 0);
        }
        return;
    }
    {
        std::lock_guard<std::mutex> lock(mu_);
        fn_ = &fn;
        num_tasks_ = num_tasks;
        next_task_.store(0, std::memory_order_relaxed);
        busy_workers_ = static_cast<int>(workers_.size());
        ++generation_;
    }
    start_cv_.notify_all();
    runTasks(0);
    // Every worker must leave runTasks before fn_ (a caller's reference) goes out of scope.
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return busy_workers_ == 0; });
    fn_ = nullptr;
}

}  // namespace atlas::bubbletea
