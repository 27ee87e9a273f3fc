// `watch`: a live per-GPU view of bubble channels.
#include <time.h>
#include <unistd.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <span>

#include "bubbletea/tools/cli_common.h"
#include "bubbletea/tools/commands.h"
#include "bubbletea/tools/recorder.h"

namespace atlas::bubbletea::tools {

namespace {

// Observed idle fraction over the last `window_ns` (or since the first observation).
double recentIdleFraction(const ChannelTimeline& t, Nanos now, Nanos window_ns) {
    if (t.observed.empty()) {
        return std::nan("");
    }
    const Nanos from = std::max(now - window_ns, t.observed.front().start_ns);
    if (now <= from) {
        return std::nan("");
    }
    // Only the tail can reach into the window; intervals are appended in time order.
    size_t first = t.observed.size();
    while (first > 0 && t.observed[first - 1].end_ns > from) {
        --first;
    }
    const std::span<const channel::IdleInterval> tail(t.observed.data() + first,
                                                      t.observed.size() - first);
    return static_cast<double>(idleTimeIn(tail, from, now)) / static_cast<double>(now - from);
}

std::string pct(double v) {
    if (std::isnan(v)) {
        return "n/a";
    }
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%.1f%%", v * 100);
    return buf;
}

void render(const Recorder& recorder, Nanos now, int max_windows) {
    for (const auto& cp : recorder.channels()) {
        const Recorder::Channel& c = *cp;
        if (!c.reader) {
            std::printf("%s\n  not readable: %s\n\n", c.timeline.name.c_str(),
                        c.last_error.c_str());
            continue;
        }
        const channel::ChannelReader& r = *c.reader;
        const channel::SegmentInfo& info = r.info();
        std::printf("%s  generation %" PRIu64 "  writer pid %d (%s, %s)\n", c.timeline.name.c_str(),
                    info.generation, info.writer_pid, channel::lifecycleName(r.lifecycle()),
                    r.writerAlive() ? "alive" : "gone");
        if (c.last_state) {
            const auto& s = *c.last_state;
            std::printf("  status      %s (%s) for %s\n", channel::stateName(s.state),
                        channel::reasonName(s.reason), formatDuration(now - s.since_ns).c_str());
            std::printf(
                "  period      %s (confidence %s)\n",
                s.stats.period_ns > 0 ? formatDuration(s.stats.period_ns).c_str() : "unknown",
                pct(channel::fromPpm(s.stats.period_confidence_ppm)).c_str());
            std::printf(
                "  idle        %s published by the writer, %s observed over the last 10 s\n",
                pct(channel::fromPpm(s.stats.idle_fraction_ppm)).c_str(),
                pct(recentIdleFraction(c.timeline, now, 10 * kNsPerSec)).c_str());
        }
        if (c.current) {
            std::printf("  predicted   set %" PRIu64 ":", c.current->set_id);
            int shown = 0;
            for (const auto& w : c.current->windows) {
                if (w.end_ns <= now) {
                    continue;
                }
                if (shown++ == max_windows) {
                    std::printf(" ...");
                    break;
                }
                std::printf("  %s%s for %s (%.0f%%)", w.start_ns >= now ? "+" : "",
                            formatDuration(w.start_ns - now).c_str(),
                            formatDuration(w.end_ns - w.start_ns).c_str(),
                            channel::fromPpm(w.confidence_ppm) * 100);
            }
            std::printf("%s\n", shown == 0 ? "  no upcoming window" : "");
        }
        const ChannelReport report = analyzeChannel(c.timeline, now);
        std::printf("  accuracy    coverage %s, precision %s over %s of history\n",
                    pct(coverageOf(report.accuracy)).c_str(),
                    pct(precisionOf(report.accuracy)).c_str(),
                    formatDuration(report.eval_to_ns - report.eval_from_ns).c_str());
        std::printf("  records     %zu idle intervals, %zu sets seen; lost %" PRIu64
                    "; restarts %" PRIu64 "%s%s\n\n",
                    c.timeline.observed.size(), c.timeline.sets.size(),
                    c.timeline.lost_observed + c.timeline.lost_windows, r.counters().restarts,
                    c.last_error.empty() ? "" : "; last error: ", c.last_error.c_str());
    }
}

}  // namespace

int cmdWatch(int argc, char** argv) {
    auto specs = channelFlags();
    specs.push_back({"interval-ms", true, "MS", "refresh interval (default 500)"});
    specs.push_back({"count", true, "N", "exit after N refreshes (default 0: until Ctrl-C)"});
    specs.push_back({"windows", true, "N", "upcoming windows to list (default 4)"});
    specs.push_back({"wait", false, "", "wait for channels that do not exist yet"});
    specs.push_back({"help", false, "", "show this help"});
    auto args = Args::parse(argc, argv, 2, specs);
    if (!args.isOk()) {
        return usageError("watch", args.status());
    }
    const Args& a = args.value();
    if (a.has("help")) {
        std::printf(
            "usage: atlas-bubbles watch [--channel NAME | --rank N]... [--interval-ms MS]\n"
            "Live view of bubble channels (all /dev/shm/atlas-bubbles-* when none is named):\n"
            "status, period, observed idle fraction, upcoming predicted windows relative to\n"
            "now, and the prediction accuracy measured since watch started.\n\n%s",
            formatFlags(specs).c_str());
        return kExitOk;
    }
    if (!a.positional().empty()) {
        return usageError(
            "watch", {Code::kInvalidArgument, "unexpected argument '" + a.positional()[0] + "'"});
    }
    auto interval = a.getDouble("interval-ms", 500, 10, 3'600'000);
    auto count = a.getInt("count", 0, 0, INT64_MAX);
    auto windows = a.getInt("windows", 4, 0, 1000);
    for (const Status& s : {interval.status(), count.status(), windows.status()}) {
        if (!s.isOk()) {
            return usageError("watch", s);
        }
    }
    auto names = selectChannels(a);
    if (!names.isOk()) {
        return names.status().code() == Code::kInvalidArgument
                   ? usageError("watch", names.status())
                   : fail("watch", names.status().message());
    }
    Recorder recorder(names.value(), monotonicNowNs());
    recorder.poll(monotonicNowNs());
    if (!a.has("wait")) {
        for (const auto& c : recorder.channels()) {
            if (!c->reader) {
                return fail("watch", c->last_error + " (use --wait to wait for the writer)");
            }
        }
    }
    installStopHandlers();
    const bool tty = ::isatty(STDOUT_FILENO) != 0;
    const Nanos interval_ns = static_cast<Nanos>(interval.value() * 1e6);
    // Poll often enough that small rings are not overrun between screen refreshes.
    const Nanos poll_ns = std::min<Nanos>(interval_ns, 20 * kNsPerMs);
    Nanos next_render = monotonicNowNs();
    for (int64_t shown = 0; !g_stop && (count.value() == 0 || shown < count.value());) {
        const Nanos now = monotonicNowNs();
        recorder.poll(now);
        if (now >= next_render) {
            if (tty) {
                std::printf("\033[H\033[2J");  // home + clear: redraw in place
            }
            render(recorder, now, static_cast<int>(windows.value()));
            std::fflush(stdout);
            ++shown;
            next_render = now + interval_ns;
        }
        const Nanos wait = std::min(poll_ns, std::max<Nanos>(next_render - monotonicNowNs(), 0));
        timespec ts{static_cast<time_t>(wait / kNsPerSec), static_cast<long>(wait % kNsPerSec)};
        nanosleep(&ts, nullptr);
    }
    return kExitOk;
}

}  // namespace atlas::bubbletea::tools
