// BubblePredictor: predicts the GPU-idle windows ("bubbles") of the next iterations from the
// idle intervals observed so far (time a stage spent waiting for a receive).
//
// Model: an iteration of period P contains a fixed set of bubble tracks (a pipeline stage has
// a fill and a drain bubble under GPipe, and several small ones under 1F1B). Each track has an
// offset from the iteration start and a duration.
//  - Period and phase: an owned PeriodDetector fed with the start of every observed interval.
//  - Tracks: an observed interval joins the track that followed the previous interval's track
//    after the same compute gap before (the sequence), else the track its phase on the period
//    is within +-tolerance*P of, or opens a new one. A track keeps its last track_history
//    samples; its offset is their median, its duration a low quantile (duration_quantile)
//    because precision matters more than coverage to BubbleTea.
//  - Alignment: predictions are placed relative to the observations of the last iteration
//    (the mean of their implied iteration starts), not the detector's anchor alone, so a
//    late or early iteration shifts the predictions with it.
//  - Output: for every track seen in at least min_track_rate of recent iterations, one window
//    per iteration, shrunk by guard_ns at both ends, confidence = detector confidence x track
//    hit rate.
// It emits nothing, and says why, while the period is unknown or lost (pause, pattern
// change), when no interval was observed for stale_cycles periods (a pause shows here
// before the detector's longer pause_cycles), or while no track has enough samples.
//
// Threads: one owner; not thread-safe. Time enters only through arguments. observe() does
// not allocate once the tracks exist; predict() writes into a caller-owned vector.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "atlas/common/status.h"
#include "scheduler/period_detector.h"
#include "scheduler/types.h"

namespace atlas::sched {

// Detector defaults for bubbles: a tighter tolerance than for transfers, since a bubble
// prediction is useless unless the period is known to a few percent anyway, and a tight
// window keeps several bubbles per iteration separable.
PeriodDetectorConfig defaultBubbleDetectorConfig();

inline constexpr int kMaxTrackHistory = 64;  // bound of BubblePredictorConfig::track_history

// The guard band every driver of the bubble pipeline uses by default (the plugin's
// ATLAS_BUBBLE_GUARD_US, atlas-bubbles replay, atlas-sim): a window starts this late and
// ends this early, so a consumer is off the GPU before the wait it predicted ends.
inline constexpr Nanos kDefaultBubbleGuardNs = 200 * kNsPerUs;

struct BubblePredictorConfig {
    PeriodDetectorConfig detector = defaultBubbleDetectorConfig();
    Nanos guard_ns = kDefaultBubbleGuardNs;  // each window shrinks by this at both ends
    int horizon_iterations = 2;              // K: windows of the current and next K-1 iterations
    // Bubble tracks per iteration. 1F1B with m micro-batches has up to ~m waits per stage and
    // iteration (48 micro-batches at 4,096 GPUs: 49); with fewer tracks than bubble kinds
    // every iteration evicts tracks before they are predicted.
    int max_tracks = 64;
    int track_history = 16;     // samples (iterations) kept per track
    int min_track_samples = 2;  // samples before a track is predicted
    // Fraction of the last track_history iterations a track must appear in. With 20% of
    // intervals unobserved a real track stays far above it; sporadic idles stay below.
    double min_track_rate = 0.4;
    // An interval joins the track whose offset is within min(track_tolerance * P,
    // track_tolerance_max_ns) of its own (see match()); otherwise it opens a new track. The cap
    // keeps bubbles tens of ms apart separate at long periods (1F1B on a WAN: P ~ 1 s, waits
    // 20 ms apart), where 5% of P would merge them.
    double track_tolerance = 0.05;
    Nanos track_tolerance_max_ns = 10 * kNsPerMs;
    double duration_quantile = 0.25;  // predicted duration = this quantile of samples
    // A window goes into force only when its bubble is seen to begin: the caller reports the
    // idle interval open now (noteOpen), a window whose track it matches starts exactly there,
    // and a window whose start has come without its interval opening is withdrawn (the GPU
    // is still busy). Windows still ahead are published as predicted, for planning. On for
    // every driver of the bubble pipeline (the plugin's recorder, replay and the simulator
    // all know when a wait begins); off: the windows stand as predicted (callers that
    // cannot see an interval open).
    bool confirm_open = true;
    double stale_cycles = 1.5;     // no observation for this many periods: emit nothing
    Nanos min_window_ns = 1;       // windows shorter than this (after guard) are dropped
    Nanos min_idle_ns = 0;         // observed intervals shorter than this are ignored
    size_t recent_intervals = 64;  // kept to rebuild tracks when the period (re)locks
};

Status validate(const BubblePredictorConfig& config);

struct PredictedWindow {
    Nanos start_ns = 0;
    Nanos end_ns = 0;
    double confidence = 0.0;  // in [0, 1]
    int64_t iteration = 0;    // absolute iteration number (PeriodEstimate numbering)
    // confirm_open only: its idle interval has begun (start observed, end predicted). A
    // consumer starts work only in such windows; the others are a plan.
    bool open = false;
};

enum class PredictionStatus : uint8_t {
    kOk,         // windows emitted (possibly none in the horizon)
    kSearching,  // no period found yet
    kLost,       // period lost; see lossReason()
    kStale,      // no idle interval observed for stale_cycles periods
    kWarmingUp,  // period known, no track has enough samples yet
};

const char* predictionStatusName(PredictionStatus status);

class BubblePredictor {
  public:
    // The config must be valid (see validate()).
    explicit BubblePredictor(const BubblePredictorConfig& config = {});

    // One observed idle interval, reported once it ended. Starts must be non-decreasing and
    // end >= start (kInvalidArgument otherwise; the interval is ignored).
    Status observe(const Interval& idle);

    // Predicted windows that end after now_ns, sorted by start, into *out (cleared first).
    // Returns kOk or why nothing was emitted. With confirm_open, *open_track_end_ns (if given)
    // is where the open wait's (noteOpen) track says it ends (its start plus the length the
    // track predicts given the time waited, before the guard band), whether or not the track's
    // window for it is emitted (it may be over, or outside the horizon); 0 when no track with
    // the samples to be predicted explains it. A window from elsewhere must not outlast it.
    PredictionStatus predict(Nanos now_ns, std::vector<PredictedWindow>* out,
                             Nanos* open_track_end_ns = nullptr) const;

    // The idle interval that is open now began at start_ns (0: none is open). Used by
    // predict() when config.confirm_open is set.
    void noteOpen(Nanos start_ns) { open_start_ns_ = start_ns; }

    PeriodEstimate period(Nanos now_ns) const { return detector_.estimate(now_ns); }
    LossReason lossReason(Nanos now_ns) const { return detector_.estimate(now_ns).reason; }
    // Tracks currently kept (including ones not yet predicted).
    size_t trackCount() const { return tracks_.size(); }
    const BubblePredictorConfig& config() const { return config_; }

  private:
    struct Sample {
        Nanos offset = 0;  // start offset from the iteration start (unwrapped near the track)
        Nanos duration = 0;
        int64_t cycle = 0;
        // Where it came in the sequence: the id of the track the interval before it joined
        // (0: none within a period) and the time from that interval's end to its start.
        uint64_t pred = 0;
        Nanos lead = 0;
    };
    struct Track {
        std::vector<Sample> samples;  // ring of track_history
        size_t next = 0;
        size_t count = 0;
        Nanos offset = 0;    // median sample offset
        Nanos duration = 0;  // duration_quantile of sample durations
        Nanos max_duration = 0;
        int64_t first_cycle = 0;
        int64_t last_cycle = 0;
        uint64_t id = 0;  // unique while the predictor lives, never 0
    };
    struct Observation {
        Nanos start_ns = 0;
        Nanos track_offset = 0;  // track offset at observation time
        int64_t cycle = 0;
    };

    void rebuild(const PeriodEstimate& est);
    // Replaces the detector by one searching only periods >= min_period_ns, fed the starts
    // of the recent intervals, and drops the tracks.
    // Waits shorter than min_wait_ns no longer feed it (see observe()).
    void relearnAbove(Nanos min_period_ns, Nanos min_wait_ns);
    // The track an interval starting at start_ns belongs to (tracks_.size() when none), the
    // phase it was matched on and its iteration. length_ns < 0: still open (see lengthFits).
    // by_order: when nothing is near, also try the track that follows the previous interval's
    // whatever the gap. Pure.
    struct Match {
        size_t track = 0;
        Nanos phase = 0;
        int64_t cycle = 0;
    };
    Match match(Nanos start_ns, Nanos length_ns, const PeriodEstimate& est,
                bool by_order = false) const;
    // How near a track's offset an interval's phase must be to join it (see the config).
    Nanos trackTolerance(Nanos period_ns) const;
    // The track with the most samples that came after the previous interval's track
    // (chain_track_id_) with a length like length_ns (lengthFitsSample) and, if match_lead, a
    // lead (previous end to start) within tol_ns of lead_ns: at least min_track_samples of
    // them, and the track not filled yet in the iteration cycle_of(track) says. tracks_.size()
    // when none.
    template <typename CycleOf>
    size_t bySequence(Nanos lead_ns, bool match_lead, Nanos tol_ns, Nanos length_ns,
                      CycleOf cycle_of) const;
    // length_ns < 0: an interval still open, open for -length_ns - 1 so far.
    static bool lengthFits(Nanos length_ns, const Track& track);
    // The same for one sample, tighter (within tol_ns or a quarter; an open interval: not
    // outlasted it): a sequence match rests on few samples, and a 1 ms wait must not take a
    // 100 ms bubble's place in it.
    static bool lengthFitsSample(Nanos length_ns, Nanos sample_ns, Nanos tol_ns);
    // The predicted duration of the track's bubble once it has lasted elapsed_ns.
    Nanos durationGiven(const Track& track, Nanos elapsed_ns) const;
    // For an interval match() placed nowhere: the track it belongs to if the whole pattern
    // shifted, judged with the recent unmatched intervals (tracks_.size() when none fits).
    Match resync(const Interval& idle, const PeriodEstimate& est) const;
    void assign(const Interval& idle, const PeriodEstimate& est);
    void refresh(Track& track);
    // Fraction of the recent iterations (up to track_history) the track appeared in.
    double hitRate(const Track& track) const;
    size_t obsCapacity() const { return 2 * static_cast<size_t>(config_.max_tracks); }

    BubblePredictorConfig config_;
    PeriodDetector detector_;
    std::vector<Track> tracks_;
    uint64_t tracks_epoch_ = 0;
    std::vector<Interval> recent_;  // ring of recent_intervals
    size_t recent_next_ = 0;
    std::vector<Observation> observations_;  // ring: recent observations, for alignment
    size_t obs_next_ = 0;
    int64_t latest_cycle_ = INT64_MIN / 2;  // newest iteration with an observation
    Nanos last_start_ns_ = 0;
    Nanos last_end_ns_ = 0;
    Nanos open_start_ns_ = 0;
    // Waits shorter than this do not feed the detector (0: all do); set when it locked on a
    // sub-period (see observe()), for the detector's life.
    Nanos detector_min_wait_ns_ = 0;
    std::array<Interval, 4> unmatched_{};  // ring: recent intervals no track matched
    size_t unmatched_next_ = 0;
    size_t unmatched_count_ = 0;
    // The previous interval: its start and end, and the offset and id of the track it joined
    // (the chain and sequence references of match()); invalid after a rebuild.
    bool chain_valid_ = false;
    Nanos chain_start_ns_ = 0;
    Nanos chain_end_ns_ = 0;
    Nanos chain_offset_ = 0;
    uint64_t chain_track_id_ = 0;
    uint64_t next_track_id_ = 1;
    bool have_observation_ = false;
    std::vector<Nanos> scratch_;

    // What predict() derives only from what observe() changes, kept until the next observe()
    // (a driver predicts every publish tick, or at every event of the simulator, far more
    // often than waits end): the alignment, the hit rates, and the open wait's match, which
    // changes only when its elapsed time passes a sample's length (lengthFits and
    // lengthFitsSample compare nothing else of an open wait), so it holds for elapsed times
    // in [elapsed_from, elapsed_below).
    struct PredictCache {
        uint64_t version = ~0ull;
        Nanos base = 0;
        int64_t ref_cycle = 0;
        std::vector<double> hit_rates;
        uint64_t open_version = ~0ull;
        Nanos open_start_ns = 0;
        Nanos elapsed_from = 0;
        Nanos elapsed_below = 0;
        Match open;
    };
    uint64_t version_ = 0;  // bumped by every observe()
    mutable PredictCache cache_;
};

}  // namespace atlas::sched
