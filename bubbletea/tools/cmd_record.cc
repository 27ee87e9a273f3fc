// `record` and `stats`: capture channels into a timeline, and report bubble fractions and
// prediction accuracy from a recorded or a live timeline.
#include <time.h>

#include <cstdio>

#include "bubbletea/tools/cli_common.h"
#include "bubbletea/tools/commands.h"
#include "bubbletea/tools/recorder.h"
#include "bubbletea/tools/timeline.h"

namespace atlas::bubbletea::tools {

namespace {

void sleepFor(Nanos ns) {
    timespec ts{static_cast<time_t>(ns / kNsPerSec), static_cast<long>(ns % kNsPerSec)};
    nanosleep(&ts, nullptr);  // EINTR (Ctrl-C) just ends the sleep early
}

// Polls `names` for `seconds` (or until Ctrl-C). Without `wait`, a channel that cannot be
// opened at the start is an error.
Result<Timeline> recordChannels(const std::vector<std::string>& names, double seconds,
                                Nanos poll_ns, bool wait) {
    const Nanos start = monotonicNowNs();
    Recorder recorder(names, start);
    recorder.poll(start);
    if (!wait) {
        for (const auto& c : recorder.channels()) {
            if (!c->reader) {
                return Status(Code::kUnavailable,
                              c->last_error + " (use --wait to wait for the writer)");
            }
        }
    }
    const Nanos end = start + static_cast<Nanos>(seconds * 1e9);
    installStopHandlers();
    while (!g_stop) {
        const Nanos now = monotonicNowNs();
        if (now >= end) {
            break;
        }
        sleepFor(std::min(poll_ns, end - now));
        recorder.poll(monotonicNowNs());
    }
    const Nanos stop = monotonicNowNs();
    recorder.poll(stop);
    for (const auto& c : recorder.channels()) {
        if (!c->reader) {
            std::fprintf(stderr, "atlas-bubbles: warning: %s never became readable: %s\n",
                         c->timeline.name.c_str(), c->last_error.c_str());
        }
    }
    return recorder.timeline(stop);
}

std::vector<FlagSpec> recordFlags() {
    auto f = channelFlags();
    f.push_back({"out", true, "PREFIX", "write PREFIX.trace.json (Chrome trace) and PREFIX.json"});
    f.push_back({"seconds", true, "S", "how long to record (default 10)"});
    f.push_back({"poll-ms", true, "MS", "poll interval (default 20)"});
    f.push_back({"wait", false, "", "wait for channels that do not exist yet"});
    f.push_back({"help", false, "", "show this help"});
    return f;
}

std::vector<FlagSpec> statsFlags() {
    auto f = channelFlags();
    f.push_back({"from", true, "FILE.json", "analyse a timeline written by 'record'"});
    f.push_back({"seconds", true, "S", "with 'live': how long to record (default 10)"});
    f.push_back({"poll-ms", true, "MS", "with 'live': poll interval (default 20)"});
    f.push_back({"wait", false, "", "with 'live': wait for channels that do not exist yet"});
    f.push_back({"skip-iterations", true, "N",
                 "leave the first N iterations after the first prediction out of the accuracy "
                 "(the predictor's warm-up; default 0)"});
    f.push_back({"json", false, "", "print the report as JSON"});
    f.push_back({"help", false, "", "show this help"});
    return f;
}

}  // namespace

int cmdRecord(int argc, char** argv) {
    const auto specs = recordFlags();
    auto args = Args::parse(argc, argv, 2, specs);
    if (!args.isOk()) {
        return usageError("record", args.status());
    }
    if (args.value().has("help")) {
        std::printf(
            "usage: atlas-bubbles record --out PREFIX [--seconds S] [--channel NAME | --rank "
            "N]...\n"
            "Records observed idle intervals, prediction sets and status changes of the\n"
            "channels (all /dev/shm/atlas-bubbles-* when none is named), including what\n"
            "their rings still hold from before the start, and writes:\n"
            "  PREFIX.trace.json  Chrome trace: open in ui.perfetto.dev or chrome://tracing\n"
            "  PREFIX.json        the intervals as plain JSON (input of 'stats --from')\n\n%s",
            formatFlags(specs).c_str());
        return kExitOk;
    }
    const Args& a = args.value();
    if (!a.positional().empty()) {
        return usageError(
            "record", {Code::kInvalidArgument, "unexpected argument '" + a.positional()[0] + "'"});
    }
    if (!a.has("out") || a.get("out").empty()) {
        return usageError("record", {Code::kInvalidArgument, "--out PREFIX is required"});
    }
    auto seconds = a.getDouble("seconds", 10, 0.01, 86400);
    auto poll_ms = a.getDouble("poll-ms", 20, 1, 10000);
    if (!seconds.isOk() || !poll_ms.isOk()) {
        return usageError("record", !seconds.isOk() ? seconds.status() : poll_ms.status());
    }
    auto names = selectChannels(a);
    if (!names.isOk()) {
        return names.status().code() == Code::kInvalidArgument
                   ? usageError("record", names.status())
                   : fail("record", names.status().message());
    }
    auto timeline = recordChannels(names.value(), seconds.value(),
                                   static_cast<Nanos>(poll_ms.value() * 1e6), a.has("wait"));
    if (!timeline.isOk()) {
        return fail("record", timeline.status().message());
    }
    const std::string prefix = a.get("out");
    const auto trace = timelineToChromeTrace(timeline.value());
    Status s1 = writeFile(prefix + ".trace.json", trace.dump() + "\n");
    Status s2 = writeFile(prefix + ".json", timelineToJson(timeline.value()).dump(1) + "\n");
    if (!s1.isOk() || !s2.isOk()) {
        return fail("record", (!s1.isOk() ? s1 : s2).message());
    }
    for (const ChannelTimeline& c : timeline.value().channels) {
        std::printf(
            "%s: %zu observed idle intervals, %zu prediction sets, %zu status changes"
            " (lost %llu observed / %llu window records)\n",
            c.name.c_str(), c.observed.size(), c.sets.size(), c.states.size(),
            static_cast<unsigned long long>(c.lost_observed),
            static_cast<unsigned long long>(c.lost_windows));
    }
    std::printf("wrote %s.trace.json (%zu events) and %s.json\n", prefix.c_str(), trace.size(),
                prefix.c_str());
    return kExitOk;
}

int cmdStats(int argc, char** argv) {
    const auto specs = statsFlags();
    auto args = Args::parse(argc, argv, 2, specs);
    if (!args.isOk()) {
        return usageError("stats", args.status());
    }
    const Args& a = args.value();
    if (a.has("help")) {
        std::printf(
            "usage: atlas-bubbles stats --from FILE.json [--json]\n"
            "       atlas-bubbles stats live [--seconds S] [--channel NAME | --rank N]... "
            "[--json]\n"
            "Per channel: the bubble (GPU idle) fraction of every complete iteration, and the\n"
            "accuracy of the predictions a consumer could act on (each set counts from its\n"
            "publish time until the next set):\n"
            "  coverage  = observed idle time inside predicted windows / observed idle time\n"
            "  precision = predicted window time that was idle / predicted window time\n"
            "evaluated over the complete iterations that began after the first prediction.\n\n%s",
            formatFlags(specs).c_str());
        return kExitOk;
    }
    const bool live = !a.positional().empty() && a.positional()[0] == "live";
    if (a.positional().size() > (live ? 1u : 0u)) {
        return usageError("stats", {Code::kInvalidArgument,
                                    "unexpected argument '" + a.positional().back() + "'"});
    }
    if (live == a.has("from")) {
        return usageError(
            "stats", {Code::kInvalidArgument, "give exactly one of --from FILE.json or 'live'"});
    }
    Result<Timeline> timeline = Status(Code::kInternal, "unset");
    if (live) {
        auto seconds = a.getDouble("seconds", 10, 0.01, 86400);
        auto poll_ms = a.getDouble("poll-ms", 20, 1, 10000);
        if (!seconds.isOk() || !poll_ms.isOk()) {
            return usageError("stats", !seconds.isOk() ? seconds.status() : poll_ms.status());
        }
        auto names = selectChannels(a);
        if (!names.isOk()) {
            return names.status().code() == Code::kInvalidArgument
                       ? usageError("stats", names.status())
                       : fail("stats", names.status().message());
        }
        timeline = recordChannels(names.value(), seconds.value(),
                                  static_cast<Nanos>(poll_ms.value() * 1e6), a.has("wait"));
    } else {
        timeline = loadTimeline(a.get("from"));
    }
    if (!timeline.isOk()) {
        return fail("stats", timeline.status().message());
    }
    auto skip = a.getInt("skip-iterations", 0, 0, 1000000);
    if (!skip.isOk()) {
        return usageError("stats", skip.status());
    }
    nlohmann::json reports = nlohmann::json::array();
    for (const ChannelTimeline& c : timeline.value().channels) {
        const ChannelReport r =
            analyzeChannel(c, timeline.value().to_ns, static_cast<int>(skip.value()));
        if (a.has("json")) {
            reports.push_back(reportToJson(r));
        } else {
            std::printf("%s", reportToText(r).c_str());
        }
    }
    if (a.has("json")) {
        std::printf("%s\n", nlohmann::json{{"channels", reports}}.dump(1).c_str());
    }
    return kExitOk;
}

}  // namespace atlas::bubbletea::tools
