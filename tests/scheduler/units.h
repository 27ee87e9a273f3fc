// Units the scheduler suites share (one definition, so a suite's files can share a unit).
#pragma once

#include <cstdint>

#include "atlas/common/clock.h"

namespace atlas::sched::test_units {

inline constexpr Nanos kMs = kNsPerMs;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;

}  // namespace atlas::sched::test_units
