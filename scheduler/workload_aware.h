// WorkloadAware: temporal link sharing ordered by a plan learned from the periodic pattern of
// pipeline training (the "workload-aware temporal sharing" of Atlas).
//
// Learning: one PeriodDetector per FlowClass {pipeline, stage, direction}, fed with the
// class's request times. Once a class is locked, each request gets its index within the
// iteration (its micro-batch order), and the class remembers its arrival offsets of the last
// iteration, which predict its next arrivals.
//
// Plans: which waiting transfer gets the link next. Which one shortens the iteration depends
// on the workload, so the policy measures it: the iteration time is the distance between
// iteration starts of a reference class, and each plan is run for a few iterations in turn
// (a trial round); the fastest one wins, a plan other than FIFO only if it beats FIFO by
// kPlanMargin (2%), and the plan is kept once two rounds in a row agree (four disagreeing
// rounds keep FIFO). Trials rerun after a pause, and when the pattern stays disrupted.
//  - kStagger: lowest pipeline id first, then the earlier micro-batch. Pipeline 0 receives as
//    if alone, pipeline 1 fills the gaps: one pipeline computes while another's data is on
//    the wire, and the first pipelines start their backward pass (whose gradients use the
//    other link direction) early instead of all together. Wins when the link is the
//    bottleneck of a GPipe iteration.
//  - kMicroBatchFirst: the earliest micro-batch of the iteration first (across pipelines),
//    then the lowest pipeline. A consumer processes micro-batches in order, so the pipeline
//    whose next stage would otherwise idle is the one missing the earliest micro-batch. Keeps
//    the pipelines in lockstep; wins when the last pipeline's receiver would otherwise get
//    all its micro-batches bunched at the end.
//  - kFifo: arrival order (TemporalFifo); the baseline every plan is measured against.
// Within a plan, ties go to backward gradients (the backward chain is the iteration's tail),
// then to arrival order. Under kStagger, a lease handed to a lower pipeline ends no later
// than the predicted next arrival of a higher one (but lasts at least min_slot_ns), so the
// critical transfer takes the link on arrival without a lease ever being revoked.
//
// Priorities: every plan orders transfers within one priority (FlowClass::priority, smaller
// first), as TemporalFifo does; with one priority for all (the default) nothing changes.
//
// Aging: a request that has waited max_wait_ns goes first whatever the plan or its priority
// (FIFO among such; TemporalCore::agedHead): the starvation bound, max_wait_ns + n *
// max_slot_ns for n active transfers.
//
// Fallback: while any waiting request's class has no period yet (still learning), after a
// pause, or while the pattern is disrupted (a class lost lock after a period change, low
// confidence, or the classes' periods disagree), the decision is exactly TemporalFifo's.
// Reason: a plan is only known to help the workload it was measured on; applied to unknown
// or disrupted traffic it could reorder transfers for no benefit, and FIFO is the safe, fair
// default. One exception: a non-FIFO plan changes the iteration's timing itself, so a
// disruption while it runs is tolerated for kGraceCycles iterations (the detectors re-lock
// on the new timing); a longer one falls back and restarts the trials.
//
// Guarantees relative to TemporalFifo by construction: the same lease bound (max_slot_ns),
// work conservation (the link is never idle while a request waits, so for the same arrivals
// the link drains all work at exactly the same instants), identical decisions in fallback,
// and a plan other than FIFO is kept only while it measured faster than FIFO. Whether that
// holds end to end is checked on generated GPipe/1F1B pipelines in tests/scheduler.
//
// Threads: one owner. Cost: onRequest adds one detector event (O(log history) once locked);
// choosing a holder is O(waiting + classes).
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "scheduler/period_detector.h"
#include "scheduler/temporal_policy.h"

namespace atlas::sched {

class WorkloadAware final : public TemporalPolicy {
  public:
    enum class Mode : uint8_t {
        kLearning,  // some contender's class has no locked period yet: FIFO
        kBroken,    // some contender's class lost lock, or periods disagree: FIFO
        kPlanned,   // every contender follows the learned pattern: plan order
    };

    enum class Plan : uint8_t { kFifo, kMicroBatchFirst, kStagger };
    static constexpr size_t kPlanCount = 3;

    struct Counters {
        uint64_t planned_picks = 0;
        uint64_t fallback_picks = 0;  // learning or broken
        uint64_t aged_picks = 0;
        uint64_t shaped_leases = 0;     // leases cut short for a predicted arrival
        uint64_t trials_completed = 0;  // trial rounds (each tries every plan once)
    };

    // What the policy has learned about one class (diagnostics, arbiter status page).
    struct ClassView {
        FlowClass cls;
        PeriodEstimate estimate;
        size_t transfers_per_cycle = 0;  // requests seen in the last complete cycle
    };

    explicit WorkloadAware(const PolicyConfig& config = {});

    PolicyKind kind() const override { return PolicyKind::kWorkload; }

    // Mode of the most recent holder choice.
    Mode lastMode() const { return last_mode_; }
    // The plan used in planned mode now (the one on trial while trials run).
    Plan activePlan() const;
    // Whether the trials are over and activePlan() is the chosen plan.
    bool planChosen() const { return trial_ >= kPlanCount; }
    // Mean iteration time measured for each plan (index = Plan) in the last trial round;
    // 0 when not measured.
    const std::array<double, kPlanCount>& planIterationNs() const { return plan_mean_ns_; }
    const Counters& counters() const { return counters_; }
    std::vector<ClassView> classes(Nanos now_ns) const;

  protected:
    void noteRequest(FlowRecord& record, Nanos now_ns) override;
    uint32_t pickNext(Nanos now_ns) override;
    Nanos leaseEnd(const FlowRecord& record, Nanos now_ns) override;

  private:
    struct ClassState {
        ClassState(const FlowClass& c, const PeriodDetectorConfig& d) : cls(c), detector(d) {}
        FlowClass cls;
        PeriodDetector detector;
        uint64_t epoch = 0;
        int64_t cycle = INT64_MIN;        // iteration of the latest request (when locked)
        uint32_t next_index = 0;          // index the next request of `cycle` will get
        Nanos cycle_first_ns = 0;         // arrival of the first request of `cycle`
        std::vector<Nanos> cur_offsets;   // arrival offsets from the cycle start, this cycle
        std::vector<Nanos> last_offsets;  // ... in the previous cycle (predicts arrivals)
    };
    struct ClassHash {
        size_t operator()(const FlowClass& c) const;
    };

    uint32_t classIndex(const FlowClass& cls);
    // What one pass over the contenders found about their classes' patterns.
    struct Scan {
        bool learning = false;   // some class has no period yet
        bool paused = false;     // some class reports a pause
        bool disrupted = false;  // some class lost lock or has low confidence
        Nanos min_period = kNever;
        Nanos max_period = 0;
    };
    Mode classify(const Scan& scan, Nanos now_ns);
    // Predicted next request time of class `c` after now_ns, or kNever.
    Nanos predictedArrival(const ClassState& c, Nanos now_ns) const;
    // An iteration of the reference class ended after `iteration_ns`: feed the trials.
    void recordIteration(Nanos iteration_ns);
    void restartTrials();

    std::unordered_map<FlowClass, uint32_t, ClassHash> class_index_;
    std::vector<ClassState> classes_;
    uint32_t overflow_class_ = UINT32_MAX;  // shared entry past kMaxClasses classes
    Mode last_mode_ = Mode::kLearning;
    Counters counters_;

    // Plan trials. The reference class is the first class that locked; its iteration starts
    // time the iterations.
    uint32_t ref_class_ = UINT32_MAX;
    Nanos last_period_ns_ = 0;           // latest agreed period of the contenders
    Nanos disrupted_since_ns_ = kNever;  // start of the current disruption
    size_t trial_ = 0;                   // index into the trial order; kPlanCount = done
    int trial_cycles_ = 0;
    uint64_t trial_fallbacks_ = 0;  // fallback_picks when the last iteration was recorded
    double trial_sum_ns_ = 0.0;
    std::array<double, kPlanCount> plan_mean_ns_{};
    int rounds_ = 0;                  // trial rounds completed since the last restart
    Plan last_winner_ = Plan::kFifo;  // winner of the previous round
    Plan chosen_ = Plan::kFifo;
};

const char* workloadModeName(WorkloadAware::Mode mode);
const char* planName(WorkloadAware::Plan plan);

}  // namespace atlas::sched
