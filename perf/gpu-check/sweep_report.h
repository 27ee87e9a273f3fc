// atlas-nccl-sweep's results and how they are printed: nccl-tests' table (its column layout
// and number formats, out-of-place columns only), the comparison of two nets, and JSON.
// Pure text formatting (no I/O); JSON is written by hand so the tool needs no JSON library
// on the GPU machine.
#pragma once

#include <string>
#include <vector>

#include "perf/gpu-check/sweep_core.h"

namespace atlas::gpucheck {

// One point of one net, merged over the ranks.
struct PointResult {
    std::string net;  // "atlas", "socket:4x4"
    Op op = Op::kAllReduce;
    size_t requested_bytes = 0;
    Geometry geom;
    double time_s = 0;   // mean over the ranks (nccl-tests averages its ranks' times)
    int iters = 0;       // timed iterations; 0 = time_s is the check run's
    double check_s = 0;  // the check run's time, mean over the ranks
    size_t wrong = 0;    // wrong elements over every rank
    std::string detail;  // the first wrong element, "" when none
    std::vector<double> rank_time_s;
};

// nccl-tests' table: a header of three lines, a row per point, and the footer lines
// ("# Out of bounds values : N OK|FAILED", "# Avg bus bandwidth : X").
std::string tableHeader();
std::string tableRow(const PointResult& p, int nranks);
std::string tableFooter(const std::vector<PointResult>& points, int nranks);
// nccl-tests' time column: %7.0f from 10 ms, %7.1f from 100 us, else %7.2f (microseconds).
std::string formatTimeUs(double seconds);

// Mean busbw over the points (nccl-tests' "Avg bus bandwidth"); 0 when none.
double averageBusBw(const std::vector<PointResult>& points, int nranks);

// For every (op, size) measured by both nets: time and busbw of each and the busbw ratio
// a / b. Rows by op, then in the order of `a`.
std::string comparisonTable(const std::vector<PointResult>& a, const std::vector<PointResult>& b,
                            int nranks);

std::string jsonEscape(const std::string& s);
// {"net": ..., "op": ..., "size_B": ..., "count": ..., "type": "float", "redop": ...,
//  "root": -1, "time_us": ..., "algbw_GBps": ..., "busbw_GBps": ..., "wrong": ...,
//  "iters": ..., "check_time_us": ..., "rank_time_us": [...], "detail": ...}
std::string pointJson(const PointResult& p, int nranks);

}  // namespace atlas::gpucheck
