// `replay`: re-runs the plugin's publishing step (scheduler/'s BubblePipeline, the same
// object) over the waits of a recorded timeline and reports the same coverage/precision as
// `stats`. It answers "what would these settings have predicted on my job?" without rerunning
// the job, and, at the plugin's recorded steps with its settings, reproduces exactly what it
// published (replay.h); the recorded prediction sets are replaced, nothing else.
#include <cstdio>
#include <string>
#include <vector>

#include "bubbletea/tools/args.h"
#include "bubbletea/tools/cli_common.h"
#include "bubbletea/tools/commands.h"
#include "bubbletea/tools/replay.h"
#include "bubbletea/tools/timeline.h"

namespace atlas::bubbletea::tools {
namespace {

// The flags that change the step away from the plugin's.
const char* const kSettingFlags[] = {"guard-us",    "track-tolerance",   "track-tolerance-max-us",
                                     "min-idle-us", "duration-quantile", "no-confirm-open",
                                     "tracks-only", "publish-us"};

// The predictor's recurring bubbles were "slots", the word of temporal sharing's time slot.
const std::vector<RenamedFlag> kRenamedFlags = {{"slot-tolerance", "track-tolerance"},
                                                {"slot-tolerance-max-us", "track-tolerance-max-us"},
                                                {"slots-only", "tracks-only"}};

std::vector<FlagSpec> replayFlags(const sched::BubblePipelineConfig& d) {
    const sched::BubblePredictorConfig& p = d.predictor;
    const std::string plugin = " (default: the plugin's, ";
    return {
        {"from", true, "FILE.json", "a timeline written by 'record' (required)"},
        {"guard-us", true, "US",
         "guard band at both window ends" + plugin + std::to_string(p.guard_ns / kNsPerUs) + ")"},
        {"track-tolerance", true, "F",
         "track match window as a fraction of the period" + plugin +
             std::to_string(p.track_tolerance) + ")"},
        {"track-tolerance-max-us", true, "US",
         "upper bound of the track match window" + plugin +
             std::to_string(p.track_tolerance_max_ns / kNsPerUs) + ")"},
        {"min-idle-us", true, "US",
         "ignore idle intervals shorter than this" + plugin +
             std::to_string(p.min_idle_ns / kNsPerUs) + ")"},
        {"duration-quantile", true, "Q",
         "predicted length = this quantile of a track's recent lengths" + plugin +
             std::to_string(p.duration_quantile) + ")"},
        {"no-confirm-open", false, "",
         "windows stand as predicted (default: in force once their wait opens, as the plugin "
         "does)"},
        {"tracks-only", false, "",
         "open windows from the predictor's tracks alone (default: also from the open wait's "
         "transfer, where the recording has it, and its elapsed time, as the plugin does)"},
        {"publish-us", true, "US",
         "tick of --steps ticks" + plugin + std::to_string(d.step_interval_ns / kNsPerUs) + ")"},
        {"steps", true, "recorded|ticks",
         "step at the plugin's recorded steps (exact; the default when the recording has them "
         "and no setting above is given) or every --publish-us"},
        {"check", false, "",
         "exit 1 unless the replayed sets equal the recorded ones (recorded steps)"},
        {"out", true, "PREFIX",
         "also write the replayed timeline: PREFIX.json and PREFIX.trace.json (Perfetto)"},
        {"skip-iterations", true, "N",
         "leave the first N iterations after the first prediction out of the accuracy"},
        {"json", false, "", "print the report as JSON"},
        {"help", false, "", "show this help"},
    };
}

// The options the flags ask for, on top of the plugin's step.
Result<ReplayOptions> replayOptions(const Args& a) {
    ReplayOptions o;
    sched::BubblePredictorConfig& pc = o.pipeline.predictor;
    const auto guard = a.getInt("guard-us", pc.guard_ns / kNsPerUs, 0, 1000000);
    const auto tol = a.getDouble("track-tolerance", pc.track_tolerance, 1e-6, 0.25);
    const auto tol_max = a.getInt("track-tolerance-max-us", pc.track_tolerance_max_ns / kNsPerUs, 1,
                                  3600LL * 1000000);
    const auto min_idle = a.getInt("min-idle-us", pc.min_idle_ns / kNsPerUs, 0, 3600LL * 1000000);
    const auto quantile = a.getDouble("duration-quantile", pc.duration_quantile, 0.0, 1.0);
    const auto tick = a.getInt("publish-us", o.pipeline.step_interval_ns / kNsPerUs, 10, 1000000);
    for (const Status& s : {guard.status(), tol.status(), tol_max.status(), min_idle.status(),
                            tick.status(), quantile.status()}) {
        ATLAS_RETURN_IF_ERROR(s);
    }
    pc.guard_ns = guard.value() * kNsPerUs;
    pc.track_tolerance = tol.value();
    pc.track_tolerance_max_ns = tol_max.value() * kNsPerUs;
    pc.min_idle_ns = min_idle.value() * kNsPerUs;
    pc.duration_quantile = quantile.value();
    pc.confirm_open = pc.confirm_open && !a.has("no-confirm-open");
    o.pipeline.open_wait_rules = o.pipeline.open_wait_rules && !a.has("tracks-only");
    o.pipeline.step_interval_ns = tick.value() * kNsPerUs;
    ATLAS_RETURN_IF_ERROR(sched::validate(o.pipeline));
    bool settings = false;
    for (const char* f : kSettingFlags) {
        settings = settings || a.has(f);
    }
    // Other settings than the plugin's would have published at other times than it stepped.
    o.steps = settings ? ReplaySteps::kTicks : ReplaySteps::kAuto;
    if (a.has("steps")) {
        const std::string s = a.get("steps");
        if (s != "recorded" && s != "ticks") {
            return Status(Code::kInvalidArgument,
                          "--steps must be recorded or ticks, not '" + s + "'");
        }
        o.steps = s == "recorded" ? ReplaySteps::kRecorded : ReplaySteps::kTicks;
    }
    return o;
}

}  // namespace

int cmdReplay(int argc, char** argv) {
    const auto specs = replayFlags(sched::BubblePipelineConfig{});
    auto args = Args::parse(argc, argv, 2, specs, kRenamedFlags);
    if (!args.isOk()) {
        return usageError("replay", args.status());
    }
    const Args& a = args.value();
    if (a.has("help")) {
        std::printf(
            "usage: atlas-bubbles replay --from FILE.json [predictor flags] [--json]\n"
            "Re-runs the plugin's bubble publishing step over the observed waits of a\n"
            "recording, as the plugin would have run it with these settings, and prints the\n"
            "'stats' report of the replayed predictions (the observed waits are the recorded\n"
            "ones, numbered into iterations as the replayed predictor would have). With the\n"
            "plugin's settings at its recorded steps the replay is exact: it says whether the\n"
            "replayed sets are the recorded ones.\n\n%s",
            formatFlags(specs, kRenamedFlags).c_str());
        return kExitOk;
    }
    if (!a.positional().empty()) {
        return usageError(
            "replay", {Code::kInvalidArgument, "unexpected argument '" + a.positional()[0] + "'"});
    }
    if (!a.has("from")) {
        return usageError("replay", {Code::kInvalidArgument, "--from FILE.json is required"});
    }
    auto options = replayOptions(a);
    const auto skip = a.getInt("skip-iterations", 0, 0, 1000000);
    if (!options.isOk() || !skip.isOk()) {
        return usageError("replay", !options.isOk() ? options.status() : skip.status());
    }
    auto timeline = loadTimeline(a.get("from"));
    if (!timeline.isOk()) {
        return fail("replay", timeline.status().message());
    }
    nlohmann::json reports = nlohmann::json::array();
    Timeline replayed = timeline.value();
    bool identical = true;
    for (size_t i = 0; i < replayed.channels.size(); ++i) {
        ChannelTimeline& c = replayed.channels[i];
        auto outcome = replayChannel(c, options.value());
        if (!outcome.isOk()) {
            return fail("replay", outcome.status().message());
        }
        const Status same = outcome->recorded_steps
                                ? sameSets(timeline.value().channels[i], c)
                                : Status(Code::kUnavailable, "not replayed at the recorded steps");
        identical = identical && same.isOk();
        const ChannelReport r = analyzeChannel(c, replayed.to_ns, static_cast<int>(skip.value()));
        if (a.has("json")) {
            nlohmann::json j = reportToJson(r);
            j["replay"] = {{"steps", outcome->recorded_steps ? "recorded" : "ticks"},
                           {"step_count", outcome->steps},
                           {"identical_to_recorded", same.isOk()}};
            reports.push_back(std::move(j));
        } else {
            std::printf("%s", reportToText(r).c_str());
            if (outcome->recorded_steps) {
                std::printf("  replayed at the plugin's %zu recorded steps: %s\n", outcome->steps,
                            same.isOk() ? "the recorded prediction sets, exactly"
                                        : ("differs: " + same.message()).c_str());
            } else {
                std::printf("  replayed at %lld us ticks\n",
                            static_cast<long long>(options->pipeline.step_interval_ns / kNsPerUs));
            }
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
    if (a.has("check") && !identical) {
        return fail("replay", "the replayed prediction sets differ from the recorded ones");
    }
    return kExitOk;
}

}  // namespace atlas::bubbletea::tools
