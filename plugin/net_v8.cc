// ncclNet v8 adapter: int message sizes (negative ones are rejected), v8 property struct,
// no context and no finalize (init takes the shared legacy reference; see net_impl.h).
#include "plugin/adapters.h"
#include "plugin/tables.h"

namespace atlas::plugin {
namespace {

ncclResult_t initV8(ncclDebugLogger_t log_fn) {
    return core::initLegacy(log_fn, nullptr);
}

ncclResult_t getPropertiesV8(int dev, ncclNetProperties_v8_t* props) {
    return adapters::getProperties(dev, props, adapters::fillV8);
}

ncclResult_t listenV8(int dev, void* handle, void** listen_comm) {
    return core::listen(nullptr, dev, handle, listen_comm);
}

ncclResult_t connectV8(int dev, void* handle, void** send_comm, ncclNetDeviceHandle_v8_t**) {
    return core::connect(nullptr, dev, nullptr, handle, send_comm);
}

ncclResult_t acceptV8(void* listen_comm, void** recv_comm, ncclNetDeviceHandle_v8_t**) {
    return core::accept(listen_comm, recv_comm);
}

ncclResult_t isendV8(void* send_comm, void* data, int size, int tag, void* mhandle,
                     void** request) {
    if (size < 0) {
        if (request != nullptr) {
            *request = nullptr;
        }
        return core::reject("isend", Code::kInternal, "negative size %d", size);
    }
    return core::isend(send_comm, data, static_cast<size_t>(size), tag, mhandle, nullptr, request);
}

ncclResult_t irecvV8(void* recv_comm, int n, void** data, int* sizes, int* tags, void** mhandles,
                     void** request) {
    if (n != 1 || sizes == nullptr) {
        return core::irecv(recv_comm, n, data, nullptr, tags, mhandles, nullptr,
                           request);  // reports it
    }
    if (sizes[0] < 0) {
        if (request != nullptr) {
            *request = nullptr;
        }
        return core::reject("irecv", Code::kInternal, "negative size %d", sizes[0]);
    }
    size_t size = static_cast<size_t>(sizes[0]);
    return core::irecv(recv_comm, n, data, &size, tags, mhandles, nullptr, request);
}

}  // namespace
}  // namespace atlas::plugin

namespace ap = atlas::plugin;

const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = ap::core::kNetName,
    .init = ap::initV8,
    .devices = ap::core::devices,
    .getProperties = ap::getPropertiesV8,
    .listen = ap::listenV8,
    .connect = ap::connectV8,
    .accept = ap::acceptV8,
    .regMr = ap::core::regMr,
    .regMrDmaBuf = nullptr,  // ptrSupport has no NCCL_PTR_DMABUF
    .deregMr = ap::core::deregMr,
    .isend = ap::isendV8,
    .irecv = ap::irecvV8,
    // Kept non-NULL for NCCL releases that used v8 natively: a stray flush then gets a clear
    // ncclInternalError instead of a NULL call.
    .iflush = ap::core::iflush,
    .test = ap::core::test,
    .closeSend = ap::core::closeSend,
    .closeRecv = ap::core::closeRecv,
    .closeListen = ap::core::closeListen,
    .getDeviceMr = nullptr,    // only for netDeviceType UNPACK
    .irecvConsumed = nullptr,  // idem
};
