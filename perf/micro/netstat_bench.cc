// Cost of the stats segment (docs/netstat.md) on the data path, in the plugin's own code:
//
//   per message  RequestPool::completed() with a stats record (a vDSO clock read and three
//                relaxed single-writer stores into the shared segment) against the same call
//                without one: BM_RequestCycle/stats:1 minus BM_RequestCycle/stats:0.
//   per sample   what a comm's owner engine spends every ATLAS_NETSTAT_INTERVAL_MS between
//                I/O batches: per stream one getsockopt(TCP_INFO) (transport/tcp_info.h) and
//                one StreamSink::stream() into the segment, then StreamSink::engine():
//                BM_SampleComm/streams:N on N connected loopback TCP sockets, split into
//                BM_ReadTcpInfo and BM_StreamSinkStore.
//
// Read the CPU column on a shared machine: wall time includes preemption.
//
// docs/netstat.md turns these into a bound against NCCL's network step sizes.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "atlas/common/clock.h"
#include "netstat/writer.h"
#include "plugin/requests.h"
#include "transport/tcp_info.h"

namespace atlas {
namespace {

// A real segment in /dev/shm (removed on destruction), with one claimed comm record.
struct Segment {
    Segment() {
        netstat::WriterConfig wc;
        wc.comm_capacity = 4;
        wc.name = "atlas-netstat-bench-" + std::to_string(::getpid());
        auto w = netstat::StatsWriter::create(wc);
        if (!w.isOk()) {
            std::fprintf(stderr, "netstat_bench: %s\n", w.status().toString().c_str());
            std::abort();
        }
        writer = std::move(w.value());
        netstat::CommIdentity id;
        id.nstreams = 64;
        id.peer = "127.0.0.1:1";
        record = writer->claim(id);
    }
    std::unique_ptr<netstat::StatsWriter> writer;
    netstat::CommRecord* record = nullptr;
};

// N connected loopback TCP pairs; the benchmark samples the client ends. Each pair has moved
// a few bytes so TCP_INFO has an RTT sample, as a live stream has.
struct LoopbackStreams {
    explicit LoopbackStreams(int n) {
        const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(addr);
        if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
            ::listen(listener, n) != 0 ||
            ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            std::perror("netstat_bench: listener");
            std::abort();
        }
        for (int i = 0; i < n; ++i) {
            const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            if (c < 0 || ::connect(c, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
                std::perror("netstat_bench: connect");
                std::abort();
            }
            const int s = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
            char byte = 1;
            if (s < 0 || ::write(c, &byte, 1) != 1 || ::read(s, &byte, 1) != 1) {
                std::perror("netstat_bench: accept/ping");
                std::abort();
            }
            clients.push_back(c);
            servers.push_back(s);
        }
        ::close(listener);
    }
    ~LoopbackStreams() {
        for (int fd : clients) {
            ::close(fd);
        }
        for (int fd : servers) {
            ::close(fd);
        }
    }
    std::vector<int> clients, servers;
};

// One request's life in the pool as isend/irecv and test() drive it (no profiler, no
// transport underneath): arg 1 with the comm's stats record, arg 0 without.
void BM_RequestCycle(benchmark::State& state) {
    Segment seg;
    plugin::RequestPool pool(plugin::RequestOp::kRecv, 0, 8, 4096);
    if (state.range(0) != 0) {
        pool.setStatsRecord(seg.record);
    }
    const size_t bytes = 512 * 1024;
    for (auto _ : state) {
        plugin::PluginRequest* r = pool.reserve();
        pool.posted(r, nullptr, bytes, nullptr);
        pool.completed(r, bytes);
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RequestCycle)->ArgName("stats")->Arg(0)->Arg(1);

// The per-message hook alone: StatsWriter::completed with its clock read.
void BM_CompletedHook(benchmark::State& state) {
    Segment seg;
    for (auto _ : state) {
        netstat::StatsWriter::completed(*seg.record, 512 * 1024,
                                        static_cast<uint64_t>(monotonicNowNs()));
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CompletedHook);

// For scale: the clock read the per-message hook includes.
void BM_MonotonicClock(benchmark::State& state) {
    for (auto _ : state) {
        benchmark::DoNotOptimize(monotonicNowNs());
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MonotonicClock);

// One TCP_INFO reading of a connected loopback socket.
void BM_ReadTcpInfo(benchmark::State& state) {
    LoopbackStreams streams(1);
    TcpInfoSample sample;
    for (auto _ : state) {
        Status st = transport::readTcpInfo(streams.clients[0], monotonicNowNs(), &sample);
        benchmark::DoNotOptimize(st);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ReadTcpInfo);

// One stream record written into the segment (a full sample's stores).
void BM_StreamSinkStore(benchmark::State& state) {
    Segment seg;
    netstat::StreamSink sink(seg.writer.get(), seg.record);
    StreamSample s;
    s.stream = 3;
    s.tcp_info_ok = true;
    s.tcp.rtt_us = 50000;
    s.tcp.snd_cwnd = 4000;
    for (auto _ : state) {
        s.bytes += 1;
        sink.stream(s);
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_StreamSinkStore);

// A comm's whole sample, as CommCore::sampleStats takes it (transport/comm_stats.cc): one
// reading and one record per stream (the control stream counts as one), then the engine
// counters. Items are streams.
void BM_SampleComm(benchmark::State& state) {
    const int n = static_cast<int>(state.range(0));
    Segment seg;
    LoopbackStreams streams(n);
    netstat::StreamSink sink(seg.writer.get(), seg.record);
    CommEngineCounters counters;
    for (auto _ : state) {
        const Nanos now = monotonicNowNs();
        for (int i = 0; i < n; ++i) {
            StreamSample sample;
            sample.stream = i;
            sample.bytes = static_cast<uint64_t>(i);
            sample.tcp_info_ok =
                transport::readTcpInfo(streams.clients[i], now, &sample.tcp).isOk();
            sink.stream(sample);
        }
        sink.engine(counters, now);
    }
    state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_SampleComm)->ArgName("streams")->Arg(1)->Arg(9)->Arg(65);

}  // namespace
}  // namespace atlas

BENCHMARK_MAIN();
