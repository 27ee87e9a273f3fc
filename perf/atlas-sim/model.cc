#include "perf/atlas-sim/model.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace atlas::sim {

namespace {

Nanos secondsToNs(double s) {
    return static_cast<Nanos>(std::ceil(s * 1e9 - 1e-6));
}

}  // namespace

double layerForwardFlops(int micro_batch, int seq_len, int hidden) {
    const double b = micro_batch;
    const double s = seq_len;
    const double h = hidden;
    return 24.0 * b * s * h * h + 4.0 * b * s * s * h;
}

std::vector<StageCost> stageCosts(const SimConfig& c) {
    const int pp = c.par.pp;
    std::vector<StageCost> out(static_cast<size_t>(pp));
    if (!c.job.stages.empty()) {
        for (int s = 0; s < pp; ++s) {
            const StageOverride& o =
                c.job.stages.size() == 1 ? c.job.stages[0] : c.job.stages[static_cast<size_t>(s)];
            StageCost& sc = out[static_cast<size_t>(s)];
            sc.forward_ns = o.forward_ns;
            sc.backward_ns = o.backward_ns;
            sc.activation_bytes = s + 1 < pp ? o.activation_bytes : 0;
            sc.grad_bytes = o.grad_bytes;
        }
        return out;
    }
    const ModelSpec& m = c.job.model;
    const int b = c.job.micro_batch_size;
    const double rate = c.gpu.peak_flops * c.gpu.efficiency * c.par.tp;
    const double layer_fwd = layerForwardFlops(b, m.seq_len, m.hidden);
    const double h = m.hidden;
    const uint64_t act =
        static_cast<uint64_t>(b) * m.seq_len * static_cast<uint64_t>(m.hidden) * c.job.dtype_bytes;
    for (int s = 0; s < pp; ++s) {
        StageCost& sc = out[static_cast<size_t>(s)];
        sc.layers = m.layers / pp + (s < m.layers % pp ? 1 : 0);
        double fwd = layer_fwd * sc.layers;
        sc.params = 12.0 * h * h * sc.layers;
        if (m.vocab > 0 && s == 0) {
            sc.params += static_cast<double>(m.vocab) * h;  // embedding
        }
        if (m.vocab > 0 && s == pp - 1) {
            sc.params += static_cast<double>(m.vocab) * h;  // LM head
            fwd += 2.0 * b * m.seq_len * h * m.vocab;
        }
        sc.forward_ns = secondsToNs(fwd / rate);
        sc.backward_ns = secondsToNs(2.0 * fwd / rate);
        sc.activation_bytes = s + 1 < pp ? act : 0;
        sc.grad_bytes = static_cast<uint64_t>(sc.params * c.job.dtype_bytes);
    }
    return out;
}

double streamBoundBytesPerSec(const WanPath& path, const NetworkSpec& net) {
    double r = path.bytes_per_sec;
    const double rtt = static_cast<double>(path.rtt_ns) / 1e9;
    if (rtt > 0.0) {
        r = std::min(r, net.tcp_window_bytes / rtt);
        if (path.loss > 0.0) {
            // Mathis et al. 1997: steady-state Reno throughput under random loss.
            r = std::min(r, 1.22 * net.mss_bytes / (rtt * std::sqrt(path.loss)));
        }
    }
    return r;
}

double transferRateBytesPerSec(const WanPath& path, const NetworkSpec& net) {
    switch (net.transport) {
        case TransportKind::kSingle:
            return streamBoundBytesPerSec(path, net);
        case TransportKind::kMulti:
            return std::min(path.bytes_per_sec, net.streams * streamBoundBytesPerSec(path, net));
        case TransportKind::kIdeal:
            return path.bytes_per_sec;
    }
    return path.bytes_per_sec;
}

Nanos ringAllReduceNs(uint64_t bytes, int n, double bytes_per_sec, Nanos step_latency_ns) {
    if (n <= 1 || bytes == 0) {
        return 0;
    }
    const double moved = 2.0 * (n - 1) / n * static_cast<double>(bytes);
    return secondsToNs(moved / bytes_per_sec) + 2 * (n - 1) * step_latency_ns;
}

double stageMemoryBytes(const SimConfig& c, const StageCost& cost, int stage) {
    const double params = cost.params / c.par.tp * 16.0;
    if (!c.job.has_model) {
        return params;
    }
    const ModelSpec& m = c.job.model;
    const double per_layer_mb = 2.0 * c.job.micro_batch_size * m.seq_len * m.hidden;
    const int m_count = c.job.micro_batches;
    const int in_flight =
        c.job.schedule == Schedule::kGpipe ? m_count : std::min(c.par.pp - stage, m_count);
    return params + per_layer_mb * cost.layers * in_flight;
}

PrefillCost PrefillCost::fromSpec(const BubbleTeaSpec& spec, const GpuSpec& gpu, int tp) {
    const double rate = gpu.peak_flops * spec.efficiency * tp;
    double a = 2.0 * spec.model_params / rate;
    if (spec.tokens_per_s > 0.0) {
        a = 1.0 / spec.tokens_per_s;
    }
    // QK^T and AV: 2 * hidden MACs per (query, key) pair per layer, half the pairs causal.
    double k = 2.0 * spec.model_layers * static_cast<double>(spec.model_hidden) / rate;
    if (spec.attention_s_per_token2 >= 0.0) {
        k = spec.attention_s_per_token2;
    }
    return PrefillCost(a, k);
}

Nanos PrefillCost::chunkNs(int64_t start, int64_t tokens) const {
    const double p = static_cast<double>(start);
    const double c = static_cast<double>(tokens);
    return secondsToNs(a_ * c + k_ * ((p + c) * (p + c) - p * p));
}

int64_t PrefillCost::maxTokensWithin(int64_t start, Nanos budget_ns, int64_t limit) const {
    if (budget_ns <= 0 || limit <= 0) {
        return 0;
    }
    const double budget = static_cast<double>(budget_ns) / 1e9;
    const double p = static_cast<double>(start);
    // k c^2 + (a + 2kp) c - budget <= 0
    const double lin = a_ + 2.0 * k_ * p;
    double c =
        k_ > 0.0 ? (-lin + std::sqrt(lin * lin + 4.0 * k_ * budget)) / (2.0 * k_) : budget / lin;
    if (!std::isfinite(c)) {
        c = 0.0;
    }
    int64_t n = std::min<int64_t>(limit, static_cast<int64_t>(std::floor(c)) + 1);
    while (n > 0 && chunkNs(start, n) > budget_ns) {
        --n;
    }
    return n;
}

}  // namespace atlas::sim
