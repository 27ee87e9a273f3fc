#include "channel/channel_name.h"

#include <dirent.h>

#include <algorithm>
#include <cstring>

#include "atlas/bubble_channel.h"

namespace atlas::channel {

Status validateChannelName(std::string_view name) {
    if (name.size() < 2 || name.front() != '/') {
        return {Code::kInvalidArgument, "channel name '" + std::string(name) +
                                            "' must start with '/' and have at least one "
                                            "more character"};
    }
    if (name.size() > 255) {
        return {Code::kInvalidArgument,
                "channel name is " + std::to_string(name.size()) + " bytes; the limit is 255"};
    }
    for (size_t i = 1; i < name.size(); ++i) {
        const auto c = static_cast<unsigned char>(name[i]);
        if (c == '/') {
            return {Code::kInvalidArgument,
                    "channel name '" + std::string(name) + "' may not contain '/' after the first"};
        }
        if (c < 0x20 || c == 0x7f) {
            return {Code::kInvalidArgument, "channel name contains a control character"};
        }
    }
    return Status::ok();
}

Result<std::string> resolveChannelName(const char* configured, int local_rank) {
    if (local_rank < 0) {
        return Status(Code::kInvalidArgument,
                      "local rank " + std::to_string(local_rank) + " is negative");
    }
    std::string name;
    if (configured == nullptr || configured[0] == '\0') {
        name = defaultChannelName(local_rank);
    } else {
        name = configured;
        const std::string placeholder = kLocalRankPlaceholder;
        const std::string rank = std::to_string(local_rank);
        for (size_t pos = name.find(placeholder); pos != std::string::npos;
             pos = name.find(placeholder, pos + rank.size())) {
            name.replace(pos, placeholder.size(), rank);
        }
    }
    Status valid = validateChannelName(name);
    if (!valid.isOk()) {
        return Status(valid.code(), "ATLAS_BUBBLE_CHANNEL: " + valid.message());
    }
    return name;
}

std::vector<std::string> listChannelNames(const char* shm_dir) {
    std::vector<std::string> names;
    DIR* dir = ::opendir(shm_dir);
    if (dir == nullptr) {
        return names;
    }
    // kDefaultNamePrefix without its leading '/': directory entries carry no slash.
    const char* prefix = kDefaultNamePrefix + 1;
    const size_t prefix_len = std::strlen(prefix);
    while (const dirent* entry = ::readdir(dir)) {
        if (std::strncmp(entry->d_name, prefix, prefix_len) == 0) {
            names.push_back(std::string("/") + entry->d_name);
        }
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
}

}  // namespace atlas::channel
