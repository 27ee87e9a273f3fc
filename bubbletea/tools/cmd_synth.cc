// `synth`: a synthetic periodic writer (see synth.h for the exact trace and its ground truth).
#include <cstdio>

#include "bubbletea/tools/cli_common.h"
#include "bubbletea/tools/commands.h"
#include "bubbletea/tools/synth.h"
#include "channel/channel_writer.h"

namespace atlas::bubbletea::tools {

int cmdSynth(int argc, char** argv) {
    std::vector<FlagSpec> specs = {
        {"channel", true, "NAME", "channel to write (default: that of --rank, or rank 0)"},
        {"rank", true, "N", "write the default channel of local rank N"},
        {"period-ms", true, "MS", "iteration period (default 50)"},
        {"idle", true, "OFF:DUR,...", "idle intervals per iteration in ms (default 0:20)"},
        {"shift-ms", true, "MS", "shift of predicted windows vs. the truth (default 0)"},
        {"confidence", true, "C", "confidence of predicted windows, 0..1 (default 0.9)"},
        {"horizon", true, "N", "iterations predicted beyond the current one (default 4)"},
        {"warmup", true, "N", "iterations before the first prediction (default 3)"},
        {"seconds", true, "S", "stop after S seconds (default 0: until Ctrl-C)"},
        {"window-capacity", true, "N", "window ring cells (default 256)"},
        {"idle-capacity", true, "N", "idle ring cells (default 4096)"},
        {"mode", true, "OCTAL", "permission bits of the segment (default 0600)"},
        {"keep", false, "", "leave the segment behind (closed) on exit"},
        {"take-over", false, "", "replace a channel whose writer is still alive"},
        {"help", false, "", "show this help"}};
    auto args = Args::parse(argc, argv, 2, specs);
    if (!args.isOk()) {
        return usageError("synth", args.status());
    }
    const Args& a = args.value();
    if (a.has("help")) {
        std::printf(
            "usage: atlas-bubbles synth [--channel NAME | --rank N] [options]\n"
            "Plays the NCCL plugin: writes a periodic synthetic trace to a bubble channel so\n"
            "watch/record/stats and bubbletea can run without a training job. Iteration k\n"
            "starts at t0 + k*period; each idle interval OFF:DUR is observed as\n"
            "[start+OFF, start+OFF+DUR). Predictions are the same intervals moved by --shift-ms,\n"
            "so with one interval of duration D: coverage = precision = (D - shift) / D and the\n"
            "bubble fraction is D / period.\n\n%s",
            formatFlags(specs).c_str());
        return kExitOk;
    }
    if (!a.positional().empty()) {
        return usageError(
            "synth", {Code::kInvalidArgument, "unexpected argument '" + a.positional()[0] + "'"});
    }
    SynthSpec spec;
    auto period = a.getDouble("period-ms", 50, 0.01, 3'600'000);
    auto shift = a.getDouble("shift-ms", 0, -3'600'000, 3'600'000);
    auto confidence = a.getDouble("confidence", 0.9, 0, 1);
    auto horizon = a.getInt("horizon", 4, 0, 1000);
    auto warmup = a.getInt("warmup", 3, 1, 1'000'000);
    auto seconds = a.getDouble("seconds", 0, 0, 1e7);
    auto window_cap =
        a.getInt("window-capacity", 256, channel::kMinWindowCapacity, channel::kMaxWindowCapacity);
    auto idle_cap =
        a.getInt("idle-capacity", 4096, channel::kMinIdleCapacity, channel::kMaxIdleCapacity);
    for (const Status& s :
         {period.status(), shift.status(), confidence.status(), horizon.status(), warmup.status(),
          seconds.status(), window_cap.status(), idle_cap.status()}) {
        if (!s.isOk()) {
            return usageError("synth", s);
        }
    }
    spec.period_ns = static_cast<Nanos>(period.value() * 1e6);
    spec.shift_ns = static_cast<Nanos>(shift.value() * 1e6);
    spec.confidence_ppm = channel::toPpm(confidence.value());
    spec.horizon = static_cast<int>(horizon.value());
    spec.warmup = static_cast<int>(warmup.value());
    if (a.has("idle")) {
        auto idle = parseSynthIdles(a.get("idle"));
        if (!idle.isOk()) {
            return usageError("synth", idle.status());
        }
        spec.idle = idle.value();
    }
    if (Status valid = validateSynthSpec(spec); !valid.isOk()) {
        return usageError("synth", valid);
    }

    std::string name = a.get("channel");
    if (name.empty()) {
        auto rank = a.getInt("rank", 0, 0, 1'000'000);
        if (!rank.isOk()) {
            return usageError("synth", rank.status());
        }
        name = channel::defaultChannelName(static_cast<int>(rank.value()));
    }
    channel::WriterOptions options;
    options.keep_on_close = a.has("keep");
    options.take_over = a.has("take-over");
    if (a.has("mode")) {
        // Octal digits only (strtol also took spaces and a sign).
        const std::string text = a.get("mode");
        const bool digits = !text.empty() && text.size() <= 4 &&
                            text.find_first_not_of("01234567") == std::string::npos;
        unsigned mode = digits ? 0 : 01000;
        for (const char c : digits ? text : std::string()) {
            mode = mode * 8 + static_cast<unsigned>(c - '0');
        }
        if (mode > 0777) {
            return usageError("synth", {Code::kInvalidArgument,
                                        "--mode: '" + text + "' is not octal permission bits"});
        }
        options.mode = static_cast<mode_t>(mode);
    }
    const channel::ChannelCapacities caps{static_cast<uint32_t>(window_cap.value()),
                                          static_cast<uint32_t>(idle_cap.value())};
    auto writer = channel::ChannelWriter::create(name, caps, options);
    if (!writer.isOk()) {
        return writer.status().code() == Code::kInvalidArgument
                   ? usageError("synth", writer.status())
                   : fail("synth", writer.status().message());
    }
    installStopHandlers();
    // Start on a round 10 ms just ahead, so timestamps are easy to read in traces.
    const Nanos t0 = (monotonicNowNs() / (10 * kNsPerMs) + 1) * (10 * kNsPerMs);
    const Nanos end = seconds.value() > 0 ? t0 + static_cast<Nanos>(seconds.value() * 1e9) : 0;
    std::fprintf(stderr,
                 "atlas-bubbles synth: writing %s (generation %llu), period %s, %zu idle "
                 "interval(s), shift %s\n",
                 name.c_str(), static_cast<unsigned long long>(writer.value().generation()),
                 formatDuration(spec.period_ns).c_str(), spec.idle.size(),
                 formatDuration(spec.shift_ns).c_str());
    runSynth(writer.value(), spec, t0, end, &g_stop);
    writer.value().close();
    return kExitOk;
}

}  // namespace atlas::bubbletea::tools
