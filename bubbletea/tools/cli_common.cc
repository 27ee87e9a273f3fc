#include "bubbletea/tools/cli_common.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "atlas/bubble_channel.h"
#include "channel/channel_name.h"
#include "channel/local_rank.h"
#include "options/value.h"

namespace atlas::bubbletea::tools {

volatile std::sig_atomic_t g_stop = 0;

namespace {
void onStopSignal(int) {
    g_stop = 1;
}
}  // namespace

std::vector<FlagSpec> channelFlags() {
    return {
        {"channel", true, "NAME", "shm name of a channel, e.g. /atlas-bubbles-1000-0 (repeatable)"},
        {"rank", true, "N", "the default channel of local rank N (repeatable)"}};
}

Result<std::vector<std::string>> selectChannels(const Args& args) {
    std::vector<std::string> names;
    for (const std::string& name : args.all("channel")) {
        Status valid = channel::validateChannelName(name);
        if (!valid.isOk()) {
            return Status(Code::kInvalidArgument, "--channel: " + valid.message());
        }
        names.push_back(name);
    }
    for (const std::string& rank : args.all("rank")) {
        const auto r = options::parseUnsigned(rank);
        if (!r || *r > static_cast<uint64_t>(channel::kMaxLocalRank)) {
            return Status(Code::kInvalidArgument, "--rank=" + options::quote(rank) +
                                                      " is invalid: expected a local rank in 0.." +
                                                      std::to_string(channel::kMaxLocalRank));
        }
        names.push_back(channel::defaultChannelName(static_cast<int>(*r)));
    }
    if (names.empty()) {
        names = channel::listChannelNames();
        if (names.empty()) {
            return Status(Code::kUnavailable,
                          "no bubble channels found (/dev/shm/atlas-bubbles-*); is a job with "
                          "the Atlas plugin running? Name one with --channel or --rank");
        }
    }
    return names;
}

void installStopHandlers() {
    struct sigaction sa {};
    sa.sa_handler = onStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: sleeps return EINTR so loops notice the stop
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

int fail(const char* command, const std::string& message, int code) {
    std::fprintf(stderr, "atlas-bubbles %s: %s\n", command, message.c_str());
    return code;
}

int usageError(const char* command, const Status& status) {
    std::fprintf(stderr, "atlas-bubbles %s: %s\n(see 'atlas-bubbles %s --help')\n", command,
                 status.message().c_str(), command);
    return kExitUsage;
}

Status writeFile(const std::string& path, const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) {
        return Status::fromErrno("cannot write " + path, errno);
    }
    const size_t n = std::fwrite(text.data(), 1, text.size(), f);
    const int close_rc = std::fclose(f);
    if (n != text.size() || close_rc != 0) {
        return Status::fromErrno("writing " + path, errno);
    }
    return Status::ok();
}

Result<std::string> readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return Status::fromErrno("cannot read " + path, errno);
    }
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::string formatDuration(Nanos ns) {
    char buf[48];
    const double abs_ns = std::fabs(static_cast<double>(ns));
    if (abs_ns < 1e6) {
        std::snprintf(buf, sizeof(buf), "%.1f us", static_cast<double>(ns) / 1e3);
    } else if (abs_ns < 1e9) {
        std::snprintf(buf, sizeof(buf), "%.1f ms", static_cast<double>(ns) / 1e6);
    } else {
        std::snprintf(buf, sizeof(buf), "%.3f s", static_cast<double>(ns) / 1e9);
    }
    return buf;
}

}  // namespace atlas::bubbletea::tools
