#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "bubbletea/engine/thread_pool.h"

namespace atlas::bubbletea {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnceWithValidWorkerIds) {
    for (int threads : {1, 2, 5}) {
        ThreadPool pool(threads);
        EXPECT_EQ(pool.size(), threads);
        for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}}) {
            std::vector<std::atomic<int>> hits(n);
            std::atomic<bool> bad_worker{false};
            pool.parallelFor(n, [&](size_t task, int worker) {
                hits[task].fetch_add(1);
                if (worker < 0 || worker >= threads) {
                    bad_worker = true;
                }
            });
            for (size_t i = 0; i < n; ++i) {
                ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " task " << i;
            }
            EXPECT_FALSE(bad_worker.load());
        }
    }
}

TEST(ThreadPool, WorkerScratchIsNotShared) {
    // Each worker id is used by one thread at a time, so per-worker scratch needs no lock.
    ThreadPool pool(4);
    std::vector<std::atomic<int>> in_use(4);
    std::atomic<bool> overlap{false};
    for (int round = 0; round < 50; ++round) {
        pool.parallelFor(64, [&](size_t, int worker) {
            if (in_use[static_cast<size_t>(worker)].fetch_add(1) != 0) {
                overlap = true;
            }
            std::this_thread::yield();  // widen the window in which a shared worker id would show
            in_use[static_cast<size_t>(worker)].fetch_sub(1);
        });
    }
    EXPECT_FALSE(overlap.load());
}

}  // namespace
}  // namespace atlas::bubbletea
