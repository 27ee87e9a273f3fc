// Helpers shared by the per-version adapters (net_v8.cc ... net_v12.cc). Internal to plugin/.
// Like NCCL's own shims and aws-ofi-nccl, a table reuses the entry of the earliest version
// whose signature it shares (v10, v11 and v12 share isendV10/irecvV10).
#pragma once

#include <cstring>

#include "plugin/net_impl.h"

namespace atlas::plugin::adapters {

// Copies the fields v8 has. The struct is zeroed first so padding never leaks stack bytes.
inline void fillV8(const NetProperties& p, ncclNetProperties_v8_t* out) {
    std::memset(out, 0, sizeof(*out));
    out->name = const_cast<char*>(p.name);
    out->pciPath = const_cast<char*>(p.pci_path);
    out->guid = p.guid;
    out->ptrSupport = p.ptr_support;
    out->regIsGlobal = p.reg_is_global;
    out->speed = p.speed_mbps;
    out->port = p.port;
    out->latency = p.latency_us;
    out->maxComms = p.max_comms;
    out->maxRecvs = p.max_recvs;
    out->netDeviceType = p.net_device_type;
    out->netDeviceVersion = p.net_device_version;
}

// v9..v12 share this prefix (v11 appends maxMultiRequestSize, v12 railId and planeId). The
// vProps array is 4 devices up to v11 and 8 in v12; Atlas fills one.
template <typename Props>
void fillV9Plus(const NetProperties& p, Props* out) {
    std::memset(out, 0, sizeof(*out));
    out->name = const_cast<char*>(p.name);
    out->pciPath = const_cast<char*>(p.pci_path);
    out->guid = p.guid;
    out->ptrSupport = p.ptr_support;
    out->regIsGlobal = p.reg_is_global;
    out->forceFlush = p.force_flush;
    out->speed = p.speed_mbps;
    out->port = p.port;
    out->latency = p.latency_us;
    out->maxComms = p.max_comms;
    out->maxRecvs = p.max_recvs;
    out->netDeviceType = p.net_device_type;
    out->netDeviceVersion = p.net_device_version;
    out->vProps.ndevs = p.vdev_count;
    out->vProps.devs[0] = p.vdev;
    out->maxP2pBytes = p.max_p2p_bytes;
    out->maxCollBytes = p.max_coll_bytes;
}

// getProperties for any version: NULL props is reported through the firewall by the core.
template <typename Props, typename Fill>
ncclResult_t getProperties(int dev, Props* out, Fill fill) {
    if (out == nullptr) {
        return core::getProperties(dev, nullptr);
    }
    NetProperties p;
    ncclResult_t rc = core::getProperties(dev, &p);
    if (rc == ncclSuccess) {
        fill(p, out);
    }
    return rc;
}

// v10+ isend/irecv (same signature in v10, v11 and v12).
inline ncclResult_t isendV10(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                             void* phandle, void** request) {
    return core::isend(send_comm, data, size, tag, mhandle, phandle, request);
}

inline ncclResult_t irecvV10(void* recv_comm, int n, void** data, size_t* sizes, int* tags,
                             void** mhandles, void** phandles, void** request) {
    return core::irecv(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
}

// v11/v12 setNetAttr: the two attribute structs have one layout (checked in net.h).
template <typename Attr>
ncclResult_t setNetAttr(void* ctx, const Attr* attr) {
    if (attr == nullptr) {
        return core::setNetAttr(ctx, nullptr);
    }
    NetHints h;
    h.send = {attr->sendCommAttr.maxConcurrentPeers, attr->sendCommAttr.minConcurrentPeers,
              attr->sendCommAttr.maxFlowsPerPeer, attr->sendCommAttr.minFlowsPerPeer};
    h.recv = {attr->recvCommAttr.maxConcurrentPeers, attr->recvCommAttr.minConcurrentPeers,
              attr->recvCommAttr.maxFlowsPerPeer, attr->recvCommAttr.minFlowsPerPeer};
    h.op = attr->op;
    h.algo = attr->algo;
    h.proto = attr->proto;
    return core::setNetAttr(ctx, &h);
}

}  // namespace atlas::plugin::adapters
