// Cost of resolving the handles NCCL passes on every isend/irecv/test (plugin/handle_table.h,
// plugin/requests.h), against the calls they guard and against what the plugin did before (a
// cast of NCCL's pointer and a read of a magic word in the object, which reads freed memory
// when the handle is stale).
//
// Rows, each resolving one handle per iteration while cycling over Arg live objects (1: hot
// in cache; 64: a large job's comms per process; 4096: the table's entries and the objects
// spread over memory):
//   BM_Comm_PointerMagic/N      the old comm lookup (cast + magic compare)
//   BM_Comm_HandleTable/N       HandleTable::find (decode, chunk load, entry compare)
//   BM_Request_PointerMagic/N   the old test() lookup (cast + state word compare)
//   BM_Request_Token/N          test()'s lookup: the comm's entry, then the pool's entry
//   BM_AbiCycle/B               the calls themselves: one irecv, one isend of B bytes and the
//                               test() polls until both are done, through ncclNetPlugin_v11
//                               on a loopback connection (real transport, engine threads).
//                               Counters isend_ns, irecv_ns, test_ns: mean time inside one
//                               call, each timed with steady_clock, the clock's own cost
//                               (calibrated in the same run) subtracted.
// After Google Benchmark's table, a summary: per call, the table lookup's cost as a share of
// the call (rows /64 against BM_AbiCycle/8), then the same as one JSON object (`summary`).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "atlas/nccl/net.h"
#include "plugin/handle_table.h"
#include "plugin/net_impl.h"
#include "plugin/requests.h"
#include "plugin/tables.h"

namespace atlas::plugin {
namespace {

constexpr uint32_t kOldMagic = 0x41745364;  // the old "AtSd"

struct OldComm {
    uint32_t magic = kOldMagic;
    char body[120] = {};  // comm objects are a few cache lines; keep them apart
};

OldComm* oldLookup(void* p) {
    auto* c = static_cast<OldComm*>(p);
    return (c != nullptr && c->magic == kOldMagic) ? c : nullptr;
}

void BM_Comm_PointerMagic(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    std::vector<std::unique_ptr<OldComm>> objs;
    std::vector<void*> handles;
    for (size_t i = 0; i < n; ++i) {
        objs.push_back(std::make_unique<OldComm>());
        handles.push_back(objs.back().get());
    }
    size_t i = 0;
    for (auto _ : state) {
        void* h = handles[i];
        benchmark::DoNotOptimize(h);
        benchmark::DoNotOptimize(oldLookup(h));
        i = i + 1 == n ? 0 : i + 1;
    }
}
BENCHMARK(BM_Comm_PointerMagic)->Arg(1)->Arg(64)->Arg(4096);

void BM_Comm_HandleTable(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    auto table = std::make_unique<HandleTable>();
    std::vector<std::unique_ptr<OldComm>> objs;
    std::vector<void*> handles;
    for (size_t i = 0; i < n; ++i) {
        objs.push_back(std::make_unique<OldComm>());
        handles.push_back(table->add(HandleKind::kSend, objs.back().get()).value());
    }
    size_t i = 0;
    for (auto _ : state) {
        void* h = handles[i];
        benchmark::DoNotOptimize(h);
        benchmark::DoNotOptimize(table->find(HandleKind::kSend, h));
        i = i + 1 == n ? 0 : i + 1;
    }
    table->removeAll(HandleKind::kSend, [](void*) {});
    (void)table->releaseStorage();
}
BENCHMARK(BM_Comm_HandleTable)->Arg(1)->Arg(64)->Arg(4096);

// Comms as the plugin lays them out for test(): the pool hangs off the comm object.
struct BenchComm {
    std::unique_ptr<RequestPool> requests;
};

auto* const kInner = reinterpret_cast<transport::Request*>(0x1000);  // never dereferenced

void BM_Request_PointerMagic(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    std::vector<std::unique_ptr<RequestPool>> pools;
    std::vector<void*> handles;
    for (size_t i = 0; i < n; ++i) {
        pools.push_back(std::make_unique<RequestPool>(RequestOp::kSend, 0, 4, 4096));
        PluginRequest* r = pools.back()->reserve();
        pools.back()->posted(r, kInner, 8, nullptr);
        handles.push_back(r);
    }
    size_t i = 0;
    for (auto _ : state) {
        void* h = handles[i];
        benchmark::DoNotOptimize(h);
        // The old check: the entry's own state word (here its token, where a magic was).
        auto* r = static_cast<PluginRequest*>(h);
        benchmark::DoNotOptimize(r != nullptr && r->token != 0 ? r : nullptr);
        i = i + 1 == n ? 0 : i + 1;
    }
}
BENCHMARK(BM_Request_PointerMagic)->Arg(1)->Arg(64)->Arg(4096);

void BM_Request_Token(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    auto table = std::make_unique<HandleTable>();
    std::vector<std::unique_ptr<BenchComm>> comms;
    std::vector<void*> handles;
    for (size_t i = 0; i < n; ++i) {
        comms.push_back(std::make_unique<BenchComm>());
        BenchComm& c = *comms.back();
        c.requests = std::make_unique<RequestPool>(RequestOp::kSend, 0, 4, 4096);
        void* token = table->add(HandleKind::kSend, &c).value();
        c.requests->bindHandles(token);
        PluginRequest* r = c.requests->reserve();
        c.requests->posted(r, kInner, 8, nullptr);
        handles.push_back(RequestPool::handleOf(r));
    }
    size_t i = 0;
    for (auto _ : state) {
        void* h = handles[i];
        benchmark::DoNotOptimize(h);
        // What plugin/state.cc's findRequest does.
        uint32_t owner = 0;
        PluginRequest* r = nullptr;
        if (RequestPool::ownerIndex(h, &owner)) {
            HandleKind kind{};
            void* obj = table->findAt(owner, &kind);
            if (kind == HandleKind::kSend) {
                r = static_cast<BenchComm*>(obj)->requests->find(h);
            }
        }
        benchmark::DoNotOptimize(r);
        i = i + 1 == n ? 0 : i + 1;
    }
    table->removeAll(HandleKind::kSend, [](void*) {});
    (void)table->releaseStorage();
}
BENCHMARK(BM_Request_Token)->Arg(1)->Arg(64)->Arg(4096);

using SteadyClock = std::chrono::steady_clock;

int64_t nsBetween(SteadyClock::time_point a, SteadyClock::time_point b) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

// Mean cost of one steady_clock read, subtracted from the per-call timings below.
double clockReadNs() {
    constexpr int kReads = 20000;
    const auto start = SteadyClock::now();
    for (int i = 0; i < kReads - 1; ++i) {
        benchmark::DoNotOptimize(SteadyClock::now());
    }
    return static_cast<double>(nsBetween(start, SteadyClock::now())) / kReads;
}

[[noreturn]] void die(const char* what, ncclResult_t rc) {
    std::fprintf(stderr, "handles_bench: %s failed (ncclResult %d)\n", what, static_cast<int>(rc));
    std::exit(1);
}

void check(ncclResult_t rc, const char* what) {
    if (rc != ncclSuccess) {
        die(what, rc);
    }
}

void dropLogs(ncclDebugLogLevel, unsigned long, const char*, int, const char*, ...) {}

// A connected send/recv pair of one context on 127.0.0.1, through the v11 table.
struct LoopbackPair {
    LoopbackPair() {
        ::setenv("ATLAS_SOCKET_IFNAME", "lo", 1);
        ncclNetCommConfig_v11_t config{-1};
        check(ncclNetPlugin_v11.init(&ctx, 7, &config, &dropLogs, nullptr), "init");
        char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
        check(ncclNetPlugin_v11.listen(ctx, 0, handle, &listen), "listen");
        const auto until = SteadyClock::now() + std::chrono::seconds(20);
        while (send == nullptr || recv == nullptr) {
            if (send == nullptr) {
                check(ncclNetPlugin_v11.connect(ctx, 0, handle, &send, nullptr), "connect");
            }
            if (recv == nullptr) {
                check(ncclNetPlugin_v11.accept(listen, &recv, nullptr), "accept");
            }
            if (SteadyClock::now() > until) {
                die("connect/accept within 20 s", ncclSystemError);
            }
        }
    }
    ~LoopbackPair() {
        (void)ncclNetPlugin_v11.closeSend(send);
        (void)ncclNetPlugin_v11.closeRecv(recv);
        (void)ncclNetPlugin_v11.closeListen(listen);
        (void)ncclNetPlugin_v11.finalize(ctx);
    }
    void* ctx = nullptr;
    void* listen = nullptr;
    void* send = nullptr;
    void* recv = nullptr;
};

void BM_AbiCycle(benchmark::State& state) {
    const size_t bytes = static_cast<size_t>(state.range(0));
    LoopbackPair pair;
    const double clock_ns = clockReadNs();
    std::vector<char> out(bytes, 'x');
    std::vector<char> in(bytes);
    void* data[1] = {in.data()};
    size_t sizes[1] = {bytes};
    int tags[1] = {0};
    int64_t send_ns = 0, recv_ns = 0, test_ns = 0;
    int64_t sends = 0, recvs = 0, tests = 0;
    for (auto _ : state) {
        void* rreq = nullptr;
        void* sreq = nullptr;
        while (rreq == nullptr) {
            const auto t0 = SteadyClock::now();
            check(ncclNetPlugin_v11.irecv(pair.recv, 1, data, sizes, tags, nullptr, nullptr, &rreq),
                  "irecv");
            recv_ns += nsBetween(t0, SteadyClock::now());
            ++recvs;
        }
        while (sreq == nullptr) {
            const auto t0 = SteadyClock::now();
            check(ncclNetPlugin_v11.isend(pair.send, out.data(), bytes, 0, nullptr, nullptr, &sreq),
                  "isend");
            send_ns += nsBetween(t0, SteadyClock::now());
            ++sends;
        }
        int sdone = 0, rdone = 0;
        while (sdone == 0 || rdone == 0) {
            for (auto [req, done] : {std::pair{sreq, &sdone}, std::pair{rreq, &rdone}}) {
                if (*done == 0) {
                    const auto t0 = SteadyClock::now();
                    check(ncclNetPlugin_v11.test(req, done, nullptr), "test");
                    test_ns += nsBetween(t0, SteadyClock::now());
                    ++tests;
                }
            }
        }
    }
    auto mean = [&](int64_t sum, int64_t n) {
        return n > 0 ? std::max(0.0, static_cast<double>(sum) / static_cast<double>(n) - clock_ns)
                     : 0.0;
    };
    state.counters["isend_ns"] = mean(send_ns, sends);
    state.counters["irecv_ns"] = mean(recv_ns, recvs);
    state.counters["test_ns"] = mean(test_ns, tests);
    state.counters["tests_per_msg"] =
        static_cast<double>(tests) / static_cast<double>(std::max<int64_t>(1, state.iterations()));
    state.counters["clock_ns"] = clock_ns;
}
BENCHMARK(BM_AbiCycle)->Arg(8)->Arg(64 << 10)->UseRealTime();

// Keeps what the console shows and adds the summary.
class SummaryReporter : public benchmark::ConsoleReporter {
  public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const Run& r : runs) {
            if (r.run_type == Run::RT_Iteration || r.aggregate_name == "median") {
                Row& row = rows_[r.run_name.str()];
                row.cpu_ns = r.GetAdjustedCPUTime();
                for (const auto& [k, c] : r.counters) {
                    row.counters[k] = c.value;
                }
            }
        }
        ConsoleReporter::ReportRuns(runs);
    }

    void printSummary() const {
        const Row* cycle = find("BM_AbiCycle/8/real_time");
        const Row* table = find("BM_Comm_HandleTable/64");
        const Row* old_comm = find("BM_Comm_PointerMagic/64");
        const Row* token = find("BM_Request_Token/64");
        const Row* old_req = find("BM_Request_PointerMagic/64");
        if (cycle == nullptr || table == nullptr || old_comm == nullptr || token == nullptr ||
            old_req == nullptr) {
            std::printf("\nsummary: needs BM_AbiCycle/8 and the /64 lookup rows (filter)\n");
            return;
        }
        struct Line {
            const char* call;
            double call_ns, lookup_ns, old_ns;
        };
        const Line lines[] = {
            {"isend", cycle->counter("isend_ns"), table->cpu_ns, old_comm->cpu_ns},
            {"irecv", cycle->counter("irecv_ns"), table->cpu_ns, old_comm->cpu_ns},
            {"test", cycle->counter("test_ns"), token->cpu_ns, old_req->cpu_ns},
        };
        std::printf("\nHandle lookup per call (64 live comms, 8-byte messages on loopback)\n");
        std::printf("%-6s %10s %11s %11s %13s %16s\n", "call", "call ns", "lookup ns", "old ns",
                    "lookup/call", "(new-old)/call");
        std::string json = "{\"summary\":{\"clock_ns\":" + num(cycle->counter("clock_ns")) +
                           ",\"tests_per_msg\":" + num(cycle->counter("tests_per_msg"));
        for (const Line& l : lines) {
            const double share = l.call_ns > 0 ? l.lookup_ns / l.call_ns : 0;
            const double extra = l.call_ns > 0 ? (l.lookup_ns - l.old_ns) / l.call_ns : 0;
            std::printf("%-6s %10.1f %11.2f %11.2f %12.2f%% %15.2f%%\n", l.call, l.call_ns,
                        l.lookup_ns, l.old_ns, 100 * share, 100 * extra);
            json += std::string(",\"") + l.call + "\":{\"call_ns\":" + num(l.call_ns) +
                    ",\"lookup_ns\":" + num(l.lookup_ns) + ",\"old_lookup_ns\":" + num(l.old_ns) +
                    ",\"lookup_share\":" + num(share) + ",\"extra_share\":" + num(extra) + "}";
        }
        std::printf("%s}}\n", json.c_str());
    }

  private:
    struct Row {
        double cpu_ns = 0;
        std::map<std::string, double> counters;
        double counter(const std::string& k) const {
            auto it = counters.find(k);
            return it != counters.end() ? it->second : 0;
        }
    };
    const Row* find(const std::string& name) const {
        auto it = rows_.find(name);
        return it != rows_.end() ? &it->second : nullptr;
    }
    static std::string num(double v) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.4g", v);
        return buf;
    }
    std::map<std::string, Row> rows_;
};

}  // namespace
}  // namespace atlas::plugin

int main(int argc, char** argv) {
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
        return 1;
    }
    atlas::plugin::SummaryReporter reporter;
    benchmark::RunSpecifiedBenchmarks(&reporter);
    reporter.printSummary();
    benchmark::Shutdown();
    return 0;
}
