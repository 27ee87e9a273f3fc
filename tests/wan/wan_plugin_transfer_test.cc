// The plugin across an emulated long-haul link: two processes in two testbed namespaces drive
// libnccl-net-atlas.so through the ABI harness (dlopen, ncclNet_v11, as NCCL does) over 100 ms
// RTT, 1 Gbit/s and 1 % random loss per TCP segment, and every byte must arrive in place.
// Loss on many streams at once is where striping bugs show: chunks of one message arrive out of
// order across streams, retransmissions stall single streams, and several messages are in
// flight together.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/abi/suites.h"
#include "tests/wan/wan_plugin_testbed.h"

namespace atlas::wanem::test {
namespace {

using abi::ChildProcess;
using abi::Deadline;
using abi::EnvVars;

const Nanos kTransferBudget = abi::scaledBudget(75 * kNsPerSec);
// Inline on the control stream, one chunk, a few chunks, many chunks over every stream.
const std::vector<size_t> kSizes = {1, 4097, abi::kMiB + 13, 3 * abi::kMiB + 1, 8 * abi::kMiB};
constexpr size_t kSlack = 4096;  // receive capacity beyond the message: test() must report size
constexpr uint64_t kSeedBase = 0x5eed0000;

struct Variant {
    const char* name;
    EnvVars env;
};

// Posts every receive at once, then checks each message's reported size and every byte.
Status receiveAll(int fd, const Deadline& deadline) {
    Result<std::unique_ptr<abi::Endpoint>> ep = abi::Endpoint::open(abi::pluginPath());
    if (!ep.isOk()) {
        return ep.status();
    }
    abi::NetApi& net = (*ep)->net();
    abi::CommPair pair;
    ATLAS_RETURN_IF_ERROR(
        abi::listenAndPublish(net, (*ep)->ctx(), 0, fd, &pair.listen_comm, deadline));
    ATLAS_RETURN_IF_ERROR(abi::acceptLoop(net, pair.listen_comm, &pair.recv_comm, deadline));
    std::vector<abi::MappedBuffer> bufs;
    std::vector<abi::Registration> mrs;
    std::vector<void*> reqs;
    for (size_t size : kSizes) {
        Result<abi::MappedBuffer> buf = abi::MappedBuffer::create(size + kSlack);
        if (!buf.isOk()) {
            return buf.status();
        }
        Result<abi::Registration> mr =
            abi::Registration::create(net, pair.recv_comm, buf->data(), size + kSlack);
        if (!mr.isOk()) {
            return mr.status();
        }
        Result<void*> req =
            abi::postRecv(net, pair.recv_comm, buf->data(), size + kSlack, mr->mhandle(), deadline);
        if (!req.isOk()) {
            return req.status();
        }
        bufs.push_back(std::move(*buf));
        mrs.push_back(std::move(*mr));
        reqs.push_back(*req);
    }
    for (size_t i = 0; i < kSizes.size(); ++i) {
        Result<size_t> got = abi::waitDone(net, reqs[i], deadline);
        if (!got.isOk()) {
            return Status(got.status().code(),
                          "message " + std::to_string(i) + ": " + got.status().toString());
        }
        if (*got != kSizes[i]) {
            return Status(Code::kInternal, "message " + std::to_string(i) + ": test() reported " +
                                               std::to_string(*got) + " bytes, sent " +
                                               std::to_string(kSizes[i]));
        }
        const std::string bad =
            abi::describePatternMismatch(bufs[i].data(), kSizes[i], kSeedBase + i);
        if (!bad.empty()) {
            return Status(Code::kInternal, "message " + std::to_string(i) + " (" +
                                               std::to_string(kSizes[i]) + " B): " + bad);
        }
    }
    mrs.clear();
    ATLAS_RETURN_IF_ERROR(abi::closePair(net, &pair));
    return (*ep)->finalizeAndClose();
}

// Posts every send at once (all in flight together), then waits for each.
Status sendAll(int fd, const Deadline& deadline) {
    Result<std::unique_ptr<abi::Endpoint>> ep = abi::Endpoint::open(abi::pluginPath());
    if (!ep.isOk()) {
        return ep.status();
    }
    abi::NetApi& net = (*ep)->net();
    abi::CommPair pair;
    ATLAS_RETURN_IF_ERROR(
        abi::readHandleAndConnect(net, (*ep)->ctx(), 0, fd, &pair.send_comm, deadline));
    std::vector<abi::MappedBuffer> bufs;
    std::vector<abi::Registration> mrs;
    std::vector<void*> reqs;
    for (size_t i = 0; i < kSizes.size(); ++i) {
        Result<abi::MappedBuffer> buf = abi::MappedBuffer::create(kSizes[i]);
        if (!buf.isOk()) {
            return buf.status();
        }
        abi::fillPattern(buf->data(), kSizes[i], kSeedBase + i);
        Result<abi::Registration> mr =
            abi::Registration::create(net, pair.send_comm, buf->data(), kSizes[i]);
        if (!mr.isOk()) {
            return mr.status();
        }
        Result<void*> req =
            abi::postSend(net, pair.send_comm, buf->data(), kSizes[i], mr->mhandle(), deadline);
        if (!req.isOk()) {
            return req.status();
        }
        bufs.push_back(std::move(*buf));
        mrs.push_back(std::move(*mr));
        reqs.push_back(*req);
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
        Result<size_t> sent = abi::waitDone(net, reqs[i], deadline);
        if (!sent.isOk()) {
            return Status(sent.status().code(),
                          "message " + std::to_string(i) + ": " + sent.status().toString());
        }
    }
    mrs.clear();
    ATLAS_RETURN_IF_ERROR(abi::closePair(net, &pair));
    return (*ep)->finalizeAndClose();
}

class WanPluginTransfer : public ::testing::TestWithParam<Variant> {};

TEST_P(WanPluginTransfer, ByteExactAcross100msOnePercentLoss) {
    if (auto reason = pluginWanSkipReason()) {
        GTEST_SKIP() << *reason;
    }
    Result<std::unique_ptr<PluginTestbed>> tb = PluginTestbed::up(kLossyLongHaul);
    ATLAS_ASSERT_OK(tb);
    RecordProperty("congestion_control", (*tb)->congestionControl());
    const Deadline deadline(kTransferBudget);
    const EnvVars env = wanPluginEnv(20000, GetParam().env);

    Result<ChildProcess> receiver = spawnPeerIn((*tb)->ns(1), env, "receiver (dc1)",
                                                [&](int fd) { return receiveAll(fd, deadline); });
    ATLAS_ASSERT_OK(receiver);
    Result<ChildProcess> sender = spawnPeerIn((*tb)->ns(0), env, "sender (dc0)",
                                              [&](int fd) { return sendAll(fd, deadline); });
    ATLAS_ASSERT_OK(sender);
    ATLAS_ASSERT_OK(relayHandle(*receiver, *sender, deadline));
    abi::expectPeerSucceeded(*sender, deadline, "sender");
    abi::expectPeerSucceeded(*receiver, deadline, "receiver");

    // The transfer really crossed a lossy link: the emulator dropped data segments on the
    // way (about 1 % of ~9000), and forwarded at least every payload byte once.
    Result<nlohmann::json> stats = (*tb)->stats();
    ATLAS_ASSERT_OK(stats);
    const nlohmann::json& a2b = (*stats)["directions"]["a2b"];
    size_t total = 0;
    for (size_t s : kSizes) {
        total += s;
    }
    EXPECT_GT(a2b["drops"]["loss"]["segments"].get<uint64_t>(), 0u) << stats->dump();
    EXPECT_GE(a2b["tx"]["bytes"].get<uint64_t>(), total) << stats->dump();

    ATLAS_EXPECT_OK((*tb)->down());
    EXPECT_TRUE((*tb)->leftovers().empty()) << ::testing::PrintToString((*tb)->leftovers());
}

INSTANTIATE_TEST_SUITE_P(
    Striping, WanPluginTransfer,
    ::testing::Values(
        // Atlas defaults with the emulated rate: the stream rule picks 5 streams at 100 ms.
        Variant{"auto_load", {{"ATLAS_LINK_GBPS", "1"}}},
        // NCCL-socket-like: 16 streams, every message split evenly.
        Variant{"even16", {{"ATLAS_NSTREAMS", "16"}, {"ATLAS_STRIPE", "even"}}}),
    [](const ::testing::TestParamInfo<Variant>& p) { return std::string(p.param.name); });

}  // namespace
}  // namespace atlas::wanem::test
