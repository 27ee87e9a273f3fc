// The ABI layer over the real transport on 127.0.0.1 (ctest label `loopback`): listen/
// connect/accept through the v11 table, regMr on live comms, irecv with the optional-
// completion sentinel, test() with and without sizes, and finalize while comms are open.
// The dlopen host (plugin_host/, tests/abi) covers the built .so; this covers the internal library.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "plugin/log.h"
#include "plugin/net_impl.h"
#include "plugin/tables.h"
#include "plugin_test_util.h"

namespace atlas::plugin {
namespace {

using testutil::CleanAtlasEnv;
using testutil::FakeInterfaceSource;
using testutil::kLoopback;
using testutil::LogCapture;

using Clock = std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(20);

class PluginLoopbackTest : public ::testing::Test {
  protected:
    void SetUp() override {
        source_.add("lo", "127.0.0.1", kLoopback);
        seams::setInterfaceSource(&source_, "/nonexistent-atlas-sysfs");
        LogCapture::clear();
        ncclNetCommConfig_v11_t config{-1};
        ASSERT_EQ(ncclNetPlugin_v11.init(&ctx_, 42, &config, &LogCapture::logger, nullptr),
                  ncclSuccess);
        ASSERT_EQ(ncclNetPlugin_v11.listen(ctx_, 0, handle_, &listen_), ncclSuccess);
        ASSERT_NE(listen_, nullptr);
        auto until = Clock::now() + kDeadline;
        while (send_ == nullptr || recv_ == nullptr) {
            if (send_ == nullptr) {
                ASSERT_EQ(ncclNetPlugin_v11.connect(ctx_, 0, handle_, &send_, nullptr),
                          ncclSuccess);
            }
            if (recv_ == nullptr) {
                ASSERT_EQ(ncclNetPlugin_v11.accept(listen_, &recv_, nullptr), ncclSuccess);
            }
            ASSERT_LT(Clock::now(), until) << "connect/accept did not complete";
        }
    }
    void TearDown() override {
        EXPECT_EQ(ncclNetPlugin_v11.closeSend(send_), ncclSuccess);
        EXPECT_EQ(ncclNetPlugin_v11.closeRecv(recv_), ncclSuccess);
        EXPECT_EQ(ncclNetPlugin_v11.closeListen(listen_), ncclSuccess);
        EXPECT_EQ(seams::snapshot().live_comms, 0);
        if (ctx_ != nullptr) {
            EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx_), ncclSuccess);
        }
        EXPECT_FALSE(seams::snapshot().alive);
        seams::unloadNow();
        seams::setInterfaceSource(nullptr, "");
        setNcclLogger(nullptr);
    }

    // Sends `payload` and receives it into a buffer of `capacity` bytes; returns what test()
    // reported on the receive side.
    void exchange(const std::vector<char>& payload, size_t capacity, int* recv_size) {
        std::vector<char> in(capacity + 1, 'z');
        void* data[1] = {in.data()};
        size_t sizes[1] = {capacity};
        int tags[1] = {0};
        void* rreq = nullptr;
        void* sreq = nullptr;
        auto until = Clock::now() + kDeadline;
        while (rreq == nullptr) {
            rreq = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);
            ASSERT_EQ(ncclNetPlugin_v11.irecv(recv_, 1, data, sizes, tags, nullptr, nullptr, &rreq),
                      ncclSuccess);
            ASSERT_NE(rreq, reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION))
                << "the sentinel must be overwritten";
            ASSERT_LT(Clock::now(), until);
        }
        while (sreq == nullptr) {
            ASSERT_EQ(ncclNetPlugin_v11.isend(send_, const_cast<char*>(payload.data()),
                                              payload.size(), 0, nullptr, nullptr, &sreq),
                      ncclSuccess);
            ASSERT_LT(Clock::now(), until);
        }
        int sdone = 0;
        int rdone = 0;
        *recv_size = -1;
        while (sdone == 0 || rdone == 0) {
            if (sdone == 0) {
                ASSERT_EQ(ncclNetPlugin_v11.test(sreq, &sdone, nullptr), ncclSuccess);
            }
            if (rdone == 0) {
                ASSERT_EQ(ncclNetPlugin_v11.test(rreq, &rdone, recv_size), ncclSuccess);
            }
            ASSERT_LT(Clock::now(), until) << "transfer of " << payload.size() << " bytes";
        }
        EXPECT_EQ(sdone, 1);
        EXPECT_EQ(rdone, 1);
        ASSERT_EQ(*recv_size, static_cast<int>(payload.size()));
        if (!payload.empty()) {  // memcmp must not see the NULL data() of an empty vector
            EXPECT_EQ(std::memcmp(in.data(), payload.data(), payload.size()), 0);
        }
        EXPECT_EQ(in[payload.size()], 'z') << "wrote past the message";
    }

    CleanAtlasEnv env_;
    FakeInterfaceSource source_;
    void* ctx_ = nullptr;
    char handle_[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* listen_ = nullptr;
    void* send_ = nullptr;
    void* recv_ = nullptr;
};

TEST_F(PluginLoopbackTest, MessagesOfSeveralSizes) {
    for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, size_t{5000}, size_t{1} << 20}) {
        std::vector<char> payload(size);
        for (size_t i = 0; i < size; ++i) {
            payload[i] = static_cast<char>(i * 131 + size);
        }
        int got = -1;
        exchange(payload, size + 100, &got);  // capacity above the size: test reports size
        if (HasFatalFailure()) {
            return;
        }
    }
}

TEST_F(PluginLoopbackTest, RegMrOnLiveComms) {
    std::vector<char> buf(4096);
    void* smh = nullptr;
    void* rmh = nullptr;
    ASSERT_EQ(ncclNetPlugin_v11.regMr(send_, buf.data(), buf.size(), NCCL_PTR_HOST, &smh),
              ncclSuccess);
    ASSERT_EQ(ncclNetPlugin_v11.regMr(recv_, buf.data(), buf.size(), NCCL_PTR_HOST, &rmh),
              ncclSuccess);
    EXPECT_NE(smh, nullptr);
    EXPECT_NE(smh, rmh);
    void* cuda = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(ncclNetPlugin_v11.regMr(send_, buf.data(), buf.size(), NCCL_PTR_CUDA, &cuda),
              ncclInternalError);
    EXPECT_EQ(cuda, nullptr);
    EXPECT_EQ(ncclNetPlugin_v11.regMr(listen_, buf.data(), buf.size(), NCCL_PTR_HOST, &cuda),
              ncclInternalError);  // a listen comm cannot register memory
    EXPECT_EQ(ncclNetPlugin_v11.deregMr(send_, smh), ncclSuccess);
    EXPECT_EQ(ncclNetPlugin_v11.deregMr(recv_, rmh), ncclSuccess);
}

TEST_F(PluginLoopbackTest, ArgumentChecksOnLiveComms) {
    char buf[16];
    void* data[2] = {buf, buf};
    size_t sizes[2] = {16, 16};
    int tags[2] = {0, 0};
    void* req = nullptr;
    EXPECT_EQ(ncclNetPlugin_v11.irecv(recv_, 2, data, sizes, tags, nullptr, nullptr, &req),
              ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v8.isend(send_, buf, -1, 0, nullptr, &req), ncclInternalError);
    // A comm of the wrong direction is rejected, not misused.
    EXPECT_EQ(ncclNetPlugin_v11.isend(recv_, buf, 1, 0, nullptr, nullptr, &req), ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v11.irecv(send_, 1, data, sizes, tags, nullptr, nullptr, &req),
              ncclInternalError);
    // The comms still work afterwards.
    int got = -1;
    exchange(std::vector<char>(10, 'a'), 16, &got);
}

TEST_F(PluginLoopbackTest, V8TableMovesDataToo) {
    // The legacy tables drive the same comms (NCCL uses one table per process; this only
    // checks the int-size conversions on a live path).
    std::vector<char> out(3000, 'q');
    std::vector<char> in(4000, 0);
    void* data[1] = {in.data()};
    int sizes[1] = {static_cast<int>(in.size())};
    int tags[1] = {0};
    void* rreq = nullptr;
    void* sreq = nullptr;
    auto until = Clock::now() + kDeadline;
    while (rreq == nullptr) {
        ASSERT_EQ(ncclNetPlugin_v8.irecv(recv_, 1, data, sizes, tags, nullptr, &rreq), ncclSuccess);
        ASSERT_LT(Clock::now(), until);
    }
    while (sreq == nullptr) {
        ASSERT_EQ(ncclNetPlugin_v8.isend(send_, out.data(), static_cast<int>(out.size()), 0,
                                         nullptr, &sreq),
                  ncclSuccess);
        ASSERT_LT(Clock::now(), until);
    }
    int sdone = 0;
    int rdone = 0;
    int got = -1;
    while (sdone == 0 || rdone == 0) {
        if (sdone == 0) {
            ASSERT_EQ(ncclNetPlugin_v8.test(sreq, &sdone, nullptr), ncclSuccess);
        }
        if (rdone == 0) {
            ASSERT_EQ(ncclNetPlugin_v8.test(rreq, &rdone, &got), ncclSuccess);
        }
        ASSERT_LT(Clock::now(), until);
    }
    EXPECT_EQ(got, 3000);
    EXPECT_EQ(std::memcmp(in.data(), out.data(), out.size()), 0);
}

TEST_F(PluginLoopbackTest, LastFinalizeWithOpenCommsKeepsEngines) {
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx_), ncclInternalError);
    ctx_ = nullptr;
    seams::StateSnapshot s = seams::snapshot();
    EXPECT_TRUE(s.alive) << "engine threads were destroyed under open comms";
    EXPECT_EQ(s.refcount, 0);
    EXPECT_EQ(s.live_comms, 3);
    EXPECT_TRUE(LogCapture::find(NCCL_LOG_WARN, "still open").has_value());
    // Unloading now would leave threads behind: refused.
    EXPECT_FALSE(seams::unloadNow());
    // The comms keep working; TearDown closes them, then the unload succeeds.
    int got = -1;
    exchange(std::vector<char>(100, 'b'), 100, &got);
}

}  // namespace
}  // namespace atlas::plugin
