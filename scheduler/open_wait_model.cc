#include "scheduler/open_wait_model.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "scheduler/quantile.h"

namespace atlas::sched {

Status validate(const OpenWaitConfig& c) {
    if (c.history < 1 || c.min_samples < 1 || c.min_samples > c.history) {
        return {Code::kInvalidArgument, "OpenWaitConfig: need 1 <= min_samples <= history"};
    }
    if (!(c.quantile >= 0.0 && c.quantile <= 1.0)) {
        return {Code::kInvalidArgument, "OpenWaitConfig: quantile must be in [0, 1]"};
    }
    return Status::ok();
}

void OpenWaitModel::Ring::add(double v) {
    values[next] = v;
    next = (next + 1) % values.size();
    count = std::min(count + 1, values.size());
}

OpenWaitModel::OpenWaitModel(const OpenWaitConfig& config)
    : config_(config), scratch_(static_cast<size_t>(config.history)) {
    waits_.values.resize(static_cast<size_t>(config.history));
    transfers_.values.resize(static_cast<size_t>(config.history));
}

void OpenWaitModel::learn(const TransferWait& w) {
    if (w.end_ns > w.start_ns) {
        waits_.add(static_cast<double>(w.end_ns - w.start_ns));
    }
    if (w.transfer_start_ns != 0 && w.end_ns > w.transfer_start_ns &&
        w.transfer_bytes >= std::max<uint64_t>(config_.min_transfer_bytes, 1)) {
        transfers_.add(static_cast<double>(w.end_ns - w.transfer_start_ns) /
                       static_cast<double>(w.transfer_bytes));
    }
}

double OpenWaitModel::quantileAbove(const Ring& ring, double above) const {
    if (ring.count < static_cast<size_t>(config_.min_samples)) {
        return 0;
    }
    size_t n = 0;
    for (size_t i = 0; i < ring.count; ++i) {
        if (ring.values[i] > above) {
            scratch_[n++] = ring.values[i];
        }
    }
    if (n == 0) {
        return 0;
    }
    return lowerQuantile(std::span(scratch_.data(), n), config_.quantile);
}

Nanos OpenWaitModel::transferEnd(const TransferWait& open, Nanos now_ns) const {
    if (open.transfer_start_ns == 0 || open.transfer_bytes < config_.min_transfer_bytes) {
        return 0;
    }
    const double bytes = static_cast<double>(open.transfer_bytes);
    const double ns_per_byte =
        quantileAbove(transfers_, static_cast<double>(now_ns - open.transfer_start_ns) / bytes);
    return ns_per_byte > 0 ? open.transfer_start_ns + std::llround(ns_per_byte * bytes) : 0;
}

Nanos OpenWaitModel::elapsedEnd(const TransferWait& open, Nanos now_ns) const {
    if (open.start_ns == 0) {
        return 0;
    }
    const double length = quantileAbove(waits_, static_cast<double>(now_ns - open.start_ns));
    return length > 0 ? open.start_ns + std::llround(length) : 0;
}

void completeOpenWindow(const OpenWaitModel& model, const TransferWait& open, Nanos track_end_ns,
                        Nanos guard_ns, Nanos now_ns, int64_t iteration,
                        std::vector<PredictedWindow>* windows) {
    if (open.start_ns == 0) {
        return;
    }
    const Nanos transfer_end = model.transferEnd(open, now_ns);
    for (PredictedWindow& w : *windows) {
        if (w.open) {
            if (transfer_end != 0) {
                w.end_ns = std::max(w.end_ns, transfer_end - guard_ns);
            }
            return;
        }
    }
    // A wait its track explains ends by the track's longest wait as far as the elapsed time can
    // tell: the lengths of other kinds of wait say nothing beyond it.
    Nanos elapsed_end = model.elapsedEnd(open, now_ns);
    if (track_end_ns != 0 && elapsed_end != 0) {
        elapsed_end = std::min(elapsed_end, track_end_ns);
    }
    const Nanos w_start = open.start_ns + guard_ns;
    const Nanos w_end = std::max(transfer_end, elapsed_end) - guard_ns;
    if (w_end <= now_ns || w_end <= w_start) {
        return;
    }
    std::erase_if(*windows, [&](const PredictedWindow& w) {
        return w.start_ns < w_end && w.end_ns > w_start;
    });
    const PredictedWindow added{w_start, w_end, model.confidence(), iteration, true};
    windows->insert(std::upper_bound(windows->begin(), windows->end(), added,
                                     [](const PredictedWindow& a, const PredictedWindow& b) {
                                         return a.start_ns < b.start_ns;
                                     }),
                    added);
}

}  // namespace atlas::sched
