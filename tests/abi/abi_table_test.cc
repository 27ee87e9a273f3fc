// The exported tables, device properties, init/finalize lifecycle, reloading, and the
// exported symbol set of libnccl-net-atlas.so.
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <sstream>

#include "tests/abi/isolate.h"
#include "tests/abi/suites.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(60 * kNsPerSec);

// ---------------------------------------------------------------------------------------------
// Tables and properties

class TableVersion : public ::testing::TestWithParam<int> {};

TEST_P(TableVersion, NameIsAtlasBeforeInitAndMandatoryPointersSet) {
    const int version = GetParam();
    runIsolated(loopbackEnv(), kBudget, [version] {
        Result<std::unique_ptr<PluginLibrary>> lib = PluginLibrary::open(pluginPath());
        ATLAS_ASSERT_OK(lib);
        std::unique_ptr<NetApi> net = makeNetApi(**lib, version);
        ASSERT_NE(net, nullptr) << "ncclNetPlugin_v" << version << " is not exported";
        // NCCL matches NCCL_NET against the name before calling init.
        ASSERT_NE(net->name(), nullptr);
        EXPECT_STREQ(net->name(), "Atlas");
        std::vector<std::string> missing = net->missingMandatory();
        std::string list;
        for (const std::string& m : missing) {
            list += m + " ";
        }
        EXPECT_TRUE(missing.empty()) << "NULL mandatory entries: " << list;
        // Loading alone must not start threads.
        expectOnlyTestThread("after dlopen alone");
    });
}

TEST_P(TableVersion, PropertiesValidForEveryDevice) {
    const int version = GetParam();
    runIsolated(loopbackEnv(), kBudget, [version] {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath(), version);
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        const int ndev = (*ep)->ndev();
        ASSERT_GE(ndev, 1);
        for (int dev = 0; dev < ndev; ++dev) {
            SCOPED_TRACE("dev " + std::to_string(dev));
            NetProps p;
            ATLAS_ASSERT_NCCL_OK(net.getProperties(dev, &p));
            EXPECT_FALSE(p.name.empty());
            EXPECT_TRUE(p.ptr_support & NCCL_PTR_HOST) << "ptrSupport=" << p.ptr_support;
            EXPECT_GE(p.max_recvs, 1);
            EXPECT_GT(p.speed_mbps, 0);
            EXPECT_GE(p.max_comms, 1);
            EXPECT_EQ(p.device_type, NCCL_NET_DEVICE_HOST);
            EXPECT_GE(p.latency_us, 0.0f);
            if (version >= 9) {
                EXPECT_GT(p.max_p2p_bytes, 0u);
                EXPECT_LE(p.max_p2p_bytes, NCCL_MAX_NET_SIZE_BYTES);
                EXPECT_GT(p.max_coll_bytes, 0u);
                EXPECT_LE(p.max_coll_bytes, NCCL_MAX_NET_SIZE_BYTES);
                EXPECT_EQ(p.vprops_capacity, version >= 12 ? NCCL_NET_MAX_DEVS_PER_NIC_V12
                                                           : NCCL_NET_MAX_DEVS_PER_NIC);
                EXPECT_GE(p.vprops_ndevs, 1);
                EXPECT_LE(p.vprops_ndevs, p.vprops_capacity);
                for (int i = 0; i < p.vprops_ndevs && i < p.vprops_capacity; ++i) {
                    EXPECT_GE(p.vprops_devs[i], 0);
                    EXPECT_LT(p.vprops_devs[i], ndev);
                }
            }
            if (version >= 11) {
                EXPECT_EQ(p.max_multi_request_size, 1);
            }
            if (version >= 12) {
                // Nothing tells an Ethernet interface's rail or plane: "not known".
                EXPECT_EQ(p.rail_id, NCCL_NET_ID_UNDEF);
                EXPECT_EQ(p.plane_id, NCCL_NET_ID_UNDEF);
            }
        }
        // Out-of-range devices are rejected, not read out of bounds.
        NetProps p;
        EXPECT_NE(net.getProperties(ndev, &p), ncclSuccess);
        EXPECT_NE(net.getProperties(-1, &p), ncclSuccess);
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

INSTANTIATE_TEST_SUITE_P(AbiTable, TableVersion, ::testing::Values(8, 9, 10, 11, 12),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                             return "v" + std::to_string(param_info.param);
                         });

TEST(AbiTable, TestOnNullRequestIsAnError) {
    runIsolated(loopbackEnv(), kBudget, [] {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        int done = 0;
        int size = 0;
        EXPECT_NE((*ep)->net().test(nullptr, &done, &size), ncclSuccess);
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

// ---------------------------------------------------------------------------------------------
// Lifecycle (v11: init per communicator, finalize mandatory)

TEST(AbiLifecycle, TwoInitsTwoFinalizes) {
    runIsolated(loopbackEnv(), kBudget, [] {
        Deadline deadline(kBudget / 2);
        Result<std::unique_ptr<PluginLibrary>> lib = PluginLibrary::open(pluginPath());
        ATLAS_ASSERT_OK(lib);
        std::unique_ptr<NetApi> net = makeNetApi(**lib, 11);
        ASSERT_NE(net, nullptr);
        void* ctx1 = nullptr;
        void* ctx2 = nullptr;
        ATLAS_ASSERT_NCCL_OK(net->init(&ctx1, captureLogger));
        ATLAS_ASSERT_NCCL_OK(net->init(&ctx2, captureLogger));
        int ndev = 0;
        ATLAS_ASSERT_NCCL_OK(net->devices(&ndev));
        ASSERT_GE(ndev, 1);

        // A comm pair spanning both contexts: listen under ctx1, connect under ctx2.
        CommPair pair;
        Handle handle{};
        ATLAS_ASSERT_NCCL_OK(net->listen(ctx1, 0, handle.data(), &pair.listen_comm));
        Backoff backoff;
        while (pair.send_comm == nullptr || pair.recv_comm == nullptr) {
            if (pair.send_comm == nullptr) {
                ATLAS_ASSERT_NCCL_OK(net->connect(ctx2, 0, handle.data(), &pair.send_comm));
            }
            if (pair.recv_comm == nullptr) {
                ATLAS_ASSERT_NCCL_OK(net->accept(pair.listen_comm, &pair.recv_comm));
            }
            ASSERT_FALSE(deadline.expired()) << "connect/accept across two contexts";
            backoff.idle();
        }
        std::vector<uint8_t> src(100000), dst(100000);
        fillPattern(src.data(), src.size(), 3);
        Result<size_t> got =
            transferInProcess(*net, pair, src.data(), src.size(), dst.data(), dst.size(), deadline);
        ATLAS_ASSERT_OK(got);
        EXPECT_EQ(*got, src.size());
        EXPECT_EQ(describePatternMismatch(dst.data(), dst.size(), 3), "");
        ATLAS_ASSERT_OK(closePair(*net, &pair));

        // The first finalize must leave the second context fully usable.
        ATLAS_ASSERT_NCCL_OK(net->finalize(ctx1));
        ATLAS_ASSERT_OK(sizesInProcess(*net, ctx2, {0, 1000, kMiB}, deadline));
        ATLAS_ASSERT_NCCL_OK(net->finalize(ctx2));
        expectOnlyTestThread("after the last finalize");
        ATLAS_EXPECT_OK((*lib)->close());
    });
}

TEST(AbiLifecycle, FinalizeNullIsHarmless) {
    runIsolated(loopbackEnv(), kBudget, [] {
        Result<std::unique_ptr<PluginLibrary>> lib = PluginLibrary::open(pluginPath());
        ATLAS_ASSERT_OK(lib);
        const ncclNet_v11_t* t = (*lib)->v11();
        ASSERT_NE(t, nullptr);
        // Before any init (NCCL's init-failure path can pass a never-set ctx).
        EXPECT_EQ(t->finalize(nullptr), ncclSuccess);
        void* ctx = nullptr;
        std::unique_ptr<NetApi> net = makeNetApi(**lib, 11);
        ATLAS_ASSERT_NCCL_OK(net->init(&ctx, captureLogger));
        EXPECT_EQ(t->finalize(nullptr), ncclSuccess);
        // The real context still works after a stray finalize(NULL).
        int ndev = 0;
        ATLAS_ASSERT_NCCL_OK(net->devices(&ndev));
        ATLAS_EXPECT_OK(sizesInProcess(*net, ctx, {4097}, Deadline(kBudget / 2)));
        EXPECT_EQ(t->finalize(ctx), ncclSuccess);
        expectOnlyTestThread("after finalize");
    });
}

TEST(AbiLifecycle, FailedInitThenFinalize) {
    runIsolated(loopbackEnv({{"ATLAS_NSTREAMS", "999"}}), kBudget, [] {
        Result<std::unique_ptr<PluginLibrary>> lib = PluginLibrary::open(pluginPath());
        ATLAS_ASSERT_OK(lib);
        std::unique_ptr<NetApi> net = makeNetApi(**lib, 11);
        ASSERT_NE(net, nullptr);
        LogCapture::clear();
        void* ctx = nullptr;
        ncclResult_t rc = net->init(&ctx, captureLogger);
        EXPECT_NE(rc, ncclSuccess) << "init accepted ATLAS_NSTREAMS=999";
        // A clear message: it names the variable.
        EXPECT_TRUE(LogCapture::contains("ATLAS_NSTREAMS"))
            << "no log line mentions ATLAS_NSTREAMS after the failed init";
        // NCCL calls finalize even after a failed init.
        EXPECT_EQ(net->finalize(ctx), ncclSuccess);
        expectOnlyTestThread("after a failed init and finalize");
        ATLAS_EXPECT_OK((*lib)->close());
    });
}

TEST(AbiLifecycle, DlcloseThenDlopenAgain) {
    runIsolated(loopbackEnv(), kBudget, [] {
        Deadline deadline(kBudget / 2);
        for (int round = 0; round < 2; ++round) {
            SCOPED_TRACE("round " + std::to_string(round));
            Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
            ATLAS_ASSERT_OK(ep);
            ATLAS_ASSERT_OK(
                sizesInProcess((*ep)->net(), (*ep)->ctx(), {0, 129, 3 * kMiB + 7}, deadline));
            ATLAS_ASSERT_OK((*ep)->finalizeAndClose());
            // Nothing of the plugin may keep running once it is (possibly) unmapped.
            expectOnlyTestThread("after finalize and dlclose");
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Exported symbols

TEST(AbiExports, ExactlyTheNetTablesV8ToV12) {
#ifndef ATLAS_NM_PATH
    GTEST_SKIP() << "no nm found at configure time";
#else
    std::string cmd = std::string(ATLAS_NM_PATH) + " -D --defined-only '" + pluginPath() + "'";
    FILE* p = popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr) << cmd;
    std::set<std::string> defined;
    char line[1024];
    while (std::fgets(line, sizeof(line), p) != nullptr) {
        std::istringstream ls(line);
        std::string addr, type, name;
        if (ls >> addr >> type >> name) {
            // Strip symbol versions (name@VER / name@@VER) if a version script adds them.
            defined.insert(name.substr(0, name.find('@')));
        }
    }
    int rc = pclose(p);
    ASSERT_EQ(rc, 0) << cmd << " failed";
    const std::set<std::string> expected = {"ncclNetPlugin_v8", "ncclNetPlugin_v9",
                                            "ncclNetPlugin_v10", "ncclNetPlugin_v11",
                                            "ncclNetPlugin_v12"};
    // Linker-provided markers that some toolchains put into .dynsym; tolerated, not required.
    const std::set<std::string> tolerated = {"_init", "_fini", "_edata", "_end", "__bss_start"};
    std::string unexpected;
    for (const std::string& s : defined) {
        if (expected.count(s) == 0 && tolerated.count(s) == 0) {
            unexpected += s + " ";
        }
    }
    for (const std::string& s : expected) {
        EXPECT_EQ(defined.count(s), 1u) << s << " is not exported";
    }
    EXPECT_TRUE(unexpected.empty()) << "unexpected exported symbols: " << unexpected;
    for (const std::string& s : tolerated) {
        if (defined.count(s) != 0) {
            std::printf("note: tolerated linker symbol %s is exported\n", s.c_str());
        }
    }
#endif
}

}  // namespace
}  // namespace atlas::abi
