// atlas-pipeline-bench without CUDA: --compute cuda is refused at run time.
#include "perf/atlas-pipeline-bench/cuda_compute.h"

namespace atlas::pipebench {

Result<std::unique_ptr<CudaCompute>> CudaCompute::create(int, double) {
    return Status(Code::kUnavailable,
                  "--compute cuda: this atlas-pipeline-bench was built without CUDA (configure "
                  "with the CUDA toolkit, -DATLAS_CUDA=ON)");
}

}  // namespace atlas::pipebench
