#include "bubbletea/daemon/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace atlas::bubbletea {
namespace {

// Ridge added to the normal equations in fit(), relative to their diagonal.
constexpr double kRidge = 1e-9;

// Solves the 3x3 system m * x = v by Gaussian elimination with partial pivoting.
bool solve3(double m[3][3], double v[3], double x[3]) {
    for (int col = 0; col < 3; ++col) {
        int pivot = col;
        for (int r = col + 1; r < 3; ++r) {
            if (std::abs(m[r][col]) > std::abs(m[pivot][col])) {
                pivot = r;
            }
        }
        if (std::abs(m[pivot][col]) < 1e-300) {
            return false;
        }
        if (pivot != col) {
            std::swap(m[pivot], m[col]);
            std::swap(v[pivot], v[col]);
        }
        for (int r = col + 1; r < 3; ++r) {
            const double f = m[r][col] / m[col][col];
            for (int c = col; c < 3; ++c) {
                m[r][c] -= f * m[col][c];
            }
            v[r] -= f * v[col];
        }
    }
    for (int r = 2; r >= 0; --r) {
        double s = v[r];
        for (int c = r + 1; c < 3; ++c) {
            s -= m[r][c] * x[c];
        }
        x[r] = s / m[r][r];
    }
    return std::isfinite(x[0]) && std::isfinite(x[1]) && std::isfinite(x[2]);
}

}  // namespace

std::string CostCoefficients::toString() const {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "a=%.0fns b=%.1fns/tok c=%.4fns/pair", a_ns, b_ns_per_token,
                  c_ns_per_pair);
    return buf;
}

CostModel::CostModel(CostCoefficients initial, CostModelConfig config) : config_(config) {
    reset(initial);
}

void CostModel::features(int64_t tokens, int64_t context, double x[3]) {
    const double t = static_cast<double>(tokens);
    const double p = static_cast<double>(context);
    x[0] = 1.0;
    x[1] = t / 1e3;
    x[2] = t * (p + t / 2.0) / 1e6;
}

Result<CostCoefficients> CostModel::fit(std::span<const CostSample> samples) {
    if (samples.empty()) {
        return Status{Code::kInvalidArgument, "cost model fit: no samples"};
    }
    double m[3][3] = {};
    double v[3] = {};
    double yy = 0;
    for (const auto& s : samples) {
        if (s.tokens <= 0 || s.context < 0 || s.time_ns < 0) {
            return Status{Code::kInvalidArgument, "cost model fit: invalid sample"};
        }
        double x[3];
        features(s.tokens, s.context, x);
        const double y = static_cast<double>(s.time_ns) / 1e3;
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 3; ++j) {
                m[i][j] += x[i] * x[j];
            }
            v[i] += x[i] * y;
        }
        yy += y * y;
    }
    double scale = 0;
    for (int i = 0; i < 3; ++i) {
        scale = std::max(scale, m[i][i]);
    }
    for (int i = 0; i < 3; ++i) {
        m[i][i] += kRidge * scale + 1e-12;
    }
    // Non-negative least squares by enumeration: with three coefficients, solve the normal
    // equations on every subset of them (the others fixed at 0) and keep the feasible
    // solution with the smallest residual. A negative cost term would make predictions
    // non-monotone (and the unconstrained optimum is often negative when timings are noisy).
    double best[3] = {0, 0, 0};
    double best_rss = -1;
    for (int mask = 1; mask < 8; ++mask) {
        int idx[3];
        int n = 0;
        for (int i = 0; i < 3; ++i) {
            if (mask & (1 << i)) {
                idx[n++] = i;
            }
        }
        double sm[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
        double sv[3] = {0, 0, 0};
        for (int r = 0; r < n; ++r) {
            for (int c = 0; c < n; ++c) {
                sm[r][c] = m[idx[r]][idx[c]];
            }
            sv[r] = v[idx[r]];
        }
        double st[3] = {0, 0, 0};
        if (!solve3(sm, sv, st)) {
            continue;
        }
        double theta[3] = {0, 0, 0};
        bool feasible = true;
        for (int r = 0; r < n; ++r) {
            theta[idx[r]] = st[r];
            feasible = feasible && st[r] >= 0;
        }
        if (!feasible) {
            continue;
        }
        // RSS = y'y - 2 theta'v + theta' M theta.
        double rss = yy;
        for (int i = 0; i < 3; ++i) {
            rss -= 2 * theta[i] * v[i];
            for (int j = 0; j < 3; ++j) {
                rss += theta[i] * m[i][j] * theta[j];
            }
        }
        if (best_rss < 0 || rss < best_rss) {
            best_rss = rss;
            std::copy(theta, theta + 3, best);
        }
    }
    if (best_rss < 0) {
        return Status{Code::kInvalidArgument, "cost model fit: singular system"};
    }
    return CostCoefficients{best[0] * 1e3, best[1], best[2] * 1e-3};
}

void CostModel::reset(const CostCoefficients& baseline) {
    baseline_ =
        CostCoefficients{std::max(baseline.a_ns, 0.0), std::max(baseline.b_ns_per_token, 0.0),
                         std::max(baseline.c_ns_per_pair, 0.0)};
    log_scale_ = 0;
}

double CostModel::baselineNs(int64_t tokens, int64_t context) const {
    const double t = static_cast<double>(tokens);
    const double p = static_cast<double>(std::max<int64_t>(context, 0));
    return baseline_.a_ns + baseline_.b_ns_per_token * t +
           baseline_.c_ns_per_pair * t * (p + t / 2);
}

CostCoefficients CostModel::coefficients() const {
    const double k = scale();
    return CostCoefficients{baseline_.a_ns * k, baseline_.b_ns_per_token * k,
                            baseline_.c_ns_per_pair * k};
}

Nanos CostModel::predict(int64_t tokens, int64_t context) const {
    if (tokens <= 0) {
        return 0;
    }
    const double ns = baselineNs(tokens, context) * scale();
    if (!(ns < 9e18)) {
        return static_cast<Nanos>(9e18);
    }
    return static_cast<Nanos>(std::ceil(ns));
}

int64_t CostModel::largestFitting(int64_t context, int64_t max_tokens, Nanos budget_ns) const {
    if (max_tokens <= 0 || budget_ns < 0 || predict(1, context) > budget_ns) {
        return 0;
    }
    int64_t lo = 1;  // fits
    int64_t hi = max_tokens;
    if (predict(hi, context) <= budget_ns) {
        return hi;
    }
    // Invariant: lo fits, hi does not.
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (predict(mid, context) <= budget_ns) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    return lo;
}

void CostModel::observe(const CostSample& sample) {
    if (sample.tokens <= 0 || sample.context < 0 || sample.time_ns < 0) {
        return;
    }
    const double measured = static_cast<double>(sample.time_ns);
    const double predicted = static_cast<double>(predict(sample.tokens, sample.context));
    const double denom = std::max(measured, 1e3);  // at least 1 us: no blow-up at ~0 ns
    const double alpha = observed_ == 0 ? 1.0 : config_.error_alpha;
    rel_error_ewma_ += alpha * (std::abs(measured - predicted) / denom - rel_error_ewma_);
    bias_ewma_ += alpha * ((measured - predicted) / denom - bias_ewma_);
    ++observed_;

    const double base = baselineNs(sample.tokens, sample.context);
    if (!(base > 0)) {
        // No profile (e.g. --cost-model 0,0,0): start from this chunk as a per-token cost.
        baseline_ =
            CostCoefficients{0, std::max(measured, 1.0) / static_cast<double>(sample.tokens), 0};
        log_scale_ = 0;
        return;
    }
    // The sample's speed relative to the profiled shape, clipped to a factor max_step away
    // from the current estimate: a preempted chunk is an outlier, not a new speed.
    const double step = std::log(config_.max_step);
    const double ratio = std::log(std::max(measured, 1.0) / base);
    const double clipped = std::clamp(ratio, log_scale_ - step, log_scale_ + step);
    log_scale_ += config_.scale_alpha * (clipped - log_scale_);
}

void CostModel::relax(Nanos elapsed_ns) {
    if (elapsed_ns <= 0 || config_.relax_half_life_ns <= 0) {
        return;
    }
    log_scale_ *= std::exp2(-static_cast<double>(elapsed_ns) /
                            static_cast<double>(config_.relax_half_life_ns));
}

}  // namespace atlas::bubbletea
