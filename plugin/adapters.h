// Helpers shared by the per-version adapters (net_v8.cc ... net_v11.cc). Internal to plugin/.
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

// v9, v10 and v11 share this prefix (v11 appends maxMultiRequestSize).
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

}  // namespace atlas::plugin::adapters
