#include "bubbletea/tools/timeline.h"

#include "bubbletea/tools/cli_common.h"
#include "scheduler/bubble_score.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <utility>

namespace atlas::bubbletea::tools {

using channel::IdleInterval;
using channel::PredictedWindow;
using nlohmann::json;

namespace {

constexpr const char* kFormatName = "atlas-bubbles-timeline";
constexpr int kFormatVersion = 1;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

json iterationJson(uint64_t iteration) {
    return iteration == channel::kUnknownIteration ? json(nullptr) : json(iteration);
}

uint64_t iterationFrom(const json& j) {
    return j.is_null() ? channel::kUnknownIteration : j.get<uint64_t>();
}

json windowJson(const PredictedWindow& w) {
    return {{"start_ns", w.start_ns},
            {"end_ns", w.end_ns},
            {"confidence", channel::fromPpm(w.confidence_ppm)},
            {"iteration", iterationJson(w.iteration)},
            {"source", channel::sourceName(w.source)}};
}

// An observed interval; the transfer fields and the writer's step reports only when known
// (nonzero), so recordings of writers that do not report them stay as they were.
json withTransfer(json j, const IdleInterval& i) {
    if (i.transfer_start_ns != 0) {
        j["transfer_start_ns"] = i.transfer_start_ns;
    }
    if (i.transfer_bytes != 0) {
        j["transfer_bytes"] = i.transfer_bytes;
    }
    const std::pair<const char*, Nanos> steps[] = {
        {"taken_step_ns", i.taken_step_ns},
        {"open_from_step_ns", i.open_from_step_ns},
        {"open_to_step_ns", i.open_to_step_ns},
        {"transfer_seen_step_ns", i.transfer_seen_step_ns},
    };
    for (const auto& [key, t] : steps) {
        if (t != 0) {
            j[key] = t;
        }
    }
    return j;
}

json observedJson(const IdleInterval& i) {
    return withTransfer(
        {{"start_ns", i.start_ns}, {"end_ns", i.end_ns}, {"iteration", iterationJson(i.iteration)}},
        i);
}

// Absent transfer and step fields read as 0 (unknown): older recordings still load.
IdleInterval observedFrom(const json& j) {
    IdleInterval i;
    i.start_ns = j.at("start_ns").get<Nanos>();
    i.end_ns = j.at("end_ns").get<Nanos>();
    i.iteration = iterationFrom(j.at("iteration"));
    i.transfer_start_ns = j.value("transfer_start_ns", Nanos{0});
    i.transfer_bytes = j.value("transfer_bytes", uint64_t{0});
    i.taken_step_ns = j.value("taken_step_ns", Nanos{0});
    i.open_from_step_ns = j.value("open_from_step_ns", Nanos{0});
    i.open_to_step_ns = j.value("open_to_step_ns", Nanos{0});
    i.transfer_seen_step_ns = j.value("transfer_seen_step_ns", Nanos{0});
    return i;
}

json observedArgs(const IdleInterval& i) {
    json j = {{"iteration", iterationJson(i.iteration)}};
    if (i.transfer_start_ns != 0) {
        j["transfer_start_ns"] = i.transfer_start_ns;
        j["transfer_bytes"] = i.transfer_bytes;
    }
    return j;
}

PredictedWindow windowFrom(const json& j) {
    PredictedWindow w;
    w.start_ns = j.at("start_ns").get<Nanos>();
    w.end_ns = j.at("end_ns").get<Nanos>();
    w.confidence_ppm = channel::toPpm(j.at("confidence").get<double>());
    w.iteration = iterationFrom(j.at("iteration"));
    const std::string source = j.value("source", std::string("predictor"));
    w.source = source == "arbiter-plan"     ? channel::WindowSource::kArbiterPlan
               : source == "predictor-open" ? channel::WindowSource::kPredictorOpen
                                            : channel::WindowSource::kPredictor;
    return w;
}

// A double that JSON can hold: NaN becomes null.
json number(double v) {
    return std::isnan(v) ? json(nullptr) : json(v);
}

double toUs(Nanos t, Nanos t0) {
    return static_cast<double>(t - t0) / 1000.0;
}

Nanos earliest(const Timeline& t) {
    Nanos e = t.from_ns;
    for (const ChannelTimeline& c : t.channels) {
        for (const IdleInterval& i : c.observed) {
            e = std::min(e, i.start_ns);
        }
        for (const RecordedSet& s : c.sets) {
            e = std::min(e, s.published_ns);
        }
    }
    return e;
}

}  // namespace

double coverageOf(const sched::Accuracy& a) {
    return a.observed_ns > 0 ? a.coverage : kNaN;
}
double precisionOf(const sched::Accuracy& a) {
    return a.predicted_ns > 0 ? a.precision : kNaN;
}

namespace {

std::string percent(double v) {
    if (std::isnan(v)) {
        return "n/a";
    }
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f%%", v * 100.0);
    return buf;
}

}  // namespace

json timelineToJson(const Timeline& timeline) {
    json channels = json::array();
    for (const ChannelTimeline& c : timeline.channels) {
        json writers = json::array();
        for (const WriterEpoch& w : c.writers) {
            writers.push_back(
                {{"generation", w.generation}, {"pid", w.pid}, {"start_ns", w.start_ns}});
        }
        json observed = json::array();
        for (const IdleInterval& i : c.observed) {
            observed.push_back(observedJson(i));
        }
        json sets = json::array();
        for (const RecordedSet& s : c.sets) {
            json windows = json::array();
            for (const PredictedWindow& w : s.windows) {
                windows.push_back(windowJson(w));
            }
            sets.push_back({{"generation", s.generation},
                            {"set_id", s.set_id},
                            {"published_ns", s.published_ns},
                            {"windows", std::move(windows)}});
        }
        json states = json::array();
        for (const StateChange& s : c.states) {
            states.push_back({{"at_ns", s.at_ns},
                              {"state", channel::stateName(s.state)},
                              {"state_code", static_cast<uint32_t>(s.state)},
                              {"reason", channel::reasonName(s.reason)},
                              {"reason_code", static_cast<uint32_t>(s.reason)}});
        }
        channels.push_back({{"name", c.name},
                            {"writers", std::move(writers)},
                            {"observed", std::move(observed)},
                            {"prediction_sets", std::move(sets)},
                            {"states", std::move(states)},
                            {"lost_observed", c.lost_observed},
                            {"lost_windows", c.lost_windows},
                            {"incomplete_sets", c.incomplete_sets},
                            {"invalid_records", c.invalid_records}});
    }
    return {{"format", kFormatName},
            {"version", kFormatVersion},
            {"clock", "CLOCK_MONOTONIC"},
            {"unit", "ns"},
            {"recorded_from_ns", timeline.from_ns},
            {"recorded_to_ns", timeline.to_ns},
            {"channels", std::move(channels)}};
}

Result<Timeline> loadTimeline(const std::string& path) {
    auto text = readFile(path);
    if (!text.isOk()) {
        return text.status();
    }
    const auto j = json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
        return Status(Code::kInvalidArgument, path + " is not valid JSON");
    }
    return timelineFromJson(j);
}

Result<Timeline> timelineFromJson(const json& j) {
    try {
        if (!j.is_object() || j.value("format", std::string()) != kFormatName) {
            return Status(Code::kInvalidArgument,
                          "not an atlas-bubbles timeline (missing \"format\": \"" +
                              std::string(kFormatName) + "\")");
        }
        if (j.at("version").get<int>() != kFormatVersion) {
            return Status(Code::kInvalidArgument,
                          "timeline version " + j.at("version").dump() + " is not supported");
        }
        Timeline t;
        t.from_ns = j.at("recorded_from_ns").get<Nanos>();
        t.to_ns = j.at("recorded_to_ns").get<Nanos>();
        for (const json& jc : j.at("channels")) {
            ChannelTimeline c;
            c.name = jc.at("name").get<std::string>();
            for (const json& w : jc.value("writers", json::array())) {
                c.writers.push_back({w.at("generation").get<uint64_t>(), w.at("pid").get<int32_t>(),
                                     w.at("start_ns").get<Nanos>()});
            }
            for (const json& i : jc.at("observed")) {
                c.observed.push_back(observedFrom(i));
            }
            for (const json& s : jc.at("prediction_sets")) {
                RecordedSet set;
                set.generation = s.value("generation", uint64_t{0});
                set.set_id = s.at("set_id").get<uint64_t>();
                set.published_ns = s.at("published_ns").get<Nanos>();
                for (const json& w : s.at("windows")) {
                    set.windows.push_back(windowFrom(w));
                }
                c.sets.push_back(std::move(set));
            }
            for (const json& s : jc.value("states", json::array())) {
                c.states.push_back(
                    {s.at("at_ns").get<Nanos>(),
                     static_cast<channel::PredictorState>(s.at("state_code").get<uint32_t>()),
                     static_cast<channel::StatusReason>(s.at("reason_code").get<uint32_t>())});
            }
            c.lost_observed = jc.value("lost_observed", uint64_t{0});
            c.lost_windows = jc.value("lost_windows", uint64_t{0});
            c.incomplete_sets = jc.value("incomplete_sets", uint64_t{0});
            c.invalid_records = jc.value("invalid_records", uint64_t{0});
            t.channels.push_back(std::move(c));
        }
        return t;
    } catch (const json::exception& e) {
        return Status(Code::kInvalidArgument, std::string("malformed timeline: ") + e.what());
    }
}

std::vector<EffectiveWindow> effectiveWindows(const ChannelTimeline& channel, Nanos until_ns) {
    std::vector<EffectiveWindow> out;
    // Original [start, end) of each emitted piece -> its index, so a window that the next
    // set repeats continues as one piece instead of being split at every publish.
    std::map<std::pair<Nanos, Nanos>, size_t> last_piece;
    for (size_t k = 0; k < channel.sets.size(); ++k) {
        const Nanos from = channel.sets[k].published_ns;
        const Nanos to = k + 1 < channel.sets.size() ? channel.sets[k + 1].published_ns : until_ns;
        for (const PredictedWindow& w : channel.sets[k].windows) {
            EffectiveWindow e{w, channel.sets[k].set_id};
            const sched::Interval part = sched::reignPart({w.start_ns, w.end_ns}, from, to);
            if (part.length() <= 0) {
                continue;
            }
            e.window.start_ns = part.start_ns;
            e.window.end_ns = part.end_ns;
            const auto key = std::make_pair(w.start_ns, w.end_ns);
            auto it = last_piece.find(key);
            if (it != last_piece.end() && out[it->second].window.end_ns == e.window.start_ns) {
                out[it->second].window.end_ns = e.window.end_ns;
                continue;
            }
            last_piece[key] = out.size();
            out.push_back(e);
        }
    }
    return out;
}

json timelineToChromeTrace(const Timeline& timeline) {
    const Nanos t0 = earliest(timeline);
    json events = json::array();
    for (size_t ci = 0; ci < timeline.channels.size(); ++ci) {
        const ChannelTimeline& c = timeline.channels[ci];
        const int pid = static_cast<int>(ci) + 1;
        events.push_back({{"name", "process_name"},
                          {"ph", "M"},
                          {"pid", pid},
                          {"tid", 0},
                          {"args", {{"name", "GPU channel " + c.name}}}});
        const char* tracks[] = {"observed idle", "predicted windows", "status"};
        for (int tid = 1; tid <= 3; ++tid) {
            events.push_back({{"name", "thread_name"},
                              {"ph", "M"},
                              {"pid", pid},
                              {"tid", tid},
                              {"args", {{"name", tracks[tid - 1]}}}});
            events.push_back({{"name", "thread_sort_index"},
                              {"ph", "M"},
                              {"pid", pid},
                              {"tid", tid},
                              {"args", {{"sort_index", tid}}}});
        }
        for (const IdleInterval& i : c.observed) {
            events.push_back({{"name", "idle"},
                              {"cat", "observed"},
                              {"ph", "X"},
                              {"pid", pid},
                              {"tid", 1},
                              {"ts", toUs(i.start_ns, t0)},
                              {"dur", toUs(i.end_ns, i.start_ns)},
                              {"args", observedArgs(i)}});
        }
        for (const EffectiveWindow& e : effectiveWindows(c, timeline.to_ns)) {
            events.push_back({{"name", "predicted"},
                              {"cat", "predicted"},
                              {"ph", "X"},
                              {"pid", pid},
                              {"tid", 2},
                              {"ts", toUs(e.window.start_ns, t0)},
                              {"dur", toUs(e.window.end_ns, e.window.start_ns)},
                              {"args",
                               {{"set_id", e.set_id},
                                {"confidence", channel::fromPpm(e.window.confidence_ppm)},
                                {"iteration", iterationJson(e.window.iteration)},
                                {"source", channel::sourceName(e.window.source)}}}});
        }
        for (const StateChange& s : c.states) {
            events.push_back({{"name", std::string(channel::stateName(s.state)) + " (" +
                                           channel::reasonName(s.reason) + ")"},
                              {"cat", "status"},
                              {"ph", "i"},
                              {"s", "t"},
                              {"pid", pid},
                              {"tid", 3},
                              {"ts", toUs(s.at_ns, t0)}});
        }
    }
    return events;
}

ChannelReport analyzeChannel(const ChannelTimeline& c, Nanos until_ns, int skip_iterations) {
    ChannelReport r;
    r.name = c.name;
    r.observed_intervals = c.observed.size();
    r.prediction_sets = c.sets.size();
    r.lost_observed = c.lost_observed;
    r.lost_windows = c.lost_windows;
    r.iterations = bubblesPerIteration(c.observed);
    r.bubble_mean = r.bubble_min = r.bubble_max = kNaN;
    if (!r.iterations.empty()) {
        double sum = 0;
        r.bubble_min = std::numeric_limits<double>::infinity();
        r.bubble_max = -std::numeric_limits<double>::infinity();
        for (const auto& b : r.iterations) {
            sum += b.fraction();
            r.bubble_min = std::min(r.bubble_min, b.fraction());
            r.bubble_max = std::max(r.bubble_max, b.fraction());
        }
        r.bubble_mean = sum / static_cast<double>(r.iterations.size());
    }
    if (c.sets.empty() || c.observed.empty()) {
        return r;
    }
    const Nanos first_publish = c.sets.front().published_ns;
    r.eval_from_ns = r.eval_to_ns = first_publish;
    bool have_range = false;
    int skipped = 0;
    for (const auto& b : r.iterations) {
        if (b.start_ns < first_publish || skipped++ < skip_iterations) {
            continue;
        }
        if (!have_range) {
            r.eval_from_ns = b.start_ns;
            have_range = true;
        }
        r.eval_to_ns = b.end_ns;
    }
    if (!have_range) {
        Nanos last_end = first_publish;
        for (const IdleInterval& i : c.observed) {
            last_end = std::max(last_end, i.end_ns);
        }
        r.eval_to_ns = last_end;
    }
    std::vector<sched::Interval> observed;
    observed.reserve(c.observed.size());
    for (const IdleInterval& i : c.observed) {
        observed.push_back({i.start_ns, i.end_ns});
    }
    std::vector<sched::TimedPredictionSet> sets;
    sets.reserve(c.sets.size());
    for (const RecordedSet& s : c.sets) {
        sched::TimedPredictionSet t{s.published_ns, {}};
        for (const PredictedWindow& w : s.windows) {
            t.windows.push_back({w.start_ns, w.end_ns});
        }
        sets.push_back(std::move(t));
    }
    const std::vector<sched::Interval> predicted = sched::effectivePredictions(sets, until_ns);
    r.accuracy =
        sched::measureAccuracy(observed, predicted, sched::Interval{r.eval_from_ns, r.eval_to_ns});
    return r;
}

json reportToJson(const ChannelReport& r) {
    json iterations = json::array();
    for (const auto& b : r.iterations) {
        iterations.push_back({{"iteration", b.iteration},
                              {"start_ns", b.start_ns},
                              {"end_ns", b.end_ns},
                              {"idle_ns", b.idle_ns},
                              {"bubble_fraction", number(b.fraction())}});
    }
    return {{"name", r.name},
            {"iterations", std::move(iterations)},
            {"bubble_fraction",
             {{"mean", number(r.bubble_mean)},
              {"min", number(r.bubble_min)},
              {"max", number(r.bubble_max)}}},
            {"observed_intervals", r.observed_intervals},
            {"prediction_sets", r.prediction_sets},
            {"evaluation", {{"from_ns", r.eval_from_ns}, {"to_ns", r.eval_to_ns}}},
            {"observed_idle_ns", r.accuracy.observed_ns},
            {"predicted_ns", r.accuracy.predicted_ns},
            {"overlap_ns", r.accuracy.overlap_ns},
            {"coverage", number(coverageOf(r.accuracy))},
            {"precision", number(precisionOf(r.accuracy))},
            {"lost_observed", r.lost_observed},
            {"lost_windows", r.lost_windows}};
}

std::string reportToText(const ChannelReport& r) {
    char buf[512];
    std::string out = "channel " + r.name + "\n";
    std::snprintf(buf, sizeof(buf), "  complete iterations  %zu (of %zu observed intervals)\n",
                  r.iterations.size(), r.observed_intervals);
    out += buf;
    out += "  bubble fraction      mean " + percent(r.bubble_mean) + "  min " +
           percent(r.bubble_min) + "  max " + percent(r.bubble_max) + "\n";
    std::snprintf(buf, sizeof(buf), "  prediction sets      %zu, accuracy evaluated over %.3f s\n",
                  r.prediction_sets, static_cast<double>(r.eval_to_ns - r.eval_from_ns) / 1e9);
    out += buf;
    out += "  coverage (recall)    " + percent(coverageOf(r.accuracy)) +
           "  of observed idle time fell inside predicted windows\n";
    out += "  precision            " + percent(precisionOf(r.accuracy)) +
           "  of predicted window time was actually idle\n";
    if (r.lost_observed + r.lost_windows > 0) {
        std::snprintf(buf, sizeof(buf),
                      "  WARNING: %llu observed and %llu window records were overwritten before "
                      "they were read (poll faster or enlarge the rings)\n",
                      static_cast<unsigned long long>(r.lost_observed),
                      static_cast<unsigned long long>(r.lost_windows));
        out += buf;
    }
    return out;
}

}  // namespace atlas::bubbletea::tools
