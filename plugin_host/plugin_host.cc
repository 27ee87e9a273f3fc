// Loading the plugin, the version adapters (v8..v12 -> NetApi), errors, logging, time.
#include "plugin_host/plugin_host.h"

#include <dlfcn.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace atlas::abi {

// ---------------------------------------------------------------------------------------------
// Time

Nanos Deadline::remainingNs() const {
    return std::max<Nanos>(0, end_ns_ - monotonicNowNs());
}

int Deadline::remainingMsForPoll() const {
    Nanos ms = (remainingNs() + kNsPerMs - 1) / kNsPerMs;
    return static_cast<int>(std::min<Nanos>(ms, INT32_MAX));
}

void Backoff::idle() {
    // ~256 yields cover the common sub-millisecond completion without adding latency; after
    // that a 50 us sleep keeps a 2-core machine usable for the plugin's engine threads.
    if (idle_calls_ < 256) {
        ++idle_calls_;
        sched_yield();
        return;
    }
    timespec ts{0, 50 * 1000};
    nanosleep(&ts, nullptr);
}

// ---------------------------------------------------------------------------------------------
// Errors

namespace {

constexpr const char* kNcclTag = " [nccl=";

Code codeForNccl(ncclResult_t rc) {
    switch (rc) {
        case ncclSuccess:
            return Code::kOk;
        case ncclSystemError:
            return Code::kSystem;
        case ncclInternalError:
            return Code::kInternal;
        case ncclInvalidArgument:
            return Code::kInvalidArgument;
        case ncclInvalidUsage:
            return Code::kInvalidUsage;
        case ncclRemoteError:
            return Code::kRemote;
        default:
            return Code::kInternal;
    }
}

}  // namespace

const char* ncclResultName(int rc) {
    switch (rc) {
        case ncclSuccess:
            return "ncclSuccess";
        case ncclUnhandledCudaError:
            return "ncclUnhandledCudaError";
        case ncclSystemError:
            return "ncclSystemError";
        case ncclInternalError:
            return "ncclInternalError";
        case ncclInvalidArgument:
            return "ncclInvalidArgument";
        case ncclInvalidUsage:
            return "ncclInvalidUsage";
        case ncclRemoteError:
            return "ncclRemoteError";
        case ncclInProgress:
            return "ncclInProgress";
        default:
            return "ncclResult(?)";
    }
}

Status ncclStatus(ncclResult_t rc, const std::string& what) {
    if (rc == ncclSuccess) {
        return Status::ok();
    }
    return Status(codeForNccl(rc), what + " returned " + ncclResultName(rc) + kNcclTag +
                                       std::to_string(static_cast<int>(rc)) + "]");
}

int ncclCodeOf(const Status& status) {
    if (status.isOk()) {
        return ncclSuccess;
    }
    const std::string& m = status.message();
    size_t pos = m.rfind(kNcclTag);
    if (pos == std::string::npos) {
        return -1;
    }
    return std::atoi(m.c_str() + pos + std::strlen(kNcclTag));
}

// ---------------------------------------------------------------------------------------------
// Logging

namespace {

struct LogState {
    std::mutex mu;
    std::vector<std::string> lines;
    std::atomic<int> echo_level{NCCL_LOG_WARN};
    std::atomic<bool> keep{true};
    LogState() {
        const char* env = std::getenv("ATLAS_ABI_LOG");
        if (env != nullptr && std::strcmp(env, "info") == 0) {
            echo_level = NCCL_LOG_INFO;
        } else if (env != nullptr && std::strcmp(env, "trace") == 0) {
            echo_level = NCCL_LOG_TRACE;
        }
    }
};

LogState& logState() {
    // Leaked on purpose: the plugin may log from its threads while statics are destroyed.
    static LogState* state = new LogState();
    return *state;
}

std::string lowered(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

}  // namespace

extern "C" void captureLogger(ncclDebugLogLevel level, unsigned long flags, const char* file,
                              int line, const char* fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char* lvl = level == NCCL_LOG_WARN    ? "WARN"
                      : level == NCCL_LOG_INFO  ? "INFO"
                      : level == NCCL_LOG_TRACE ? "TRACE"
                                                : "LOG";
    std::string text = std::string(lvl) + " " + msg;
    LogState& st = logState();
    if (static_cast<int>(level) <= st.echo_level.load(std::memory_order_relaxed) &&
        level != NCCL_LOG_NONE) {
        std::fprintf(stderr, "[pid %d plugin] %s (%s:%d)\n", static_cast<int>(getpid()),
                     text.c_str(), file != nullptr ? file : "?", line);
    }
    if (!st.keep.load(std::memory_order_relaxed)) {
        return;
    }
    std::lock_guard<std::mutex> lock(st.mu);
    // Bounded: a chatty plugin in a 10k-transfer loop must not look like a leak.
    if (st.lines.size() < 20000) {
        st.lines.push_back(std::move(text));
    }
}

std::vector<std::string> LogCapture::lines() {
    LogState& st = logState();
    std::lock_guard<std::mutex> lock(st.mu);
    return st.lines;
}

bool LogCapture::contains(const std::string& needle) {
    std::string n = lowered(needle);
    for (const std::string& l : lines()) {
        if (lowered(l).find(n) != std::string::npos) {
            return true;
        }
    }
    return false;
}

void LogCapture::clear() {
    LogState& st = logState();
    std::lock_guard<std::mutex> lock(st.mu);
    st.lines.clear();
}

void LogCapture::setKeep(bool keep) {
    logState().keep.store(keep, std::memory_order_relaxed);
}

void LogCapture::setEchoLevel(int level) {
    logState().echo_level.store(level, std::memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Loading

Result<std::unique_ptr<PluginLibrary>> PluginLibrary::open(const std::string& path) {
    dlerror();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* err = dlerror();
        return Status(Code::kUnavailable,
                      "dlopen(" + path + "): " + (err != nullptr ? err : "unknown error"));
    }
    return std::unique_ptr<PluginLibrary>(new PluginLibrary(path, handle));
}

PluginLibrary::~PluginLibrary() {
    (void)close();
}

Status PluginLibrary::close() {
    if (handle_ == nullptr) {
        return Status::ok();
    }
    void* h = handle_;
    handle_ = nullptr;
    if (dlclose(h) != 0) {
        const char* err = dlerror();
        return Status(Code::kSystem, std::string("dlclose: ") + (err != nullptr ? err : "?"));
    }
    return Status::ok();
}

void* PluginLibrary::symbol(const char* name) const {
    return handle_ == nullptr ? nullptr : dlsym(handle_, name);
}

const ncclNet_v8_t* PluginLibrary::v8() const {
    return static_cast<const ncclNet_v8_t*>(symbol("ncclNetPlugin_v8"));
}
const ncclNet_v9_t* PluginLibrary::v9() const {
    return static_cast<const ncclNet_v9_t*>(symbol("ncclNetPlugin_v9"));
}
const ncclNet_v10_t* PluginLibrary::v10() const {
    return static_cast<const ncclNet_v10_t*>(symbol("ncclNetPlugin_v10"));
}
const ncclNet_v11_t* PluginLibrary::v11() const {
    return static_cast<const ncclNet_v11_t*>(symbol("ncclNetPlugin_v11"));
}
const ncclNet_v12_t* PluginLibrary::v12() const {
    return static_cast<const ncclNet_v12_t*>(symbol("ncclNetPlugin_v12"));
}

std::string pluginPathFromEnv(const std::string& fallback) {
    const char* env = std::getenv("ATLAS_ABI_PLUGIN");
    return env != nullptr && env[0] != '\0' ? std::string(env) : fallback;
}

// ---------------------------------------------------------------------------------------------
// Version adapters

namespace {

extern "C" ncclResult_t profilerStub(void** eHandle, int, void*, int64_t, void*) {
    if (eHandle != nullptr) {
        *eHandle = nullptr;
    }
    return ncclSuccess;
}

std::atomic<uint64_t> g_comm_id{0x41544c4153000001ull};

// The per-context structs of v11+ (same layouts, different names per version).
template <int V>
struct ContextTypes {};
template <>
struct ContextTypes<11> {
    using Config = ncclNetCommConfig_v11_t;
    using Attr = ncclNetAttr_v11_t;
};
template <>
struct ContextTypes<12> {
    using Config = ncclNetCommConfig_v12_t;
    using Attr = ncclNetAttr_v12_t;
};
static_assert(sizeof(ContextTypes<11>::Attr) == sizeof(ncclNetAttr_v12_t));

template <typename Table, typename Props, int V>
class NetApiImpl final : public NetApi {
  public:
    explicit NetApiImpl(const Table* table) : t_(table) {}

    int version() const override { return V; }
    const char* name() const override { return t_->name; }

    std::vector<std::string> missingMandatory() const override {
        std::vector<std::string> missing;
        auto need = [&missing](bool present, const char* what) {
            if (!present) {
                missing.emplace_back(what);
            }
        };
        need(t_->name != nullptr, "name");
        need(t_->init != nullptr, "init");
        need(t_->devices != nullptr, "devices");
        need(t_->getProperties != nullptr, "getProperties");
        need(t_->listen != nullptr, "listen");
        need(t_->connect != nullptr, "connect");
        need(t_->accept != nullptr, "accept");
        need(t_->regMr != nullptr, "regMr");
        need(t_->deregMr != nullptr, "deregMr");
        need(t_->isend != nullptr, "isend");
        need(t_->irecv != nullptr, "irecv");
        need(t_->test != nullptr, "test");
        need(t_->closeSend != nullptr, "closeSend");
        need(t_->closeRecv != nullptr, "closeRecv");
        need(t_->closeListen != nullptr, "closeListen");
        if constexpr (V >= 11) {
            need(t_->finalize != nullptr, "finalize");
        }
        return missing;
    }

    using NetApi::init;
    ncclResult_t init(void** ctx, ncclDebugLogger_t logger, const InitOptions& opts) override {
        ncclProfilerCallback_t prof = opts.profiler != nullptr ? opts.profiler : profilerStub;
        traffic_class_ = opts.traffic_class;
        if constexpr (V >= 11) {
            // NCCL passes the address of a local config; the plugin must copy what it keeps.
            typename ContextTypes<V>::Config config{opts.traffic_class};
            return t_->init(ctx, g_comm_id.fetch_add(1), &config, logger, prof);
        } else {
            if (ctx != nullptr) {
                *ctx = nullptr;
            }
            if constexpr (V == 10) {
                return t_->init(logger, prof);
            } else {
                return t_->init(logger);
            }
        }
    }

    bool hasSetNetAttr() const override {
        if constexpr (V >= 11) {
            return t_->setNetAttr != nullptr;
        } else {
            return false;
        }
    }

    ncclResult_t setNetAttr(void* ctx, const ncclNetAttr_v12_t& attr) override {
        if constexpr (V >= 11) {
            if (t_->setNetAttr == nullptr) {
                return ncclSuccess;  // NCCL skips a NULL setNetAttr
            }
            // NCCL passes a pointer to its own copy; the plugin must not keep it.
            typename ContextTypes<V>::Attr a;
            std::memcpy(&a, &attr, sizeof(a));
            return t_->setNetAttr(ctx, &a);
        } else {
            return ncclInternalError;
        }
    }

    ncclResult_t finalize(void* ctx) override {
        if constexpr (V >= 11) {
            return t_->finalize(ctx);
        } else {
            return ncclSuccess;
        }
    }

    ncclResult_t devices(int* ndev) override { return t_->devices(ndev); }

    ncclResult_t getProperties(int dev, NetProps* out) override {
        Props p;
        std::memset(&p, 0, sizeof(p));
        ncclResult_t rc = t_->getProperties(dev, &p);
        if (rc != ncclSuccess) {
            return rc;
        }
        *out = NetProps{};
        out->name = p.name != nullptr ? p.name : "";
        out->pci_path_null = p.pciPath == nullptr;
        out->pci_path = p.pciPath != nullptr ? p.pciPath : "";
        out->guid = p.guid;
        out->ptr_support = p.ptrSupport;
        out->reg_is_global = p.regIsGlobal;
        out->speed_mbps = p.speed;
        out->port = p.port;
        out->latency_us = p.latency;
        out->max_comms = p.maxComms;
        out->max_recvs = p.maxRecvs;
        out->device_type = static_cast<int>(p.netDeviceType);
        out->device_version = p.netDeviceVersion;
        if constexpr (V >= 9) {
            out->force_flush = p.forceFlush;
            out->vprops_ndevs = p.vProps.ndevs;
            constexpr int kCap = sizeof(p.vProps.devs) / sizeof(p.vProps.devs[0]);
            out->vprops_capacity = kCap;
            for (int i = 0; i < kCap; ++i) {
                out->vprops_devs[i] = p.vProps.devs[i];
            }
            out->max_p2p_bytes = p.maxP2pBytes;
            out->max_coll_bytes = p.maxCollBytes;
        }
        if constexpr (V >= 11) {
            out->max_multi_request_size = p.maxMultiRequestSize;
        }
        if constexpr (V >= 12) {
            out->rail_id = p.railId;
            out->plane_id = p.planeId;
        }
        return ncclSuccess;
    }

    ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) override {
        if constexpr (V >= 11) {
            return t_->listen(ctx, dev, handle, listen_comm);
        } else {
            return t_->listen(dev, handle, listen_comm);
        }
    }

    ncclResult_t connect(void* ctx, int dev, void* handle, void** send_comm) override {
        // NCCL passes a real out-pointer whose target is NULL (no device offload requested).
        ncclNetDeviceHandle_v11_t* dev_handle = nullptr;
        if constexpr (V >= 11) {
            return t_->connect(ctx, dev, handle, send_comm, &dev_handle);
        } else if constexpr (V == 10) {
            ncclNetCommConfig_v10_t config{traffic_class_};
            return t_->connect(dev, &config, handle, send_comm, &dev_handle);
        } else {
            return t_->connect(dev, handle, send_comm, &dev_handle);
        }
    }

    ncclResult_t accept(void* listen_comm, void** recv_comm) override {
        ncclNetDeviceHandle_v11_t* dev_handle = nullptr;
        return t_->accept(listen_comm, recv_comm, &dev_handle);
    }

    ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
        return t_->regMr(comm, data, size, type, mhandle);
    }

    ncclResult_t deregMr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }

    ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                       void** request, void* phandle) override {
        if constexpr (V == 8) {
            if (size > static_cast<size_t>(INT_MAX)) {
                return ncclInvalidArgument;
            }
            return t_->isend(send_comm, data, static_cast<int>(size), tag, mhandle, request);
        } else if constexpr (V == 9) {
            return t_->isend(send_comm, data, size, tag, mhandle, request);
        } else {
            return t_->isend(send_comm, data, size, tag, mhandle, phandle, request);
        }
    }

    ncclResult_t irecv(void* recv_comm, void* data, size_t capacity, int tag, void* mhandle,
                       void** request, void* phandle) override {
        void* datas[1] = {data};
        int tags[1] = {tag};
        void* mhandles[1] = {mhandle};
        if constexpr (V == 8) {
            if (capacity > static_cast<size_t>(INT_MAX)) {
                return ncclInvalidArgument;
            }
            int sizes[1] = {static_cast<int>(capacity)};
            return t_->irecv(recv_comm, 1, datas, sizes, tags, mhandles, request);
        } else if constexpr (V == 9) {
            size_t sizes[1] = {capacity};
            return t_->irecv(recv_comm, 1, datas, sizes, tags, mhandles, request);
        } else {
            size_t sizes[1] = {capacity};
            void* phandles[1] = {phandle};
            return t_->irecv(recv_comm, 1, datas, sizes, tags, mhandles, phandles, request);
        }
    }

    ncclResult_t test(void* request, int* done, int* size) override {
        return t_->test(request, done, size);
    }
    ncclResult_t closeSend(void* c) override { return t_->closeSend(c); }
    ncclResult_t closeRecv(void* c) override { return t_->closeRecv(c); }
    ncclResult_t closeListen(void* c) override { return t_->closeListen(c); }

  private:
    const Table* t_;
    int traffic_class_ = NCCL_NET_TRAFFIC_CLASS_UNDEF;
};

}  // namespace

std::unique_ptr<NetApi> makeNetApi(const PluginLibrary& lib, int version) {
    switch (version) {
        case 8:
            if (const ncclNet_v8_t* t = lib.v8()) {
                return std::make_unique<NetApiImpl<ncclNet_v8_t, ncclNetProperties_v8_t, 8>>(t);
            }
            break;
        case 9:
            if (const ncclNet_v9_t* t = lib.v9()) {
                return std::make_unique<NetApiImpl<ncclNet_v9_t, ncclNetProperties_v9_t, 9>>(t);
            }
            break;
        case 10:
            if (const ncclNet_v10_t* t = lib.v10()) {
                return std::make_unique<NetApiImpl<ncclNet_v10_t, ncclNetProperties_v10_t, 10>>(t);
            }
            break;
        case 11:
            if (const ncclNet_v11_t* t = lib.v11()) {
                return std::make_unique<NetApiImpl<ncclNet_v11_t, ncclNetProperties_v11_t, 11>>(t);
            }
            break;
        case 12:
            if (const ncclNet_v12_t* t = lib.v12()) {
                return std::make_unique<NetApiImpl<ncclNet_v12_t, ncclNetProperties_v12_t, 12>>(t);
            }
            break;
        default:
            break;
    }
    return nullptr;
}

}  // namespace atlas::abi
