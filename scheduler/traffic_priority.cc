#include "scheduler/traffic_priority.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace atlas::sched {

const char* trafficKindName(TrafficKind kind) {
    switch (kind) {
        case TrafficKind::kUnknown:
            return "unknown";
        case TrafficKind::kPipeline:
            return "pipeline";
        case TrafficKind::kDataParallel:
            return "data-parallel";
    }
    return "?";
}

Result<PriorityOrder> parsePriorityOrder(std::string_view text, std::string_view what) {
    std::string t(text);
    std::transform(t.begin(), t.end(), t.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (t.empty() || t == "pipeline") {
        return PriorityOrder::kPipelineFirst;
    }
    if (t == "collective") {
        return PriorityOrder::kCollectiveFirst;
    }
    if (t == "equal") {
        return PriorityOrder::kEqual;
    }
    return Status(Code::kInvalidUsage, std::string(what) + "='" + std::string(text) +
                                           "': expected pipeline, collective or equal");
}

const char* priorityOrderName(PriorityOrder order) {
    switch (order) {
        case PriorityOrder::kPipelineFirst:
            return "pipeline";
        case PriorityOrder::kCollectiveFirst:
            return "collective";
        case PriorityOrder::kEqual:
            return "equal";
    }
    return "?";
}

uint8_t admissionPriority(TrafficKind kind, PriorityOrder order) {
    static_assert(kDefaultPriority == 1 && kPriorityLevels > 2);
    if (order == PriorityOrder::kEqual || kind == TrafficKind::kUnknown) {
        return kDefaultPriority;
    }
    const bool first = (order == PriorityOrder::kPipelineFirst) == (kind == TrafficKind::kPipeline);
    return first ? 0 : 2;
}

}  // namespace atlas::sched
