// kv-sink: the reference decode-side receiver of bubbletea's KV hand-off (protocol:
// bubbletea/daemon/kv_wire.h, docs/bubbletea.md). It validates each header, receives the
// payload over the Atlas transport, verifies the checksum, acks, and reports bandwidth as a
// table on stdout and JSON (--json FILE).
//
// It also has a sender mode (--send-to HOST:PORT) that pushes synthetic KV caches through
// the daemon's own pusher, to measure the hand-off without a model.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "bubbletea/daemon/config.h"
#include "bubbletea/daemon/kv_push.h"
#include "bubbletea/daemon/kv_receiver.h"
#include "perf/kv-sink/options.h"

namespace {

using namespace atlas;
using namespace atlas::bubbletea;
using json = nlohmann::json;
using kvsink::Options;

volatile std::sig_atomic_t g_stop = 0;

double percentile(std::vector<double> v, double q) {
    if (v.empty()) {
        return 0;
    }
    std::sort(v.begin(), v.end());
    const size_t i = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
    return v[std::min(i, v.size() - 1)];
}

void writeJson(const std::string& path, const json& j) {
    if (path.empty()) {
        return;
    }
    std::ofstream out(path);
    out << j.dump(2) << "\n";
}

int runSender(const Options& o) {
    std::string host;
    uint16_t port = 0;
    if (!parseHostPort(o.send_to, &host, &port).isOk() || port == 0) {
        std::fprintf(stderr, "kv-sink: --send-to expects HOST:PORT\n");
        return 2;
    }
    KvPushConfig pc;
    pc.auth_key = o.auth_key;
    pc.transport_streams = o.streams;
    pc.timeout_ns = static_cast<Nanos>(o.timeout_ms) * kNsPerMs;
    pc.logger = Logger::stderrLogger(LogLevel::kWarn);
    auto pusher = KvPusher::create(pc);
    if (!pusher.isOk()) {
        std::fprintf(stderr, "kv-sink: %s\n", pusher.status().toString().c_str());
        return 1;
    }
    // A BF16 KV of llama-3-8b shape (32 layers, 8 KV heads, head_dim 128): 128 KiB/token.
    const uint64_t per_token = 32ull * 2 * 8 * 128 * 2;
    const uint64_t tokens =
        std::max<uint64_t>(1, static_cast<uint64_t>(o.size_mb * 1024 * 1024) / per_token);
    std::vector<double> gbps;
    std::vector<double> ms;
    int failures = 0;
    std::printf("%-6s %12s %10s %10s\n", "xfer", "bytes", "ms", "Gbit/s");
    for (int i = 0; i < o.send_count && !g_stop; ++i) {
        KvPushJob job;
        job.host = host;
        job.port = port;
        job.header.transfer_id = static_cast<uint64_t>(i + 1);
        job.header.num_layers = 32;
        job.header.num_kv_heads = 8;
        job.header.head_dim = 128;
        job.header.num_tokens = tokens;
        job.header.dtype = DType::kBF16;
        job.header.first_token = 1;
        job.header.checksum_kind =
            o.checksum == "sha256" ? ChecksumKind::kSha256 : ChecksumKind::kCrc32c;
        job.header.model_id = "synthetic";
        job.header.request_id = "synthetic-" + std::to_string(i);
        job.header.engine_id = "kv-sink-sender";
        job.payload.resize(tokens * per_token);
        for (size_t k = 0; k < job.payload.size(); k += 4096) {
            job.payload[k] = static_cast<std::byte>(k * 31 + static_cast<size_t>(i));
        }
        std::promise<Result<KvPushReceipt>> done;
        auto fut = done.get_future();
        job.done = [&done](Result<KvPushReceipt> r) { done.set_value(std::move(r)); };
        pusher.value()->push(std::move(job));
        auto r = fut.get();
        if (!r.isOk()) {
            ++failures;
            std::printf("%-6d failed: %s\n", i + 1, r.status().message().c_str());
            continue;
        }
        const double t = static_cast<double>(r.value().elapsed_ns) / 1e6;
        const double g = static_cast<double>(r.value().bytes) * 8 / (t * 1e6);
        ms.push_back(t);
        gbps.push_back(g);
        std::printf("%-6d %12llu %10.2f %10.2f\n", i + 1,
                    static_cast<unsigned long long>(r.value().bytes), t, g);
    }
    std::printf(
        "\nsummary: %zu ok, %d failed; Gbit/s p50 %.2f min %.2f max %.2f (includes "
        "checksum, first transfer includes connection set-up)\n",
        gbps.size(), failures, percentile(gbps, 0.5), percentile(gbps, 0.0), percentile(gbps, 1.0));
    writeJson(o.json_path, {{"mode", "send"},
                            {"bytes_per_transfer", tokens * per_token},
                            {"ok", gbps.size()},
                            {"failed", failures},
                            {"gbps_p50", percentile(gbps, 0.5)},
                            {"gbps_min", percentile(gbps, 0.0)},
                            {"gbps_max", percentile(gbps, 1.0)},
                            {"ms_p50", percentile(ms, 0.5)},
                            {"checksum", o.checksum}});
    return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    auto parsed = kvsink::parseOptions(std::vector<std::string>(argv + 1, argv + argc));
    if (!parsed.isOk()) {
        std::fprintf(stderr, "kv-sink: %s\n", parsed.status().message().c_str());
        return 2;
    }
    const Options& o = parsed.value();
    if (o.help) {
        std::fputs(kvsink::usageText().c_str(), stdout);
        return 0;
    }
    std::signal(SIGINT, [](int) { g_stop = 1; });
    std::signal(SIGTERM, [](int) { g_stop = 1; });
    std::signal(SIGPIPE, SIG_IGN);
    if (!o.send_to.empty()) {
        return runSender(o);
    }
    KvReceiverConfig rc;
    if (!parseHostPort(o.listen, &rc.bind_host, &rc.port).isOk()) {
        std::fprintf(stderr, "kv-sink: --listen expects HOST:PORT\n");
        return 2;
    }
    rc.auth_key = o.auth_key;
    rc.expected_model = o.expected_model;
    rc.max_payload_bytes = o.max_bytes;
    rc.keep_payload = false;
    rc.timeout_ms = o.timeout_ms;
    rc.logger = Logger::stderrLogger(LogLevel::kWarn);

    std::mutex mu;
    std::vector<double> gbps;
    std::vector<double> verify_gbps;
    uint64_t bytes_total = 0;
    uint64_t ok = 0;
    uint64_t failed = 0;
    std::atomic<uint64_t> seen{0};
    const bool quiet = o.quiet;
    auto receiver = KvReceiver::start(rc, [&](const KvTransfer& t) {
        std::lock_guard<std::mutex> lock(mu);
        seen.fetch_add(1);
        if (t.status != kv::AckStatus::kOk) {
            ++failed;
            if (!quiet) {
                std::printf("%-24s %-10s %s\n", t.header.request_id.c_str(),
                            kv::ackStatusName(t.status), t.error.c_str());
                std::fflush(stdout);
            }
            return;
        }
        ++ok;
        bytes_total += t.header.payload_bytes;
        const double secs = static_cast<double>(t.receive_ns) / 1e9;
        const double g =
            secs > 0 ? static_cast<double>(t.header.payload_bytes) * 8 / secs / 1e9 : 0;
        const double vsecs = static_cast<double>(t.verify_ns) / 1e9;
        gbps.push_back(g);
        verify_gbps.push_back(
            vsecs > 0 ? static_cast<double>(t.header.payload_bytes) * 8 / vsecs / 1e9 : 0);
        if (!quiet) {
            std::printf("%-24s %-8s %6llu tok %12llu B %9.3f ms %8.2f Gbit/s  first_token %d\n",
                        t.header.request_id.c_str(), t.header.model_id.c_str(),
                        static_cast<unsigned long long>(t.header.num_tokens),
                        static_cast<unsigned long long>(t.header.payload_bytes), secs * 1e3, g,
                        t.header.first_token);
            std::fflush(stdout);
        }
    });
    if (!receiver.isOk()) {
        std::fprintf(stderr, "kv-sink: %s\n", receiver.status().toString().c_str());
        return 1;
    }
    std::fprintf(stderr, "kv-sink: listening on %s:%u\n", rc.bind_host.c_str(),
                 receiver.value()->port());
    const auto start = std::chrono::steady_clock::now();
    while (!g_stop) {
        if (o.count > 0 && seen.load() >= o.count) {
            break;
        }
        if (o.duration_s > 0 && std::chrono::steady_clock::now() - start >
                                    std::chrono::duration<double>(o.duration_s)) {
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    receiver.value()->stop();
    std::lock_guard<std::mutex> lock(mu);
    std::printf("\n%-10s %-10s %-14s %-12s %-12s %-12s %-14s\n", "ok", "failed", "bytes",
                "Gbit/s p50", "Gbit/s min", "Gbit/s max", "verify Gbit/s");
    std::printf("%-10llu %-10llu %-14llu %-12.2f %-12.2f %-12.2f %-14.2f\n",
                static_cast<unsigned long long>(ok), static_cast<unsigned long long>(failed),
                static_cast<unsigned long long>(bytes_total), percentile(gbps, 0.5),
                percentile(gbps, 0.0), percentile(gbps, 1.0), percentile(verify_gbps, 0.5));
    writeJson(o.json_path, {{"mode", "receive"},
                            {"ok", ok},
                            {"failed", failed},
                            {"bytes", bytes_total},
                            {"gbps_p50", percentile(gbps, 0.5)},
                            {"gbps_min", percentile(gbps, 0.0)},
                            {"gbps_max", percentile(gbps, 1.0)},
                            {"verify_gbps_p50", percentile(verify_gbps, 0.5)}});
    return 0;
}
