// The data-path entry points: regMr, deregMr, isend, irecv, iflush, test and the closes
// (contracts: net_impl.h). isend/irecv/test run on NCCL's proxy progress thread and take no
// lock but the handle table's (lock-free lookups) and their comm's.
#include <climits>
#include <memory>
#include <string>

#include "plugin/state.h"

namespace atlas::plugin::core {

using namespace detail;

ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) {
    return guarded("regMr", [&]() -> Status {
        if (mhandle == nullptr) {
            return misuse("mhandle is NULL");
        }
        *mhandle = nullptr;
        if (type != NCCL_PTR_HOST) {
            return misuse("memory type " + std::to_string(type) +
                          " is not supported (ptrSupport is NCCL_PTR_HOST only)");
        }
        if (data == nullptr && size > 0) {
            return misuse("data is NULL with size " + std::to_string(size));
        }
        if (lookup<SendObj>(HandleKind::kSend, comm) == nullptr &&
            lookup<RecvObj>(HandleKind::kRecv, comm) == nullptr) {
            return misuse("comm is not a live send or recv comm");
        }
        auto mr = std::make_unique<MrHandle>();
        mr->type = type;
        mr->base = data;
        mr->size = size;
        mr->comm = comm;
        auto token = g_handles.add(HandleKind::kMr, mr.get());
        if (!token) {
            return token.status();
        }
        (void)mr.release();
        *mhandle = token.value();
        return Status::ok();
    });
}

ncclResult_t deregMr(void* comm, void* mhandle) {
    return guarded("deregMr", [&]() -> Status {
        if (mhandle == nullptr) {
            return Status::ok();
        }
        auto* mr = static_cast<MrHandle*>(g_handles.remove(HandleKind::kMr, mhandle));
        if (mr == nullptr) {
            return misuse(
                "mhandle is not a live registration (deregistered twice, or not returned by "
                "regMr)");
        }
        delete mr;
        return Status::ok();
    });
}

ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle, void* phandle,
                   void** request) {
    return guarded("isend", [&]() -> Status {
        if (request == nullptr) {
            return misuse("request is NULL");
        }
        *request = nullptr;
        if (data == nullptr && size > 0) {
            return misuse("data is NULL with size " + std::to_string(size));
        }
        if (size > static_cast<size_t>(INT_MAX)) {
            return misuse("size " + std::to_string(size) +
                          " exceeds INT_MAX, which test() cannot report");
        }
        SendObj* obj = lookup<SendObj>(HandleKind::kSend, send_comm);
        if (obj == nullptr) {
            return misuse("sendComm is not a live send comm");
        }
        return post(
            *obj, [&](transport::Request** req) { return obj->comm->isend(data, size, req); }, size,
            phandle, request);
    });
}

ncclResult_t irecv(void* recv_comm, int n, void** data, const size_t* sizes, int* tags,
                   void** mhandles, void** phandles, void** request) {
    return guarded("irecv", [&]() -> Status {
        if (request == nullptr) {
            return misuse("request is NULL");
        }
        // May hold NCCL_NET_OPTIONAL_RECV_COMPLETION on entry: overwritten, never read.
        *request = nullptr;
        // Arguments first, then the comm, so each check is observable on its own.
        if (n != 1) {
            return misuse("n = " + std::to_string(n) + " but maxRecvs is 1");
        }
        if (data == nullptr || sizes == nullptr) {
            return misuse("data or sizes is NULL");
        }
        if (data[0] == nullptr && sizes[0] > 0) {
            return misuse("data[0] is NULL with size " + std::to_string(sizes[0]));
        }
        RecvObj* obj = lookup<RecvObj>(HandleKind::kRecv, recv_comm);
        if (obj == nullptr) {
            return misuse("recvComm is not a live recv comm");
        }
        return post(
            *obj,
            [&](transport::Request** req) { return obj->comm->irecv(data[0], sizes[0], req); },
            sizes[0], phandles != nullptr ? phandles[0] : nullptr, request);
    });
}

ncclResult_t iflush(void*, int, void**, int*, void**, void** request) {
    return guarded("iflush", [&]() -> Status {
        if (request != nullptr) {
            *request = nullptr;
        }
        return misuse("iflush is not supported: Atlas only handles host memory (NCCL_PTR_HOST)");
    });
}

ncclResult_t test(void* request, int* done, int* sizes) {
    return guarded("test", [&]() -> Status {
        if (request == nullptr || done == nullptr) {
            return misuse("request or done is NULL");
        }
        *done = 0;
        PluginRequest* r = findRequest(request);
        if (r == nullptr) {
            return misuse(
                "request is not in flight (not returned by isend/irecv, already reported done, "
                "or its comm is closed)");
        }
        bool finished = false;
        size_t size = 0;
        // Stream losses and rejoins reach NCCL's profiler from here, on the comm's own thread.
        r->pool->pollStreamEvents();
        ATLAS_RETURN_IF_ERROR(transport::test(r->inner, &finished, &size));
        if (!finished) {
            return Status::ok();
        }
        r->pool->completed(r, size);
        if (sizes != nullptr) {
            if (size > static_cast<size_t>(INT_MAX)) {
                return misuse("completed size " + std::to_string(size) + " does not fit int");
            }
            sizes[0] = static_cast<int>(size);
        }
        *done = 1;
        return Status::ok();
    });
}

ncclResult_t closeSend(void* send_comm) {
    return closeObj<SendObj>("closeSend", send_comm, HandleKind::kSend);
}
ncclResult_t closeRecv(void* recv_comm) {
    return closeObj<RecvObj>("closeRecv", recv_comm, HandleKind::kRecv);
}
ncclResult_t closeListen(void* listen_comm) {
    return closeObj<ListenObj>("closeListen", listen_comm, HandleKind::kListen);
}

}  // namespace atlas::plugin::core
