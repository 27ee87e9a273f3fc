// The NCCL rank backend of atlas-nccl-sweep: real collectives on a CUDA device.
//
// NCCL is dlopen'ed (--nccl, default "libnccl.so.2" through the loader), never linked, so the
// tool runs against whichever NCCL the GPU machine has (PyTorch's nvidia-nccl-cu13 wheel)
// and says clearly when there is none. The prototypes come from nccl.h (toolkit or wheel).
// alltoall is grouped ncclSend/ncclRecv, as nccl-tests does it, so any NCCL >= 2.7 works.
// Timing follows nccl-tests: host wall clock around runs launched back to back on one stream,
// completion polled together with the communicator's async errors and the deadline.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "atlas/common/clock.h"
#include "perf/gpu-check/sweep_rank.h"

namespace atlas::gpucheck {
namespace {

// The NCCL entry points the sweep calls, resolved from the loaded library.
struct NcclApi {
    void* handle = nullptr;
    decltype(&ncclGetVersion) getVersion = nullptr;
    decltype(&ncclGetUniqueId) getUniqueId = nullptr;
    decltype(&ncclCommInitRank) commInitRank = nullptr;
    decltype(&ncclCommGetAsyncError) commGetAsyncError = nullptr;
    decltype(&ncclCommFinalize) commFinalize = nullptr;
    decltype(&ncclCommDestroy) commDestroy = nullptr;
    decltype(&ncclCommAbort) commAbort = nullptr;
    decltype(&ncclGetErrorString) getErrorString = nullptr;
    decltype(&ncclGetLastError) getLastError = nullptr;
    decltype(&ncclGroupStart) groupStart = nullptr;
    decltype(&ncclGroupEnd) groupEnd = nullptr;
    decltype(&ncclAllReduce) allReduce = nullptr;
    decltype(&ncclAllGather) allGather = nullptr;
    decltype(&ncclReduceScatter) reduceScatter = nullptr;
    decltype(&ncclSend) send = nullptr;
    decltype(&ncclRecv) recv = nullptr;
};

template <typename F>
bool resolve(void* h, const char* name, F* out) {
    *out = reinterpret_cast<F>(::dlsym(h, name));
    return *out != nullptr;
}

Result<NcclApi> loadNccl(const std::string& lib) {
    NcclApi a;
    a.handle = ::dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (a.handle == nullptr) {
        const char* err = ::dlerror();
        return Status(Code::kUnavailable,
                      "cannot load NCCL '" + lib + "' (" + (err ? err : "?") +
                          "); put the nvidia-nccl wheel's lib/ on LD_LIBRARY_PATH or use --nccl");
    }
    const bool ok = resolve(a.handle, "ncclGetVersion", &a.getVersion) &&
                    resolve(a.handle, "ncclGetUniqueId", &a.getUniqueId) &&
                    resolve(a.handle, "ncclCommInitRank", &a.commInitRank) &&
                    resolve(a.handle, "ncclCommGetAsyncError", &a.commGetAsyncError) &&
                    resolve(a.handle, "ncclCommFinalize", &a.commFinalize) &&
                    resolve(a.handle, "ncclCommDestroy", &a.commDestroy) &&
                    resolve(a.handle, "ncclCommAbort", &a.commAbort) &&
                    resolve(a.handle, "ncclGetErrorString", &a.getErrorString) &&
                    resolve(a.handle, "ncclGetLastError", &a.getLastError) &&
                    resolve(a.handle, "ncclGroupStart", &a.groupStart) &&
                    resolve(a.handle, "ncclGroupEnd", &a.groupEnd) &&
                    resolve(a.handle, "ncclAllReduce", &a.allReduce) &&
                    resolve(a.handle, "ncclAllGather", &a.allGather) &&
                    resolve(a.handle, "ncclReduceScatter", &a.reduceScatter) &&
                    resolve(a.handle, "ncclSend", &a.send) &&
                    resolve(a.handle, "ncclRecv", &a.recv);
    if (!ok) {
        return Status(Code::kUnavailable, "'" + lib + "' lacks an NCCL entry point (NCCL < 2.14?)");
    }
    return a;
}

Status cudaStatus(cudaError_t e, const char* what) {
    if (e == cudaSuccess) {
        return Status::ok();
    }
    const bool no_gpu =
        e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInvalidDevice;
    return Status(no_gpu ? Code::kUnavailable : Code::kSystem,
                  std::string(what) + ": " + cudaGetErrorString(e));
}

double wallSeconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

class NcclBackend final : public RankBackend {
  public:
    NcclBackend(const RankConfig& cfg, NcclApi api) : cfg_(cfg), api_(api) {}
    ~NcclBackend() override { release(); }

    Result<std::string> init() override {
        deadline_ns_ = monotonicNowNs() + static_cast<int64_t>(cfg_.timeout_s) * kNsPerSec;
        ATLAS_RETURN_IF_ERROR(cudaStatus(cudaSetDevice(cfg_.device), "cudaSetDevice"));
        cudaDeviceProp prop{};
        ATLAS_RETURN_IF_ERROR(
            cudaStatus(cudaGetDeviceProperties(&prop, cfg_.device), "cudaGetDeviceProperties"));
        ATLAS_RETURN_IF_ERROR(cudaStatus(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                                         "cudaStreamCreate"));
        ATLAS_RETURN_IF_ERROR(cudaStatus(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming),
                                         "cudaEventCreate"));
        // Buffers for the largest point of any op: nccl-tests allocates once, too.
        size_t count = 0;
        for (Op op : kAllOps) {
            const Geometry g = geometryFor(op, cfg_.max_bytes, cfg_.nranks);
            count = std::max({count, g.send_count, g.recv_count});
        }
        count = std::max<size_t>(count, 1);
        ATLAS_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&send_, count * kElementSize), "cudaMalloc"));
        ATLAS_RETURN_IF_ERROR(cudaStatus(cudaMalloc(&recv_, count * kElementSize), "cudaMalloc"));
        host_.resize(count);
        int version = 0;
        ATLAS_RETURN_IF_ERROR(nccl(api_.getVersion(&version), "ncclGetVersion"));
        ncclUniqueId id;  // derived from NCCL_COMM_ID: identical on both ranks
        ATLAS_RETURN_IF_ERROR(nccl(api_.getUniqueId(&id), "ncclGetUniqueId"));
        ATLAS_RETURN_IF_ERROR(
            nccl(api_.commInitRank(&comm_, cfg_.nranks, id, cfg_.rank), "ncclCommInitRank"));
        Dl_info info{};
        const char* where = ::dladdr(reinterpret_cast<void*>(api_.getVersion), &info) != 0 &&
                                    info.dli_fname != nullptr
                                ? info.dli_fname
                                : cfg_.nccl_lib.c_str();
        return "NCCL " + std::to_string(version / 10000) + "." +
               std::to_string(version / 100 % 100) + "." + std::to_string(version % 100) + " (" +
               where + ") on " + prop.name;
    }

    Result<double> checkRun(Op op, const Geometry& g, uint32_t seed, CheckResult* check) override {
        fillInput(cfg_.rank, seed, std::span<float>(host_.data(), g.send_count));
        ATLAS_RETURN_IF_ERROR(cudaStatus(
            cudaMemcpy(send_, host_.data(), g.send_count * kElementSize, cudaMemcpyHostToDevice),
            "cudaMemcpy"));
        // 0xff bytes are NaN floats: an element the op never wrote fails the check.
        ATLAS_RETURN_IF_ERROR(
            cudaStatus(cudaMemset(recv_, 0xff, std::max<size_t>(g.recv_count, 1) * kElementSize),
                       "cudaMemset"));
        ATLAS_RETURN_IF_ERROR(cudaStatus(cudaDeviceSynchronize(), "cudaDeviceSynchronize"));
        auto s = timedRuns(op, g, 1);
        if (!s) {
            return s;
        }
        ATLAS_RETURN_IF_ERROR(cudaStatus(
            cudaMemcpy(host_.data(), recv_, g.recv_count * kElementSize, cudaMemcpyDeviceToHost),
            "cudaMemcpy"));
        *check = checkOutput(op, g, cfg_.rank, cfg_.nranks, seed,
                             std::span<const float>(host_.data(), g.recv_count));
        return s;
    }

    Result<double> timedRuns(Op op, const Geometry& g, int iters) override {
        if (iters <= 0 || g.bytes() == 0) {
            return 0.0;  // nothing to move (reduce_scatter's smallest points)
        }
        const double t0 = wallSeconds();
        for (int i = 0; i < iters; ++i) {
            ATLAS_RETURN_IF_ERROR(launch(op, g));
        }
        ATLAS_RETURN_IF_ERROR(waitStream(op));
        return (wallSeconds() - t0) / iters;
    }

    Status finish() override {
        if (comm_ != nullptr) {
            ATLAS_RETURN_IF_ERROR(nccl(api_.commFinalize(comm_), "ncclCommFinalize"));
            ATLAS_RETURN_IF_ERROR(nccl(api_.commDestroy(comm_), "ncclCommDestroy"));
            comm_ = nullptr;
        }
        release();
        return Status::ok();
    }

    void abort() override {
        if (comm_ != nullptr) {
            api_.commAbort(comm_);
            comm_ = nullptr;
        }
    }

  private:
    Status nccl(ncclResult_t rc, const char* what) {
        if (rc == ncclSuccess) {
            return Status::ok();
        }
        std::string detail = comm_ != nullptr ? api_.getLastError(comm_) : "";
        return Status(rc == ncclSystemError ? Code::kSystem : Code::kRemote,
                      std::string(what) + ": " + api_.getErrorString(rc) +
                          (detail.empty() ? "" : " (" + detail + ")"));
    }

    Status launch(Op op, const Geometry& g) {
        const size_t c = g.param_count;
        const int n = cfg_.nranks;
        const int r = cfg_.rank;
        auto* sb = static_cast<char*>(send_);
        auto* rb = static_cast<char*>(recv_);
        switch (op) {
            case Op::kAllReduce:
                return nccl(api_.allReduce(sb, rb, c, ncclFloat32, ncclSum, comm_, stream_),
                            "ncclAllReduce");
            case Op::kAllGather:
                return nccl(api_.allGather(sb, rb, c, ncclFloat32, comm_, stream_),
                            "ncclAllGather");
            case Op::kReduceScatter:
                return nccl(api_.reduceScatter(sb, rb, c, ncclFloat32, ncclSum, comm_, stream_),
                            "ncclReduceScatter");
            case Op::kSendRecv:
                ATLAS_RETURN_IF_ERROR(nccl(api_.groupStart(), "ncclGroupStart"));
                ATLAS_RETURN_IF_ERROR(
                    nccl(api_.send(sb, c, ncclFloat32, (r + 1) % n, comm_, stream_), "ncclSend"));
                ATLAS_RETURN_IF_ERROR(nccl(
                    api_.recv(rb, c, ncclFloat32, (r - 1 + n) % n, comm_, stream_), "ncclRecv"));
                return nccl(api_.groupEnd(), "ncclGroupEnd");
            case Op::kAllToAll: {
                const size_t block = c * kElementSize;
                ATLAS_RETURN_IF_ERROR(nccl(api_.groupStart(), "ncclGroupStart"));
                for (int p = 0; p < n; ++p) {
                    ATLAS_RETURN_IF_ERROR(nccl(
                        api_.send(sb + p * block, c, ncclFloat32, p, comm_, stream_), "ncclSend"));
                    ATLAS_RETURN_IF_ERROR(nccl(
                        api_.recv(rb + p * block, c, ncclFloat32, p, comm_, stream_), "ncclRecv"));
                }
                return nccl(api_.groupEnd(), "ncclGroupEnd");
            }
        }
        return Status(Code::kInternal, "unknown op");
    }

    // Polls the stream's completion, the communicator's async error and the deadline; past
    // the deadline the communicator is aborted (the peer may be gone).
    Status waitStream(Op op) {
        ATLAS_RETURN_IF_ERROR(cudaStatus(cudaEventRecord(done_, stream_), "cudaEventRecord"));
        for (;;) {
            const cudaError_t e = cudaEventQuery(done_);
            if (e == cudaSuccess) {
                return Status::ok();
            }
            if (e != cudaErrorNotReady) {
                return cudaStatus(e, opName(op));
            }
            ncclResult_t async = ncclSuccess;
            ATLAS_RETURN_IF_ERROR(
                nccl(api_.commGetAsyncError(comm_, &async), "ncclCommGetAsyncError"));
            if (async != ncclSuccess && async != ncclInProgress) {
                return nccl(async, opName(op));
            }
            if (monotonicNowNs() > deadline_ns_) {
                abort();
                return Status(Code::kTimeout, std::string(opName(op)) +
                                                  " not finished at the deadline (--timeout)");
            }
            ::sched_yield();
        }
    }

    void release() {
        if (send_ != nullptr) {
            cudaFree(send_);
            send_ = nullptr;
        }
        if (recv_ != nullptr) {
            cudaFree(recv_);
            recv_ = nullptr;
        }
        if (done_ != nullptr) {
            cudaEventDestroy(done_);
            done_ = nullptr;
        }
        if (stream_ != nullptr) {
            cudaStreamDestroy(stream_);
            stream_ = nullptr;
        }
    }

    RankConfig cfg_;
    NcclApi api_;
    int64_t deadline_ns_ = 0;
    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t done_ = nullptr;
    void* send_ = nullptr;
    void* recv_ = nullptr;
    std::vector<float> host_;
};

}  // namespace

Result<std::unique_ptr<RankBackend>> makeNcclBackend(const RankConfig& cfg) {
    auto api = loadNccl(cfg.nccl_lib);
    if (!api) {
        return api.status();
    }
    return std::unique_ptr<RankBackend>(new NcclBackend(cfg, api.value()));
}

}  // namespace atlas::gpucheck
