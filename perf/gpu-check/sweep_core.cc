#include "perf/gpu-check/sweep_core.h"

#include <cmath>
#include <optional>
#include <sstream>

#include "options/value.h"

namespace atlas::gpucheck {
namespace {

Status bad(const std::string& what) {
    return {Code::kInvalidArgument, what};
}

// splitmix64's finaliser: a well-mixed function of (rank, index, seed), cheap enough for
// 64M elements per check.
uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace

const char* opName(Op op) {
    switch (op) {
        case Op::kAllReduce:
            return "all_reduce";
        case Op::kAllGather:
            return "all_gather";
        case Op::kReduceScatter:
            return "reduce_scatter";
        case Op::kSendRecv:
            return "sendrecv";
        case Op::kAllToAll:
            return "alltoall";
    }
    return "?";
}

const char* redopName(Op op) {
    return op == Op::kAllReduce || op == Op::kReduceScatter ? "sum" : "none";
}

Result<Op> parseOp(std::string_view name) {
    for (Op op : kAllOps) {
        if (name == opName(op)) {
            return op;
        }
    }
    return bad("unknown op '" + std::string(name) +
               "' (expected all_reduce, all_gather, reduce_scatter, sendrecv or alltoall)");
}

Result<std::vector<Op>> parseOps(const std::string& list) {
    if (list == "all") {
        return std::vector<Op>(kAllOps.begin(), kAllOps.end());
    }
    std::vector<Op> ops;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ',')) {
        auto op = parseOp(item);
        if (!op) {
            return op.status();
        }
        for (Op o : ops) {
            if (o == op.value()) {
                return bad("op '" + item + "' listed twice");
            }
        }
        ops.push_back(op.value());
    }
    if (ops.empty() || list.back() == ',') {
        return bad("empty op list '" + list + "'");
    }
    return ops;
}

Geometry geometryFor(Op op, size_t requested_bytes, int nranks) {
    const size_t count = requested_bytes / kElementSize;
    const size_t n = static_cast<size_t>(nranks);
    Geometry g;
    switch (op) {
        case Op::kAllReduce:
        case Op::kSendRecv:
            g.send_count = g.recv_count = g.param_count = count;
            break;
        case Op::kAllGather:
            g.param_count = count / n;
            g.send_count = g.param_count;
            g.recv_count = g.param_count * n;
            break;
        case Op::kReduceScatter: {
            // nccl-tests: base = (count / nranks) & -(16 / eltSize), i.e. 16-byte aligned.
            const size_t align = 16 / kElementSize;
            g.param_count = (count / n) & ~(align - 1);
            g.send_count = g.param_count * n;
            g.recv_count = g.param_count;
            break;
        }
        case Op::kAllToAll:
            g.param_count = count / n;
            g.send_count = g.recv_count = g.param_count * n;
            break;
    }
    return g;
}

double busBwFactor(Op op, int nranks) {
    const double n = nranks;
    switch (op) {
        case Op::kAllReduce:
            return 2.0 * (n - 1) / n;
        case Op::kAllGather:
        case Op::kReduceScatter:
        case Op::kAllToAll:
            return (n - 1) / n;
        case Op::kSendRecv:
            return 1.0;
    }
    return 1.0;
}

Bandwidth bandwidthFor(Op op, const Geometry& g, double seconds, int nranks) {
    Bandwidth b;
    if (seconds <= 0) {
        return b;
    }
    b.algbw_gbs = static_cast<double>(g.bytes()) / 1e9 / seconds;
    b.busbw_gbs = b.algbw_gbs * busBwFactor(op, nranks);
    return b;
}

float inputValue(int rank, size_t index, uint32_t seed) {
    const uint64_t key = (static_cast<uint64_t>(seed) << 40) ^
                         (static_cast<uint64_t>(static_cast<uint32_t>(rank)) << 32) ^ index;
    return static_cast<float>(mix(key) & 63);
}

void fillInput(int rank, uint32_t seed, std::span<float> send) {
    for (size_t i = 0; i < send.size(); ++i) {
        send[i] = inputValue(rank, i, seed);
    }
}

float expectedOutput(Op op, const Geometry& g, int rank, int nranks, uint32_t seed, size_t j) {
    const size_t c = g.param_count;
    switch (op) {
        case Op::kAllReduce:
        case Op::kReduceScatter: {
            // reduce_scatter: rank r gets the sum of block r of every rank's send buffer.
            const size_t at = op == Op::kAllReduce ? j : static_cast<size_t>(rank) * c + j;
            double sum = 0;
            for (int r = 0; r < nranks; ++r) {
                sum += inputValue(r, at, seed);
            }
            return static_cast<float>(sum);
        }
        case Op::kAllGather:
            // block k of the output is rank k's whole send buffer
            return inputValue(static_cast<int>(j / c), j % c, seed);
        case Op::kSendRecv:
            // nccl-tests' ring: send to rank+1, receive from rank-1
            return inputValue((rank - 1 + nranks) % nranks, j, seed);
        case Op::kAllToAll:
            // block k of the output is block `rank` of rank k's send buffer
            return inputValue(static_cast<int>(j / c), static_cast<size_t>(rank) * c + j % c, seed);
    }
    return 0;
}

CheckResult checkOutput(Op op, const Geometry& g, int rank, int nranks, uint32_t seed,
                        std::span<const float> recv) {
    CheckResult r;
    if (recv.size() != g.recv_count) {
        r.wrong = g.recv_count > recv.size() ? g.recv_count : recv.size();
        r.first_bad = 0;
        return r;
    }
    for (size_t j = 0; j < recv.size(); ++j) {
        const float want = expectedOutput(op, g, rank, nranks, seed, j);
        // Exact comparison: every expected value is a small integer, exact in float32. A NaN
        // never equals anything, so it counts as wrong.
        if (!(recv[j] == want)) {
            if (r.wrong == 0) {
                r.first_bad = j;
                r.got = recv[j];
                r.want = want;
            }
            ++r.wrong;
        }
    }
    return r;
}

Result<std::vector<size_t>> sweepSizes(size_t min_bytes, size_t max_bytes, int factor) {
    if (min_bytes == 0) {
        return bad("the smallest size must be at least 1 byte");
    }
    if (max_bytes < min_bytes) {
        return bad("the largest size " + std::to_string(max_bytes) + " is below the smallest " +
                   std::to_string(min_bytes));
    }
    if (factor < 2) {
        return bad("the step factor must be at least 2");
    }
    std::vector<size_t> sizes;
    for (size_t s = min_bytes; s <= max_bytes; s *= static_cast<size_t>(factor)) {
        sizes.push_back(s);
        if (sizes.size() > 64) {
            return bad("more than 64 sizes; use a larger step factor");
        }
        if (s > max_bytes / static_cast<size_t>(factor)) {
            break;
        }
    }
    return sizes;
}

Result<size_t> parseByteSize(const std::string& text) {
    // The product's one size syntax (options/value.h: ATLAS_*_BYTES, every binary's flags).
    const std::optional<uint64_t> v = options::parseSize(text);
    if (!v) {
        return bad("size '" + text + "': expected bytes with an optional K, M or G suffix");
    }
    if (*v > (4ull << 30)) {
        return bad("size '" + text + "' is above 4G");
    }
    return static_cast<size_t>(*v);
}

int timedIterations(double check_run_s, const IterPlan& plan) {
    if (plan.max_iters <= 0) {
        return 0;
    }
    if (!(check_run_s > 0)) {
        return plan.max_iters;  // too fast to measure: as many as allowed
    }
    const double n = std::floor(plan.target_s / check_run_s);
    if (n < 1) {
        return 0;
    }
    return n >= plan.max_iters ? plan.max_iters : static_cast<int>(n);
}

bool pointFitsBudget(double now_s, double budget_s, double previous_point_s, double ratio) {
    if (budget_s <= 0) {
        return true;
    }
    const double expected = previous_point_s > 0 ? previous_point_s * (ratio > 1 ? ratio : 1) : 0;
    return now_s + expected <= budget_s;
}

double simulatedSeconds(Op op, const Geometry& g, int nranks, const SimLink& link) {
    if (g.bytes() == 0) {
        return 0;  // as the NCCL backend: nothing is launched
    }
    const double wire_bytes = static_cast<double>(g.bytes()) * busBwFactor(op, nranks);
    const double rate = link.gbps > 0 ? link.gbps * 1e9 / 8 : 0;
    return link.rtt_ms / 1e3 + (rate > 0 ? wire_bytes / rate : 0);
}

}  // namespace atlas::gpucheck
