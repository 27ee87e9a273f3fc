// The plugin's process-wide state and the helpers every entry point shares (internal; the
// entry points themselves are net_setup.cc and net_data.cc, the state's life cycle is
// state.cc). Contracts: net_impl.h. Lock order: g_mutex, then a Ctx's hints_mu; engine
// threads take neither.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "atlas/common/clock.h"
#include "plugin/bubbles.h"
#include "plugin/comm_stats.h"
#include "plugin/devices.h"
#include "plugin/handle_table.h"
#include "plugin/net_impl.h"
#include "plugin/params.h"
#include "plugin/pending_connects.h"
#include "plugin/requests.h"
#include "plugin/wan/admission.h"
#include "transport/net.h"

namespace atlas::plugin::detail {

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

extern HandleTable g_handles;  // every handle NCCL holds; its own lock (state.cc)

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

// Everything here has a trivial destructor (or is freed explicitly), so the library
// destructor can run before or after C++ static destruction (exit vs dlclose order differs).
extern std::mutex g_mutex;
extern GlobalState* g_state;  // guarded by g_mutex
// Comms NCCL holds open (listen, send, recv): the state is not torn down while any is.
extern std::atomic<int> g_live_comms;
extern std::atomic<seams::FaultHook> g_fault_hook;

inline Status misuse(const std::string& what) {
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

// Hands a connected send or recv comm to NCCL: registered under a new token, its request
// pool bound to that token, counted live, and only then the token written to *out, so NCCL
// never holds a handle the table, the pool or the teardown count does not know yet.
template <typename Obj>
Status handOver(HandleKind kind, std::unique_ptr<Obj> obj, void** out) {
    ATLAS_RETURN_IF_ERROR(addHandle(kind, obj.get()));
    obj->requests->bindHandles(obj->token);
    g_live_comms.fetch_add(1, std::memory_order_acq_rel);
    *out = obj.release()->token;
    return Status::ok();
}

// The context behind NCCL's `ctx` (nullptr for a NULL ctx, which v8..v10 pass), or misuse.
Status findCtxLocked(void* ctx, const Ctx** out);
// The in-flight request behind NCCL's request handle, through its comm's table entry; nullptr
// for anything else (reads only the table and live pools).
PluginRequest* findRequest(const void* handle);
Status requireStateLocked();
Status checkDevLocked(int dev);
// Starts the bubble publisher once (best effort: a failure is logged, never returned).
void startBubblesLocked(GlobalState& st);
// Creates the global state if there is none: registry, devices, engine pool.
Status ensureStateLocked();
// Destroys the state once nothing references it (joins the engine threads, under g_mutex:
// engine threads never take g_mutex).
Status releaseIfUnusedLocked();

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

// isend/irecv after validation: a request entry of the comm's pool wraps the transport's.
// No free entry, or no free transport request: *request stays NULL (back-pressure, NCCL retries).
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

}  // namespace atlas::plugin::detail
