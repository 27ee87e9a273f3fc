// ncclNet v11 adapter (NCCL 2.28 and 2.29 use this table directly, with no shim): init runs
// per communicator and returns a context holding commId and trafficClass; listen/connect take
// that context; finalize(ctx) is mandatory and releases it; setNetAttr records NCCL's hints
// on it (see net_impl.h, net_hints.h).
#include "plugin/adapters.h"
#include "plugin/tables.h"

namespace atlas::plugin {
namespace {

ncclResult_t initV11(void** ctx, uint64_t comm_id, ncclNetCommConfig_v11_t* config,
                     ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn) {
    int traffic_class = config != nullptr ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
    return core::init(ctx, comm_id, traffic_class, log_fn, prof_fn);
}

ncclResult_t getPropertiesV11(int dev, ncclNetProperties_v11_t* props) {
    return adapters::getProperties(dev, props, [](const NetProperties& p, auto* out) {
        adapters::fillV9Plus(p, out);
        out->maxMultiRequestSize = p.max_multi_request_size;
    });
}

ncclResult_t connectV11(void* ctx, int dev, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v11_t**) {
    return core::connect(ctx, dev, nullptr, handle, send_comm);
}

ncclResult_t acceptV11(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v11_t**) {
    return core::accept(listen_comm, recv_comm);
}

ncclResult_t setNetAttrV11(void* ctx, ncclNetAttr_v11_t* attr) {
    return adapters::setNetAttr(ctx, attr);
}

}  // namespace
}  // namespace atlas::plugin

namespace ap = atlas::plugin;

const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = ap::core::kNetName,
    .init = ap::initV11,
    .devices = ap::core::devices,
    .getProperties = ap::getPropertiesV11,
    .listen = ap::core::listen,
    .connect = ap::connectV11,
    .accept = ap::acceptV11,
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
    .setNetAttr = ap::setNetAttrV11,
};
