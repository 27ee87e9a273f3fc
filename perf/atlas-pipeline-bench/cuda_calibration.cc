#include "perf/atlas-pipeline-bench/cuda_calibration.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace atlas::pipebench {

Result<Calibration> calibrateGemms(const std::function<Result<Nanos>(int)>& time_batch,
                                   const CalibrationConfig& cfg) {
    Calibration c;
    auto timed = [&](int n) -> Result<Nanos> {
        auto t = time_batch(n);
        if (!t) {
            return t.status();
        }
        if (t.value() <= 0) {
            return Status(Code::kInternal, "GEMM calibration: " + std::to_string(n) +
                                               " GEMMs took " + std::to_string(t.value()) +
                                               " ns (the timer must report positive durations)");
        }
        c.spent_ns += t.value();
        return t;
    };
    if (cfg.warmup_gemms > 0) {
        auto w = timed(cfg.warmup_gemms);
        if (!w) {
            return w.status();
        }
    }
    int batch = 1;
    for (;;) {
        auto t = timed(batch);
        if (!t) {
            return t.status();
        }
        if (t.value() >= cfg.min_batch_ns || batch >= cfg.max_batch) {
            break;
        }
        batch = std::min(batch * 2, std::max(cfg.max_batch, 1));
    }
    std::vector<double> per_gemm;
    const Nanos sampling_from = c.spent_ns;
    for (int i = 0; i < std::max(cfg.samples, 1); ++i) {
        auto t = timed(batch);
        if (!t) {
            return t.status();
        }
        per_gemm.push_back(static_cast<double>(t.value()) / batch);
        if (c.spent_ns - sampling_from > cfg.max_total_ns) {
            break;
        }
    }
    std::sort(per_gemm.begin(), per_gemm.end());
    const size_t n = per_gemm.size();
    c.ns_per_gemm = n % 2 == 1 ? per_gemm[n / 2] : (per_gemm[n / 2 - 1] + per_gemm[n / 2]) / 2;
    c.batch = batch;
    c.samples = static_cast<int>(n);
    c.spread = (per_gemm.back() - per_gemm.front()) / c.ns_per_gemm;
    return c;
}

int64_t gemmsFor(Nanos period_ns, double ns_per_gemm) {
    if (period_ns <= 0 || !(ns_per_gemm > 0)) {
        return 0;
    }
    const auto n = static_cast<int64_t>(std::llround(static_cast<double>(period_ns) / ns_per_gemm));
    return std::max<int64_t>(n, 1);
}

}  // namespace atlas::pipebench
