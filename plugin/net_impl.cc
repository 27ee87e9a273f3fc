#include "plugin/net_impl.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "atlas/common/clock.h"
#include "channel/channel_name.h"
#include "channel/local_rank.h"
#include "options/env.h"
#include "plugin/bubbles.h"
#include "plugin/comm_stats.h"
#include "plugin/devices.h"
#include "plugin/handle_table.h"
#include "plugin/log.h"
#include "plugin/params.h"
#include "plugin/pending_connects.h"
#include "plugin/requests.h"
#include "plugin/wan/admission.h"
#include "transport/net.h"

#ifndef ATLAS_VERSION
#define ATLAS_VERSION "dev"
#endif

namespace atlas::plugin {

static_assert(transport::kHandleSize == NCCL_NET_HANDLE_MAXSIZE,
              "the transport's handle must be exactly the buffer NCCL provides");
static_assert(transport::kMaxRequests == NCCL_NET_MAX_REQUESTS);

namespace {

// NCCL never holds a pointer to these objects: it holds tokens of g_handles
// (plugin/handle_table.h), so a stale, double-closed, foreign or wrong-kind handle is
// recognised from the table alone and answered with ncclInternalError, one WARN line.

// Per-communicator context (v11/v12). commId and trafficClass are kept for the WAN
// scheduler, NCCL's latest setNetAttr hints for the comms connected under it.
struct Ctx {
    void* token = nullptr;  // NCCL's handle
    uint64_t comm_id = 0;
    int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
    // setNetAttr runs on NCCL's progress thread, connect/accept on its service thread: the
    // hints have their own lock, never taken on the data path (NCCL calls setNetAttr only
    // when the attributes change).
    std::mutex hints_mu;
    NetHints hints;           // guarded by hints_mu
    uint64_t hint_calls = 0;  // guarded by hints_mu; 0: NCCL never gave hints

    TrafficKind trafficKind() {
        std::lock_guard<std::mutex> lock(hints_mu);
        return trafficKindOf(hint_calls > 0, hints.op);
    }
};

struct CommBase {
    void* token = nullptr;  // NCCL's handle
    int dev = 0;
    uint64_t comm_id = 0;
    int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
    TrafficKind traffic = TrafficKind::kUnknown;  // from the context's hints at connect/listen
};
struct ListenObj : CommBase {
    std::unique_ptr<transport::ListenComm> comm;
    transport::Transport* transport = nullptr;  // outlives the listen comm
    netstat::StatsWriter* stats = nullptr;      // idem; nullptr: no stats segment
    IdleRecorder* bubbles = nullptr;         // receives of accepted WAN comms are watched when set
    const wan::WanAdmission* wan = nullptr;  // the WAN rule for those receives; outlives us
};
struct DataObj : CommBase {
    std::unique_ptr<RequestPool> requests;  // what isend/irecv hand to NCCL (plugin/requests.h)
    netstat::StatsWriter* stats = nullptr;  // outlives the comm (GlobalState)
};
struct SendObj : DataObj {
    std::unique_ptr<transport::SendComm> comm;
};
struct RecvObj : DataObj {
    std::unique_ptr<transport::RecvComm> comm;
};

// regMr handle. Nothing is pinned or registered: TCP reads and writes host memory directly.
struct MrHandle {
    int type = NCCL_PTR_HOST;
    const void* base = nullptr;  // for debugging: what NCCL registered
    size_t size = 0;
    const void* comm = nullptr;  // the comm's token
};

constinit HandleTable g_handles;  // every handle NCCL holds; its own lock

struct GlobalState {
    int refcount = 0;  // live contexts + legacy reference
    bool legacy_ref = false;
    std::unordered_set<Ctx*> contexts;
    PendingConnects pending{&g_handles};  // connects in progress (plugin/pending_connects.h)
    Params params;
    PriorityOrder priority_order = PriorityOrder::kPipelineFirst;  // ATLAS_TRAFFIC_PRIORITY
    std::vector<Device> devices;
    std::vector<const char*> names;      // interned device names
    std::vector<const char*> pci_paths;  // interned, nullptr when absent
    // Owned here rather than a function-local static so it outlives the engine threads even
    // when teardown runs from the library destructor at exit (after static destructors).
    MonotonicClock clock;
    // Bubble measurement (docs/bubbles.md): the recorder is fed by engine threads, so it is
    // declared before the transport (destroyed after the engines stop); the publisher
    // thread reads it and stops first.
    IdleRecorder idle_recorder;
    std::unique_ptr<BubblePublisher> bubbles;
    bool bubbles_tried = false;  // the publisher starts with the first WAN receive comm
    // WAN admission (docs/arbitration.md): gates live in comms, so it is destroyed after
    // the transport; its destructor joins the arbiter client and shm watcher threads.
    std::unique_ptr<wan::WanAdmission> wan;
    // The stats segment (docs/netstat.md): comm records are released at close and sinks die
    // with their transport comms, so it is destroyed after the transport.
    std::unique_ptr<netstat::StatsWriter> stats;
    std::unique_ptr<transport::Transport> transport;  // declared last: destroyed first
};

// Everything below has a trivial destructor (or is freed explicitly), so the library
// destructor can run before or after C++ static destruction (exit vs dlclose order differs).
std::mutex g_mutex;
GlobalState* g_state = nullptr;                   // guarded by g_mutex
std::set<std::string>* g_interned = nullptr;      // guarded by g_mutex; strings given to NCCL
const InterfaceSource* g_iface_source = nullptr;  // guarded by g_mutex (test seam)
std::string* g_sysfs_root = nullptr;              // guarded by g_mutex (test seam)
std::atomic<int> g_live_comms{0};
std::atomic<bool> g_abort_on_error{false};
std::atomic<seams::FaultHook> g_fault_hook{nullptr};

const char* internLocked(const std::string& s) {
    if (g_interned == nullptr) {
        g_interned = new std::set<std::string>();
    }
    return g_interned->insert(s).first->c_str();
}

Status misuse(const std::string& what) {
    return Status(Code::kInternal, what);
}

// The firewall around every entry point; see net_impl.h.
template <typename Body>
ncclResult_t guarded(const char* func, Body&& body) noexcept {
    try {
        if (seams::FaultHook hook = g_fault_hook.load(std::memory_order_acquire)) {
            hook(func);
        }
        Status st = body();
        if (st.isOk()) {
            return ncclSuccess;
        }
        return core::reject(func, st.code(), "%s", st.message().c_str());
    } catch (const std::bad_alloc&) {
        return core::reject(func, Code::kSystem, "out of memory");
    } catch (const std::exception& e) {
        return core::reject(func, Code::kInternal, "unexpected exception: %s", e.what());
    } catch (...) {
        return core::reject(func, Code::kInternal, "unexpected non-standard exception");
    }
}

// The live object of `kind` behind NCCL's handle `h`, or nullptr (lock-free; reads only the
// table until the handle is known to be live).
template <typename T>
T* lookup(HandleKind kind, const void* h) {
    return static_cast<T*>(g_handles.find(kind, h));
}

// Registers `obj` under a new token (obj->token); kSystem when the table is full.
template <typename T>
Status addHandle(HandleKind kind, T* obj) {
    auto token = g_handles.add(kind, obj);
    if (!token) {
        return token.status();
    }
    obj->token = token.value();
    return Status::ok();
}

Status findCtxLocked(void* ctx, const Ctx** out) {
    *out = nullptr;
    if (ctx == nullptr) {
        return Status::ok();
    }
    const Ctx* c = lookup<Ctx>(HandleKind::kCtx, ctx);
    if (c == nullptr) {
        return misuse("unknown context " + std::to_string(reinterpret_cast<uintptr_t>(ctx)) +
                      " (not returned by init, or already finalized)");
    }
    *out = c;
    return Status::ok();
}

// The in-flight request behind NCCL's request handle, through its comm's table slot; nullptr
// for anything else (reads only the table and live pools).
PluginRequest* findRequest(const void* handle) {
    uint32_t owner = 0;
    if (!RequestPool::ownerIndex(handle, &owner)) {
        return nullptr;
    }
    HandleKind kind{};
    void* obj = g_handles.findAt(owner, &kind);
    RequestPool* pool = nullptr;
    if (kind == HandleKind::kSend) {
        pool = static_cast<SendObj*>(obj)->requests.get();
    } else if (kind == HandleKind::kRecv) {
        pool = static_cast<RecvObj*>(obj)->requests.get();
    }
    return pool != nullptr ? pool->find(handle) : nullptr;
}

Status requireStateLocked() {
    if (g_state == nullptr) {
        return misuse("the plugin is not initialized (init has not succeeded)");
    }
    return Status::ok();
}

Status checkDevLocked(int dev) {
    int n = static_cast<int>(g_state->devices.size());
    if (dev < 0 || dev >= n) {
        return misuse("device " + std::to_string(dev) + " out of range (" + std::to_string(n) +
                      " devices)");
    }
    return Status::ok();
}

// Bubble prediction is best effort: a channel that cannot be created is logged once and the
// plugin runs on without it. Started by the first WAN receive comm, so processes without WAN
// traffic (tests, intra-DC jobs, two ranks of one host on loopback) create no channel.
void startBubblesLocked(GlobalState& st) {
    if (!st.params.bubbles || st.bubbles_tried) {
        return;
    }
    st.bubbles_tried = true;
    BubbleConfig bc;
    auto rank = channel::resolveLocalRank(static_cast<int>(st.params.local_rank), processEnv());
    if (!rank) {
        ATLAS_WARN("%s; bubbles not published", rank.status().message().c_str());
        return;
    }
    auto name = channel::resolveChannelName(
        st.params.bubble_channel.empty() ? nullptr : st.params.bubble_channel.c_str(),
        rank.value().rank);
    if (!name) {
        ATLAS_WARN("ATLAS_BUBBLE_CHANNEL: %s; bubbles not published",
                   name.status().toString().c_str());
        return;
    }
    bc.channel_name = name.value();
    bc.pipeline.predictor.guard_ns = static_cast<Nanos>(st.params.bubble_guard_us) * kNsPerUs;
    auto pub = BubblePublisher::start(bc, &st.idle_recorder, st.clock, makeLibraryLogger());
    if (!pub) {
        ATLAS_WARN("bubble channel %s not published: %s", bc.channel_name.c_str(),
                   pub.status().toString().c_str());
        return;
    }
    st.bubbles = std::move(pub.value());
    ATLAS_INFO("bubble channel %s: publishing predicted idle windows (guard %llu us)",
               st.bubbles->channelName().c_str(),
               static_cast<unsigned long long>(st.params.bubble_guard_us));
}

// Creates the global state if there is none: registry, devices, engine pool.
Status ensureStateLocked() {
    if (g_state != nullptr) {
        return Status::ok();
    }
    auto st = std::make_unique<GlobalState>();
    ParamsParse parsed = parseParams(processEnv());
    // These two matter for reporting the parse errors themselves.
    setStderrMirror(parsed.params.debug_stderr);
    g_abort_on_error.store(parsed.params.abort_on_error, std::memory_order_relaxed);
    for (const std::string& w : parsed.warnings) {
        ATLAS_WARN("%s", w.c_str());
    }
    for (const std::string& w : options::unknownEnvWarningsOnce()) {
        ATLAS_WARN("%s", w.c_str());
    }
    ATLAS_RETURN_IF_ERROR(parsed.status());
    st->params = std::move(parsed.params);
    auto order = parsePriorityOrder(st->params.traffic_priority);
    if (!order) {
        return order.status();
    }
    st->priority_order = order.value();
    auto wan_config = wan::configFromParams(st->params);
    if (!wan_config) {
        return wan_config.status();
    }
    st->wan =
        std::make_unique<wan::WanAdmission>(std::move(wan_config.value()), makeLibraryLogger());
    for (const std::string& line : describeParams(st->params, false)) {
        ATLAS_INFO("%s", line.c_str());
    }
    for (const std::string& line : describeParams(st->params, true)) {
        ATLAS_TRACE("%s", line.c_str());
    }

    auto stats = createStatsWriter(st->params);
    if (!stats) {
        ATLAS_WARN("stats segment not published (%s); atlas-netstat will not see this process",
                   stats.status().toString().c_str());
    } else {
        st->stats = std::move(stats.value());
        if (st->stats != nullptr) {
            ATLAS_INFO("stats segment %s (atlas-netstat)", st->stats->path().c_str());
        }
    }

    DiscoveryOptions opts;
    opts.ifname_spec = st->params.socket_ifname;
    opts.family = st->params.socket_family;
    if (g_sysfs_root != nullptr && !g_sysfs_root->empty()) {
        opts.sysfs_net_root = *g_sysfs_root;
    }
    const InterfaceSource& source =
        g_iface_source != nullptr ? *g_iface_source : SystemInterfaceSource::instance();
    auto devs = discoverDevices(opts, source);
    if (!devs) {
        return devs.status();
    }
    st->devices = std::move(devs.value());
    int max_speed = 0;
    std::string summary;
    for (const Device& d : st->devices) {
        st->names.push_back(internLocked(d.name));
        st->pci_paths.push_back(d.pci_path.empty() ? nullptr : internLocked(d.pci_path));
        max_speed = std::max(max_speed, d.speed_mbps);
        summary += " [" + std::to_string(d.index) + "]" + d.name + ":" + d.addressString() + "/" +
                   std::to_string(d.speed_mbps) + "Mbps";
    }

    transport::TransportConfig config = makeTransportConfig(st->params, max_speed);
    config.logger = makeLibraryLogger();
    config.clock = &st->clock;
    auto created = transport::Transport::create(config);
    if (!created) {
        return created.status();
    }
    st->transport = std::move(created.value());
    ATLAS_INFO("Atlas %s: %zu device(s):%s; io=%s engine_threads=%d streams=%s", ATLAS_VERSION,
               st->devices.size(), summary.c_str(),
               transport::ioBackendName(st->transport->backend()), config.engine_threads,
               config.nstreams == 0 ? "auto" : std::to_string(config.nstreams).c_str());
    g_state = st.release();
    return Status::ok();
}

// Destroys the state once nothing references it. Joining the engine threads happens here
// (Transport's destructor), under g_mutex: engine threads never take g_mutex.
Status releaseIfUnusedLocked() {
    if (g_state == nullptr || g_state->refcount > 0) {
        return Status::ok();
    }
    int open = g_live_comms.load(std::memory_order_acquire);
    if (open > 0 || g_state->transport->liveComms() > 0) {
        // Destroying the engine pool under open comms would free what NCCL still uses; keep
        // it, and let a later init reuse it or the library destructor retry.
        return misuse("last finalize with " + std::to_string(open) +
                      " comm(s) still open; keeping the engine threads alive");
    }
    // Attempts of the v8..v10 paths (no finalize of their own); none is left otherwise.
    (void)g_state->pending.reclaim(nullptr, true, g_state->transport.get());
    delete g_state;
    g_state = nullptr;
    ATLAS_INFO("last reference released: engine threads stopped");
    return Status::ok();
}

// Teardown at dlclose/exit. try_lock: at exit another thread may be stuck inside init.
bool unloadState() noexcept {
    try {
        std::unique_lock<std::mutex> lock(g_mutex, std::try_to_lock);
        if (!lock.owns_lock()) {
            return false;
        }
        if (g_state != nullptr) {
            int open = g_live_comms.load(std::memory_order_acquire);
            if (open > 0 || g_state->transport->liveComms() > 0) {
                ATLAS_WARN("unloading with %d comm(s) still open: engine threads left running",
                           open);
                return false;
            }
            (void)g_state->pending.reclaim(nullptr, true, g_state->transport.get());
            for (Ctx* c : g_state->contexts) {
                (void)g_handles.remove(HandleKind::kCtx, c->token);
                delete c;
            }
            delete g_state;
            g_state = nullptr;
        }
        // Registrations NCCL never released (their comms are closed); then the table's own
        // storage, which must not outlive the library.
        g_handles.removeAll(HandleKind::kMr, [](void* mr) { delete static_cast<MrHandle*>(mr); });
        (void)g_handles.releaseStorage();
        delete g_interned;
        g_interned = nullptr;
        return true;
    } catch (...) {
        return false;
    }
}

__attribute__((destructor)) void atlasPluginDestructor() {
    unloadState();
}

template <typename Obj>
ncclResult_t closeObj(const char* func, void* p, HandleKind kind) {
    return guarded(func, [&]() -> Status {
        if (p == nullptr) {
            return Status::ok();
        }
        // Unregistered first: from here on the handle is dead for every entry point.
        Obj* obj = static_cast<Obj*>(g_handles.remove(kind, p));
        if (obj == nullptr) {
            return misuse(std::string("not a live ") + handleKindName(kind) +
                          " (closed twice, or not a handle this plugin returned)");
        }
        std::unique_ptr<Obj> owned(obj);
        Status st = Status::ok();
        if constexpr (!std::is_same_v<Obj, ListenObj>) {
            st = owned->comm->close();
            // The engine took its last sample in close(); the record can be reused now.
            if (owned->stats != nullptr) {
                owned->stats->release(owned->requests->statsRecord());
            }
        }
        owned.reset();
        if (g_live_comms.fetch_sub(1, std::memory_order_acq_rel) == 1) {
            // The last comm is gone: finish a teardown that a premature last finalize had
            // to defer. Nothing happens while a context or the legacy reference remains.
            std::lock_guard<std::mutex> lock(g_mutex);
            if (g_state != nullptr && g_state->refcount == 0 &&
                g_state->transport->liveComms() == 0) {
                // Logs "engine threads stopped" once the state is gone.
                ATLAS_RETURN_IF_ERROR(releaseIfUnusedLocked());
            }
        }
        return st;
    });
}

// isend/irecv after validation: a request slot of the comm's pool wraps the transport's.
// No slot, or no transport slot: *request stays NULL (back-pressure, NCCL retries).
template <typename Obj, typename PostFn>
Status post(Obj& obj, PostFn&& transport_post, size_t length, void* phandle, void** request) {
    PluginRequest* r = obj.requests->reserve();
    if (r == nullptr) {
        return Status::ok();
    }
    transport::Request* inner = nullptr;
    Status st = transport_post(&inner);
    if (!st.isOk() || inner == nullptr) {
        obj.requests->unreserve(r);
        return st;
    }
    obj.requests->posted(r, inner, length, phandle);
    *request = RequestPool::handleOf(r);
    return Status::ok();
}

}  // namespace

ncclResult_t toNcclResult(Code code) {
    switch (code) {
        case Code::kOk:
            return ncclSuccess;
        case Code::kSystem:
            return ncclSystemError;
        case Code::kInternal:
            return ncclInternalError;
        case Code::kInvalidArgument:
            return ncclInvalidArgument;
        case Code::kInvalidUsage:
            return ncclInvalidUsage;
        case Code::kRemote:
            return ncclRemoteError;
        case Code::kTimeout:
            return ncclRemoteError;
        case Code::kUnavailable:
            return ncclSystemError;
    }
    return ncclInternalError;
}

namespace core {

ncclResult_t reject(const char* func, Code code, const char* fmt, ...) noexcept {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    logMessage(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, "%s failed (%s): %s", func,
               codeName(code), msg);
    if (g_abort_on_error.load(std::memory_order_relaxed)) {
        logMessage(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__,
                   "ATLAS_ABORT_ON_ERROR is set: aborting");
        std::abort();
    }
    return toNcclResult(code);
}

ncclResult_t init(void** ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t log_fn,
                  ncclProfilerCallback_t prof_fn) {
    if (log_fn != nullptr) {
        setNcclLogger(log_fn);  // first, so a failing init is reported
    }
    if (prof_fn != nullptr) {
        setProfilerCallback(prof_fn);  // NCCL passes the same callback to every init
    }
    return guarded("init", [&]() -> Status {
        if (ctx == nullptr) {
            return misuse("ctx is NULL");
        }
        *ctx = nullptr;
        std::lock_guard<std::mutex> lock(g_mutex);
        ATLAS_RETURN_IF_ERROR(ensureStateLocked());
        try {
            auto c = std::make_unique<Ctx>();
            c->comm_id = comm_id;
            c->traffic_class = traffic_class;
            Status added = addHandle(HandleKind::kCtx, c.get());
            if (!added.isOk()) {
                (void)releaseIfUnusedLocked();
                return added;
            }
            try {
                g_state->contexts.insert(c.get());
            } catch (...) {
                (void)g_handles.remove(HandleKind::kCtx, c->token);
                throw;
            }
            ++g_state->refcount;
            *ctx = c->token;
            (void)c.release();
        } catch (...) {
            (void)releaseIfUnusedLocked();
            throw;
        }
        ATLAS_INFO("init commId 0x%llx trafficClass %d (%d reference(s))",
                   static_cast<unsigned long long>(comm_id), traffic_class, g_state->refcount);
        return Status::ok();
    });
}

ncclResult_t initLegacy(ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn) {
    if (log_fn != nullptr) {
        setNcclLogger(log_fn);
    }
    if (prof_fn != nullptr) {
        setProfilerCallback(prof_fn);
    }
    return guarded("init", [&]() -> Status {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_state != nullptr && g_state->legacy_ref) {
            return Status::ok();
        }
        ATLAS_RETURN_IF_ERROR(ensureStateLocked());
        g_state->legacy_ref = true;
        ++g_state->refcount;
        return Status::ok();
    });
}

ncclResult_t finalize(void* ctx) {
    return guarded("finalize", [&]() -> Status {
        if (ctx == nullptr) {
            return Status::ok();  // NCCL calls finalize even when init failed
        }
        std::lock_guard<std::mutex> lock(g_mutex);
        auto* c = g_state != nullptr ? static_cast<Ctx*>(g_handles.remove(HandleKind::kCtx, ctx))
                                     : nullptr;
        if (c == nullptr) {
            return misuse(
                "finalize of an unknown context (not returned by init, or finalized "
                "twice)");
        }
        g_state->contexts.erase(c);
        // Connects NCCL gave up on under this communicator (an abort during setup).
        const int reclaimed = g_state->pending.reclaim(ctx, false, g_state->transport.get());
        if (reclaimed > 0) {
            ATLAS_INFO(
                "finalize commId 0x%llx: reclaimed %d connection attempt(s) that never "
                "completed",
                static_cast<unsigned long long>(c->comm_id), reclaimed);
        }
        delete c;
        --g_state->refcount;
        return releaseIfUnusedLocked();
    });
}

ncclResult_t setNetAttr(void* ctx, const NetHints* hints) {
    return guarded("setNetAttr", [&]() -> Status {
        if (ctx == nullptr || hints == nullptr) {
            return misuse("ctx or netAttr is NULL");
        }
        // Not under g_mutex: this runs on NCCL's progress thread, which must not wait for
        // another communicator's init. NCCL never calls it after finalize(ctx).
        Ctx* c = lookup<Ctx>(HandleKind::kCtx, ctx);
        if (c == nullptr) {
            return misuse("setNetAttr on a context init did not return (or finalized)");
        }
        TrafficKind kind;
        uint64_t calls;
        {
            std::lock_guard<std::mutex> lock(c->hints_mu);
            c->hints = *hints;
            calls = ++c->hint_calls;
            kind = trafficKindOf(true, hints->op);
        }
        // NCCL logs the same attributes at INFO (printNetAttrs); ours adds what they mean.
        ATLAS_INFO("setNetAttr commId 0x%llx (#%llu): %s -> %s traffic",
                   static_cast<unsigned long long>(c->comm_id),
                   static_cast<unsigned long long>(calls), describeHints(*hints).c_str(),
                   trafficKindName(kind));
        return Status::ok();
    });
}

ncclResult_t devices(int* ndev) {
    return guarded("devices", [&]() -> Status {
        if (ndev == nullptr) {
            return misuse("ndev is NULL");
        }
        std::lock_guard<std::mutex> lock(g_mutex);
        ATLAS_RETURN_IF_ERROR(requireStateLocked());
        *ndev = static_cast<int>(g_state->devices.size());
        return Status::ok();
    });
}

ncclResult_t getProperties(int dev, NetProperties* props) {
    return guarded("getProperties", [&]() -> Status {
        if (props == nullptr) {
            return misuse("props is NULL");
        }
        std::lock_guard<std::mutex> lock(g_mutex);
        ATLAS_RETURN_IF_ERROR(requireStateLocked());
        ATLAS_RETURN_IF_ERROR(checkDevLocked(dev));
        const Device& d = g_state->devices[dev];
        NetProperties p;
        p.name = g_state->names[dev];
        p.pci_path = g_state->pci_paths[dev];
        p.guid = static_cast<uint64_t>(dev);
        p.ptr_support = NCCL_PTR_HOST;
        p.reg_is_global = 0;
        p.force_flush = 0;
        p.speed_mbps = d.speed_mbps;
        p.port = 0;
        p.latency_us = 0;
        p.max_comms = kMaxComms;
        p.max_recvs = 1;
        p.net_device_type = NCCL_NET_DEVICE_HOST;
        p.net_device_version = NCCL_NET_DEVICE_INVALID_VERSION;
        p.vdev_count = 1;
        p.vdev = dev;
        p.max_p2p_bytes = NCCL_MAX_NET_SIZE_BYTES;
        p.max_coll_bytes = kMaxCollBytes;
        p.max_multi_request_size = 1;
        p.rail_id = NCCL_NET_ID_UNDEF;
        p.plane_id = NCCL_NET_ID_UNDEF;
        *props = p;
        return Status::ok();
    });
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) {
    return guarded("listen", [&]() -> Status {
        if (handle == nullptr || listen_comm == nullptr) {
            return misuse("handle or listenComm is NULL");
        }
        *listen_comm = nullptr;
        transport::Transport* t = nullptr;
        transport::SocketAddress local;
        auto obj = std::make_unique<ListenObj>();
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            ATLAS_RETURN_IF_ERROR(requireStateLocked());
            const Ctx* c = nullptr;
            ATLAS_RETURN_IF_ERROR(findCtxLocked(ctx, &c));
            ATLAS_RETURN_IF_ERROR(checkDevLocked(dev));
            const Device& d = g_state->devices[dev];
            local.storage = d.addr;
            local.len = d.addr_len;
            obj->comm_id = c != nullptr ? c->comm_id : 0;
            obj->traffic_class = c != nullptr ? c->traffic_class : NCCL_NET_TRAFFIC_CLASS_UNDEF;
            // NCCL sets the connection's hints right before listen/accept as before connect.
            obj->traffic =
                c != nullptr ? const_cast<Ctx*>(c)->trafficKind() : TrafficKind::kUnknown;
            // The Transport outlives this call: a live context (or the legacy reference)
            // keeps the state, and NCCL does not finalize while it is listening.
            t = g_state->transport.get();
            obj->wan = g_state->wan.get();
            if (g_state->params.bubbles) {
                obj->bubbles = &g_state->idle_recorder;
            }
        }
        auto lc = t->listen(local, static_cast<uint8_t*>(handle));
        if (!lc) {
            return lc.status();
        }
        obj->transport = t;
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            obj->stats = g_state != nullptr ? g_state->stats.get() : nullptr;
        }
        obj->dev = dev;
        obj->comm = std::move(lc.value());
        ATLAS_RETURN_IF_ERROR(addHandle(HandleKind::kListen, obj.get()));
        g_live_comms.fetch_add(1, std::memory_order_acq_rel);
        *listen_comm = obj.release()->token;
        return Status::ok();
    });
}

ncclResult_t connect(void* ctx, int dev, const int* traffic_class, void* handle, void** send_comm) {
    return guarded("connect", [&]() -> Status {
        if (handle == nullptr || send_comm == nullptr) {
            return misuse("handle or sendComm is NULL");
        }
        *send_comm = nullptr;
        transport::Transport* t = nullptr;
        wan::WanAdmission* wan_admission = nullptr;  // lives as long as t
        uint64_t comm_id = 0;
        int tc = NCCL_NET_TRAFFIC_CLASS_UNDEF;
        netstat::StatsWriter* stats = nullptr;
        Nanos stats_interval = 0;
        TrafficKind kind = TrafficKind::kUnknown;
        PriorityOrder order = PriorityOrder::kPipelineFirst;
        auto* nccl_handle = static_cast<uint8_t*>(handle);
        PendingConnect* pc = nullptr;
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            ATLAS_RETURN_IF_ERROR(requireStateLocked());
            const Ctx* c = nullptr;
            ATLAS_RETURN_IF_ERROR(findCtxLocked(ctx, &c));
            ATLAS_RETURN_IF_ERROR(checkDevLocked(dev));
            ATLAS_RETURN_IF_ERROR(g_state->pending.resume(ctx, nccl_handle, &pc));
            if (c != nullptr) {
                comm_id = c->comm_id;
                tc = c->traffic_class;
                // The hints NCCL set right before this connect describe this connection.
                kind = const_cast<Ctx*>(c)->trafficKind();
            }
            t = g_state->transport.get();
            wan_admission = g_state->wan.get();
            order = g_state->priority_order;
            stats = g_state->stats.get();
            stats_interval = static_cast<Nanos>(g_state->params.netstat_interval_ms) * kNsPerMs;
        }
        if (traffic_class != nullptr) {
            tc = *traffic_class;
        }
        std::unique_ptr<transport::SendComm> sc;
        Status st = t->connect(pc->handle.data(), &sc);
        if (!st.isOk() || sc != nullptr) {
            // The transport freed its connector: the attempt is over, the buffer reusable.
            std::lock_guard<std::mutex> lock(g_mutex);
            g_state->pending.finish(pc, nccl_handle);
        }
        ATLAS_RETURN_IF_ERROR(st);
        if (sc == nullptr) {
            return Status::ok();  // not connected yet: NCCL calls again with the same handle
        }
        CommStatsInputs si;
        si.role = netstat::kRoleSend;
        si.comm_id = comm_id;
        si.dev = dev;
        si.traffic = kind;
        si.priority = admissionPriority(kind, order);
        if (wan_admission != nullptr) {
            // Before NCCL can isend on it: WAN flows get their admission gate here.
            const wan::TrafficHint hint{kind, si.priority};
            const wan::AttachResult wr = wan_admission->attach(*sc, comm_id, tc, hint);
            si.wan = wr.verdict.wan;
            si.link = wr.verdict.link;
            if (wr.verdict.wan) {
                ATLAS_INFO("WAN send comm to %s (%s): %s, %s (%s), %s traffic, priority %d",
                           sc->info().peer.toString().c_str(), wr.verdict.reason.c_str(),
                           wr.mode.c_str(), wan::describeClass(wr.cls).c_str(), wr.class_rule,
                           trafficKindName(wr.hint.kind), wr.hint.priority);
            }
        }
        auto obj = std::make_unique<SendObj>();
        obj->dev = dev;
        obj->comm_id = comm_id;
        obj->traffic_class = tc;
        obj->traffic = kind;
        obj->comm = std::move(sc);
        obj->requests = std::make_unique<RequestPool>(
            RequestOp::kSend, dev, obj->comm->info().nstreams, obj->comm->info().inline_bytes);
        obj->stats = stats;
        obj->requests->setStatsRecord(attachStats(stats, stats_interval, *obj->comm, si));
        obj->requests->setStreamEvents(&obj->comm->streamEvents());
        const transport::CommInfo& info = obj->comm->info();
        ATLAS_TRACE("connected dev %d to %s: %d stream(s), rtt %.3f ms%s", dev,
                    info.peer.toString().c_str(), info.nstreams,
                    static_cast<double>(info.rtt_ns) / 1e6,
                    info.authenticated ? ", authenticated" : "");
        ATLAS_RETURN_IF_ERROR(addHandle(HandleKind::kSend, obj.get()));
        obj->requests->bindHandles(obj->token);
        g_live_comms.fetch_add(1, std::memory_order_acq_rel);
        *send_comm = obj.release()->token;
        return Status::ok();
    });
}

// Starts the bubble publisher on first use; false when it is off or could not start.
static bool bubblePublisherRunning() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_state == nullptr) {
        return false;
    }
    startBubblesLocked(*g_state);
    return g_state->bubbles != nullptr;
}

ncclResult_t accept(void* listen_comm, void** recv_comm) {
    return guarded("accept", [&]() -> Status {
        if (recv_comm == nullptr) {
            return misuse("recvComm is NULL");
        }
        *recv_comm = nullptr;
        ListenObj* lobj = lookup<ListenObj>(HandleKind::kListen, listen_comm);
        if (lobj == nullptr) {
            return misuse("listenComm is not a live listen comm");
        }
        std::unique_ptr<transport::RecvComm> rc;
        ATLAS_RETURN_IF_ERROR(lobj->comm->accept(&rc));
        if (lobj->stats != nullptr) {
            // Strangers the listeners dropped: a process-wide figure, refreshed while NCCL
            // polls accept (the only time a listener exists).
            netstat::StatsWriter::setCounter(lobj->stats->header().auth_failures,
                                             lobj->transport->authFailures());
        }
        if (rc == nullptr) {
            return Status::ok();  // no connector finished the handshake yet
        }
        if (lobj->bubbles != nullptr && lobj->wan != nullptr && lobj->wan->isWanRecv(*rc) &&
            bubblePublisherRunning()) {
            // Only WAN receives are GPU waits worth predicting (docs/bubbles.md); set before
            // NCCL can post a receive on the comm (the observer's publication rule).
            rc->setObserver(
                std::make_unique<CommIdleObserver>(lobj->bubbles, CommIdleObserver::nextCommId()));
        }
        auto obj = std::make_unique<RecvObj>();
        obj->dev = lobj->dev;
        obj->comm_id = lobj->comm_id;
        obj->traffic_class = lobj->traffic_class;
        obj->traffic = lobj->traffic;
        obj->comm = std::move(rc);
        obj->requests =
            std::make_unique<RequestPool>(RequestOp::kRecv, lobj->dev, obj->comm->info().nstreams,
                                          obj->comm->info().inline_bytes);
        obj->requests->setStreamEvents(&obj->comm->streamEvents());
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            if (g_state != nullptr && g_state->stats != nullptr) {
                obj->stats = g_state->stats.get();
                CommStatsInputs si;
                si.role = netstat::kRoleRecv;
                si.comm_id = obj->comm_id;
                si.dev = obj->dev;
                si.traffic = obj->traffic;
                si.priority = admissionPriority(obj->traffic, g_state->priority_order);
                if (lobj->wan != nullptr) {
                    const wan::WanVerdict v = lobj->wan->classifyRecv(obj->comm->info());
                    si.wan = v.wan;
                    si.link = v.link;
                }
                obj->requests->setStatsRecord(attachStats(
                    obj->stats, static_cast<Nanos>(g_state->params.netstat_interval_ms) * kNsPerMs,
                    *obj->comm, si));
            }
        }
        const transport::CommInfo& info = obj->comm->info();
        ATLAS_TRACE("accepted dev %d from %s: %d stream(s), rtt %.3f ms%s", lobj->dev,
                    info.peer.toString().c_str(), info.nstreams,
                    static_cast<double>(info.rtt_ns) / 1e6,
                    info.authenticated ? ", authenticated" : "");
        ATLAS_RETURN_IF_ERROR(addHandle(HandleKind::kRecv, obj.get()));
        obj->requests->bindHandles(obj->token);
        g_live_comms.fetch_add(1, std::memory_order_acq_rel);
        *recv_comm = obj.release()->token;
        return Status::ok();
    });
}

ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
    return guarded("regMr", [&]() -> Status {
        if (mhandle == nullptr) {
            return misuse("mhandle is NULL");
        }
        *mhandle = nullptr;
        if (type != NCCL_PTR_HOST) {
            return misuse("memory type " + std::to_string(type) +
                          " is not supported (ptrSupport is NCCL_PTR_HOST only)");
        }
        if (data == nullptr && size > 0) {
            return misuse("data is NULL with size " + std::to_string(size));
        }
        if (lookup<SendObj>(HandleKind::kSend, comm) == nullptr &&
            lookup<RecvObj>(HandleKind::kRecv, comm) == nullptr) {
            return misuse("comm is not a live send or recv comm");
        }
        auto mr = std::make_unique<MrHandle>();
        mr->type = type;
        mr->base = data;
        mr->size = size;
        mr->comm = comm;
        auto token = g_handles.add(HandleKind::kMr, mr.get());
        if (!token) {
            return token.status();
        }
        (void)mr.release();
        *mhandle = token.value();
        return Status::ok();
    });
}

ncclResult_t deregMr(void* comm, void* mhandle) {
    return guarded("deregMr", [&]() -> Status {
        if (mhandle == nullptr) {
            return Status::ok();
        }
        auto* mr = static_cast<MrHandle*>(g_handles.remove(HandleKind::kMr, mhandle));
        if (mr == nullptr) {
            return misuse(
                "mhandle is not a live registration (deregistered twice, or not returned by "
                "regMr)");
        }
        delete mr;
        return Status::ok();
    });
}

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request) {
    return guarded("isend", [&]() -> Status {
        if (request == nullptr) {
            return misuse("request is NULL");
        }
        *request = nullptr;
        if (data == nullptr && size > 0) {
            return misuse("data is NULL with size " + std::to_string(size));
        }
        if (size > static_cast<size_t>(INT_MAX)) {
            return misuse("size " + std::to_string(size) +
                          " exceeds INT_MAX, which test() cannot report");
        }
        SendObj* obj = lookup<SendObj>(HandleKind::kSend, send_comm);
        if (obj == nullptr) {
            return misuse("sendComm is not a live send comm");
        }
        return post(
            *obj, [&](transport::Request** req) { return obj->comm->isend(data, size, req); }, size,
            phandle, request);
    });
}

ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, int* tags,
                   void** mhandles, void** phandles, void** request) {
    return guarded("irecv", [&]() -> Status {
        if (request == nullptr) {
            return misuse("request is NULL");
        }
        // May hold NCCL_NET_OPTIONAL_RECV_COMPLETION on entry: overwritten, never read.
        *request = nullptr;
        // Arguments first, then the comm, so each check is observable on its own.
        if (n != 1) {
            return misuse("n = " + std::to_string(n) + " but maxRecvs is 1");
        }
        if (data == nullptr || sizes == nullptr) {
            return misuse("data or sizes is NULL");
        }
        if (data[0] == nullptr && sizes[0] > 0) {
            return misuse("data[0] is NULL with size " + std::to_string(sizes[0]));
        }
        RecvObj* obj = lookup<RecvObj>(HandleKind::kRecv, recv_comm);
        if (obj == nullptr) {
            return misuse("recvComm is not a live recv comm");
        }
        return post(
            *obj,
            [&](transport::Request** req) { return obj->comm->irecv(data[0], sizes[0], req); },
            sizes[0], phandles != nullptr ? phandles[0] : nullptr, request);
    });
}

ncclResult_t iflush(void*, int, void**, int*, void**, void** request) {
    return guarded("iflush", [&]() -> Status {
        if (request != nullptr) {
            *request = nullptr;
        }
        return misuse("iflush is not supported: Atlas only handles host memory (NCCL_PTR_HOST)");
    });
}

ncclResult_t test(void* request, int* done, int* sizes) {
    return guarded("test", [&]() -> Status {
        if (request == nullptr || done == nullptr) {
            return misuse("request or done is NULL");
        }
        *done = 0;
        PluginRequest* r = findRequest(request);
        if (r == nullptr) {
            return misuse(
                "request is not in flight (not returned by isend/irecv, already reported done, "
                "or its comm is closed)");
        }
        bool finished = false;
        size_t size = 0;
        // Stream losses and rejoins reach NCCL's profiler from here, on the comm's own thread.
        r->pool->pollStreamEvents();
        ATLAS_RETURN_IF_ERROR(transport::test(r->inner, &finished, &size));
        if (!finished) {
            return Status::ok();
        }
        r->pool->completed(r, size);
        if (sizes != nullptr) {
            if (size > static_cast<size_t>(INT_MAX)) {
                return misuse("completed size " + std::to_string(size) + " does not fit int");
            }
            sizes[0] = static_cast<int>(size);
        }
        *done = 1;
        return Status::ok();
    });
}

ncclResult_t closeSend(void* send_comm) {
    return closeObj<SendObj>("closeSend", send_comm, HandleKind::kSend);
}
ncclResult_t closeRecv(void* recv_comm) {
    return closeObj<RecvObj>("closeRecv", recv_comm, HandleKind::kRecv);
}
ncclResult_t closeListen(void* listen_comm) {
    return closeObj<ListenObj>("closeListen", listen_comm, HandleKind::kListen);
}

}  // namespace core

namespace seams {

void setFaultHook(FaultHook hook) {
    g_fault_hook.store(hook, std::memory_order_release);
}

void setInterfaceSource(const InterfaceSource* source, const std::string& sysfs_net_root) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_iface_source = source;
    if (g_sysfs_root == nullptr) {
        g_sysfs_root = new std::string();
    }
    *g_sysfs_root = sysfs_net_root;
}

StateSnapshot snapshot() {
    std::lock_guard<std::mutex> lock(g_mutex);
    StateSnapshot s;
    s.live_comms = g_live_comms.load(std::memory_order_acquire);
    if (g_state != nullptr) {
        s.alive = true;
        s.refcount = g_state->refcount;
        s.legacy_ref = g_state->legacy_ref;
        s.live_contexts = static_cast<int>(g_state->contexts.size());
        s.ndevs = static_cast<int>(g_state->devices.size());
    }
    return s;
}

bool unloadNow() {
    return unloadState();
}

}  // namespace seams

}  // namespace atlas::plugin
