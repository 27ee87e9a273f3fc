// Channel naming (the rule is documented in atlas/bubble_channel.h and
// docs/bubble-channel.md). Not on a hot path: these may allocate.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/status.h"

namespace atlas::channel {

// OK when `name` is a usable POSIX shm name: starts with '/', no other '/', 2..255 bytes,
// no NUL or control bytes. The message names the rule that failed.
Status validateChannelName(std::string_view name);

// The name for one local GPU: `configured` (the ATLAS_BUBBLE_CHANNEL value; may be null or
// empty) with "{local_rank}" substituted, or defaultChannelName(local_rank) when unset.
Result<std::string> resolveChannelName(const char* configured, int local_rank);

// Names of the shm objects in `shm_dir` (normally /dev/shm) whose names start with
// "atlas-bubbles-", as shm names ("/atlas-bubbles-..."), sorted. Missing dir: empty list.
std::vector<std::string> listChannelNames(const char* shm_dir = "/dev/shm");

}  // namespace atlas::channel
