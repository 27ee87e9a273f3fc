// ncclNet v12 adapter (NCCL 2.30 and 2.31 look for this table first and use it directly):
// the v11 functions over the v12 structs. Properties: vProps has room for 8 devices (Atlas
// fills one), railId and planeId are NCCL_NET_ID_UNDEF (no rail/plane topology is known for
// an Ethernet interface). setNetAttr takes the v12 attribute struct (same layout as v11).
#include "plugin/adapters.h"
#include "plugin/tables.h"

namespace atlas::plugin {
namespace {

ncclResult_t initV12(void** ctx, uint64_t comm_id, ncclNetCommConfig_v12_t* config,
                     ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn) {
    int traffic_class = config != nullptr ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
    return core::init(ctx, comm_id, traffic_class, log_fn, prof_fn);
}

ncclResult_t getPropertiesV12(int dev, ncclNetProperties_v12_t* props) {
    return adapters::getProperties(dev, props, [](const NetProperties& p, auto* out) {
        adapters::fillV9Plus(p, out);
        out->maxMultiRequestSize = p.max_multi_request_size;
        out->railId = p.rail_id;
        out->planeId = p.plane_id;
    });
}

ncclResult_t connectV12(void* ctx, int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v12_t**) {
    return core::connect(ctx, dev, nullptr, handle, send_comm);
}

ncclResult_t acceptV12(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v12_t**) {
    return core::accept(listen_comm, recv_comm);
}

ncclResult_t setNetAttrV12(void* ctx, ncclNetAttr_v12_t* attr) {
    return adapters::setNetAttr(ctx, attr);
}

}  // namespace
}  // namespace atlas::plugin

namespace ap = atlas::plugin;

const ncclNet_v12_t ncclNetPlugin_v12 = {
    .name = ap::core::kNetName,
    .init = ap::initV12,
    .devices = ap::core::devices,
    .getProperties = ap::getPropertiesV12,
    .listen = ap::core::listen,
    .connect = ap::connectV12,
    .accept = ap::acceptV12,
    .regMr = ap::core::regMr,
    .regMrDmaBuf = nullptr,  // ptrSupport has no NCCL_PTR_DMABUF
    .deregMr = ap::core::deregMr,
    .isend = ap::adapters::isendV10,
    .irecv = ap::adapters::irecvV10,
    .iflush = ap::core::iflush,  // non-NULL on purpose, see net_v8.cc
    .test = ap::core::test,
    .closeSend = ap::core::closeSend,
    .closeRecv = ap::core::closeRecv,
    .closeListen = ap::core::closeListen,
    .getDeviceMr = nullptr,    // only for netDeviceType UNPACK
    .irecvConsumed = nullptr,  // idem
    .makeVDevice = nullptr,    // no NIC fusion: NCCL uses the physical devices
    .finalize = ap::core::finalize,
    .setNetAttr = ap::setNetAttrV12,
};
