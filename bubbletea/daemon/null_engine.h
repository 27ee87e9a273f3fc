// NullEngine: a zero-cost Engine for `bubbletea --engine null`. It is a test and
// measurement seam BESIDE the real engines (cpu, cuda), never a substitute: it computes no
// transformer. It exists to measure the daemon's own overhead (HTTP, scheduling, hand-off)
// with bubbletea-load, and to test the daemon without paying for prefill.
//
// Behaviour: prefillChunk validates like the real engines (empty chunk, token range,
// capacity, cancel) and returns next_token = a hash of every prompt token so far (mod
// vocab): deterministic, and the same for every chunk split. exportKv produces a tiny KV
// (1 layer, 1 KV head, head_dim 2; K = token id, V = position) so the hand-off path still
// moves real, checkable bytes.
//
// Threads: like every Engine, used by one thread at a time.
#pragma once

#include <memory>

#include "bubbletea/engine/engine.h"

namespace atlas::bubbletea {

std::unique_ptr<Engine> makeNullEngine(const ModelConfig& config);

// The token NullEngine returns for `prompt` (for tests).
int32_t nullEngineToken(std::span<const int32_t> prompt, int64_t vocab_size);

}  // namespace atlas::bubbletea
