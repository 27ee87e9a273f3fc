// The class {pipeline, stage, direction} of a WAN send comm, which the workload-aware policy
// learns per class. Sources, first match wins (docs/arbitration.md, docs/env.md):
//
//  1. NCCL's trafficClass (v10 connect config, v11 init config) when >= 0, encoded as
//       trafficClass = pipeline * 256 + stage * 2 + direction     (direction 0 fwd, 1 bwd)
//     i.e. stage 0..127, pipeline 0..8388607.
//  2. ATLAS_FLOW_CLASS = "PIPELINE:STAGE[:fwd|bwd]" (one per process). Without the direction
//     part, the direction is derived per comm as in rule 3.
//  3. Automatic:
//       pipeline  = commId folded to 23 bits when commId != 0 (v11), else a hash of the
//                   peer's address (each pipeline's stage talks to a different peer);
//       stage     = index of the local DC in ATLAS_DC_MAP order (0 without a map);
//       direction = forward when the peer's DC comes later in ATLAS_DC_MAP order than the
//                   local one, else backward (forward without a map).
//
// Pure functions; no state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "arbiter/protocol.h"
#include "atlas/common/status.h"
#include "transport/net.h"

namespace atlas::plugin::wan {

struct FlowClassSpec {  // parsed ATLAS_FLOW_CLASS
    int32_t pipeline = 0;
    int32_t stage = 0;
    std::optional<uint8_t> direction;
};

constexpr int32_t kMaxStage = 127;
constexpr int32_t kMaxPipeline = (1 << 23) - 1;

// nullopt for a negative (undefined) trafficClass.
std::optional<arbiter::WireClass> decodeTrafficClass(int traffic_class);
int encodeTrafficClass(const arbiter::WireClass& cls);

// Empty text: nullopt. Errors (kInvalidUsage) name the variable and the syntax.
Result<std::optional<FlowClassSpec>> parseFlowClass(std::string_view text);

struct ClassInputs {
    int traffic_class = -1;
    uint64_t comm_id = 0;
    std::optional<FlowClassSpec> env;  // ATLAS_FLOW_CLASS
    std::optional<size_t> local_dc;
    std::optional<size_t> peer_dc;
    const transport::SocketAddress* peer = nullptr;
};

// The class and which rule produced it ("trafficClass", "ATLAS_FLOW_CLASS", "auto").
arbiter::WireClass deriveClass(const ClassInputs& in, const char** rule);

std::string describeClass(const arbiter::WireClass& cls);

}  // namespace atlas::plugin::wan
