// The start-up profiling run that seeds the cost model: a few prefill chunks of different
// sizes at different contexts, timed on the real engine, before the daemon serves anything.
//
// Blocking (it runs the engine); call it on the thread that owns the engine, once.
#pragma once

#include <cstdint>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/log.h"
#include "atlas/common/status.h"
#include "bubbletea/daemon/cost_model.h"
#include "bubbletea/engine/engine.h"

namespace atlas::bubbletea {

struct ProfilePlan {
    std::vector<int64_t> chunk_tokens = {16, 64, 256};  // sizes timed at every context
    std::vector<int64_t> contexts = {0, 512};           // cached tokens before each chunk
    Nanos budget_ns = 20 * kNsPerSec;  // stop once spent (after at least 2 samples)
};

// Runs one untimed warm-up chunk, then every (context, size) pair in increasing order of
// cost (each twice, keeping the faster), clamped to the model's context length. The context is
// built once per context value and reused through KvCache::truncate. Returns the timed samples (>=
// 1 on success).
Result<std::vector<CostSample>> profileEngine(Engine& engine, const ProfilePlan& plan,
                                              const Clock& clock, const Logger& logger);

}  // namespace atlas::bubbletea
