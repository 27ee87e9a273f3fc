// ncclNet v9 adapter: size_t message sizes, v9 property struct (vProps, max*Bytes), no
// context and no finalize (init takes the shared legacy reference; see net_impl.h).
#include "plugin/adapters.h"
#include "plugin/tables.h"

namespace atlas::plugin {
namespace {

ncclResult_t initV9(ncclDebugLogger_t log_fn) {
    return core::initLegacy(log_fn, nullptr);
}

ncclResult_t getPropertiesV9(int dev, ncclNetProperties_v9_t* props) {
    return adapters::getProperties(dev, props, adapters::fillV9Plus<ncclNetProperties_v9_t>);
}

ncclResult_t listenV9(int dev, void* handle, void** listen_comm) {
    return core::listen(nullptr, dev, handle, listen_comm);
}

ncclResult_t connectV9(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v9_t**) {
    return core::connect(nullptr, dev, nullptr, handle, send_comm);
}

ncclResult_t acceptV9(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v9_t**) {
    return core::accept(listen_comm, recv_comm);
}

ncclResult_t isendV9(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                     void** request) {
    return core::isend(send_comm, data, size, tag, mhandle, nullptr, request);
}

ncclResult_t irecvV9(void* recv_comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** request) {
    return core::irecv(recv_comm, n, data, sizes, tags, mhandles, nullptr, request);
}

}  // namespace
}  // namespace atlas::plugin

namespace ap = atlas::plugin;

const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = ap::core::kNetName,
    .init = ap::initV9,
    .devices = ap::core::devices,
    .getProperties = ap::getPropertiesV9,
    .listen = ap::listenV9,
    .connect = ap::connectV9,
    .accept = ap::acceptV9,
    .regMr = ap::core::regMr,
    .regMrDmaBuf = nullptr,  // ptrSupport has no NCCL_PTR_DMABUF
    .deregMr = ap::core::deregMr,
    .isend = ap::isendV9,
    .irecv = ap::irecvV9,
    .iflush = ap::core::iflush,  // non-NULL on purpose, see net_v8.cc
    .test = ap::core::test,
    .closeSend = ap::core::closeSend,
    .closeRecv = ap::core::closeRecv,
    .closeListen = ap::core::closeListen,
    .getDeviceMr = nullptr,    // only for netDeviceType UNPACK
    .irecvConsumed = nullptr,  // idem
    .makeVDevice = nullptr,    // no NIC fusion: NCCL uses the physical devices
};
