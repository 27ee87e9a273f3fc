#include "channel/channel_types.h"

#include <cmath>
#include <limits>

namespace atlas::channel {

const char* stateName(PredictorState state) {
    switch (state) {
        case PredictorState::kStarting:
            return "starting";
        case PredictorState::kLearning:
            return "learning";
        case PredictorState::kPredicting:
            return "predicting";
        case PredictorState::kPeriodLost:
            return "period-lost";
        case PredictorState::kIdle:
            return "idle";
        case PredictorState::kDisabled:
            return "disabled";
    }
    return "unknown";
}

const char* reasonName(StatusReason reason) {
    switch (reason) {
        case StatusReason::kNone:
            return "none";
        case StatusReason::kWarmup:
            return "warmup";
        case StatusReason::kNoTraffic:
            return "no-traffic";
        case StatusReason::kPeriodChanged:
            return "period-changed";
        case StatusReason::kJitterTooHigh:
            return "jitter-too-high";
        case StatusReason::kLowConfidence:
            return "low-confidence";
        case StatusReason::kConfigDisabled:
            return "config-disabled";
        case StatusReason::kSynthetic:
            return "synthetic";
        case StatusReason::kWriterShutdown:
            return "writer-shutdown";
    }
    return "unknown";
}

const char* sourceName(WindowSource source) {
    switch (source) {
        case WindowSource::kPredictor:
            return "predictor";
        case WindowSource::kArbiterPlan:
            return "arbiter-plan";
        case WindowSource::kPredictorOpen:
            return "predictor-open";
    }
    return "unknown";
}

const char* lifecycleName(Lifecycle lifecycle) {
    switch (lifecycle) {
        case Lifecycle::kLive:
            return "live";
        case Lifecycle::kClosed:
            return "closed";
        case Lifecycle::kRetired:
            return "retired";
    }
    return "unknown";
}

double fromPpm(uint32_t ppm) {
    if (ppm == kUnknownPpm) {
        return std::numeric_limits<double>::quiet_NaN();
    }
    return static_cast<double>(ppm) / kPpmOne;
}

}  // namespace atlas::channel
