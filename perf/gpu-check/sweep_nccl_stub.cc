// atlas-nccl-sweep built without CUDA or nccl.h: only --simulate works.
#include "perf/gpu-check/sweep_rank.h"

namespace atlas::gpucheck {

Result<std::unique_ptr<RankBackend>> makeNcclBackend(const RankConfig&) {
    return Status(Code::kUnavailable,
                  "atlas-nccl-sweep was built without CUDA/nccl.h; rebuild with the CUDA toolkit "
                  "(ATLAS_CUDA=ON) or use --simulate");
}

}  // namespace atlas::gpucheck
