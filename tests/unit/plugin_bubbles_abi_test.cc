// Bubble measurement through the plugin's ABI on 127.0.0.1 (ctest label `loopback`, real
// time): a WAN receive comm (ATLAS_WAN_RTT_US=0 makes every comm WAN) starts the publisher
// and its waits reach the shared-memory channel as observed idle intervals; a LAN comm (the
// default 2 ms RTT rule on loopback) creates no channel at all.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "channel/channel_reader.h"
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
using testutil::ScopedEnv;

using Clock = std::chrono::steady_clock;
constexpr auto kDeadline = std::chrono::seconds(20);
constexpr auto kWait = std::chrono::milliseconds(4);  // the receiver's wait per message

class PluginBubblesAbiTest : public ::testing::Test {
  protected:
    void SetUp() override {
        channel_ = "/atlas-test-abi-bubbles-" + std::to_string(::getpid()) + "-" +
                   ::testing::UnitTest::GetInstance()->current_test_info()->name();
        source_.add("lo", "127.0.0.1", kLoopback);
        seams::setInterfaceSource(&source_, "/nonexistent-atlas-sysfs");
        LogCapture::clear();
    }
    void TearDown() override {
        seams::unloadNow();
        seams::setInterfaceSource(nullptr, "");
        setNcclLogger(nullptr);
    }

    // init, one send/recv pair over loopback, `n` messages where the receive is posted `kWait`
    // before the send (a GPU waiting on the WAN), then close and finalize.
    void runExchanges(int n) {
        void* ctx = nullptr;
        ncclNetCommConfig_v11_t config{-1};
        ASSERT_EQ(ncclNetPlugin_v11.init(&ctx, 7, &config, &LogCapture::logger, nullptr),
                  ncclSuccess);
        char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
        void* listen = nullptr;
        void* send = nullptr;
        void* recv = nullptr;
        ASSERT_EQ(ncclNetPlugin_v11.listen(ctx, 0, handle, &listen), ncclSuccess);
        auto until = Clock::now() + kDeadline;
        while (send == nullptr || recv == nullptr) {
            if (send == nullptr) {
                ASSERT_EQ(ncclNetPlugin_v11.connect(ctx, 0, handle, &send, nullptr), ncclSuccess);
            }
            if (recv == nullptr) {
                ASSERT_EQ(ncclNetPlugin_v11.accept(listen, &recv, nullptr), ncclSuccess);
            }
            ASSERT_LT(Clock::now(), until) << "connect/accept did not complete";
        }
        std::vector<char> out(4096, 'a');
        std::vector<char> in(4096);
        for (int i = 0; i < n; ++i) {
            void* data[1] = {in.data()};
            size_t sizes[1] = {in.size()};
            int tags[1] = {0};
            void* rreq = nullptr;
            void* sreq = nullptr;
            while (rreq == nullptr) {
                ASSERT_EQ(
                    ncclNetPlugin_v11.irecv(recv, 1, data, sizes, tags, nullptr, nullptr, &rreq),
                    ncclSuccess);
                ASSERT_LT(Clock::now(), until);
            }
            std::this_thread::sleep_for(kWait);
            while (sreq == nullptr) {
                ASSERT_EQ(ncclNetPlugin_v11.isend(send, out.data(), out.size(), 0, nullptr, nullptr,
                                                  &sreq),
                          ncclSuccess);
                ASSERT_LT(Clock::now(), until);
            }
            int sdone = 0;
            int rdone = 0;
            while (sdone == 0 || rdone == 0) {
                if (sdone == 0) {
                    ASSERT_EQ(ncclNetPlugin_v11.test(sreq, &sdone, nullptr), ncclSuccess);
                }
                if (rdone == 0) {
                    ASSERT_EQ(ncclNetPlugin_v11.test(rreq, &rdone, nullptr), ncclSuccess);
                }
                ASSERT_LT(Clock::now(), until);
            }
        }
        // Lets the publisher (1 ms tick) drain the last intervals before teardown.
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (check_while_open_) {
            check_while_open_();
        }
        EXPECT_EQ(ncclNetPlugin_v11.closeSend(send), ncclSuccess);
        EXPECT_EQ(ncclNetPlugin_v11.closeRecv(recv), ncclSuccess);
        EXPECT_EQ(ncclNetPlugin_v11.closeListen(listen), ncclSuccess);
        EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
    }

    std::string channel_;
    FakeInterfaceSource source_;
    std::function<void()> check_while_open_;
};

TEST_F(PluginBubblesAbiTest, WanReceiveWaitsArePublishedAsObservedIdleIntervals) {
    CleanAtlasEnv clean;
    ScopedEnv wan("ATLAS_WAN_RTT_US", "0");
    ScopedEnv name("ATLAS_BUBBLE_CHANNEL", channel_.c_str());
    constexpr int kMessages = 6;
    std::vector<channel::IdleInterval> seen;
    check_while_open_ = [&] {
        auto reader = channel::ChannelReader::open(channel_);
        ASSERT_TRUE(reader.isOk()) << reader.status().toString();
        channel::ReadCursor cursor;
        auto batch = reader.value().readObservedSince(cursor);
        ASSERT_TRUE(batch.isOk()) << batch.status().toString();
        seen = batch.value().records;
    };
    runExchanges(kMessages);
    ASSERT_EQ(seen.size(), static_cast<size_t>(kMessages));
    const Nanos wait_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(kWait).count();
    for (size_t i = 0; i < seen.size(); ++i) {
        const Nanos len = seen[i].end_ns - seen[i].start_ns;
        EXPECT_GE(len, wait_ns) << "interval " << i << " is shorter than the receiver's wait";
        EXPECT_LT(len, 2 * kNsPerSec) << "interval " << i;
        if (i > 0) {
            EXPECT_GE(seen[i].start_ns, seen[i - 1].end_ns) << "intervals overlap at " << i;
        }
    }
    // The writer is gone after finalize: the segment is unlinked.
    EXPECT_FALSE(channel::ChannelReader::open(channel_).isOk());
}

TEST_F(PluginBubblesAbiTest, LanReceivesCreateNoChannel) {
    CleanAtlasEnv clean;  // ATLAS_WAN_RTT_US defaults to 2 ms: loopback comms are not WAN
    ScopedEnv name("ATLAS_BUBBLE_CHANNEL", channel_.c_str());
    bool opened = true;
    check_while_open_ = [&] { opened = channel::ChannelReader::open(channel_).isOk(); };
    runExchanges(2);
    EXPECT_FALSE(opened) << "a process without WAN receives published a bubble channel";
}

}  // namespace
}  // namespace atlas::plugin
