// KV hand-off end to end: the daemon (CPU engine, tiny random model) pushes the KV cache to
// an in-process KvReceiver (the code behind kv-sink) over the Atlas transport. The bytes
// must equal a direct engine export, the checksum must verify, the first token must match a
// direct run; pull mode and dead/silent/mismatched decode endpoints are covered too.
#include <sys/socket.h>

#include <mutex>

#include "bubbletea/daemon/kv_net.h"
#include "bubbletea/daemon/kv_receiver.h"
#include "bubbletea/daemon/kv_wire.h"
#include "bubbletea/engine/model_writer.h"
#include "bubbletea/engine/weights.h"
#include "daemon_test_util.h"
#include "engine_test_util.h"
#include "kv_sink_util.h"

namespace atlas::bubbletea {
namespace {

using testutil::completionBody;
using testutil::DaemonHarness;
using testutil::json;
using testutil::nullDaemonConfig;
using testutil::parseJson;
using testutil::postCompletion;
using testutil::Sink;

class DaemonKv : public ::testing::Test {
  protected:
    void SetUp() override {
        auto cfg = shapePreset("tiny");
        ASSERT_TRUE(cfg.isOk());
        ASSERT_TRUE(writeRandomModel(dir_.path(), cfg.value(), DType::kBF16, 5).isOk());
        auto w = loadModelDir(dir_.path());
        ASSERT_TRUE(w.isOk());
        weights_ = w.value();
    }

    DaemonConfig cpuConfig() const {
        DaemonConfig c = nullDaemonConfig();
        c.engine = EngineKind::kCpu;
        c.random_weights.clear();
        c.model_dir = dir_.path().string();
        c.engine_threads = 2;
        c.max_chunk_tokens = 16;  // several chunks: the KV must survive chunking
        c.min_chunk_tokens = 4;
        return c;
    }

    // The reference: one direct prefill of `prompt` and its KV export.
    void directRun(const std::vector<int32_t>& prompt, DType dtype, int32_t* token,
                   std::vector<std::byte>* kv_bytes, KvLayout* layout) {
        auto engine = makeCpuEngine(weights_, 1);
        ASSERT_TRUE(engine.isOk());
        auto kv = engine.value()->newSequence(prompt.size());
        ASSERT_TRUE(kv.isOk());
        auto r = engine.value()->prefillChunk(*kv.value(), prompt, true);
        ASSERT_TRUE(r.isOk());
        *token = r.value().next_token;
        ASSERT_TRUE(engine.value()->exportKv(*kv.value(), dtype, kv_bytes, layout).isOk());
    }

    testutil::TempDir dir_;
    std::shared_ptr<const Weights> weights_;
};

TEST_F(DaemonKv, PushIsByteExactAndChecksummed) {
    KvReceiverConfig rc;
    rc.expected_model = "tiny";
    Sink sink(rc);
    ASSERT_NE(sink.receiver, nullptr);
    DaemonHarness h(cpuConfig());
    ASSERT_TRUE(h.ok());
    auto c = h.client(30 * kNsPerSec);
    for (DType dtype : {DType::kBF16}) {
        const auto prompt = testutil::tokenRange(50, 9);
        int32_t token = -1;
        std::vector<std::byte> expected;
        KvLayout layout;
        directRun(prompt, dtype, &token, &expected, &layout);
        const json kv = {{"do_remote_decode", true},
                         {"remote_host", "127.0.0.1"},
                         {"remote_port", sink.port()},
                         {"remote_engine_id", "decode-0"}};
        auto r = postCompletion(*c, completionBody(prompt, {{"kv_transfer_params", kv}}));
        ASSERT_TRUE(r.isOk()) << r.status().toString();
        ASSERT_EQ(r.value().status, 200) << r.value().body;
        const json j = parseJson(r.value().body);
        EXPECT_EQ(j["choices"][0]["token_ids"][0], token);
        const json& p = j["kv_transfer_params"];
        EXPECT_EQ(p["do_remote_prefill"], true);
        EXPECT_EQ(p["remote_engine_id"], "test-engine");
        EXPECT_EQ(p["remote_request_id"], j["id"]);
        EXPECT_EQ(p["kv_location"]["mode"], "push");
        EXPECT_EQ(p["kv_location"]["bytes"], expected.size());
        EXPECT_EQ(p["kv_layout"]["num_tokens"], 50);
        EXPECT_EQ(p["kv_layout"]["dtype"], "BF16");
        EXPECT_GE(j["bubbletea"]["chunks"].get<int>(), 4);

        const auto transfers = sink.snapshot();
        ASSERT_EQ(transfers.size(), 1u);
        const KvTransfer& t = transfers[0];
        EXPECT_EQ(t.status, kv::AckStatus::kOk) << t.error;
        EXPECT_EQ(t.header.request_id, j["id"].get<std::string>());
        EXPECT_EQ(t.header.model_id, "tiny");
        EXPECT_EQ(t.header.first_token, token);
        EXPECT_EQ(t.header.num_layers, static_cast<uint32_t>(layout.num_layers));
        EXPECT_EQ(t.header.num_kv_heads, static_cast<uint32_t>(layout.num_kv_heads));
        EXPECT_EQ(t.header.head_dim, static_cast<uint32_t>(layout.head_dim));
        EXPECT_EQ(t.header.num_tokens, 50u);
        ASSERT_EQ(t.payload.size(), expected.size());
        EXPECT_TRUE(t.payload == expected) << "pushed KV differs from a direct export";
        EXPECT_EQ(kv::computeChecksum(t.header.checksum_kind, t.payload), t.header.checksum);
    }
    // The endpoint connection is reused: a second push needs no new control connection.
    auto r = postCompletion(
        *c, completionBody(testutil::tokenRange(7), {{"kv_transfer_params",
                                                      {{"do_remote_decode", true},
                                                       {"remote_host", "127.0.0.1"},
                                                       {"remote_port", sink.port()}}}}));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 200) << r.value().body;
    EXPECT_EQ(sink.snapshot().size(), 2u);
    EXPECT_EQ(h.daemon().metrics().kv_pushes.load(), 2u);
    EXPECT_GT(h.daemon().metrics().kv_bytes_pushed.load(), 0u);
}

TEST_F(DaemonKv, DecodeUrlIsTheDefaultEndpointAndAuthKeysMustMatch) {
    KvReceiverConfig rc;
    rc.auth_key = "shared-secret";
    Sink sink(rc);
    DaemonConfig config = cpuConfig();
    config.decode_url = "127.0.0.1:" + std::to_string(sink.port());
    config.auth_key = "shared-secret";
    config.kv_dtype = DType::kF32;
    config.kv_checksum = ChecksumKind::kSha256;
    DaemonHarness h(config);
    ASSERT_TRUE(h.ok());
    auto c = h.client(30 * kNsPerSec);
    const auto prompt = testutil::tokenRange(20, 2);
    auto r = postCompletion(
        *c, completionBody(prompt, {{"kv_transfer_params", {{"do_remote_decode", true}}}}));
    ASSERT_TRUE(r.isOk());
    ASSERT_EQ(r.value().status, 200) << r.value().body;
    const auto transfers = sink.snapshot();
    ASSERT_EQ(transfers.size(), 1u);
    EXPECT_EQ(transfers[0].header.checksum_kind, ChecksumKind::kSha256);
    EXPECT_EQ(transfers[0].header.dtype, DType::kF32);
    int32_t token = -1;
    std::vector<std::byte> expected;
    KvLayout layout;
    directRun(prompt, DType::kF32, &token, &expected, &layout);
    EXPECT_TRUE(transfers[0].payload == expected);

    // A daemon with another key cannot push to this sink: reported as 502, not a hang.
    DaemonConfig wrong = config;
    wrong.auth_key = "other-secret";
    wrong.kv_timeout_ns = 2 * kNsPerSec;
    DaemonHarness h2(wrong);
    ASSERT_TRUE(h2.ok());
    auto c2 = h2.client(30 * kNsPerSec);
    r = postCompletion(
        *c2, completionBody(prompt, {{"kv_transfer_params", {{"do_remote_decode", true}}}}));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 502) << r.value().body;
    EXPECT_EQ(sink.snapshot().size(), 1u);
}

TEST_F(DaemonKv, PullModeKeepsTheCacheForOneFetch) {
    DaemonHarness h(cpuConfig());
    ASSERT_TRUE(h.ok());
    auto c = h.client(30 * kNsPerSec);
    const auto prompt = testutil::tokenRange(30, 4);
    auto r = postCompletion(
        *c, completionBody(prompt, {{"kv_transfer_params", {{"do_remote_decode", true}}}}));
    ASSERT_TRUE(r.isOk());
    ASSERT_EQ(r.value().status, 200) << r.value().body;
    const json p = parseJson(r.value().body)["kv_transfer_params"];
    ASSERT_EQ(p["kv_location"]["mode"], "pull") << p.dump();
    EXPECT_EQ(p["remote_port"], h.port());
    const std::string id = p["kv_location"]["kv_id"];
    auto pulled = c->request("GET", "/v1/kv/" + id);
    ASSERT_TRUE(pulled.isOk());
    ASSERT_EQ(pulled.value().status, 200);
    const std::string& blob = pulled.value().body;
    const size_t header_bytes = p["kv_location"]["header_bytes"];
    ASSERT_GT(blob.size(), header_bytes);
    auto header = kv::decodeHeader(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(blob.data()), header_bytes),
        1ull << 30);
    ASSERT_TRUE(header.isOk()) << header.status().toString();
    const std::span<const std::byte> payload(
        reinterpret_cast<const std::byte*>(blob.data()) + header_bytes, blob.size() - header_bytes);
    EXPECT_EQ(payload.size(), header.value().payload_bytes);
    EXPECT_EQ(kv::computeChecksum(header.value().checksum_kind, payload), header.value().checksum);
    int32_t token = -1;
    std::vector<std::byte> expected;
    KvLayout layout;
    directRun(prompt, DType::kBF16, &token, &expected, &layout);
    EXPECT_EQ(header.value().first_token, token);
    EXPECT_TRUE(std::equal(payload.begin(), payload.end(), expected.begin(), expected.end()));
    // One-shot.
    auto again = c->request("GET", "/v1/kv/" + id);
    ASSERT_TRUE(again.isOk());
    EXPECT_EQ(again.value().status, 404);
}

TEST_F(DaemonKv, DeadOrSilentDecodeEndpointsAreReportedWithinABound) {
    DaemonConfig config = cpuConfig();
    config.kv_timeout_ns = 1500 * kNsPerMs;
    DaemonHarness h(config);
    ASSERT_TRUE(h.ok());
    auto c = h.client(30 * kNsPerSec);

    // Dead: nothing listens on the port.
    uint16_t dead_port = 0;
    {
        auto s = kv::listenTcp("127.0.0.1", 0);
        ASSERT_TRUE(s.isOk());
        dead_port = kv::localPort(s.value());
    }  // closed
    auto t0 = std::chrono::steady_clock::now();
    auto r = postCompletion(
        *c, completionBody(testutil::tokenRange(10), {{"kv_transfer_params",
                                                       {{"do_remote_decode", true},
                                                        {"remote_host", "127.0.0.1"},
                                                        {"remote_port", dead_port}}}}));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 502) << r.value().body;
    const json e = parseJson(r.value().body);
    EXPECT_EQ(e["error"]["code"], "kv_transfer_failed");
    EXPECT_NE(e["error"]["message"].get<std::string>().find(std::to_string(dead_port)),
              std::string::npos);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));

    // Silent: accepts the TCP connection but never answers the hello.
    auto silent = kv::listenTcp("127.0.0.1", 0);
    ASSERT_TRUE(silent.isOk());
    t0 = std::chrono::steady_clock::now();
    r = postCompletion(*c, completionBody(testutil::tokenRange(10),
                                          {{"kv_transfer_params",
                                            {{"do_remote_decode", true},
                                             {"remote_host", "127.0.0.1"},
                                             {"remote_port", kv::localPort(silent.value())}}}}));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 502) << r.value().body;
    const auto elapsed = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(elapsed, std::chrono::milliseconds(1400));  // the configured bound ...
    EXPECT_LT(elapsed, std::chrono::seconds(4));          // ... and not much more
    EXPECT_EQ(h.daemon().metrics().kv_push_failures.load(), 2u);

    // The daemon still serves after both failures.
    r = postCompletion(*c, completionBody(testutil::tokenRange(3)));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 200);
}

TEST_F(DaemonKv, ModelMismatchIsNackedAndReported) {
    KvReceiverConfig rc;
    rc.expected_model = "llama-3-8b";
    Sink sink(rc);
    DaemonHarness h(cpuConfig());
    ASSERT_TRUE(h.ok());
    auto c = h.client(30 * kNsPerSec);
    auto r = postCompletion(
        *c, completionBody(testutil::tokenRange(10), {{"kv_transfer_params",
                                                       {{"do_remote_decode", true},
                                                        {"remote_host", "127.0.0.1"},
                                                        {"remote_port", sink.port()}}}}));
    ASSERT_TRUE(r.isOk());
    EXPECT_EQ(r.value().status, 502);
    EXPECT_NE(r.value().body.find("model mismatch"), std::string::npos) << r.value().body;
    ASSERT_EQ(sink.snapshot().size(), 1u);
    EXPECT_EQ(sink.snapshot()[0].status, kv::AckStatus::kModelMismatch);
}

}  // namespace
}  // namespace atlas::bubbletea
