// `replay`: re-runs the scheduler's BubblePredictor over the idle intervals of a recorded
// timeline, the way the plugin's publisher runs it (intervals reported when they end, a
// prediction every publish tick, a set published when it changes), and reports the same
// coverage/precision as `stats`. It answers "what would these settings have predicted on my
// job?" without rerunning the job; the recorded prediction sets are replaced, nothing else.
#include <cstdio>
#include <string>
#include <vector>

#include "bubbletea/tools/args.h"
#include "bubbletea/tools/cli_common.h"
#include "bubbletea/tools/commands.h"
#include "bubbletea/tools/timeline.h"
#include "scheduler/bubble_predictor.h"
#include "scheduler/open_wait_model.h"

namespace atlas::bubbletea::tools {
namespace {

std::vector<FlagSpec> replayFlags() {
    return {
        {"from", true, "FILE.json", "a timeline written by 'record' (required)"},
        {"guard-us", true, "US", "guard band at both window ends (default 200, as the plugin)"},
        {"slot-tolerance", true, "F",
         "slot match window as a fraction of the period (default: the predictor's)"},
        {"slot-tolerance-max-us", true, "US",
         "upper bound of the slot match window (default: the predictor's)"},
        {"min-idle-us", true, "US", "ignore idle intervals shorter than this (default 0)"},
        {"duration-quantile", true, "Q",
         "predicted length = this quantile of a slot's recent lengths (default: the "
         "predictor's)"},
        {"no-confirm-open", false, "",
         "windows stand as predicted (default: in force once their interval opens, as the "
         "plugin does)"},
        {"slots-only", false, "",
         "open windows from the predictor's slots alone (default: also from the open wait's "
         "transfer, where the recording has it, and its elapsed time, as the plugin does)"},
        {"publish-us", true, "US", "publish tick (default 1000, as the plugin)"},
        {"out", true, "PREFIX",
         "also write the replayed timeline: PREFIX.json and PREFIX.trace.json (Perfetto)"},
        {"skip-iterations", true, "N",
         "leave the first N iterations after the first prediction out of the accuracy"},
        {"json", false, "", "print the report as JSON"},
        {"help", false, "", "show this help"},
    };
}

// Replays one channel: its observed intervals through a fresh predictor. Replaces the
// prediction sets with those the publisher would have published, and the observed intervals'
// iteration numbers with the ones it would have given them (the recorded ones come from the
// recorded run's detector, and stats delimits iterations with them).
// open_wait == nullptr: windows from the slots alone.
void replayChannel(ChannelTimeline& c, const sched::BubblePredictorConfig& pc,
                   const sched::OpenWaitConfig* open_wait, Nanos tick_ns) {
    std::vector<RecordedSet>& sets = c.sets;
    sets.clear();
    if (c.observed.empty()) {
        return;
    }
    // The publisher learns of an interval when it ends; feed them in end order, as it would.
    std::vector<channel::IdleInterval>& byEnd = c.observed;
    std::stable_sort(byEnd.begin(), byEnd.end(),
                     [](const auto& a, const auto& b) { return a.end_ns < b.end_ns; });
    sched::BubblePredictor predictor(pc);
    sched::OpenWaitModel open_wait_model(open_wait != nullptr ? *open_wait
                                                              : sched::OpenWaitConfig{});
    std::vector<sched::PredictedWindow> predicted;
    std::vector<channel::PredictedWindow> last;
    size_t next = 0;
    const Nanos from = byEnd.front().end_ns;
    const Nanos to = byEnd.back().end_ns;
    uint64_t set_id = 0;
    for (Nanos now = from; now <= to + tick_ns; now += tick_ns) {
        for (; next < byEnd.size() && byEnd[next].end_ns <= now; ++next) {
            const auto est = predictor.period(byEnd[next].start_ns);
            byEnd[next].iteration =
                est.locked()
                    ? static_cast<uint64_t>(std::max<int64_t>(0, est.cycleOf(byEnd[next].start_ns)))
                    : channel::kUnknownIteration;
            const channel::IdleInterval& iv = byEnd[next];
            (void)predictor.observe({iv.start_ns, iv.end_ns});
            open_wait_model.learn(
                {iv.start_ns, iv.end_ns, iv.transfer_start_ns, iv.transfer_bytes});
        }
        // The plugin's recorder knows the interval that is open now, and its transfer once
        // the first data arrived; here it is the one that began by now and ends later
        // (intervals never overlap).
        sched::TransferWait open;
        for (size_t k = next; k < byEnd.size(); ++k) {
            if (byEnd[k].start_ns <= now) {
                open.start_ns = byEnd[k].start_ns;
                if (byEnd[k].transfer_start_ns != 0 && byEnd[k].transfer_start_ns <= now) {
                    open.transfer_start_ns = byEnd[k].transfer_start_ns;
                    open.transfer_bytes = byEnd[k].transfer_bytes;
                }
                break;
            }
        }
        predictor.noteOpen(open.start_ns);
        const sched::PredictionStatus status = predictor.predict(now, &predicted);
        if (open_wait != nullptr && status == sched::PredictionStatus::kOk && pc.confirm_open) {
            sched::completeOpenWindow(open_wait_model, open, false, pc.guard_ns, now,
                                      predictor.period(now).cycleOf(open.start_ns), &predicted);
        }
        std::vector<channel::PredictedWindow> windows;
        windows.reserve(predicted.size());
        for (const auto& p : predicted) {
            windows.push_back({p.start_ns, p.end_ns, static_cast<uint32_t>(p.confidence * 1e6),
                               static_cast<uint64_t>(std::max<int64_t>(0, p.iteration)),
                               p.open ? channel::WindowSource::kPredictorOpen
                                      : channel::WindowSource::kPredictor});
        }
        auto same = [](const channel::PredictedWindow& a, const channel::PredictedWindow& b) {
            return a.start_ns == b.start_ns && a.end_ns == b.end_ns && a.source == b.source;
        };
        if (windows.size() != last.size() ||
            !std::equal(windows.begin(), windows.end(), last.begin(), same)) {
            RecordedSet s;
            s.generation = 1;
            s.set_id = ++set_id;
            s.published_ns = now;
            s.windows = windows;
            sets.push_back(std::move(s));
            last = std::move(windows);
        }
    }
}

}  // namespace

int cmdReplay(int argc, char** argv) {
    const auto specs = replayFlags();
    auto args = Args::parse(argc, argv, 2, specs);
    if (!args.isOk()) {
        return usageError("replay", args.status());
    }
    const Args& a = args.value();
    if (a.has("help")) {
        std::printf(
            "usage: atlas-bubbles replay --from FILE.json [predictor flags] [--json]\n"
            "Re-runs the bubble predictor over the observed idle intervals of a recording, as\n"
            "the plugin would have run it with these settings, and prints the 'stats' report\n"
            "of the replayed predictions (the observed intervals are the recorded ones,\n"
            "numbered into iterations as the replayed predictor would have).\n\n%s",
            formatFlags(specs).c_str());
        return kExitOk;
    }
    if (!a.positional().empty()) {
        return usageError(
            "replay", {Code::kInvalidArgument, "unexpected argument '" + a.positional()[0] + "'"});
    }
    if (!a.has("from")) {
        return usageError("replay", {Code::kInvalidArgument, "--from FILE.json is required"});
    }
    sched::BubblePredictorConfig pc;
    const auto guard = a.getInt("guard-us", 200, 0, 1000000);
    const auto tol = a.getDouble("slot-tolerance", pc.slot_tolerance, 1e-6, 0.25);
    const auto tol_max =
        a.getInt("slot-tolerance-max-us", pc.slot_tolerance_max_ns / kNsPerUs, 1, 3600LL * 1000000);
    const auto min_idle = a.getInt("min-idle-us", 0, 0, 3600LL * 1000000);
    const auto quantile = a.getDouble("duration-quantile", pc.duration_quantile, 0.0, 1.0);
    const auto skip = a.getInt("skip-iterations", 0, 0, 1000000);
    const auto tick = a.getInt("publish-us", 1000, 10, 1000000);
    for (const Status& s : {guard.status(), tol.status(), tol_max.status(), min_idle.status(),
                            tick.status(), quantile.status(), skip.status()}) {
        if (!s.isOk()) {
            return usageError("replay", s);
        }
    }
    pc.guard_ns = guard.value() * kNsPerUs;
    pc.slot_tolerance = tol.value();
    pc.slot_tolerance_max_ns = tol_max.value() * kNsPerUs;
    pc.min_idle_ns = min_idle.value() * kNsPerUs;
    pc.duration_quantile = quantile.value();
    pc.confirm_open = !a.has("no-confirm-open");
    if (Status v = sched::validate(pc); !v.isOk()) {
        return usageError("replay", v);
    }
    auto timeline = loadTimeline(a.get("from"));
    if (!timeline.isOk()) {
        return fail("replay", timeline.status().message());
    }
    const sched::OpenWaitConfig open_wait_config;  // the plugin's
    nlohmann::json reports = nlohmann::json::array();
    Timeline replayed = timeline.value();
    for (ChannelTimeline& c : replayed.channels) {
        replayChannel(c, pc, a.has("slots-only") ? nullptr : &open_wait_config,
                      tick.value() * kNsPerUs);
        const ChannelReport r = analyzeChannel(c, replayed.to_ns, static_cast<int>(skip.value()));
        if (a.has("json")) {
            reports.push_back(reportToJson(r));
        } else {
            std::printf("%s", reportToText(r).c_str());
        }
    }
    if (a.has("json")) {
        std::printf("%s\n", nlohmann::json{{"channels", reports}}.dump(1).c_str());
    }
    if (a.has("out")) {
        const std::string prefix = a.get("out");
        Status s1 = writeFile(prefix + ".json", timelineToJson(replayed).dump(1) + "\n");
        Status s2 =
            writeFile(prefix + ".trace.json", timelineToChromeTrace(replayed).dump() + "\n");
        if (!s1.isOk() || !s2.isOk()) {
            return fail("replay", (!s1.isOk() ? s1 : s2).message());
        }
    }
    return kExitOk;
}

}  // namespace atlas::bubbletea::tools
