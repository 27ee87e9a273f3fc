// The rank side of atlas-nccl-sweep: one process per rank, driven by the parent over a
// socketpair, one text line per command and per reply:
//
//   rank -> parent   "ready <description>"            once, after the communicator is up
//   parent -> rank   "warmup <op> <bytes> <n>"        n untimed runs       -> "ok <seconds>"
//                    "check <op> <bytes> <seed>"      fresh data, one timed run, every element
//                                                     checked -> "check <s> <wrong> <first> <got>
//                                                     <want>"
//                    "time <op> <bytes> <n>"          n runs back to back  -> "ok <seconds per
//                    run>" "quit"                           finalize             -> "bye"
//   rank -> parent   "error <message>"                instead of any reply; the rank exits
//
// The geometry of a point is derived on both sides from (op, bytes, nranks) by the same pure
// function (sweep_core.h). Backends: NCCL on a GPU (sweep_nccl.cc) and --simulate (here).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "perf/gpu-check/sweep_core.h"

namespace atlas::gpucheck {

struct RankConfig {
    int rank = 0;
    int nranks = 2;
    int device = 0;
    size_t max_bytes = 0;  // the largest size of the sweep: buffers are sized for it once
    int timeout_s = 300;   // a wait past it aborts the communicator and fails the rank
    std::string nccl_lib;
    SimLink sim_link;
    std::vector<Op> sim_corrupt;
};

// One rank's collectives. Called from the rank process's only thread.
class RankBackend {
  public:
    virtual ~RankBackend() = default;
    // Creates the communicator; returns a one-line description (NCCL version, GPU).
    virtual Result<std::string> init() = 0;
    // Fills the send buffer for `seed`, poisons the receive buffer, runs the op once (timed:
    // the seconds are returned) and checks every element of the result.
    virtual Result<double> checkRun(Op op, const Geometry& g, uint32_t seed,
                                    CheckResult* check) = 0;
    // Runs the op `iters` times back to back on the current data; seconds per run.
    virtual Result<double> timedRuns(Op op, const Geometry& g, int iters) = 0;
    virtual Status finish() = 0;
    virtual void abort() = 0;
};

std::unique_ptr<RankBackend> makeSimBackend(const RankConfig& cfg);
// kUnavailable when the tool was built without CUDA and nccl.h; a clear error when NCCL
// cannot be loaded (the message names the library and dlerror()).
Result<std::unique_ptr<RankBackend>> makeNcclBackend(const RankConfig& cfg);

// The command loop; returns the process exit code (0, 1 on a failed command, 2 when init
// failed because there is no usable GPU or NCCL).
int rankMain(const RankConfig& cfg, RankBackend& backend, int fd);

// Line I/O over the socketpair (both sides).
Status writeLine(int fd, const std::string& line);
// Reads one '\n'-terminated line; `buffer` keeps bytes read past it. deadline_ns is
// CLOCK_MONOTONIC (0 = wait forever).
Result<std::string> readLine(int fd, std::string* buffer, int64_t deadline_ns);

}  // namespace atlas::gpucheck
