#include "scheduler/workload_aware.h"

#include <algorithm>
#include <tuple>

namespace atlas::sched {

namespace {

// Arrival offsets remembered per class and cycle; bounds memory for pathological classes.
constexpr size_t kMaxOffsetsPerCycle = 256;
// Distinct flow classes learned individually (a training job has pipelines x stages x 2).
constexpr size_t kMaxClasses = 4096;
// Plan trials: FIFO first (the baseline), then the others. Each runs kTrialSettle iterations
// unmeasured (the switch itself perturbs them), then kTrialMeasure measured ones.
constexpr std::array<WorkloadAware::Plan, WorkloadAware::kPlanCount> kTrialOrder = {
    WorkloadAware::Plan::kFifo, WorkloadAware::Plan::kStagger,
    WorkloadAware::Plan::kMicroBatchFirst};
constexpr int kTrialSettle = 1;
constexpr int kTrialMeasure = 3;
// A plan other than FIFO must be at least this much faster than FIFO to be kept (measurement
// noise must not pick a plan that is really no better).
constexpr double kPlanMargin = 0.02;
// Trial rounds before giving up on agreement (then FIFO).
constexpr int kMaxTrialRounds = 4;
// Iterations a non-FIFO plan keeps running while the detectors re-lock (see classify()).
constexpr int64_t kGraceCycles = 12;

// Tie-break inside a plan: backward gradients (0) before forward activations (1).
int backwardFirst(const FlowRecord& r) {
    return r.cls.direction == Direction::kBackward ? 0 : 1;
}

Nanos tolerance(const PeriodDetectorConfig& c, Nanos period_ns) {
    return static_cast<Nanos>(c.tolerance * static_cast<double>(period_ns));
}

}  // namespace

const char* planName(WorkloadAware::Plan plan) {
    switch (plan) {
        case WorkloadAware::Plan::kFifo:
            return "fifo";
        case WorkloadAware::Plan::kMicroBatchFirst:
            return "micro-batch-first";
        case WorkloadAware::Plan::kStagger:
            return "stagger";
    }
    return "unknown";
}

const char* workloadModeName(WorkloadAware::Mode mode) {
    switch (mode) {
        case WorkloadAware::Mode::kLearning:
            return "learning";
        case WorkloadAware::Mode::kBroken:
            return "broken";
        case WorkloadAware::Mode::kPlanned:
            return "planned";
    }
    return "unknown";
}

size_t WorkloadAware::ClassHash::operator()(const FlowClass& c) const {
    const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(c.pipeline)) << 32) |
                         static_cast<uint32_t>(c.stage);
    return std::hash<uint64_t>{}(key) ^
           (static_cast<size_t>(c.direction) * size_t{0x9e3779b97f4a7c15ULL});
}

WorkloadAware::WorkloadAware(const PolicyConfig& config) : TemporalPolicy(config) {}

uint32_t WorkloadAware::classIndex(const FlowClass& cls) {
    auto it = class_index_.find(cls);
    if (it != class_index_.end()) {
        return it->second;
    }
    // Memory stays bounded whatever classes an arbiter is sent: past kMaxClasses, new classes
    // share one class entry whose mixed request stream is unlikely to lock: they are served FIFO.
    if (classes_.size() >= kMaxClasses) {
        if (overflow_class_ == UINT32_MAX) {
            overflow_class_ = static_cast<uint32_t>(classes_.size());
            classes_.emplace_back(FlowClass{-1, -1, Direction::kForward}, config_.detector);
        }
        return overflow_class_;
    }
    const auto index = static_cast<uint32_t>(classes_.size());
    class_index_.emplace(cls, index);
    classes_.emplace_back(cls, config_.detector);
    return index;
}

void WorkloadAware::noteRequest(FlowRecord& record, Nanos now_ns) {
    record.class_index = classIndex(record.cls);
    ClassState& c = classes_[record.class_index];
    // Times reaching here were validated as non-decreasing by TemporalPolicy.
    (void)c.detector.addEvent(now_ns);
    const PeriodEstimate est = c.detector.estimate(now_ns);
    if (!est.locked()) {
        c.cycle = INT64_MIN;
        c.cur_offsets.clear();
        c.last_offsets.clear();
        record.order = 0;
        return;
    }
    if (ref_class_ == UINT32_MAX) {
        ref_class_ = record.class_index;
    }
    if (est.epoch != c.epoch) {
        c.epoch = est.epoch;
        c.cycle = INT64_MIN;
        c.cur_offsets.clear();
        c.last_offsets.clear();
    }
    // A request up to one tolerance early still belongs to the next iteration: jitter must
    // not make the first micro-batch of an iteration look like the last of the previous one.
    const int64_t cycle = est.cycleOf(now_ns + tolerance(config_.detector, est.period_ns));
    if (cycle != c.cycle) {
        if (record.class_index == ref_class_ && cycle == c.cycle + 1) {
            recordIteration(now_ns - c.cycle_first_ns);
        }
        if (!c.cur_offsets.empty()) {
            c.last_offsets.swap(c.cur_offsets);
        }
        c.cur_offsets.clear();
        c.cycle = cycle;
        c.next_index = 0;
        c.cycle_first_ns = now_ns;
    }
    if (c.cur_offsets.size() < kMaxOffsetsPerCycle) {
        c.cur_offsets.push_back(now_ns - est.cycleStartNs(cycle));
    }
    record.order = c.next_index++;
}

WorkloadAware::Mode WorkloadAware::classify(const Scan& scan, Nanos now_ns) {
    bool disrupted = scan.disrupted;
    // All classes of one training job iterate together; disagreeing periods mean the pattern
    // is not one job's iteration (or is in transition).
    if (scan.max_period > 0 &&
        static_cast<double>(scan.max_period) >
            static_cast<double>(scan.min_period) * (1.0 + 2.0 * config_.detector.tolerance)) {
        disrupted = true;
    }
    if (scan.learning) {
        return Mode::kLearning;
    }
    if (scan.paused) {
        // Training stopped and restarts with unknown timing: measure the plans again.
        restartTrials();
        disrupted_since_ns_ = kNever;
        return Mode::kBroken;
    }
    if (!disrupted) {
        disrupted_since_ns_ = kNever;
        if (scan.max_period > 0) {
            last_period_ns_ = scan.max_period;
        }
        return Mode::kPlanned;
    }
    // A plan that reorders transfers changes the iteration's timing, so the detectors may
    // lose lock because of the plan itself (a stagger that shortens the iteration by 25% is a
    // "period change"). Keep the plan for a grace period while they re-lock; if the pattern
    // stays disrupted, fall back and measure the plans again once it settles.
    if (disrupted_since_ns_ == kNever) {
        disrupted_since_ns_ = now_ns;
    }
    const Nanos grace = kGraceCycles * last_period_ns_;
    if (activePlan() != Plan::kFifo && last_period_ns_ > 0 &&
        now_ns - disrupted_since_ns_ <= grace) {
        return Mode::kPlanned;
    }
    if (activePlan() != Plan::kFifo) {
        restartTrials();
    }
    return Mode::kBroken;
}

uint32_t WorkloadAware::pickNext(Nanos now_ns) {
    // One pass over the contenders gathers everything a decision may need: the FIFO
    // candidate, each plan's candidate, and the state of their classes' patterns. Every key
    // starts with the priority (a plan orders transfers within one priority, as FIFO does in
    // TemporalFifo) and ends with the FIFO sequence (unique), so the pass order does not
    // matter. The aged candidate is the core's (one aging rule for both temporal policies).
    Scan scan;
    using FifoKey = std::tuple<uint8_t, uint64_t>;                             // priority, sequence
    using StaggerKey = std::tuple<uint8_t, int32_t, uint32_t, int, uint64_t>;  // pipeline, order
    using MicroBatchKey = std::tuple<uint8_t, uint32_t, int32_t, int, uint64_t>;  // order, pipeline
    constexpr uint32_t kNone = TemporalCore::kNone;
    const uint32_t aged = state().agedHead(now_ns, max_wait_ns_);
    uint32_t fifo = kNone;
    uint32_t stagger = kNone;
    uint32_t micro_batch = kNone;
    FifoKey fifo_key{};
    StaggerKey stagger_key{};
    MicroBatchKey micro_batch_key{};
    forEachWaiting([&](uint32_t index, const FlowRecord& r, const TemporalEntry& e) {
        const FifoKey fk{e.priority, e.seq};
        const StaggerKey sk{e.priority, r.cls.pipeline, r.order, backwardFirst(r), e.seq};
        const MicroBatchKey mk{e.priority, r.order, r.cls.pipeline, backwardFirst(r), e.seq};
        if (fifo == kNone || fk < fifo_key) {
            fifo = index;
            fifo_key = fk;
        }
        if (stagger == kNone || sk < stagger_key) {
            stagger = index;
            stagger_key = sk;
        }
        if (micro_batch == kNone || mk < micro_batch_key) {
            micro_batch = index;
            micro_batch_key = mk;
        }
        const PeriodEstimate est = classes_[r.class_index].detector.estimate(now_ns);
        if (est.state == LockState::kSearching) {
            scan.learning = true;
        } else if (est.state == LockState::kLost) {
            scan.paused = scan.paused || est.reason == LossReason::kPause;
            scan.disrupted = true;
        } else if (est.confidence < config_.min_confidence) {
            scan.disrupted = true;
        } else {
            scan.min_period = std::min(scan.min_period, est.period_ns);
            scan.max_period = std::max(scan.max_period, est.period_ns);
        }
    });
    last_mode_ = classify(scan, now_ns);
    if (aged != kNone) {
        ++counters_.aged_picks;
        return aged;
    }
    if (last_mode_ != Mode::kPlanned) {
        ++counters_.fallback_picks;
        return fifo;
    }
    ++counters_.planned_picks;
    switch (activePlan()) {
        case Plan::kFifo:
            return fifo;
        case Plan::kStagger:
            return stagger;
        case Plan::kMicroBatchFirst:
            return micro_batch;
    }
    return fifo;
}

WorkloadAware::Plan WorkloadAware::activePlan() const {
    return trial_ < kPlanCount ? kTrialOrder[trial_] : chosen_;
}

void WorkloadAware::restartTrials() {
    trial_ = 0;
    rounds_ = 0;
    last_winner_ = Plan::kFifo;
    trial_cycles_ = 0;
    trial_sum_ns_ = 0.0;
    trial_fallbacks_ = counters_.fallback_picks;
}

void WorkloadAware::recordIteration(Nanos iteration_ns) {
    if (trial_ >= kPlanCount) {
        return;
    }
    // An iteration during which some decision fell back to FIFO did not run the plan.
    const bool clean = counters_.fallback_picks == trial_fallbacks_;
    trial_fallbacks_ = counters_.fallback_picks;
    if (!clean) {
        trial_cycles_ = 0;
        trial_sum_ns_ = 0.0;
        return;
    }
    if (++trial_cycles_ <= kTrialSettle) {
        return;
    }
    trial_sum_ns_ += static_cast<double>(iteration_ns);
    if (trial_cycles_ < kTrialSettle + kTrialMeasure) {
        return;
    }
    plan_mean_ns_[static_cast<size_t>(kTrialOrder[trial_])] = trial_sum_ns_ / kTrialMeasure;
    ++trial_;
    trial_cycles_ = 0;
    trial_sum_ns_ = 0.0;
    if (trial_ < kPlanCount) {
        return;
    }
    ++counters_.trials_completed;
    const double fifo = plan_mean_ns_[static_cast<size_t>(Plan::kFifo)];
    Plan winner = Plan::kFifo;
    double best = fifo * (1.0 - kPlanMargin);
    for (Plan p : kTrialOrder) {
        const double mean = plan_mean_ns_[static_cast<size_t>(p)];
        if (p != Plan::kFifo && mean < best) {
            best = mean;
            winner = p;
        }
    }
    // Commit only when two rounds in a row agree: a round can be misled by something else
    // that varies meanwhile (the policy of the other link direction running its own trials).
    // Rounds that keep disagreeing end in FIFO.
    ++rounds_;
    if ((rounds_ >= 2 && winner == last_winner_) || rounds_ >= kMaxTrialRounds) {
        chosen_ = winner == last_winner_ ? winner : Plan::kFifo;
        return;
    }
    last_winner_ = winner;
    trial_ = 0;
}

Nanos WorkloadAware::predictedArrival(const ClassState& c, Nanos now_ns) const {
    const PeriodEstimate est = c.detector.estimate(now_ns);
    if (!est.locked() || c.last_offsets.empty()) {
        return kNever;
    }
    const Nanos h = tolerance(config_.detector, est.period_ns);
    const int64_t cycle = est.cycleOf(now_ns + h);
    // The next request of this cycle if the class is inside it, else the cycle's first.
    size_t index = c.cycle == cycle ? c.next_index : 0;
    if (c.cycle > cycle) {
        index = c.last_offsets.size();  // already past this cycle's requests
    }
    if (index < c.last_offsets.size()) {
        const Nanos t = est.cycleStartNs(cycle) + c.last_offsets[index];
        // A request up to one tolerance overdue is imminent; later than that the pattern
        // has slipped and the prediction is worthless for this cycle.
        if (t > now_ns - h) {
            return std::max(t, now_ns);
        }
    }
    return est.cycleStartNs(cycle + 1) + c.last_offsets.front();
}

Nanos WorkloadAware::leaseEnd(const FlowRecord& record, Nanos now_ns) {
    const Nanos base = TemporalPolicy::leaseEnd(record, now_ns);
    if (last_mode_ != Mode::kPlanned || activePlan() != Plan::kStagger) {
        return base;
    }
    const ClassState& own = classes_[record.class_index];
    const PeriodEstimate own_est = own.detector.estimate(now_ns);
    if (!own_est.locked() || own_est.confidence < config_.min_confidence) {
        return base;
    }
    Nanos next = kNever;
    for (const ClassState& c : classes_) {
        if (c.cls.pipeline >= record.cls.pipeline) {
            continue;
        }
        next = std::min(next, predictedArrival(c, now_ns));
    }
    if (next >= base) {
        return base;
    }
    ++counters_.shaped_leases;
    return std::min(base, std::max(next, now_ns + std::max<Nanos>(config_.min_slot_ns, 1)));
}

std::vector<WorkloadAware::ClassView> WorkloadAware::classes(Nanos now_ns) const {
    std::vector<ClassView> out;
    out.reserve(classes_.size());
    for (const ClassState& c : classes_) {
        out.push_back({c.cls, c.detector.estimate(now_ns), c.last_offsets.size()});
    }
    return out;
}

}  // namespace atlas::sched
