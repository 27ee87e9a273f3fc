// Per-core throughput of frame sealing (transport/seal.h) against bare EVP AES-256-GCM.
//
// Every case runs on one thread, so the GB column (decimal GB of payload per CPU second) is
// per core. BM_Evp/message:0 is what `openssl speed -evp aes-256-gcm` times (bulk
// EVP_EncryptUpdate, no per-message IV, AAD or tag); message:1 adds the per-message IV set-up
// and tag (what `openssl speed -aead -evp aes-256-gcm` times). BM_Seal and BM_Open add what a
// frame costs on top: a second GCM message for the 32-byte header, and the AAD. Run with
// perf/micro/seal-bench.
#include <benchmark/benchmark.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "transport/seal.h"
#include "transport/wire.h"

namespace seal = atlas::transport::seal;

namespace {

constexpr size_t kH = atlas::transport::wire::kFrameHeaderBytes;
// Open cases re-seal their frames between timed batches; a batch of about this many bytes
// stays in L2, as a payload just received from the socket would be.
constexpr size_t kBatchBytes = 1 << 20;

seal::SessionSecrets secrets() {
    atlas::transport::AuthContext c;
    c.session_id = 7;
    c.client_nonce.fill(1);
    c.server_nonce.fill(2);
    return std::move(seal::SessionSecrets::derive("bench key", c)).value();
}

void report(benchmark::State& state, size_t bytes_per_iter) {
    const double bytes =
        static_cast<double>(state.iterations()) * static_cast<double>(bytes_per_iter);
    state.SetBytesProcessed(static_cast<int64_t>(bytes));
    state.counters["GB"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsRate);
}

// args: payload bytes, in place (1) or out of place (0)
void BM_Seal(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    const bool in_place = state.range(1) != 0;
    auto tx = seal::StreamSealer::create(secrets(), seal::Direction::kConnectorToListener, 1, kH);
    std::vector<uint8_t> src(n, 0x5a), dst(n), prefix(tx->prefixBytes());
    std::vector<uint8_t> header(kH, 0x11);
    for (auto _ : state) {
        atlas::Status st =
            in_place ? tx->sealInPlace(header, src, prefix) : tx->seal(header, src, dst, prefix);
        if (!st.isOk()) {
            state.SkipWithError(st.toString().c_str());
            break;
        }
        benchmark::DoNotOptimize(prefix.data());
    }
    report(state, n);
}

// args: payload bytes, piece bytes per decrypt() (0 = the whole payload at once)
void BM_Open(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    const size_t piece = state.range(1) == 0 ? n : static_cast<size_t>(state.range(1));
    const auto s = secrets();
    auto tx = seal::StreamSealer::create(s, seal::Direction::kConnectorToListener, 1, kH);
    auto rx = seal::StreamOpener::create(s, seal::Direction::kConnectorToListener, 1, kH);
    const size_t frame = rx->prefixBytes() + n;
    const size_t batch = std::max<size_t>(1, kBatchBytes / n);
    std::vector<uint8_t> wire(batch * frame);
    std::vector<uint8_t> header(kH, 0x11);
    auto refill = [&] {
        for (size_t i = 0; i < batch; ++i) {
            uint8_t* f = wire.data() + i * frame;
            std::memset(f + rx->prefixBytes(), 0x5a, n);
            (void)tx->sealInPlace(header, {f + rx->prefixBytes(), n}, {f, rx->prefixBytes()});
        }
    };
    refill();
    size_t next = 0;
    for (auto _ : state) {
        if (next == batch) {
            state.PauseTiming();
            refill();
            next = 0;
            state.ResumeTiming();
        }
        uint8_t* f = wire.data() + next++ * frame;
        atlas::Status st = rx->openPrefix({f, rx->prefixBytes()});
        if (st.isOk()) {
            st = rx->beginPayload(n);
        }
        for (size_t off = 0; st.isOk() && off < n; off += piece) {
            st = rx->decrypt({f + rx->prefixBytes() + off, std::min(piece, n - off)});
        }
        if (st.isOk()) {
            st = rx->finish();
        }
        if (!st.isOk()) {
            state.SkipWithError(st.toString().c_str());
            break;
        }
    }
    report(state, n);
}

// Bare EVP, one reused context. args: bytes, per-message IV + tag (1) or bulk update only (0)
void BM_Evp(benchmark::State& state) {
    const size_t n = static_cast<size_t>(state.range(0));
    const bool message = state.range(1) != 0;
    EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
    unsigned char key[32] = {1}, iv[12] = {2}, tag[16];
    EVP_EncryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key, iv);
    std::vector<uint8_t> buf(n, 0x5a);
    int len = 0;
    for (auto _ : state) {
        if (message) {
            ++iv[11];
            EVP_EncryptInit_ex(ctx, nullptr, nullptr, nullptr, iv);
        }
        EVP_EncryptUpdate(ctx, buf.data(), &len, buf.data(), static_cast<int>(n));
        if (message) {
            EVP_EncryptFinal_ex(ctx, tag, &len);
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag);
        }
        benchmark::DoNotOptimize(buf.data());
    }
    EVP_CIPHER_CTX_free(ctx);
    report(state, n);
}

// 8 bytes: the per-frame cost alone (NCCL's small messages); then the three sizes.
void sizes(benchmark::internal::Benchmark* b, std::vector<int64_t> second) {
    for (int64_t n : {8, 4096, 65536, 524288}) {
        for (int64_t s : second) {
            b->Args({n, s});
        }
    }
}

}  // namespace

BENCHMARK(BM_Evp)->ArgNames({"bytes", "message"})->Apply([](auto* b) { sizes(b, {0, 1}); });
BENCHMARK(BM_Seal)->ArgNames({"bytes", "in_place"})->Apply([](auto* b) { sizes(b, {0, 1}); });
BENCHMARK(BM_Open)->ArgNames({"bytes", "piece"})->Apply([](auto* b) { sizes(b, {0, 16384}); });

BENCHMARK_MAIN();
