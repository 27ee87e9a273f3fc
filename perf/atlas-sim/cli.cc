#include "perf/atlas-sim/cli.h"

#include <fstream>
#include <iostream>

#include "perf/atlas-sim/config.h"
#include "perf/atlas-sim/plan.h"
#include "perf/atlas-sim/report.h"
#include "perf/atlas-sim/trace.h"

namespace atlas::sim {

namespace {

constexpr int kOk = 0;
constexpr int kFailed = 1;
constexpr int kUsage = 2;

const char* kHelp = R"(atlas-sim: discrete-event simulator of geo-distributed LLM training
(Atlas WAN transport and link scheduling, placement, BubbleTea prefill in GPU bubbles).

usage:
  atlas-sim run CONFIG [options]      simulate one configuration, print a table
  atlas-sim compare CONFIG [options]  simulate every entry of the config's "variants";
                                      speed-up is relative to the first
  atlas-sim plan CONFIG [options]     search DP/PP/TP, micro-batching and the DC subset
                                      for the fastest iteration

options:
  --set PATH=VALUE       override a config key (dotted path, JSON value), repeatable
                         e.g. --set network.policy=fair --set parallelism.dp=4
  --json FILE            write the results as JSON
  --trace FILE           (run) Chrome trace of the last iterations (open in Perfetto)
  --plots DIR            (run) gnuplot timeline and utilization PNGs into DIR
  --trace-iterations N   iterations shown in --trace/--plots (default 2)
  --trace-pipelines N    pipelines shown in --trace/--plots (default 8)
  --quiet                no table on stdout
  -h, --help             this text

docs/atlas-sim.md describes every config key and output.
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
};

bool parseInt(const std::string& s, int lo, int hi, int* out) {
    try {
        size_t pos = 0;
        const long v = std::stol(s, &pos);
        if (pos != s.size() || v < lo || v > hi) {
            return false;
        }
        *out = static_cast<int>(v);
        return true;
    } catch (...) {
        return false;
    }
}

// Returns kOk, or kUsage after printing why.
int parseArgs(const std::vector<std::string>& args, Options* o, std::ostream& err) {
    size_t i = 0;
    auto value = [&](const std::string& flag, std::string* dst) {
        if (i + 1 >= args.size()) {
            err << "atlas-sim: " << flag << " needs a value\n";
            return false;
        }
        *dst = args[++i];
        return true;
    };
    for (; i < args.size(); ++i) {
        const std::string& a = args[i];
        std::string v;
        if (a == "-h" || a == "--help") {
            o->command = "help";
            return kOk;
        } else if (a == "--set") {
            if (!value(a, &v)) {
                return kUsage;
            }
            o->sets.push_back(v);
        } else if (a == "--json") {
            if (!value(a, &o->json)) {
                return kUsage;
            }
        } else if (a == "--trace") {
            if (!value(a, &o->trace)) {
                return kUsage;
            }
        } else if (a == "--plots") {
            if (!value(a, &o->plots)) {
                return kUsage;
            }
        } else if (a == "--trace-iterations" || a == "--trace-pipelines") {
            int* dst = a == "--trace-iterations" ? &o->trace_iterations : &o->trace_pipelines;
            if (!value(a, &v) || !parseInt(v, 1, 1 << 20, dst)) {
                err << "atlas-sim: " << a << " needs a positive integer\n";
                return kUsage;
            }
        } else if (a == "--quiet") {
            o->quiet = true;
        } else if (!a.empty() && a[0] == '-') {
            err << "atlas-sim: unknown option " << a << " (see --help)\n";
            return kUsage;
        } else if (o->command.empty()) {
            o->command = a;
        } else if (o->config.empty()) {
            o->config = a;
        } else {
            err << "atlas-sim: unexpected argument " << a << "\n";
            return kUsage;
        }
    }
    if (o->command.empty()) {
        o->command = "help";
        return kOk;
    }
    if (o->command != "run" && o->command != "compare" && o->command != "plan") {
        err << "atlas-sim: unknown command '" << o->command << "' (run, compare, plan)\n";
        return kUsage;
    }
    if (o->config.empty()) {
        err << "atlas-sim: " << o->command << " needs a CONFIG file\n";
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

int runCli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    Options o;
    if (parseArgs(args, &o, err) != kOk) {
        return kUsage;
    }
    if (o.command == "help") {
        out << kHelp;
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
