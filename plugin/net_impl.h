// The one implementation behind every ncclNet version table (net_v8.cc ... net_v12.cc).
//
// Each function here is a firewall for one exported entry point: it validates its arguments,
// runs the body inside try/catch(...), maps the internal Status to ncclResult_t
// (toNcclResult), and logs a failure once, as a WARN through NCCL's logger. With
// ATLAS_ABORT_ON_ERROR=1 the first failure abort()s instead. The adapters only convert
// argument types (int vs size_t sizes, property structs, where the traffic class comes from).
//
// Lifecycle. Global state (parsed ATLAS_* registry, devices, the transport's engine pool) is
// created by the first successful init and reference-counted:
//  - v11: init runs once per communicator and returns a small context (commId,
//    trafficClass); finalize(ctx) drops that reference; the last one destroys the Transport,
//    which joins every engine thread (NCCL may dlclose right after). finalize(NULL) and a
//    finalize of a context that init never returned are tolerated. A last finalize while
//    comms are still open (NCCL misuse) is reported and keeps the engines alive; closing the
//    last comm then completes the teardown.
//  - v8..v10: there is no finalize. Their init takes one shared "legacy" reference (later
//    legacy inits only refresh the logger); the library destructor releases it at dlclose or
//    exit and tears the state down when no comm is left open.
//
// Threads: NCCL calls init/devices/getProperties from application threads, listen/connect/
// accept/regMr/deregMr from proxy service threads and isend/irecv/test from proxy progress
// threads, several GPUs/communicators concurrently. Global state is guarded by one mutex that
// is never held on the data path; a given comm is used by one thread at a time (NCCL's
// contract). No function here blocks, except close*, which waits (bounded by
// ATLAS_TIMEOUT_MS) for the owner engine thread to drop the comm.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "atlas/common/status.h"
#include "atlas/nccl/net.h"
#include "plugin/net_hints.h"

namespace atlas::plugin {

class InterfaceSource;

// Status code -> ncclResult_t (kSystem/kUnavailable -> ncclSystemError, kInternal ->
// ncclInternalError, kInvalidArgument -> ncclInvalidArgument, kInvalidUsage ->
// ncclInvalidUsage, kRemote/kTimeout -> ncclRemoteError, kOk -> ncclSuccess).
ncclResult_t toNcclResult(Code code);

// Version-independent device properties; the adapters copy what their struct has.
struct NetProperties {
    const char* name = nullptr;      // interface name; valid for the process lifetime
    const char* pci_path = nullptr;  // NULL for a virtual NIC; valid for the process lifetime
    uint64_t guid = 0;
    int ptr_support = NCCL_PTR_HOST;
    int reg_is_global = 0;
    int force_flush = 0;
    int speed_mbps = 0;
    int port = 0;
    float latency_us = 0;
    int max_comms = 0;
    int max_recvs = 0;
    ncclNetDeviceType net_device_type = NCCL_NET_DEVICE_HOST;
    int net_device_version = NCCL_NET_DEVICE_INVALID_VERSION;
    int vdev_count = 1;  // vProps = {1, {dev}}
    int vdev = 0;
    size_t max_p2p_bytes = 0;
    size_t max_coll_bytes = 0;
    int max_multi_request_size = 1;
    int16_t rail_id = NCCL_NET_ID_UNDEF;   // v12: no rail/plane topology is known for a NIC
    int16_t plane_id = NCCL_NET_ID_UNDEF;  // found by interface discovery
};

constexpr size_t kMaxCollBytes = 512ull << 20;  // NCCL's MAX_COLLNET_SIZE
constexpr int kMaxComms = 65536;

namespace core {

constexpr const char* kNetName = "Atlas";

// v11/v12 init: *ctx receives a new context (set to NULL first, so a failed init leaves NULL).
// prof_fn (v10+; NCCL always passes one): where request events go (plugin/requests.h).
ncclResult_t init(void** ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t log_fn,
                  ncclProfilerCallback_t prof_fn);
// v8..v10 init: the shared legacy reference.
ncclResult_t initLegacy(ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn);
ncclResult_t finalize(void* ctx);

// v11/v12 setNetAttr: NCCL's hints about the transfers that follow on ctx's comms, recorded
// per context (plugin/net_hints.h). NULL hints are an error; a NULL ctx (v8..v10 never call
// it) too.
ncclResult_t setNetAttr(void* ctx, const NetHints* hints);

ncclResult_t devices(int* ndev);
ncclResult_t getProperties(int dev, NetProperties* props);

// ctx: the v11 context, or NULL on the v8..v10 paths. traffic_class: v10 passes the one from
// its connect config; NULL means "take it from ctx" (v11) or undefined (v8/v9).
ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm);
ncclResult_t connect(void* ctx, int dev, const int* traffic_class, void* handle, void** send_comm);
ncclResult_t accept(void* listen_comm, void** recv_comm);

// HOST memory only; the handle records base/size and must be released with deregMr.
ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle);
ncclResult_t deregMr(void* comm, void* mhandle);

// *request = NULL with ncclSuccess means "no free request now, retry" (back-pressure). Sizes above
// INT_MAX are rejected because test() reports sizes as int in every ABI version.
// phandle (v10+, else NULL): NCCL's profiler parent of this request's event.
ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request);
// n must be 1 (maxRecvs = 1). *request may arrive as NCCL_NET_OPTIONAL_RECV_COMPLETION; it is
// ignored and overwritten with the real request or NULL. phandles: as isend's phandle.
ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, int* tags,
                   void** mhandles, void** phandles, void** request);
// Host memory never needs a flush: always ncclInternalError.
ncclResult_t iflush(void* recv_comm, int n, void** data, int* sizes, void** mhandles,
                    void** request);
// *done = 1 exactly once; then sizes[0] (if sizes != NULL) holds the byte count and the
// request must not be tested again.
ncclResult_t test(void* request, int* done, int* sizes);

// NULL is accepted (nothing to close). The comm is freed even when closing reports an error.
ncclResult_t closeSend(void* send_comm);
ncclResult_t closeRecv(void* recv_comm);
ncclResult_t closeListen(void* listen_comm);

// For adapter-level validation (e.g. negative v8 sizes), and the firewall's own reporting:
// logs the printf-style message once as a failure of `func` (aborting instead when
// ATLAS_ABORT_ON_ERROR is set) and returns toNcclResult(code). Never throws or allocates.
__attribute__((format(printf, 3, 4))) ncclResult_t reject(const char* func, Code code,
                                                          const char* fmt, ...) noexcept;

}  // namespace core

// Test seams: compiled into the internal library, unreachable from NCCL (not exported).
namespace seams {
// Called at the start of every firewall body with the entry point's name; a hook may throw
// to exercise the exception path. nullptr disables it.
using FaultHook = void (*)(const char* func);
void setFaultHook(FaultHook hook);
// Replaces getifaddrs (nullptr = the system) and the sysfs root ("" = /sys/class/net) used
// by the next state creation (first init). The source must outlive that init.
void setInterfaceSource(const InterfaceSource* source, const std::string& sysfs_net_root);

struct StateSnapshot {
    bool alive = false;       // global state exists
    int refcount = 0;         // live v11 contexts + the legacy reference
    bool legacy_ref = false;  // a v8..v10 init holds a reference
    int live_contexts = 0;
    int live_comms = 0;  // listen + send + recv comms handed to NCCL and not closed
    int ndevs = 0;
};
StateSnapshot snapshot();
// What the library destructor does at dlclose/exit; returns true if the state is gone.
bool unloadNow();
}  // namespace seams

}  // namespace atlas::plugin
