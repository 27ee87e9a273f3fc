// Built when the project has no CUDA toolkit: the CUDA engine is reported as unavailable so
// callers (the daemon, tests, tools) compile and degrade to the CPU engine.
#include "bubbletea/engine/engine.h"

namespace atlas::bubbletea {

Result<std::unique_ptr<Engine>> makeCudaEngine(std::shared_ptr<const Weights>, int, bool) {
    return Status{Code::kUnavailable,
                  "this build of atlas has no CUDA support (ATLAS_CUDA=OFF "
                  "or no toolkit found)"};
}

}  // namespace atlas::bubbletea
