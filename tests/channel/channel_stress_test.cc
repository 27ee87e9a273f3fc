// Concurrency stress: a writer process publishes as fast as it can into small rings while
// reader processes copy records out. Every field of every record is derived from one
// counter, so a torn copy (fields from two records) breaks an invariant the readers check.
// Bounded in time (~2.5 s); asserts progress so a reader that only ever says "busy" fails.
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "atlas/common/clock.h"
#include "channel/channel_reader.h"
#include "channel/channel_writer.h"
#include "tests/channel/channel_test_util.h"

namespace atlas::channel {
namespace {

using testing::ShmNameGuard;
using testing::uniqueShmName;

constexpr ChannelCapacities kCaps{16, 64};  // small rings: overruns and wrap-arounds happen
constexpr uint32_t kMaxSet = maxPredictionSet(16);
constexpr int kReaders = 2;

// ---- the invariants: record contents as functions of one counter ----
// Every fourth record has no known transfer (both fields 0); the others have one whose first
// data landed up to 30 ns before the wait opened or inside it, all valid for the writer.
IdleInterval idleRecord(uint64_t n) {
    const Nanos start = static_cast<Nanos>(n) * 1000 + 7;
    const Nanos end = start + static_cast<Nanos>(n % 97) + 1;
    IdleInterval i{start, end, n};
    if (n % 4 != 0) {
        i.transfer_start_ns = std::min(start - 30 + static_cast<Nanos>(n % 61), end);
        i.transfer_bytes = n * 4096 + 1;
    }
    return i;
}
std::vector<PredictedWindow> predictionSet(uint64_t k) {
    std::vector<PredictedWindow> set(1 + k % kMaxSet);
    for (size_t i = 0; i < set.size(); ++i) {
        const Nanos start = static_cast<Nanos>(k) * 1'000'000 + static_cast<Nanos>(i) * 1000;
        set[i] = {start, start + 100 + static_cast<Nanos>(i),
                  static_cast<uint32_t>((k * 13 + i) % kPpmOne), k,
                  (k + i) % 2 != 0 ? WindowSource::kPredictor : WindowSource::kArbiterPlan};
    }
    return set;
}
ChannelStats statsFor(uint64_t j) {
    ChannelStats s;
    s.period_ns = static_cast<Nanos>(j) * 10;
    s.period_confidence_ppm = static_cast<uint32_t>(j % kPpmOne);
    s.idle_fraction_ppm = static_cast<uint32_t>((j * 3) % kPpmOne);
    s.iteration = j;
    s.coverage_ppm = static_cast<uint32_t>((j * 5) % kPpmOne);
    s.precision_ppm = static_cast<uint32_t>((j * 7) % kPpmOne);
    return s;
}

// Results shared by all processes (an anonymous shared mapping).
struct Shared {
    std::atomic<bool> stop;
    std::atomic<uint64_t> writer_records;
    std::atomic<uint64_t> writer_sets;
    std::atomic<uint64_t> reads[kReaders];
    std::atomic<uint64_t> records_checked;
    std::atomic<uint64_t> sets_checked;
    std::atomic<uint64_t> states_checked;
    std::atomic<uint64_t> busy;
    std::atomic<uint64_t> lost;
    std::atomic<uint64_t> violations;
    char first_violation[256];
};

void violation(Shared* shared, const char* what, uint64_t a, uint64_t b) {
    if (shared->violations.fetch_add(1) == 0) {
        std::snprintf(shared->first_violation, sizeof(shared->first_violation), "%s (%llu vs %llu)",
                      what, static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
    }
}

void runWriter(ChannelWriter& w, Shared* shared, Nanos deadline) {
    uint64_t n = 0;
    uint64_t k = 0;
    while (monotonicNowNs() < deadline) {
        for (int i = 0; i < 64; ++i) {
            if (!w.publishObserved(idleRecord(n++))) {
                violation(shared, "writer refused a valid record", n - 1, 0);
            }
            if (i % 3 == 0) {
                ++k;  // set ids start at 1 and go up by one per publish
                w.publishPredictions(predictionSet(k));
            }
            if (i % 5 == 0) {
                w.setStats(statsFor(n));
            }
        }
    }
    shared->writer_records.store(n);
    shared->writer_sets.store(k);
}

void runReader(const std::string& name, Shared* shared, int index) {
    auto opened = ChannelReader::open(name);
    if (!opened.isOk()) {
        violation(shared, "reader could not open", 0, 0);
        return;
    }
    ChannelReader& r = opened.value();
    ReadCursor cursor;
    uint64_t last_iteration = 0;
    bool have_last = false;
    uint64_t last_set = 0;
    while (!shared->stop.load(std::memory_order_relaxed)) {
        auto batch = r.readObservedSince(cursor, 256);
        if (batch.isOk()) {
            shared->lost.fetch_add(batch.value().lost, std::memory_order_relaxed);
            for (const IdleInterval& got : batch.value().records) {
                const IdleInterval want = idleRecord(got.iteration);
                if (got.start_ns != want.start_ns || got.end_ns != want.end_ns ||
                    got.transfer_start_ns != want.transfer_start_ns ||
                    got.transfer_bytes != want.transfer_bytes) {
                    violation(shared, "torn idle record", got.iteration,
                              static_cast<uint64_t>(got.start_ns));
                }
                if (have_last && got.iteration <= last_iteration) {
                    violation(shared, "idle records out of order", got.iteration, last_iteration);
                }
                last_iteration = got.iteration;
                have_last = true;
            }
            shared->records_checked.fetch_add(batch.value().records.size(),
                                              std::memory_order_relaxed);
        } else {
            violation(shared, "readObservedSince failed", 0, 0);
        }

        auto set = r.readPredictions();
        if (set.isOk() && set.value().set_id != 0) {
            const PredictionSet& s = set.value();
            const auto want = predictionSet(s.set_id);
            if (s.set_id < last_set) {
                violation(shared, "prediction set id went backwards", s.set_id, last_set);
            }
            last_set = s.set_id;
            if (s.windows.size() != want.size()) {
                violation(shared, "prediction set size", s.windows.size(), want.size());
            } else {
                for (size_t i = 0; i < want.size(); ++i) {
                    const PredictedWindow& g = s.windows[i];
                    if (g.start_ns != want[i].start_ns || g.end_ns != want[i].end_ns ||
                        g.confidence_ppm != want[i].confidence_ppm ||
                        g.iteration != want[i].iteration || g.source != want[i].source) {
                        violation(shared, "torn prediction set", s.set_id, i);
                    }
                }
            }
            shared->sets_checked.fetch_add(1, std::memory_order_relaxed);
        } else if (!set.isOk()) {
            if (set.status().code() == Code::kUnavailable) {
                shared->busy.fetch_add(1, std::memory_order_relaxed);
            } else {
                violation(shared, "readPredictions failed", 0, 0);
            }
        }

        auto state = r.readState();
        if (state.isOk() && state.value().stats.iteration != kUnknownIteration) {
            const ChannelStats want = statsFor(state.value().stats.iteration);
            const ChannelStats& got = state.value().stats;
            if (got.period_ns != want.period_ns ||
                got.period_confidence_ppm != want.period_confidence_ppm ||
                got.idle_fraction_ppm != want.idle_fraction_ppm ||
                got.coverage_ppm != want.coverage_ppm || got.precision_ppm != want.precision_ppm) {
                violation(shared, "torn state block", got.iteration,
                          static_cast<uint64_t>(got.period_ns));
            }
            shared->states_checked.fetch_add(1, std::memory_order_relaxed);
        } else if (!state.isOk()) {
            shared->busy.fetch_add(1, std::memory_order_relaxed);
        }
        shared->reads[index].fetch_add(1, std::memory_order_relaxed);
    }
}

// Waits for pid until the deadline (a pidfd polled with a timeout), then kills it.
// Returns true if it exited with status 0.
bool waitBounded(pid_t pid, Nanos deadline) {
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
        pollfd p{pidfd, POLLIN, 0};
        const Nanos left = deadline - monotonicNowNs();
        const int rc = ::poll(&p, 1, left > 0 ? static_cast<int>(left / kNsPerMs) : 0);
        ::close(pidfd);
        if (rc <= 0) {
            ::kill(pid, SIGKILL);
        }
    }
    // Without pidfd (old kernel) the ctest timeout is the bound.
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid) {
        return false;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

TEST(ChannelStress, ConcurrentWriterAndReaderProcessesNeverSeeTornRecords) {
    ShmNameGuard guard(uniqueShmName("stress"));
    void* mem =
        ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto* shared = new (mem) Shared{};

    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const Nanos run_ns = 2500 * kNsPerMs;
    const pid_t writer = ::fork();
    ASSERT_GE(writer, 0);
    if (writer == 0) {
        ::close(ready[0]);
        auto w = ChannelWriter::create(guard.name(), kCaps);
        const char ok = w.isOk() ? 'y' : 'n';
        (void)!::write(ready[1], &ok, 1);
        if (w.isOk()) {
            runWriter(w.value(), shared, monotonicNowNs() + run_ns);
        }
        ::_exit(w.isOk() ? 0 : 1);
    }
    ::close(ready[1]);
    char ok = 'n';
    ASSERT_EQ(::read(ready[0], &ok, 1), 1);
    ::close(ready[0]);
    ASSERT_EQ(ok, 'y');

    std::vector<pid_t> readers;
    for (int i = 0; i < kReaders; ++i) {
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            runReader(guard.name(), shared, i);
            ::_exit(0);
        }
        readers.push_back(pid);
    }
    const Nanos deadline = monotonicNowNs() + run_ns + 10 * kNsPerSec;
    EXPECT_TRUE(waitBounded(writer, deadline));
    shared->stop.store(true);
    for (pid_t pid : readers) {
        EXPECT_TRUE(waitBounded(pid, deadline));
    }

    EXPECT_EQ(shared->violations.load(), 0u) << shared->first_violation;
    EXPECT_GT(shared->writer_records.load(), 10000u);
    EXPECT_GT(shared->writer_sets.load(), 1000u);
    for (int i = 0; i < kReaders; ++i) {
        EXPECT_GT(shared->reads[i].load(), 1000u) << "reader " << i;
    }
    EXPECT_GT(shared->records_checked.load(), 1000u);
    EXPECT_GT(shared->sets_checked.load(), 1000u);
    EXPECT_GT(shared->states_checked.load(), 1000u);
    // Rings of 64 records cannot keep up with an unthrottled writer: overruns must have
    // been detected (and skipped) rather than read as garbage.
    EXPECT_GT(shared->lost.load(), 0u);
    std::printf(
        "writer: %llu records, %llu sets; checked %llu records, %llu sets, "
        "%llu states; lost %llu; busy %llu; reads %llu/%llu\n",
        static_cast<unsigned long long>(shared->writer_records.load()),
        static_cast<unsigned long long>(shared->writer_sets.load()),
        static_cast<unsigned long long>(shared->records_checked.load()),
        static_cast<unsigned long long>(shared->sets_checked.load()),
        static_cast<unsigned long long>(shared->states_checked.load()),
        static_cast<unsigned long long>(shared->lost.load()),
        static_cast<unsigned long long>(shared->busy.load()),
        static_cast<unsigned long long>(shared->reads[0].load()),
        static_cast<unsigned long long>(shared->reads[1].load()));
    shared->~Shared();
    ::munmap(mem, sizeof(Shared));
}

// The same protocol with a writer thread and a reader thread in one process, so TSan sees
// both sides (it cannot see across processes).
TEST(ChannelStress, WriterAndReaderThreadsNeverSeeTornRecords) {
    ShmNameGuard guard(uniqueShmName("threads"));
    auto w = ChannelWriter::create(guard.name(), kCaps);
    ASSERT_TRUE(w.isOk()) << w.status().toString();
    Shared shared{};
    const Nanos deadline = monotonicNowNs() + 1000 * kNsPerMs;
    std::thread writer([&] { runWriter(w.value(), &shared, deadline); });
    std::thread reader([&] { runReader(guard.name(), &shared, 0); });
    writer.join();
    shared.stop.store(true);
    reader.join();
    EXPECT_EQ(shared.violations.load(), 0u) << shared.first_violation;
    EXPECT_GT(shared.reads[0].load(), 100u);
    EXPECT_GT(shared.records_checked.load(), 100u);
    EXPECT_GT(shared.sets_checked.load(), 100u);
}

}  // namespace
}  // namespace atlas::channel
