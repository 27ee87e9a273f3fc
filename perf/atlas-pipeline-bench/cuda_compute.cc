// The CUDA compute backend: cuBLAS GEMMs on one stream, timed with CUDA events for the
// calibration, waited for with an event at the end of each period.
#include "perf/atlas-pipeline-bench/cuda_compute.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>

namespace atlas::pipebench {
namespace {

constexpr int kN = 2048;  // ~17 GFLOP per GEMM: tens of microseconds on an H100/H200

Status cudaOk(cudaError_t e, const char* what) {
    if (e == cudaSuccess) {
        return Status::ok();
    }
    return Status(Code::kSystem,
                  std::string("--compute cuda: ") + what + ": " + cudaGetErrorString(e));
}

Status cublasOk(cublasStatus_t s, const char* what) {
    if (s == CUBLAS_STATUS_SUCCESS) {
        return Status::ok();
    }
    return Status(Code::kSystem, std::string("--compute cuda: ") + what +
                                     " failed (cuBLAS status " +
                                     std::to_string(static_cast<int>(s)) + ")");
}

class CublasCompute final : public CudaCompute {
  public:
    ~CublasCompute() override {
        if (handle_ != nullptr) {
            cublasDestroy(handle_);
        }
        for (void* p : {a_, b_, c_}) {
            if (p != nullptr) {
                cudaFree(p);
            }
        }
        for (cudaEvent_t e : {start_, stop_}) {
            if (e != nullptr) {
                cudaEventDestroy(e);
            }
        }
        if (stream_ != nullptr) {
            cudaStreamDestroy(stream_);
        }
    }

    Status init(int device, double ns_per_gemm) {
        int count = 0;
        const cudaError_t e = cudaGetDeviceCount(&count);
        if (e != cudaSuccess || count == 0) {
            return Status(Code::kUnavailable,
                          std::string("--compute cuda: no CUDA device (cudaGetDeviceCount: ") +
                              (e == cudaSuccess ? "0 devices" : cudaGetErrorString(e)) + ")");
        }
        if (device >= count) {
            return Status(Code::kUnavailable, "--compute cuda: device " + std::to_string(device) +
                                                  " but only " + std::to_string(count) + " found");
        }
        ATLAS_RETURN_IF_ERROR(cudaOk(cudaSetDevice(device), "cudaSetDevice"));
        cudaDeviceProp prop{};
        ATLAS_RETURN_IF_ERROR(cudaOk(cudaGetDeviceProperties(&prop, device), "properties"));
        name_ = prop.name;
        ATLAS_RETURN_IF_ERROR(
            cudaOk(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream"));
        ATLAS_RETURN_IF_ERROR(cudaOk(cudaEventCreate(&start_), "event"));
        ATLAS_RETURN_IF_ERROR(cudaOk(cudaEventCreate(&stop_), "event"));
        const size_t bytes = static_cast<size_t>(kN) * kN * 2;  // bf16
        for (void** p : {&a_, &b_, &c_}) {
            ATLAS_RETURN_IF_ERROR(cudaOk(cudaMalloc(p, bytes), "cudaMalloc"));
            // 0x3c3c is bf16 ~0.0115: finite products, no denormals or overflow.
            ATLAS_RETURN_IF_ERROR(cudaOk(cudaMemset(*p, 0x3c, bytes), "cudaMemset"));
        }
        ATLAS_RETURN_IF_ERROR(cublasOk(cublasCreate(&handle_), "cublasCreate"));
        ATLAS_RETURN_IF_ERROR(cublasOk(cublasSetStream(handle_, stream_), "cublasSetStream"));
        ATLAS_RETURN_IF_ERROR(cudaOk(cudaDeviceSynchronize(), "synchronize"));
        if (ns_per_gemm > 0) {
            cal_.ns_per_gemm = ns_per_gemm;
            return Status::ok();
        }
        auto c = calibrateGemms([this](int n) { return timeBatch(n); });
        if (!c) {
            return c.status();
        }
        cal_ = c.value();
        calibrated_ = true;
        return Status::ok();
    }

    Status run(Nanos period_ns) override {
        const int64_t n = gemmsFor(period_ns, cal_.ns_per_gemm);
        for (int64_t i = 0; i < n; ++i) {
            ATLAS_RETURN_IF_ERROR(gemm());
        }
        ATLAS_RETURN_IF_ERROR(cudaOk(cudaEventRecord(stop_, stream_), "cudaEventRecord"));
        return cudaOk(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    }

    double nsPerGemm() const override { return cal_.ns_per_gemm; }

    std::string describe() const override {
        char buf[256];
        if (calibrated_) {
            std::snprintf(buf, sizeof(buf),
                          "%s, %d^3 bf16 GEMM %.1f us (calibrated: %d x %d, spread %.1f%%)",
                          name_.c_str(), kN, cal_.ns_per_gemm / 1e3, cal_.samples, cal_.batch,
                          cal_.spread * 100);
        } else {
            std::snprintf(buf, sizeof(buf), "%s, %d^3 bf16 GEMM %.1f us (given)", name_.c_str(), kN,
                          cal_.ns_per_gemm / 1e3);
        }
        return buf;
    }

  private:
    Status gemm() {
        const float alpha = 1.0f;
        const float beta = 0.0f;
        return cublasOk(cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, kN, kN, kN, &alpha, a_,
                                     CUDA_R_16BF, kN, b_, CUDA_R_16BF, kN, &beta, c_, CUDA_R_16BF,
                                     kN, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                        "cublasGemmEx");
    }

    Result<Nanos> timeBatch(int n) {
        ATLAS_RETURN_IF_ERROR(cudaOk(cudaEventRecord(start_, stream_), "cudaEventRecord"));
        for (int i = 0; i < n; ++i) {
            ATLAS_RETURN_IF_ERROR(gemm());
        }
        ATLAS_RETURN_IF_ERROR(cudaOk(cudaEventRecord(stop_, stream_), "cudaEventRecord"));
        ATLAS_RETURN_IF_ERROR(cudaOk(cudaEventSynchronize(stop_), "cudaEventSynchronize"));
        float ms = 0;
        ATLAS_RETURN_IF_ERROR(cudaOk(cudaEventElapsedTime(&ms, start_, stop_), "elapsed"));
        return static_cast<Nanos>(static_cast<double>(ms) * 1e6);
    }

    std::string name_;
    cudaStream_t stream_ = nullptr;
    cudaEvent_t start_ = nullptr;
    cudaEvent_t stop_ = nullptr;
    cublasHandle_t handle_ = nullptr;
    void* a_ = nullptr;
    void* b_ = nullptr;
    void* c_ = nullptr;
    Calibration cal_;
    bool calibrated_ = false;
};

}  // namespace

Result<std::unique_ptr<CudaCompute>> CudaCompute::create(int device, double ns_per_gemm) {
    auto c = std::make_unique<CublasCompute>();
    ATLAS_RETURN_IF_ERROR(c->init(device, ns_per_gemm));
    return std::unique_ptr<CudaCompute>(std::move(c));
}

}  // namespace atlas::pipebench
