// ncclNet v10 adapter: like v9, plus the profiler callback in init, the traffic class in
// connect's config, and the profiler handles in isend/irecv (the parents of Atlas's request
// events, plugin/requests.h). No context and no finalize (see net_impl.h).
#include "plugin/adapters.h"
#include "plugin/tables.h"

namespace atlas::plugin {
namespace {

ncclResult_t initV10(ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn) {
    return core::initLegacy(log_fn, prof_fn);
}

ncclResult_t getPropertiesV10(int dev, ncclNetProperties_v10_t* props) {
    return adapters::getProperties(dev, props, adapters::fillV9Plus<ncclNetProperties_v10_t>);
}

ncclResult_t listenV10(int dev, void* handle, void** listen_comm) {
    return core::listen(nullptr, dev, handle, listen_comm);
}

ncclResult_t connectV10(int dev, ncclNetCommConfig_v10_t* config, void* handle, void** send_comm,
                        ncclNetDeviceHandle_v10_t**) {
    return core::connect(nullptr, dev, config != nullptr ? &config->trafficClass : nullptr, handle,
                         send_comm);
}

ncclResult_t acceptV10(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v10_t**) {
    return core::accept(listen_comm, recv_comm);
}

}  // namespace
}  // namespace atlas::plugin

namespace ap = atlas::plugin;

const ncclNet_v10_t ncclNetPlugin_v10 = {
    .name = ap::core::kNetName,
    .init = ap::initV10,
    .devices = ap::core::devices,
    .getProperties = ap::getPropertiesV10,
    .listen = ap::listenV10,
    .connect = ap::connectV10,
    .accept = ap::acceptV10,
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
};
