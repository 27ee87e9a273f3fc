// The plugin's ATLAS_* registry: every environment variable the plugin reads is declared
// exactly once, in ATLAS_PARAM_LIST (include/atlas/env_catalog.h, the catalogue of every
// ATLAS_* name of the product), with its type, default, accepted range and a doc string.
// docs/env.md's summary table is this registry (params_test regenerates and compares it).
//
// Adding a variable is one line in ATLAS_PARAM_LIST: it creates the Params field, the parser,
// the range check, the INFO logging, the docs row and a compile-time guard that rejects a
// duplicate key. The machinery is the options layer (options/table.h), shared with every
// binary's flags.
//
// Parsing happens once, at the first init, from getenv (NCCL has already setenv()ed the
// values of /etc/nccl.conf and NCCL_CONF_FILE by then). An empty value counts as unset. Any
// invalid value fails init with a message that names the variable, the bad value and what is
// accepted; all of them at once. Libraries never read the environment: they get the plain
// structs built here.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/env.h"
#include "atlas/common/status.h"
#include "atlas/env_catalog.h"
#include "atlas/netstat.h"
#include "options/table.h"
#include "plugin/devices.h"
#include "scheduler/bubble_predictor.h"
#include "scheduler/grant_hold.h"
#include "scheduler/link_policy.h"
#include "transport/net.h"

namespace atlas::plugin {

using options::kGiB;
using options::kKiB;
using options::kMiB;

// Plugin enums spelled as text. Specialize for a new enum-valued variable.
template <typename E>
struct EnumChoices;

template <>
struct EnumChoices<AddressFamily> {
    static constexpr options::EnumChoice<AddressFamily> kValues[] = {
        {"any", AddressFamily::kAny},
        {"AF_INET", AddressFamily::kInet},
        {"AF_INET6", AddressFamily::kInet6},
    };
};
template <>
struct EnumChoices<transport::IoBackend> {
    static constexpr options::EnumChoice<transport::IoBackend> kValues[] = {
        {"auto", transport::IoBackend::kAuto},
        {"uring", transport::IoBackend::kUring},
        {"epoll", transport::IoBackend::kEpoll},
    };
};
template <>
struct EnumChoices<transport::StripeMode> {
    static constexpr options::EnumChoice<transport::StripeMode> kValues[] = {
        {"load", transport::StripeMode::kLoadAware},
        {"even", transport::StripeMode::kEven},
    };
};

// The kinds ATLAS_PARAM_LIST names (options/kinds.h).
namespace param_kinds {
using String = options::kinds::String;
using Secret = options::kinds::Secret;
using Bool = options::kinds::Bool;
using Uint = options::kinds::Uint;
using Int = options::kinds::Int;
using Size = options::kinds::Size;
using Double = options::kinds::Double;
template <typename E>
using Enum = options::kinds::Enum<E, EnumChoices<E>>;
}  // namespace param_kinds

// Duplicate keys fail to compile: each key defines one empty struct in this namespace.
namespace param_key_guards {
#define ATLAS_PARAM_KEY_GUARD(KEY, ...) \
    struct KEY {};
ATLAS_PARAM_LIST(ATLAS_PARAM_KEY_GUARD)
#undef ATLAS_PARAM_KEY_GUARD
}  // namespace param_key_guards

// The parsed values; a default-constructed Params holds every default.
struct Params {
#define ATLAS_PARAM_FIELD(KEY, field, Kind, def, lo, hi, doc) param_kinds::Kind::Value field = def;
    ATLAS_PARAM_LIST(ATLAS_PARAM_FIELD)
#undef ATLAS_PARAM_FIELD

    // Not a variable: ATLAS_AUTH_KEY, or the contents of ATLAS_AUTH_KEY_FILE.
    std::string resolved_auth_key;
    // Not a variable: ATLAS_FAULTS parsed (only with ATLAS_TEST_MODE=1).
    std::vector<transport::FaultSpec> resolved_faults;
};

// Every registered variable in declaration order, and the deprecated spellings
// (ATLAS_PARAM_ALIASES). Built once; thread-safe.
const options::Table<Params>& paramTable();
using ParamSpec = options::Option<Params>;
const ParamSpec* findParam(std::string_view key);

using atlas::EnvLookup;
using atlas::processEnv;

struct ParamsParse {
    Params params;                      // defaults wherever a value was unset or invalid
    std::vector<std::string> errors;    // one complete message per problem
    std::vector<std::string> warnings;  // deprecated names in use
    // OK, or kInvalidUsage with every message joined by "; ".
    Status status() const;
};
// Parses every variable (so all problems are reported at once), then the cross-variable
// rules: ATLAS_AUTH_KEY and ATLAS_AUTH_KEY_FILE are exclusive; the key file must be readable
// and non-empty; an explicit ATLAS_NSTREAMS must not exceed ATLAS_MAX_STREAMS; ATLAS_FAULTS
// must parse and needs ATLAS_TEST_MODE=1; ATLAS_ENCRYPT needs a key.
ParamsParse parseParams(const EnvLookup& env);

// "KEY=value" for the variables that differ from their default (all of them when
// `include_defaults`), in declaration order; secrets are masked, empty strings "(unset)".
std::vector<std::string> describeParams(const Params& params, bool include_defaults);

// The transport settings implied by `params`. `device_speed_mbps` (the fastest selected
// device) is the path rate assumed when ATLAS_LINK_GBPS is 0. `gates_wan_flows`
// (wan::WanConfig::gatesWanFlows) picks ATLAS_TCP_CC=auto's congestion control. The caller
// sets logger/clock.
transport::TransportConfig makeTransportConfig(const Params& params, int device_speed_mbps,
                                               bool gates_wan_flows = false);

// Kept for plugin/wan, which parses list items with it: options::parseUnsigned.
inline std::optional<uint64_t> parseUnsignedText(std::string_view text) {
    return options::parseUnsigned(text);
}

}  // namespace atlas::plugin
