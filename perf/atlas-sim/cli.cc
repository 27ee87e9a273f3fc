#include "perf/atlas-sim/cli.h"

#include <fstream>
#include <iostream>

#include "options/help.h"
#include "options/table.h"
#include "perf/atlas-sim/config.h"
#include "perf/atlas-sim/plan.h"
#include "perf/atlas-sim/report.h"
#include "perf/atlas-sim/trace.h"

namespace atlas::sim {

namespace {

constexpr int kOk = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;

const char* kPreamble = R"(atlas-sim: discrete-event simulator of geo-distributed LLM training
(Atlas WAN transport and link scheduling, placement, BubbleTea prefill in GPU bubbles).

usage:
  atlas-sim run CONFIG [options]      simulate one configuration, print a table
  atlas-sim compare CONFIG [options]  simulate every entry of the config's "variants";
                                      speed-up is relative to the first
  atlas-sim plan CONFIG [options]     search DP/PP/TP, micro-batching and the DC subset
                                      for the fastest iteration

options:
)";

struct Options {
    std::string command;
    std::string config;
    std::vector<std::string> sets;
    std::string json;
    std::string trace;
    std::string plots;
    int trace_iterations = 2;
    int trace_pipelines = 8;
    bool quiet = false;
    bool help = false;
};

using namespace options::kinds;

#define ATLAS_SIM_OPTIONS(X)                                                                      \
    X("--set", Repeat<String>, sets, 0, 0, "PATH=VALUE",                                          \
      "override a config key before parsing: PATH is dotted (network.policy, "                    \
      "cluster.dcs.0.gpus), VALUE is read as JSON when it parses (4, true, [1,2]), else as a "    \
      "string")                                                                                   \
    X("--json", Path, json, 0, 0, "FILE", "write the results (and the effective config) as JSON") \
    X("--trace", Path, trace, 0, 0, "FILE",                                                       \
      "(run) Chrome trace JSON of the last iterations (open it in https://ui.perfetto.dev)")      \
    X("--plots", Path, plots, 0, 0, "DIR",                                                        \
      "(run) gnuplot data, script and, with gnuplot installed, timeline and utilization PNGs")    \
    X("--trace-iterations", Uint, trace_iterations, 1, 1 << 20, "N",                              \
      "iterations shown in --trace/--plots (the last ones)")                                      \
    X("--trace-pipelines", Uint, trace_pipelines, 1, 1 << 20, "N",                                \
      "pipelines shown in --trace/--plots (all stages of each)")                                  \
    X("--quiet", Switch, quiet, 0, 0, "", "no table on stdout")                                   \
    X("--help", Switch, help, 0, 0, "", "this text")

#define ATLAS_SIM_ALIASES(X) X("-h", "--help", false)

const options::Table<Options>& table() {
    static const auto t = ATLAS_OPTIONS_TABLE(Options, ATLAS_SIM_OPTIONS, ATLAS_SIM_ALIASES);
    return t;
}

// Returns kOk, or kUsage after printing every problem.
int parseArgs(const std::vector<std::string>& args, Options* o, std::ostream& err) {
    options::Parsed<Options> p;
    options::readArgs(table(), args, &p);
    *o = p.config;
    if (o->help) {
        o->command = "help";
        return kOk;
    }
    if (!p.positional.empty()) {
        o->command = p.positional[0];
    }
    if (p.positional.size() > 1) {
        o->config = p.positional[1];
    }
    for (size_t i = 2; i < p.positional.size(); ++i) {
        p.errors.push_back("unexpected argument " + p.positional[i]);
    }
    if (o->command.empty() && p.errors.empty()) {
        o->command = "help";
        return kOk;
    }
    if (!o->command.empty() && o->command != "run" && o->command != "compare" &&
        o->command != "plan") {
        p.errors.push_back("unknown command '" + o->command + "' (run, compare, plan)");
    } else if (!o->command.empty() && o->config.empty()) {
        p.errors.push_back(o->command + " needs a CONFIG file");
    }
    if (!p.errors.empty()) {
        err << "atlas-sim: " << p.status().message() << "\n";
        return kUsage;
    }
    return kOk;
}

bool writeJson(const std::string& path, const nlohmann::json& j, std::ostream& err) {
    std::ofstream out(path);
    out << j.dump(2) << "\n";
    if (!out) {
        err << "atlas-sim: cannot write " << path << "\n";
        return false;
    }
    return true;
}

int fail(std::ostream& err, const Status& s, int code) {
    err << "atlas-sim: " << s.message() << "\n";
    return code;
}

int cmdRun(const Options& o, const nlohmann::json& doc, std::ostream& out, std::ostream& err) {
    Result<SimConfig> cfg = parseConfig(doc);
    if (!cfg.isOk()) {
        return fail(err, cfg.status(), kUsage);
    }
    RunFlags flags;
    flags.record_timeline = !o.trace.empty() || !o.plots.empty();
    flags.record_iterations = o.trace_iterations;
    flags.record_link_rates = !o.trace.empty();
    Result<RunReport> rep = runConfig(cfg.value(), flags);
    if (!rep.isOk()) {
        return fail(err, rep.status(),
                    rep.status().code() == Code::kInvalidUsage ? kUsage : kFailed);
    }
    if (!o.quiet) {
        printSummary(out, rep.value().summary);
    }
    if (!o.trace.empty()) {
        Status s = writeChromeTrace(rep.value(), o.trace, o.trace_pipelines);
        if (!s.isOk()) {
            return fail(err, s, kFailed);
        }
        out << "trace: wrote " << o.trace << "\n";
    }
    if (!o.plots.empty()) {
        std::string msg;
        Status s = writePlots(rep.value(), o.plots, o.trace_pipelines, &msg);
        if (!s.isOk()) {
            return fail(err, s, kFailed);
        }
        out << "plots: " << msg << "\n";
    }
    if (!o.json.empty() &&
        !writeJson(o.json, {{"config", doc}, {"summary", toJson(rep.value().summary)}}, err)) {
        return kFailed;
    }
    return kOk;
}

int cmdCompare(const Options& o, const nlohmann::json& doc, std::ostream& out, std::ostream& err) {
    Result<SimConfig> cfg = parseConfig(doc);
    if (!cfg.isOk()) {
        return fail(err, cfg.status(), kUsage);
    }
    if (cfg.value().variants.empty()) {
        err << "atlas-sim: compare needs a \"variants\" list in the config\n";
        return kUsage;
    }
    std::vector<Summary> runs;
    nlohmann::json results = nlohmann::json::array();
    for (const Variant& v : cfg.value().variants) {
        nlohmann::json vdoc = doc;
        vdoc.erase("variants");
        Status s = applyOverrides(&vdoc, v.set);
        if (!s.isOk()) {
            return fail(err, s, kUsage);
        }
        vdoc["name"] = v.name;
        Result<SimConfig> vc = parseConfig(vdoc);
        if (!vc.isOk()) {
            return fail(
                err,
                Status(Code::kInvalidUsage, "variant " + v.name + ": " + vc.status().message()),
                kUsage);
        }
        Result<RunReport> rep = runConfig(vc.value(), RunFlags{});
        if (!rep.isOk()) {
            return fail(
                err,
                Status(rep.status().code(), "variant " + v.name + ": " + rep.status().message()),
                rep.status().code() == Code::kInvalidUsage ? kUsage : kFailed);
        }
        if (!o.quiet) {
            printSummary(out, rep.value().summary);
            out << "\n";
        }
        runs.push_back(rep.value().summary);
        results.push_back(
            {{"variant", v.name}, {"set", v.set}, {"summary", toJson(rep.value().summary)}});
    }
    printComparison(out, runs);
    for (size_t i = 0; i < results.size(); ++i) {
        results[i]["speedup_vs_first"] =
            runs[i].iteration_ms > 0 ? runs.front().iteration_ms / runs[i].iteration_ms : 0.0;
    }
    if (!o.json.empty() && !writeJson(o.json, {{"config", doc}, {"variants", results}}, err)) {
        return kFailed;
    }
    return kOk;
}

int cmdPlan(const Options& o, const nlohmann::json& doc, std::ostream& out, std::ostream& err) {
    Result<SimConfig> cfg = parseConfig(doc);
    if (!cfg.isOk()) {
        return fail(err, cfg.status(), kUsage);
    }
    Result<PlanResult> r = plan(cfg.value());
    if (!r.isOk()) {
        return fail(err, r.status(), r.status().code() == Code::kInvalidUsage ? kUsage : kFailed);
    }
    if (!o.quiet) {
        printPlan(out, cfg.value(), r.value());
    }
    if (!o.json.empty() &&
        !writeJson(o.json, {{"config", doc}, {"plan", toJson(r.value())}}, err)) {
        return kFailed;
    }
    return kOk;
}

}  // namespace

std::string helpText() {
    return kPreamble + options::flagHelp(table()) +
           "\ndocs/atlas-sim.md describes every config key and output.\n";
}

std::string optionsMarkdown() {
    return options::markdown(table());
}

int runCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    Options o;
    if (parseArgs(args, &o, err) != kOk) {
        return kUsage;
    }
    if (o.command == "help") {
        out << helpText();
        return kOk;
    }
    Result<nlohmann::json> doc = loadJsonFile(o.config);
    if (!doc.isOk()) {
        return fail(err, doc.status(), kUsage);
    }
    for (const std::string& s : o.sets) {
        Status st = applyOverride(&doc.value(), s);
        if (!st.isOk()) {
            return fail(err, st, kUsage);
        }
    }
    if (o.command == "run") {
        return cmdRun(o, doc.value(), out, err);
    }
    if (o.command == "compare") {
        return cmdCompare(o, doc.value(), out, err);
    }
    return cmdPlan(o, doc.value(), out, err);
}

}  // namespace atlas::sim
