// atlas-nccl-sweep's pure part (docs/gpu-check.md, "atlas-nccl-sweep"): what each collective
// moves and how nccl-tests reports it (buffer sizes, element counts, algbw and busbw with
// nccl-tests' formulas, doc/PERFORMANCE.md), the data every rank sends and must receive, so
// that every element of every result is checked, how many timed iterations a point gets, and
// when a sweep stops for its time budget.
//
// No CUDA, no NCCL, no I/O and no clock reads: the NCCL ranks, the --simulate ranks and the
// unit tests (tests/unit/nccl_sweep_core_test.cc) all call these same functions. Builds with
// nothing but a C++20 compiler, include/atlas/common and options/, so the GPU machine can compile the
// tool without the project's other dependencies.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/status.h"

namespace atlas::gpucheck {

// The collectives of the sweep, named like nccl-tests' binaries (all_reduce_perf, ...).
enum class Op : uint8_t { kAllReduce, kAllGather, kReduceScatter, kSendRecv, kAllToAll };
inline constexpr std::array<Op, 5> kAllOps = {Op::kAllReduce, Op::kAllGather, Op::kReduceScatter,
                                              Op::kSendRecv, Op::kAllToAll};

const char* opName(Op op);  // "all_reduce", "all_gather", "reduce_scatter", "sendrecv", "alltoall"
// The redop column of nccl-tests' table: "sum" for the reductions, "none" otherwise.
const char* redopName(Op op);
Result<Op> parseOp(std::string_view name);
// "all_reduce,sendrecv" (or "all"); duplicates and unknown names are errors naming the item.
Result<std::vector<Op>> parseOps(const std::string& list);

// Every buffer holds float32 elements (nccl-tests' default -d float).
inline constexpr size_t kElementSize = 4;

// Buffer geometry of one point, as nccl-tests' <op>GetCollByteCount derives it from the
// requested size S (bytes) for n ranks: elements in each rank's send and receive buffer, and
// the count argument of the NCCL call (per rank for all_gather, reduce_scatter and alltoall).
struct Geometry {
    size_t send_count = 0;
    size_t recv_count = 0;
    size_t param_count = 0;
    // nccl-tests' size column: max(send, recv) bytes. algbw = this / time.
    size_t bytes() const {
        return (send_count > recv_count ? send_count : recv_count) * kElementSize;
    }
};
// reduce_scatter rounds the per-rank count down to a multiple of 16 bytes, as nccl-tests
// does, so its smallest points can have size 0 (then nothing is sent).
Geometry geometryFor(Op op, size_t requested_bytes, int nranks);

// nccl-tests' bus bandwidth factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter and
// alltoall (n-1)/n; sendrecv 1.
double busBwFactor(Op op, int nranks);
struct Bandwidth {
    double algbw_gbs = 0;  // GB/s = 1e9 bytes per second
    double busbw_gbs = 0;
};
// seconds <= 0 gives zeros (nothing measured).
Bandwidth bandwidthFor(Op op, const Geometry& g, double seconds, int nranks);

// ---- the data ----------------------------------------------------------------------------
// Element i of rank r's send buffer for check number `seed`: a small integer (0..63), so
// every sum of up to 64 ranks is exact in float32 whatever order NCCL adds in, and a value
// that depends on rank, position and seed, so data from the wrong rank, the wrong offset or
// an earlier iteration is caught.
float inputValue(int rank, size_t index, uint32_t seed);
void fillInput(int rank, uint32_t seed, std::span<float> send);
// What element j of rank r's receive buffer must hold after the op.
float expectedOutput(Op op, const Geometry& g, int rank, int nranks, uint32_t seed, size_t j);

struct CheckResult {
    size_t wrong = 0;             // nccl-tests' #wrong column
    size_t first_bad = SIZE_MAX;  // index of the first wrong element
    float got = 0;                // its value
    float want = 0;               // and what it should have been
};
// Compares every element; recv.size() must be g.recv_count (else every element is wrong).
CheckResult checkOutput(Op op, const Geometry& g, int rank, int nranks, uint32_t seed,
                        std::span<const float> recv);

// ---- sizes, iterations, budget -------------------------------------------------------------
// nccl-tests' -b/-e/-f: min, min*f, ... up to max inclusive. Errors for min 0, max < min,
// f < 2, or more than 64 points.
Result<std::vector<size_t>> sweepSizes(size_t min_bytes, size_t max_bytes, int factor);
// "8", "64K", "256M", "1G" (binary suffixes); at most 4G.
Result<size_t> parseByteSize(const std::string& text);

struct IterPlan {
    double target_s = 0.2;  // what the timed iterations of one point should take in total
    int max_iters = 20;
};
// Every point first runs once with fresh data and is checked; that run is timed too. Its
// time t decides how many timed iterations follow: floor(target / t), at most max_iters,
// and 0 when one run already takes target or more (then the check run's time is reported).
int timedIterations(double check_run_s, const IterPlan& plan);

// Whether a point may start at `now_s` (seconds since the net's start) under a budget of
// `budget_s` (0 = unlimited), when the same op's previous point took `previous_point_s` in
// all (its check run and timed iterations; 0 if none yet): the next point moves `ratio`
// times as many bytes, so it is expected to take about ratio x as long, and a point that
// would end past the budget is not started.
bool pointFitsBudget(double now_s, double budget_s, double previous_point_s, double ratio);

// A link for --simulate: the time one op takes on it (latency + the bytes one rank puts on
// the wire / rate), so the orchestration, the iteration plan and the budget logic run without
// a GPU. Wire bytes per rank follow the ring algorithms: all_reduce 2(n-1)/n S, all_gather,
// reduce_scatter and alltoall (n-1)/n S, sendrecv S. A point of size 0 takes 0.
struct SimLink {
    double gbps = 1.0;     // Gbit/s per direction
    double rtt_ms = 50.0;  // one round trip of latency per op
};
double simulatedSeconds(Op op, const Geometry& g, int nranks, const SimLink& link);

}  // namespace atlas::gpucheck
