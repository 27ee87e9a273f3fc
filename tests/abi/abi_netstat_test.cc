// The stats segment end to end: the loaded .so publishes its comms and their streams while a
// transfer runs, `atlas-netstat --prometheus` (the real binary, another process) lists them as
// valid Prometheus text, and closing the comms and finalizing removes them again.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "netstat/reader.h"
#include "tests/abi/isolate.h"
#include "tests/abi/suites.h"
#include "tests/netstat/prom_parser.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(60 * kNsPerSec);

std::string runTool(const std::string& args) {
    std::string out;
    FILE* p = popen((std::string(ATLAS_NETSTAT_PATH) + " " + args + " 2>&1").c_str(), "r");
    if (p == nullptr) {
        return out;
    }
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) {
        out.append(buf, n);
    }
    pclose(p);
    return out;
}

TEST(Netstat, CommsAndStreamsVisibleFromAnotherProcess) {
    char tmpl[] = "/tmp/atlas-abi-netstat.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    runIsolated(loopbackEnv({{"ATLAS_NETSTAT_DIR", dir},
                             {"ATLAS_NETSTAT_INTERVAL_MS", "10"},
                             {"ATLAS_NSTREAMS", "4"}}),
                kBudget, [&dir] {
                    Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
                    ATLAS_ASSERT_OK(ep);
                    NetApi& net = (*ep)->net();
                    Deadline deadline(kBudget / 2);
                    CommPair pair;
                    ATLAS_ASSERT_OK(connectInProcess(net, (*ep)->ctx(), 0, &pair, deadline));
                    const size_t kSize = 4 << 20;
                    std::vector<uint8_t> src(kSize), dst(kSize);
                    for (int i = 0; i < 3; ++i) {
                        ATLAS_ASSERT_OK(transferInProcess(net, pair, src.data(), kSize, dst.data(),
                                                          kSize, deadline));
                    }
                    const std::vector<std::string> segs = netstat::listSegments(dir);
                    ASSERT_EQ(segs.size(), 1u);
                    // Sampling runs on the engines every 10 ms: wait for a sample of every
                    // stream of both comms taken after the last transfer (bounded by the
                    // deadline; the engines sample idle comms on their 50 ms tick).
                    netstat::ProcessView view;
                    Backoff backoff;
                    for (;;) {
                        auto v = netstat::readSegmentFile(segs[0]);
                        ATLAS_ASSERT_OK(v);
                        view = v.value();
                        bool all = view.comms.size() == 2;
                        for (const auto& c : view.comms) {
                            uint64_t sum = 0;
                            for (const auto& s : c.streams) {
                                all = all && s.valid;
                                sum += s.bytes;
                            }
                            all = all && sum == c.bytes;  // a sample after the last transfer
                        }
                        if (all) {
                            break;
                        }
                        ASSERT_FALSE(deadline.expired()) << "streams never sampled";
                        backoff.idle();
                    }
                    ASSERT_EQ(view.pid, getpid());
                    for (const auto& c : view.comms) {
                        SCOPED_TRACE(c.role == netstat::kRoleSend ? "send" : "recv");
                        EXPECT_EQ(c.nstreams, 4u);
                        EXPECT_EQ(c.messages, 3u);
                        EXPECT_EQ(c.bytes, 3 * kSize);
                        ASSERT_EQ(c.streams.size(), 5u);
                        uint64_t stream_bytes = 0;
                        for (const auto& s : c.streams) {
                            EXPECT_GT(s.snd_cwnd, 0u);
                            EXPECT_GT(s.rtt_us, 0u);
                            stream_bytes += s.bytes;
                        }
                        EXPECT_EQ(stream_bytes, 3 * kSize) << "every payload byte on some stream";
                    }
                    EXPECT_EQ(view.comms[0].session_id, view.comms[1].session_id);

                    // The CLI, as another process: valid Prometheus text with both comms.
                    const std::string prom = runTool("--dir " + dir + " --prometheus");
                    netstat::test::PromParse parsed = netstat::test::parsePrometheus(prom);
                    ASSERT_TRUE(parsed.ok()) << parsed.errors[0] << "\n" << prom;
                    EXPECT_EQ(parsed.find("atlas_comm_streams").size(), 2u);
                    EXPECT_EQ(parsed.find("atlas_stream_cwnd_segments").size(), 10u) << prom;
                    EXPECT_EQ(parsed.find("atlas_comm_bytes_total", {{"role", "send"}})[0].value,
                              3.0 * kSize);
                    const std::string table = runTool("--dir " + dir);
                    EXPECT_NE(table.find("send "), std::string::npos) << table;
                    EXPECT_NE(table.find("recv "), std::string::npos) << table;

                    ATLAS_ASSERT_OK(closePair(net, &pair));
                    auto after = netstat::readSegmentFile(segs[0]);
                    ATLAS_ASSERT_OK(after);
                    EXPECT_TRUE(after->comms.empty()) << "closed comms stay listed";
                    ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
                    EXPECT_TRUE(netstat::listSegments(dir).empty())
                        << "the segment outlived the last finalize";
                });
    (void)rmdir(dir.c_str());
}

TEST(Netstat, OffMeansNoSegment) {
    char tmpl[] = "/tmp/atlas-abi-netstat.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    runIsolated(loopbackEnv({{"ATLAS_NETSTAT_DIR", dir}, {"ATLAS_NETSTAT", "0"}}), kBudget, [&dir] {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        EXPECT_TRUE(netstat::listSegments(dir).empty());
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
    (void)rmdir(dir.c_str());
}

}  // namespace
}  // namespace atlas::abi
