// --compute cuda: a stage's compute periods are real GPU work (docs/arbitration.md, "Pipeline
// benchmark"). Each period enqueues gemmsFor(period) cuBLAS GEMMs (bf16 inputs, fp32
// accumulate, 2048^3) on the stage's stream and waits for them, so the GPU is busy for the
// configured time and idle in between: its idle time is exactly the stage's bubbles.
//
// Owned and called by the stage process's compute thread only (it creates the CUDA context
// after fork). Built when CMake finds CUDA (ATLAS_HAVE_CUDA); otherwise create() fails with a
// message saying so. create() also fails clearly when there is no usable GPU.
#pragma once

#include <memory>
#include <string>

#include "perf/atlas-pipeline-bench/cuda_calibration.h"

namespace atlas::pipebench {

class CudaCompute {
  public:
    virtual ~CudaCompute() = default;
    // ns_per_gemm > 0 skips the calibration (so runs that are compared do identical work);
    // 0 calibrates with calibrateGemms() first.
    static Result<std::unique_ptr<CudaCompute>> create(int device, double ns_per_gemm);
    // Runs one compute period of `period_ns` and waits for it (kSystem on a CUDA error).
    virtual Status run(Nanos period_ns) = 0;
    virtual double nsPerGemm() const = 0;
    // "NVIDIA H200, 2048^3 bf16 GEMM 31.2 us (calibrated: 640 x 5, spread 0.4%)"
    virtual std::string describe() const = 0;
};

}  // namespace atlas::pipebench
