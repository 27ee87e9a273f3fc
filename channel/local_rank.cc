#include "channel/local_rank.h"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace atlas::channel {

Result<LocalRank> resolveLocalRank(int configured, const EnvLookup& env) {
    if (configured > kMaxLocalRank) {
        return Status(Code::kInvalidUsage, "local rank " + std::to_string(configured) +
                                               " is above " + std::to_string(kMaxLocalRank));
    }
    if (configured >= 0) {
        return LocalRank{configured, "configured"};
    }
    for (const char* const* var = kLocalRankVariables; *var != nullptr; ++var) {
        const char* v = env(*var);
        if (v == nullptr || v[0] == '\0') {
            continue;
        }
        const size_t len = std::strlen(v);
        int rank = -1;
        auto [ptr, ec] = std::from_chars(v, v + len, rank);
        if (ec != std::errc() || ptr != v + len || rank < 0 || rank > kMaxLocalRank) {
            std::string shown(v, std::min<size_t>(len, 40));
            return Status(Code::kInvalidUsage, std::string(*var) + "='" + shown +
                                                   "' is not a local rank (an integer in 0.." +
                                                   std::to_string(kMaxLocalRank) + ")");
        }
        return LocalRank{rank, *var};
    }
    return LocalRank{0, "default"};
}

}  // namespace atlas::channel
