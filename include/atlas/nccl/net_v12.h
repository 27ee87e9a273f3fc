// ncclNet v12 (NCCL 2.30 and 2.31, the newest table they look for): the function table is the
// v11 one, field for field. Only the structs changed:
//  - a vNIC fuses up to NCCL_NET_MAX_DEVS_PER_NIC_V12 = 8 devices (v11: 4), so vProps is 36
//    bytes and every property after it moves (maxP2pBytes from offset 88 to 104);
//  - the properties end with railId and planeId (int16_t), NCCL_NET_ID_UNDEF when unknown.
// Written from the ABI description in the design notes (nccl-net-abi.md section 8); net.h
// pins the sizes and offsets, which match NCCL's own net_v12.h.
#pragma once

#include "atlas/nccl/types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NCCL_NET_MAX_DEVS_PER_NIC_V12 8
// railId / planeId value for "not known".
#define NCCL_NET_ID_UNDEF -1

typedef struct {
    int ndevs;
    int devs[NCCL_NET_MAX_DEVS_PER_NIC_V12];
} ncclNetVDeviceProps_v12_t;

typedef struct {
    int trafficClass;  // NCCL_NET_TRAFFIC_CLASS_UNDEF when unset (ncclConfig_t.trafficClass)
} ncclNetCommConfig_v12_t;

typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_v12_t;

typedef struct {
    char* name;
    char* pciPath;
    uint64_t guid;
    int ptrSupport;
    int regIsGlobal;
    int forceFlush;
    int speed;  // Mbit/s
    int port;
    float latency;  // us
    int maxComms;
    int maxRecvs;
    ncclNetDeviceType netDeviceType;
    int netDeviceVersion;
    ncclNetVDeviceProps_v12_t vProps;
    size_t maxP2pBytes;
    size_t maxCollBytes;
    int maxMultiRequestSize;
    int16_t railId;   // NCCL_NET_ID_UNDEF unless the rail of this NIC is known
    int16_t planeId;  // NCCL_NET_ID_UNDEF unless the network plane is known
} ncclNetProperties_v12_t;

// Same layout as v11 (see net_v11.h); every field may be NCCL_NET_ATTR_UNDEF.
typedef struct {
    int32_t maxConcurrentPeers;
    int32_t minConcurrentPeers;
    int32_t maxFlowsPerPeer;
    int32_t minFlowsPerPeer;
} ncclNetCommAttr_v12_t;

typedef struct {
    ncclNetCommAttr_v12_t sendCommAttr;
    ncclNetCommAttr_v12_t recvCommAttr;
    uint32_t op;     // bitmask of ncclFunc_t (bit 6 Send, bit 7 Recv, ...)
    uint32_t algo;   // bitmask of NCCL algorithms; UNDEF for point-to-point
    uint32_t proto;  // bitmask of NCCL protocols; UNDEF for point-to-point
} ncclNetAttr_v12_t;

typedef struct {
    const char* name;
    ncclResult_t (*init)(void** ctx, uint64_t commId, ncclNetCommConfig_v12_t* config,
                         ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
    ncclResult_t (*devices)(int* ndev);
    ncclResult_t (*getProperties)(int dev, ncclNetProperties_v12_t* props);
    ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
    ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm,
                            ncclNetDeviceHandle_v12_t** sendDevComm);
    ncclResult_t (*accept)(void* listenComm, void** recvComm,
                           ncclNetDeviceHandle_v12_t** recvDevComm);
    ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
    ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset,
                                int fd, void** mhandle);
    ncclResult_t (*deregMr)(void* comm, void* mhandle);
    ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                          void* phandle, void** request);
    ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                          void** mhandles, void** phandles, void** request);
    ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                           void** request);
    ncclResult_t (*test)(void* request, int* done, int* sizes);
    ncclResult_t (*closeSend)(void* sendComm);
    ncclResult_t (*closeRecv)(void* recvComm);
    ncclResult_t (*closeListen)(void* listenComm);
    ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptr_mhandle);
    ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
    ncclResult_t (*makeVDevice)(int* d, ncclNetVDeviceProps_v12_t* props);
    ncclResult_t (*finalize)(void* ctx);
    ncclResult_t (*setNetAttr)(void* ctx, ncclNetAttr_v12_t* netAttr);
} ncclNet_v12_t;

#ifdef __cplusplus
}  // extern "C"
#endif
