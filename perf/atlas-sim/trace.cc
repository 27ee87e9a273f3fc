#include "perf/atlas-sim/trace.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <fstream>
#include <sstream>

extern char** environ;

namespace atlas::sim {

using nlohmann::json;

namespace {

const RunResult& shown(const RunReport& r) {
    return r.bt ? *r.bt : r.base;
}

std::string taskLabel(const Activity& a) {
    switch (a.kind) {
        case ActivityKind::kForward:
            return "F" + std::to_string(a.index);
        case ActivityKind::kBackward:
            return "B" + std::to_string(a.index);
        case ActivityKind::kAllReduce:
            return "allreduce";
        case ActivityKind::kPrefill:
            return "prefill r" + std::to_string(a.index);
    }
    return "?";
}

const char* kColors[] = {"#4e79a7", "#f28e2b", "#9c9c9c", "#59a14f"};

}  // namespace

json chromeTrace(const RunReport& rep, int max_pipelines) {
    const RunResult& r = shown(rep);
    const Layout& l = rep.layout;
    const SimConfig& c = rep.config;
    json events = json::array();
    for (size_t dc = 0; dc < c.cluster.dcs.size(); ++dc) {
        events.push_back({{"name", "process_name"},
                          {"ph", "M"},
                          {"pid", dc},
                          {"args", {{"name", "DC " + c.cluster.dcs[dc].name}}}});
    }
    const int pipes = std::min(l.dp, max_pipelines);
    for (int d = 0; d < pipes; ++d) {
        for (int s = 0; s < l.pp; ++s) {
            const size_t g = static_cast<size_t>(d) * l.pp + s;
            const int dc = l.dcOf(d, s);
            events.push_back(
                {{"name", "thread_name"},
                 {"ph", "M"},
                 {"pid", dc},
                 {"tid", g},
                 {"args",
                  {{"name", "pipeline " + std::to_string(d) + " stage " + std::to_string(s)}}}});
            if (g >= r.timeline.size()) {
                continue;
            }
            for (const Activity& a : r.timeline[g]) {
                events.push_back({{"name", taskLabel(a)},
                                  {"cat", activityName(a.kind)},
                                  {"ph", "X"},
                                  {"ts", static_cast<double>(a.start_ns) / 1e3},
                                  {"dur", static_cast<double>(a.end_ns - a.start_ns) / 1e3},
                                  {"pid", dc},
                                  {"tid", g},
                                  {"args", {{"iteration", a.iteration}}}});
            }
        }
    }
    const int base_pid = static_cast<int>(c.cluster.dcs.size());
    for (size_t i = 0; i < r.links.size(); ++i) {
        const LinkStats& ls = r.links[i];
        const std::string name = "WAN " + c.cluster.dcs[static_cast<size_t>(ls.from)].name + "->" +
                                 c.cluster.dcs[static_cast<size_t>(ls.to)].name;
        const int pid = base_pid + static_cast<int>(i);
        events.push_back(
            {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
        for (const RateSegment& seg : ls.rate) {
            events.push_back({{"name", "rate"},
                              {"ph", "C"},
                              {"ts", static_cast<double>(seg.start_ns) / 1e3},
                              {"pid", pid},
                              {"args", {{"Gbps", seg.bytes_per_sec * 8 / 1e9}}}});
        }
    }
    return {{"displayTimeUnit", "ms"}, {"traceEvents", events}};
}

Status writeChromeTrace(const RunReport& rep, const std::string& path, int max_pipelines) {
    std::ofstream out(path);
    if (!out) {
        return Status::fromErrno("open " + path, errno, Code::kInvalidUsage);
    }
    out << chromeTrace(rep, max_pipelines).dump() << "\n";
    return out ? Status::ok() : Status(Code::kSystem, "write " + path + " failed");
}

Status writePlots(const RunReport& rep, const std::string& dir, int max_pipelines,
                  std::string* message) {
    if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return Status::fromErrno("mkdir " + dir, errno, Code::kInvalidUsage);
    }
    const RunResult& r = shown(rep);
    const Layout& l = rep.layout;
    const int pipes = std::min(l.dp, max_pipelines);
    Nanos t0 = sched::kNever;
    for (const auto& tl : r.timeline) {
        for (const Activity& a : tl) {
            t0 = std::min(t0, a.start_ns);
        }
    }
    if (t0 == sched::kNever) {
        t0 = 0;
    }
    // One data block per activity kind: x centre, row, x half-width (ms).
    std::ostringstream blocks[4];
    bool present[4] = {false, false, false, false};
    std::ostringstream ytics;
    int row = 0;
    for (int d = 0; d < pipes; ++d) {
        for (int s = 0; s < l.pp; ++s, ++row) {
            const size_t g = static_cast<size_t>(d) * l.pp + s;
            ytics << (row == 0 ? "" : ", ") << "\"p" << d << " s" << s << "\" " << row;
            if (g >= r.timeline.size()) {
                continue;
            }
            for (const Activity& a : r.timeline[g]) {
                const int k = static_cast<int>(a.kind);
                const double x0 = static_cast<double>(a.start_ns - t0) / 1e6;
                const double x1 = static_cast<double>(a.end_ns - t0) / 1e6;
                blocks[k] << (x0 + x1) / 2 << " " << row << " " << (x1 - x0) / 2 << "\n";
                present[k] = true;
            }
        }
    }
    const std::string tdat = dir + "/timeline.dat";
    const std::string udat = dir + "/utilization.dat";
    const std::string gp = dir + "/plots.gp";
    {
        std::ofstream out(tdat);
        for (int k = 0; k < 4; ++k) {
            out << "# " << activityName(static_cast<ActivityKind>(k)) << "\n"
                << blocks[k].str() << (present[k] ? "" : "0 -10 0\n") << "\n\n";
        }
        if (!out) {
            return Status(Code::kSystem, "write " + tdat + " failed");
        }
    }
    {
        std::ofstream out(udat);
        out << "# stage training_util with_bubbletea_util\n";
        for (const StageSummary& st : rep.summary.stages) {
            out << "\"s" << st.stage << " " << st.dc << "\" " << 100 * st.utilization << " "
                << 100 * st.utilization_bt << "\n";
        }
        if (!out) {
            return Status(Code::kSystem, "write " + udat + " failed");
        }
    }
    {
        std::ofstream out(gp);
        const int rows = std::max(row, 1);
        out << "# atlas-sim plots for '" << rep.config.name << "' (run: gnuplot " << gp << ")\n"
            << "set terminal pngcairo size 1400," << std::min(200 + 22 * rows, 4000)
            << " font 'sans,9'\n"
            << "set output '" << dir << "/timeline.png'\n"
            << "set title 'atlas-sim timeline: " << rep.config.name << " (last iterations)'\n"
            << "set xlabel 'time (ms)'\nset yrange [-1:" << rows << "] reverse\n";
        if (rows <= 64) {
            out << "set ytics (" << ytics.str() << ")\n";
        }
        out << "set style fill solid 0.9 noborder\nset key outside right\nplot ";
        bool first = true;
        for (int k = 0; k < 4; ++k) {
            if (!present[k]) {
                continue;
            }
            out << (first ? "" : ", ") << "'" << tdat << "' index " << k
                << " using 1:2:3:(0.4) with boxxyerror lc rgb '" << kColors[k] << "' title '"
                << activityName(static_cast<ActivityKind>(k)) << "'";
            first = false;
        }
        if (first) {
            out << "'" << tdat << "' index 0 using 1:2:3:(0.4) with boxxyerror notitle";
        }
        out << "\n\nset terminal pngcairo size 1000,600 font 'sans,10'\n"
            << "set output '" << dir << "/utilization.png'\n"
            << "set title 'GPU utilization per stage (mean over replicas)'\n"
            << "unset xlabel\nset ylabel 'busy %'\nset yrange [0:100] noreverse\nset ytics auto\n"
            << "set style data histograms\nset style histogram clustered gap 1\n"
            << "set style fill solid 0.9 border -1\nset key top left\nset xtics rotate by -30\n"
            << "plot '" << udat << "' using 2:xtic(1) title 'training' lc rgb '" << kColors[0]
            << "', '' using 3 title 'training + BubbleTea prefill' lc rgb '" << kColors[3] << "'\n";
        if (!out) {
            return Status(Code::kSystem, "write " + gp + " failed");
        }
    }
    pid_t pid = 0;
    const char* argv[] = {"gnuplot", gp.c_str(), nullptr};
    const int rc =
        posix_spawnp(&pid, "gnuplot", nullptr, nullptr, const_cast<char**>(argv), environ);
    if (rc != 0) {
        *message = "gnuplot not found: wrote " + gp +
                   " and its data; install gnuplot-nox "
                   "and run 'gnuplot " +
                   gp + "' for the PNGs";
        return Status::ok();
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        return Status(Code::kSystem, "gnuplot failed on " + gp);
    }
    *message = "wrote " + dir + "/timeline.png and " + dir + "/utilization.png";
    return Status::ok();
}

}  // namespace atlas::sim
