// The ABI layer without sockets: version tables, property filling per version, Status ->
// ncclResult_t mapping, argument validation, the exception firewall (through the fault-hook
// seam), logging, and the init/finalize reference counting. Devices come from a fake
// interface list and a fake sysfs tree.
#include <gtest/gtest.h>

#include <climits>
#include <filesystem>
#include <new>
#include <stdexcept>

#include "plugin/log.h"
#include "plugin/net_impl.h"
#include "plugin/tables.h"
#include "plugin_test_util.h"

namespace atlas::plugin {
namespace {

using testutil::CleanAtlasEnv;
using testutil::FakeInterfaceSource;
using testutil::LogCapture;
using testutil::ScopedEnv;
using testutil::TempDir;

class PluginNetTest : public ::testing::Test {
  protected:
    void SetUp() override {
        net_ = sysfs_.path() / "net";
        pci_ = sysfs_.path() / "devices/pci0000:00/0000:00:05.0";
        std::filesystem::create_directories(pci_);
        sysfs_.write("net/eth0/speed", "25000\n");
        std::filesystem::create_directory_symlink(pci_, net_ / "eth0/device");
        source_.add("eth0", "10.0.0.2").add("eth1", "10.0.1.2");
        seams::setInterfaceSource(&source_, net_.string());
        LogCapture::clear();
        ASSERT_FALSE(seams::snapshot().alive) << "a previous test leaked plugin state";
    }
    void TearDown() override {
        seams::setFaultHook(nullptr);
        seams::unloadNow();  // whatever a failing test left behind
        seams::setInterfaceSource(nullptr, "");
        setNcclLogger(nullptr);
    }

    void* initV11(uint64_t comm_id = 0x1234, int traffic_class = -1) {
        void* ctx = reinterpret_cast<void*>(0x5);  // must be overwritten
        ncclNetCommConfig_v11_t config{traffic_class};
        EXPECT_EQ(ncclNetPlugin_v11.init(&ctx, comm_id, &config, &LogCapture::logger, nullptr),
                  ncclSuccess);
        EXPECT_NE(ctx, nullptr);
        return ctx;
    }

    CleanAtlasEnv env_;
    TempDir sysfs_;
    std::filesystem::path net_;
    std::filesystem::path pci_;
    FakeInterfaceSource source_;
};

// Asserts that the last WARN mentions every fragment and carries NCCL_ALL flags.
void expectWarn(std::initializer_list<const char*> fragments) {
    std::vector<testutil::LogEntry> log = LogCapture::snapshot();
    const testutil::LogEntry* last = nullptr;
    for (const auto& e : log) {
        if (e.level == NCCL_LOG_WARN) {
            last = &e;
        }
    }
    ASSERT_NE(last, nullptr) << "no WARN was logged";
    EXPECT_EQ(last->flags, static_cast<unsigned long>(NCCL_ALL));
    EXPECT_EQ(last->msg.rfind("NET/Atlas : ", 0), 0u) << last->msg;
    for (const char* f : fragments) {
        EXPECT_NE(last->msg.find(f), std::string::npos) << "'" << f << "' not in: " << last->msg;
    }
}

TEST(PluginTablesTest, NamesAreValidBeforeInitAndOptionalFunctionsAreNull) {
    EXPECT_STREQ(ncclNetPlugin_v8.name, "Atlas");
    EXPECT_STREQ(ncclNetPlugin_v9.name, "Atlas");
    EXPECT_STREQ(ncclNetPlugin_v10.name, "Atlas");
    EXPECT_STREQ(ncclNetPlugin_v11.name, "Atlas");
    EXPECT_STREQ(ncclNetPlugin_v12.name, "Atlas");

    EXPECT_EQ(ncclNetPlugin_v8.regMrDmaBuf, nullptr);
    EXPECT_EQ(ncclNetPlugin_v8.getDeviceMr, nullptr);
    EXPECT_EQ(ncclNetPlugin_v8.irecvConsumed, nullptr);
    EXPECT_NE(ncclNetPlugin_v8.iflush, nullptr);
    EXPECT_EQ(ncclNetPlugin_v9.makeVDevice, nullptr);
    EXPECT_EQ(ncclNetPlugin_v10.makeVDevice, nullptr);
    EXPECT_EQ(ncclNetPlugin_v11.makeVDevice, nullptr);
    // setNetAttr records NCCL's hints (v11+); the same functions serve v12.
    EXPECT_NE(ncclNetPlugin_v11.setNetAttr, nullptr);
    EXPECT_NE(ncclNetPlugin_v12.setNetAttr, nullptr);
    EXPECT_EQ(ncclNetPlugin_v12.makeVDevice, nullptr);
    EXPECT_EQ(ncclNetPlugin_v12.isend, ncclNetPlugin_v11.isend);
    EXPECT_EQ(ncclNetPlugin_v12.finalize, ncclNetPlugin_v11.finalize);
    EXPECT_EQ(ncclNetPlugin_v11.regMrDmaBuf, nullptr);
    EXPECT_EQ(ncclNetPlugin_v11.getDeviceMr, nullptr);
    EXPECT_EQ(ncclNetPlugin_v11.irecvConsumed, nullptr);
    // finalize is mandatory in v11: NCCL calls it without a NULL check.
    ASSERT_NE(ncclNetPlugin_v11.finalize, nullptr);
    for (auto fn : {ncclNetPlugin_v11.devices}) {
        EXPECT_NE(fn, nullptr);
    }
    EXPECT_NE(ncclNetPlugin_v11.test, nullptr);
    EXPECT_NE(ncclNetPlugin_v11.closeListen, nullptr);
}

TEST(PluginTablesTest, StatusMapping) {
    EXPECT_EQ(toNcclResult(Code::kOk), ncclSuccess);
    EXPECT_EQ(toNcclResult(Code::kSystem), ncclSystemError);
    EXPECT_EQ(toNcclResult(Code::kInternal), ncclInternalError);
    EXPECT_EQ(toNcclResult(Code::kInvalidArgument), ncclInvalidArgument);
    EXPECT_EQ(toNcclResult(Code::kInvalidUsage), ncclInvalidUsage);
    EXPECT_EQ(toNcclResult(Code::kRemote), ncclRemoteError);
    EXPECT_EQ(toNcclResult(Code::kTimeout), ncclRemoteError);
    EXPECT_EQ(toNcclResult(Code::kUnavailable), ncclSystemError);
}

TEST_F(PluginNetTest, CallsBeforeInitAreRejected) {
    setNcclLogger(&LogCapture::logger);
    int n = -1;
    EXPECT_EQ(ncclNetPlugin_v11.devices(&n), ncclInternalError);
    expectWarn({"devices failed", "not initialized"});
    ncclNetProperties_v11_t props;
    EXPECT_EQ(ncclNetPlugin_v11.getProperties(0, &props), ncclInternalError);
    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* comm = reinterpret_cast<void*>(0x9);
    EXPECT_EQ(ncclNetPlugin_v11.listen(nullptr, 0, handle, &comm), ncclInternalError);
    EXPECT_EQ(comm, nullptr);
}

TEST_F(PluginNetTest, InitTwiceFinalizeTwice) {
    void* a = initV11(1);
    void* b = initV11(2);
    EXPECT_NE(a, b);
    seams::StateSnapshot s = seams::snapshot();
    EXPECT_TRUE(s.alive);
    EXPECT_EQ(s.refcount, 2);
    EXPECT_EQ(s.live_contexts, 2);
    EXPECT_EQ(s.ndevs, 2);

    EXPECT_EQ(ncclNetPlugin_v11.finalize(a), ncclSuccess);
    s = seams::snapshot();
    EXPECT_TRUE(s.alive);
    EXPECT_EQ(s.refcount, 1);
    int n = 0;
    EXPECT_EQ(ncclNetPlugin_v11.devices(&n), ncclSuccess);
    EXPECT_EQ(n, 2);

    EXPECT_FALSE(LogCapture::find(NCCL_LOG_INFO, "engine threads stopped").has_value());
    EXPECT_EQ(ncclNetPlugin_v11.finalize(b), ncclSuccess);
    EXPECT_FALSE(seams::snapshot().alive);
    EXPECT_TRUE(LogCapture::find(NCCL_LOG_INFO, "engine threads stopped").has_value());
    EXPECT_EQ(ncclNetPlugin_v11.devices(&n), ncclInternalError);
}

TEST_F(PluginNetTest, FinalizeNullAndUnknownContexts) {
    setNcclLogger(&LogCapture::logger);
    EXPECT_EQ(ncclNetPlugin_v11.finalize(nullptr), ncclSuccess);
    void* ctx = initV11();
    EXPECT_EQ(ncclNetPlugin_v11.finalize(nullptr), ncclSuccess);
    int bogus = 0;
    EXPECT_EQ(ncclNetPlugin_v11.finalize(&bogus), ncclInternalError);
    expectWarn({"finalize failed", "unknown context"});
    EXPECT_EQ(seams::snapshot().refcount, 1);
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
    // A second finalize of the same context is reported, not dereferenced.
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclInternalError);
    EXPECT_FALSE(seams::snapshot().alive);
}

TEST_F(PluginNetTest, FailedInitFromBadEnvThenFinalize) {
    ScopedEnv bad("ATLAS_CHUNK_BYTES", "1K");
    void* ctx = reinterpret_cast<void*>(0x77);
    ncclNetCommConfig_v11_t config{-1};
    EXPECT_EQ(ncclNetPlugin_v11.init(&ctx, 9, &config, &LogCapture::logger, nullptr),
              ncclInvalidUsage);
    EXPECT_EQ(ctx, nullptr);
    expectWarn({"init failed", "ATLAS_CHUNK_BYTES='1K'", "is out of range", "4K..64M"});
    EXPECT_FALSE(seams::snapshot().alive);
    // NCCL calls finalize with whatever init stored, even after a failure.
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
    EXPECT_FALSE(seams::snapshot().alive);

    // Fixing the variable lets the next init succeed (the registry is parsed again).
    ScopedEnv good("ATLAS_CHUNK_BYTES", "1M");
    void* ok = initV11();
    EXPECT_TRUE(LogCapture::find(NCCL_LOG_INFO, "ATLAS_CHUNK_BYTES=1M").has_value());
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ok), ncclSuccess);
}

TEST_F(PluginNetTest, RegistryIsParsedOncePerLifetime) {
    ScopedEnv first("ATLAS_NSTREAMS", "4");
    void* a = initV11();
    {
        // While the state lives, later inits do not re-read the environment.
        ScopedEnv broken("ATLAS_NSTREAMS", "not-a-number");
        void* b = initV11();
        EXPECT_EQ(ncclNetPlugin_v11.finalize(b), ncclSuccess);
    }
    EXPECT_EQ(ncclNetPlugin_v11.finalize(a), ncclSuccess);
    auto info = LogCapture::find(NCCL_LOG_INFO, "ATLAS_NSTREAMS=4");
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->flags, static_cast<unsigned long>(NCCL_NET | NCCL_INIT));
    EXPECT_EQ(info->msg.rfind("NET/Atlas : ", 0), 0u);
}

TEST_F(PluginNetTest, InitWithoutInterfacesFails) {
    FakeInterfaceSource empty;
    seams::setInterfaceSource(&empty, net_.string());
    void* ctx = nullptr;
    EXPECT_EQ(ncclNetPlugin_v11.init(&ctx, 1, nullptr, &LogCapture::logger, nullptr),
              ncclSystemError);
    EXPECT_EQ(ctx, nullptr);
    expectWarn({"init failed", "no usable network interface"});
    EXPECT_FALSE(seams::snapshot().alive);
}

TEST_F(PluginNetTest, InitSummaryIsLoggedAtInfo) {
    void* ctx = initV11(0xabc, 3);
    EXPECT_TRUE(LogCapture::find(NCCL_LOG_INFO, "[0]eth0:10.0.0.2/25000Mbps").has_value());
    EXPECT_TRUE(LogCapture::find(NCCL_LOG_INFO, "[1]eth1:10.0.1.2/10000Mbps").has_value());
    EXPECT_TRUE(LogCapture::find(NCCL_LOG_INFO, "commId 0xabc trafficClass 3").has_value());
    EXPECT_EQ(LogCapture::count(NCCL_LOG_WARN), 0);
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
}

TEST_F(PluginNetTest, LegacyInitsShareOneReference) {
    EXPECT_EQ(ncclNetPlugin_v8.init(&LogCapture::logger), ncclSuccess);
    EXPECT_EQ(ncclNetPlugin_v8.init(&LogCapture::logger), ncclSuccess);
    EXPECT_EQ(ncclNetPlugin_v9.init(&LogCapture::logger), ncclSuccess);
    EXPECT_EQ(ncclNetPlugin_v10.init(&LogCapture::logger, nullptr), ncclSuccess);
    seams::StateSnapshot s = seams::snapshot();
    EXPECT_TRUE(s.legacy_ref);
    EXPECT_EQ(s.refcount, 1);

    void* ctx = initV11();
    EXPECT_EQ(seams::snapshot().refcount, 2);
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
    EXPECT_TRUE(seams::snapshot().alive);  // the legacy reference lives until unload

    EXPECT_TRUE(seams::unloadNow());  // what the library destructor does at dlclose
    EXPECT_FALSE(seams::snapshot().alive);
    int n = 0;
    EXPECT_EQ(ncclNetPlugin_v8.devices(&n), ncclInternalError);
    // A fresh legacy init after unload (dlopen again) works.
    EXPECT_EQ(ncclNetPlugin_v8.init(&LogCapture::logger), ncclSuccess);
    EXPECT_EQ(ncclNetPlugin_v8.devices(&n), ncclSuccess);
    EXPECT_EQ(n, 2);
    EXPECT_TRUE(seams::unloadNow());
}

TEST_F(PluginNetTest, PropertiesV8) {
    EXPECT_EQ(ncclNetPlugin_v8.init(&LogCapture::logger), ncclSuccess);
    ncclNetProperties_v8_t p;
    std::memset(&p, 0xab, sizeof(p));
    ASSERT_EQ(ncclNetPlugin_v8.getProperties(0, &p), ncclSuccess);
    EXPECT_STREQ(p.name, "eth0");
    EXPECT_EQ(std::string(p.pciPath), std::filesystem::canonical(pci_).string());
    EXPECT_EQ(p.guid, 0u);
    EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
    EXPECT_EQ(p.regIsGlobal, 0);
    EXPECT_EQ(p.speed, 25000);
    EXPECT_EQ(p.port, 0);
    EXPECT_EQ(p.latency, 0.0f);
    EXPECT_EQ(p.maxComms, 65536);
    EXPECT_EQ(p.maxRecvs, 1);
    EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
    EXPECT_EQ(p.netDeviceVersion, NCCL_NET_DEVICE_INVALID_VERSION);

    ASSERT_EQ(ncclNetPlugin_v8.getProperties(1, &p), ncclSuccess);
    EXPECT_STREQ(p.name, "eth1");
    EXPECT_EQ(p.pciPath, nullptr);
    EXPECT_EQ(p.guid, 1u);
    EXPECT_EQ(p.speed, 10000);

    EXPECT_EQ(ncclNetPlugin_v8.getProperties(2, &p), ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v8.getProperties(-1, &p), ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v8.getProperties(0, nullptr), ncclInternalError);
}

template <typename Props, typename Table>
void checkV9PlusProperties(const Table& table, const std::filesystem::path& pci) {
    Props p;
    std::memset(&p, 0xab, sizeof(p));
    ASSERT_EQ(table.getProperties(1, &p), ncclSuccess);
    EXPECT_STREQ(p.name, "eth1");
    EXPECT_EQ(p.pciPath, nullptr);
    EXPECT_EQ(p.guid, 1u);
    EXPECT_EQ(p.ptrSupport, NCCL_PTR_HOST);
    EXPECT_EQ(p.regIsGlobal, 0);
    EXPECT_EQ(p.forceFlush, 0);
    EXPECT_EQ(p.speed, 10000);
    EXPECT_EQ(p.port, 0);
    EXPECT_EQ(p.latency, 0.0f);
    EXPECT_EQ(p.maxComms, 65536);
    EXPECT_EQ(p.maxRecvs, 1);
    EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
    EXPECT_EQ(p.netDeviceVersion, NCCL_NET_DEVICE_INVALID_VERSION);
    EXPECT_EQ(p.vProps.ndevs, 1);
    EXPECT_EQ(p.vProps.devs[0], 1);
    EXPECT_EQ(p.vProps.devs[1], 0);  // zeroed, not left as garbage
    EXPECT_EQ(p.maxP2pBytes, static_cast<size_t>(NCCL_MAX_NET_SIZE_BYTES));
    EXPECT_EQ(p.maxCollBytes, static_cast<size_t>(512) << 20);

    ASSERT_EQ(table.getProperties(0, &p), ncclSuccess);
    EXPECT_STREQ(p.name, "eth0");
    EXPECT_EQ(std::string(p.pciPath), std::filesystem::canonical(pci).string());
    EXPECT_EQ(p.speed, 25000);
    EXPECT_EQ(p.vProps.devs[0], 0);
    EXPECT_EQ(table.getProperties(2, &p), ncclInternalError);
}

TEST_F(PluginNetTest, PropertiesV9V10V11) {
    void* ctx = initV11();
    checkV9PlusProperties<ncclNetProperties_v9_t>(ncclNetPlugin_v9, pci_);
    checkV9PlusProperties<ncclNetProperties_v10_t>(ncclNetPlugin_v10, pci_);
    checkV9PlusProperties<ncclNetProperties_v11_t>(ncclNetPlugin_v11, pci_);
    ncclNetProperties_v11_t p;
    std::memset(&p, 0xab, sizeof(p));
    ASSERT_EQ(ncclNetPlugin_v11.getProperties(0, &p), ncclSuccess);
    EXPECT_EQ(p.maxMultiRequestSize, 1);
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
}

TEST_F(PluginNetTest, PropertyStringsSurviveReinit) {
    void* ctx = initV11();
    ncclNetProperties_v11_t p;
    ASSERT_EQ(ncclNetPlugin_v11.getProperties(0, &p), ncclSuccess);
    const char* name = p.name;
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
    ctx = initV11();
    EXPECT_STREQ(name, "eth0");  // interned: NCCL may keep the pointer
    ASSERT_EQ(ncclNetPlugin_v11.getProperties(0, &p), ncclSuccess);
    EXPECT_EQ(p.name, name);
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
}

TEST_F(PluginNetTest, ListenConnectValidation) {
    void* ctx = initV11();
    char handle[NCCL_NET_HANDLE_MAXSIZE] = {};
    void* comm = reinterpret_cast<void*>(0x9);
    EXPECT_EQ(ncclNetPlugin_v11.listen(ctx, 2, handle, &comm), ncclInternalError);
    expectWarn({"listen failed", "device 2 out of range (2 devices)"});
    EXPECT_EQ(comm, nullptr);
    EXPECT_EQ(ncclNetPlugin_v11.listen(ctx, 0, nullptr, &comm), ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v11.listen(ctx, 0, handle, nullptr), ncclInternalError);
    int bogus = 0;
    EXPECT_EQ(ncclNetPlugin_v11.listen(&bogus, 0, handle, &comm), ncclInternalError);
    expectWarn({"unknown context"});
    EXPECT_EQ(ncclNetPlugin_v11.connect(&bogus, 0, handle, &comm, nullptr), ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v11.connect(ctx, -1, handle, &comm, nullptr), ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v11.connect(ctx, 0, nullptr, &comm, nullptr), ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v11.accept(nullptr, &comm, nullptr), ncclInternalError);
    uint64_t junk[8] = {};
    EXPECT_EQ(ncclNetPlugin_v11.accept(junk, &comm, nullptr), ncclInternalError);
    expectWarn({"accept failed", "not a live listen comm"});
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
}

TEST_F(PluginNetTest, DataPathArgumentValidation) {
    setNcclLogger(&LogCapture::logger);
    uint64_t junk[8] = {};  // zeroed memory: not any of our objects
    char buf[64];
    void* req = reinterpret_cast<void*>(0x1234);

    EXPECT_EQ(ncclNetPlugin_v11.isend(junk, buf, 8, 0, nullptr, nullptr, &req), ncclInternalError);
    EXPECT_EQ(req, nullptr);  // overwritten even on failure
    expectWarn({"isend failed", "not a live send comm"});
    EXPECT_EQ(ncclNetPlugin_v11.isend(nullptr, buf, 8, 0, nullptr, nullptr, nullptr),
              ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v11.isend(junk, nullptr, 8, 0, nullptr, nullptr, &req),
              ncclInternalError);
    expectWarn({"data is NULL with size 8"});
    EXPECT_EQ(ncclNetPlugin_v11.isend(junk, buf, size_t{INT_MAX} + 1, 0, nullptr, nullptr, &req),
              ncclInternalError);
    expectWarn({"exceeds INT_MAX"});

    // v8: int sizes; negative ones never reach the core.
    req = reinterpret_cast<void*>(0x1234);
    EXPECT_EQ(ncclNetPlugin_v8.isend(junk, buf, -5, 0, nullptr, &req), ncclInternalError);
    EXPECT_EQ(req, nullptr);
    expectWarn({"isend failed", "negative size -5"});
    void* data[1] = {buf};
    int isizes[1] = {-1};
    int tags[1] = {0};
    EXPECT_EQ(ncclNetPlugin_v8.irecv(junk, 1, data, isizes, tags, nullptr, &req),
              ncclInternalError);
    expectWarn({"irecv failed", "negative size -1"});

    // irecv: n != 1, and the optional-completion sentinel on entry is overwritten.
    size_t sizes[2] = {64, 64};
    int tags2[2] = {0, 0};
    void* data2[2] = {buf, buf};
    req = reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION);
    EXPECT_EQ(ncclNetPlugin_v11.irecv(junk, 2, data2, sizes, tags2, nullptr, nullptr, &req),
              ncclInternalError);
    EXPECT_EQ(req, nullptr);
    expectWarn({"irecv failed", "n = 2 but maxRecvs is 1"});
    isizes[0] = 64;
    EXPECT_EQ(ncclNetPlugin_v8.irecv(junk, 0, data, isizes, tags, nullptr, &req),
              ncclInternalError);
    expectWarn({"n = 0 but maxRecvs is 1"});
    EXPECT_EQ(ncclNetPlugin_v9.irecv(junk, 1, nullptr, sizes, tags, nullptr, &req),
              ncclInternalError);
    expectWarn({"data or sizes is NULL"});
    EXPECT_EQ(ncclNetPlugin_v10.irecv(junk, 1, data, sizes, tags, nullptr, nullptr, &req),
              ncclInternalError);
    expectWarn({"not a live recv comm"});

    // test()
    int done = 7;
    int size = 0;
    EXPECT_EQ(ncclNetPlugin_v11.test(nullptr, &done, &size), ncclInternalError);
    expectWarn({"test failed", "request or done is NULL"});
    EXPECT_EQ(ncclNetPlugin_v11.test(junk, nullptr, &size), ncclInternalError);

    // iflush is never valid for host memory.
    req = reinterpret_cast<void*>(0x1234);
    EXPECT_EQ(ncclNetPlugin_v11.iflush(junk, 1, data, isizes, nullptr, &req), ncclInternalError);
    EXPECT_EQ(req, nullptr);
    expectWarn({"iflush failed", "NCCL_PTR_HOST"});
}

TEST_F(PluginNetTest, RegMrAndCloseValidation) {
    setNcclLogger(&LogCapture::logger);
    uint64_t junk[8] = {};
    char buf[64];
    void* mh = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(ncclNetPlugin_v11.regMr(junk, buf, sizeof(buf), NCCL_PTR_CUDA, &mh),
              ncclInternalError);
    EXPECT_EQ(mh, nullptr);
    expectWarn({"regMr failed", "memory type 2", "NCCL_PTR_HOST only"});
    EXPECT_EQ(ncclNetPlugin_v8.regMr(junk, buf, sizeof(buf), NCCL_PTR_DMABUF, &mh),
              ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v11.regMr(junk, buf, sizeof(buf), NCCL_PTR_HOST, nullptr),
              ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v11.regMr(junk, buf, sizeof(buf), NCCL_PTR_HOST, &mh),
              ncclInternalError);
    expectWarn({"comm is not a live send or recv comm"});
    EXPECT_EQ(ncclNetPlugin_v11.regMr(junk, nullptr, 16, NCCL_PTR_HOST, &mh), ncclInternalError);

    EXPECT_EQ(ncclNetPlugin_v11.deregMr(junk, nullptr), ncclSuccess);
    EXPECT_EQ(ncclNetPlugin_v11.deregMr(junk, junk), ncclInternalError);
    expectWarn({"deregMr failed", "not a live registration"});

    // close*(NULL) is a no-op; a pointer that is not a live comm of that kind is reported.
    EXPECT_EQ(ncclNetPlugin_v11.closeSend(nullptr), ncclSuccess);
    EXPECT_EQ(ncclNetPlugin_v11.closeRecv(nullptr), ncclSuccess);
    EXPECT_EQ(ncclNetPlugin_v11.closeListen(nullptr), ncclSuccess);
    EXPECT_EQ(ncclNetPlugin_v11.closeSend(junk), ncclInternalError);
    expectWarn({"closeSend failed", "not a live send comm"});
    EXPECT_EQ(ncclNetPlugin_v11.closeRecv(junk), ncclInternalError);
    EXPECT_EQ(ncclNetPlugin_v11.closeListen(junk), ncclInternalError);
}

// Fault hooks for the exception firewall; each throws only for "devices".
void throwRuntimeError(const char* func) {
    if (std::string(func) == "devices") {
        throw std::runtime_error("injected failure");
    }
}
void throwBadAlloc(const char* func) {
    if (std::string(func) == "devices") {
        throw std::bad_alloc();
    }
}
void throwInt(const char* func) {
    if (std::string(func) == "devices") {
        throw 42;
    }
}

TEST_F(PluginNetTest, FirewallCatchesExceptions) {
    void* ctx = initV11();
    int n = -1;
    seams::setFaultHook(&throwRuntimeError);
    EXPECT_EQ(ncclNetPlugin_v11.devices(&n), ncclInternalError);
    expectWarn({"devices failed", "unexpected exception: injected failure"});
    seams::setFaultHook(&throwBadAlloc);
    EXPECT_EQ(ncclNetPlugin_v9.devices(&n), ncclSystemError);
    expectWarn({"devices failed", "out of memory"});
    seams::setFaultHook(&throwInt);
    EXPECT_EQ(ncclNetPlugin_v8.devices(&n), ncclInternalError);
    expectWarn({"unexpected non-standard exception"});
    EXPECT_EQ(n, -1);
    // Other entry points are unaffected by the hook, and the state is intact.
    ncclNetProperties_v11_t p;
    EXPECT_EQ(ncclNetPlugin_v11.getProperties(0, &p), ncclSuccess);
    seams::setFaultHook(nullptr);
    EXPECT_EQ(ncclNetPlugin_v11.devices(&n), ncclSuccess);
    EXPECT_EQ(n, 2);
    EXPECT_EQ(ncclNetPlugin_v11.finalize(ctx), ncclSuccess);
}

TEST_F(PluginNetTest, ErrorsAreLoggedOncePerFailedCall) {
    setNcclLogger(&LogCapture::logger);
    int before = LogCapture::count(NCCL_LOG_WARN);
    EXPECT_EQ(ncclNetPlugin_v11.closeSend(reinterpret_cast<void*>(&before)), ncclInternalError);
    EXPECT_EQ(LogCapture::count(NCCL_LOG_WARN), before + 1);
}

// Not a PluginNetTest: the threadsafe death test's child runs the test's fixture again and
// then aborts, so a fixture's temporary sysfs tree would be left behind in /tmp once per run.
// init fails on the bad variable before it looks at any interface.
TEST(PluginNetAbort, AbortOnErrorAbortsAndMirrorsToStderr) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    CleanAtlasEnv env;
    EXPECT_DEATH(
        {
            setNcclLogger(nullptr);  // NCCL gave no logger: ATLAS_DEBUG_STDERR mirrors
            setenv("ATLAS_ABORT_ON_ERROR", "1", 1);
            setenv("ATLAS_DEBUG_STDERR", "yes", 1);
            setenv("ATLAS_NSTREAMS", "x", 1);
            void* ctx = nullptr;
            ncclNetPlugin_v11.init(&ctx, 1, nullptr, nullptr, nullptr);
        },
        "NET/Atlas : WARN init failed.*ATLAS_NSTREAMS='x'");
}

TEST_F(PluginNetTest, LibraryLoggerForwardsToNccl) {
    setNcclLogger(&LogCapture::logger);
    Logger lib = makeLibraryLogger();
    ATLAS_LOG_WARN(lib, "engine %d lost %s", 1, "a stream");
    ATLAS_LOG_INFO(lib, "100%% done");
    ATLAS_LOG_TRACE(lib, "trace line");
    auto warn = LogCapture::find(NCCL_LOG_WARN, "engine 1 lost a stream");
    ASSERT_TRUE(warn.has_value());
    EXPECT_EQ(warn->msg, "NET/Atlas : engine 1 lost a stream");
    auto info = LogCapture::find(NCCL_LOG_INFO, "100% done");
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->flags, static_cast<unsigned long>(NCCL_NET | NCCL_INIT));
    EXPECT_EQ(LogCapture::find(NCCL_LOG_TRACE, "trace line").has_value(), ATLAS_TRACE_ENABLED != 0);
}

}  // namespace
}  // namespace atlas::plugin
