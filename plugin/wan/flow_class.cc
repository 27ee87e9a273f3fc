#include "plugin/wan/flow_class.h"

#include <cstring>

namespace atlas::plugin::wan {
namespace {

Status bad(std::string_view text, const std::string& why) {
    return {Code::kInvalidUsage, "ATLAS_FLOW_CLASS='" + std::string(text) + "': " + why +
                                     " (expected PIPELINE:STAGE[:fwd|bwd], e.g. 3:0:fwd)"};
}

bool parseInt(std::string_view s, int32_t hi, int32_t* out) {
    if (s.empty() || s.size() > 8) {
        return false;
    }
    int64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') {
            return false;
        }
        v = v * 10 + (c - '0');
    }
    if (v > hi) {
        return false;
    }
    *out = static_cast<int32_t>(v);
    return true;
}

// FNV-1a: stable across processes and builds (the class must agree on every host).
uint64_t fnv1a(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

int32_t fold(uint64_t v) {
    return static_cast<int32_t>((v ^ (v >> 23) ^ (v >> 46)) & static_cast<uint64_t>(kMaxPipeline));
}

uint64_t hashAddress(const transport::SocketAddress& a) {
    if (a.family() == AF_INET) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(&a.storage);
        return fnv1a(&sin->sin_addr, 4) ^ fnv1a(&sin->sin_port, 2);
    }
    if (a.family() == AF_INET6) {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
        return fnv1a(&sin6->sin6_addr, 16) ^ fnv1a(&sin6->sin6_port, 2);
    }
    return 0;
}

}  // namespace

std::optional<arbiter::WireClass> decodeTrafficClass(int tc) {
    if (tc < 0) {
        return std::nullopt;
    }
    arbiter::WireClass c;
    c.direction = static_cast<uint8_t>(tc & 1);
    c.stage = (tc >> 1) & kMaxStage;
    c.pipeline = tc >> 8;
    return c;
}

int encodeTrafficClass(const arbiter::WireClass& c) {
    return (c.pipeline << 8) | ((c.stage & kMaxStage) << 1) | (c.direction & 1);
}

Result<std::optional<FlowClassSpec>> parseFlowClass(std::string_view text) {
    if (text.empty()) {
        return std::optional<FlowClassSpec>();
    }
    FlowClassSpec spec;
    const size_t c1 = text.find(':');
    if (c1 == std::string_view::npos) {
        return bad(text, "missing ':STAGE'");
    }
    const size_t c2 = text.find(':', c1 + 1);
    const std::string_view p = text.substr(0, c1);
    const std::string_view s =
        text.substr(c1 + 1, c2 == std::string_view::npos ? std::string_view::npos : c2 - c1 - 1);
    if (!parseInt(p, kMaxPipeline, &spec.pipeline)) {
        return bad(text, "PIPELINE must be an integer in 0.." + std::to_string(kMaxPipeline));
    }
    if (!parseInt(s, kMaxStage, &spec.stage)) {
        return bad(text, "STAGE must be an integer in 0.." + std::to_string(kMaxStage));
    }
    if (c2 != std::string_view::npos) {
        const std::string_view d = text.substr(c2 + 1);
        if (d == "fwd" || d == "forward") {
            spec.direction = 0;
        } else if (d == "bwd" || d == "backward") {
            spec.direction = 1;
        } else {
            return bad(text, "direction must be fwd or bwd");
        }
    }
    return std::optional<FlowClassSpec>(spec);
}

arbiter::WireClass deriveClass(const ClassInputs& in, const char** rule) {
    if (auto c = decodeTrafficClass(in.traffic_class)) {
        *rule = "trafficClass";
        return *c;
    }
    uint8_t auto_direction = 0;
    if (in.local_dc && in.peer_dc && *in.peer_dc < *in.local_dc) {
        auto_direction = 1;
    }
    arbiter::WireClass c;
    if (in.env) {
        *rule = "ATLAS_FLOW_CLASS";
        c.pipeline = in.env->pipeline;
        c.stage = in.env->stage;
        c.direction = in.env->direction.value_or(auto_direction);
        return c;
    }
    *rule = "auto";
    if (in.comm_id != 0) {
        c.pipeline = fold(in.comm_id);
    } else if (in.peer != nullptr) {
        c.pipeline = fold(hashAddress(*in.peer));
    }
    c.stage = in.local_dc ? static_cast<int32_t>(std::min<size_t>(*in.local_dc, kMaxStage)) : 0;
    c.direction = auto_direction;
    return c;
}

std::string describeClass(const arbiter::WireClass& c) {
    return "pipeline " + std::to_string(c.pipeline) + " stage " + std::to_string(c.stage) + " " +
           (c.direction == 0 ? "fwd" : "bwd");
}

}  // namespace atlas::plugin::wan
