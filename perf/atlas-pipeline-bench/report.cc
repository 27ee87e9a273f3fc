#include "perf/atlas-pipeline-bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace atlas::pipebench {
namespace {

double ms(int64_t ns) {
    return static_cast<double>(ns) / 1e6;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), f, v);
    return buf;
}

std::string bytesText(uint64_t b) {
    if (b % (1ull << 20) == 0) {
        return std::to_string(b >> 20) + " MiB";
    }
    if (b % (1ull << 10) == 0) {
        return std::to_string(b >> 10) + " KiB";
    }
    return std::to_string(b) + " B";
}

}  // namespace

Summary summarize(const BenchConfig& cfg, const RunResult& run) {
    Summary s;
    const int w = cfg.warmup;
    for (size_t it = static_cast<size_t>(w); it < run.iter_end_ns.size(); ++it) {
        s.iteration_ms.push_back(ms(run.iter_end_ns[it] - run.iter_start_ns[it]));
    }
    if (!s.iteration_ms.empty()) {
        double sum = 0;
        s.min_ms = s.iteration_ms[0];
        s.max_ms = s.iteration_ms[0];
        for (double v : s.iteration_ms) {
            sum += v;
            s.min_ms = std::min(s.min_ms, v);
            s.max_ms = std::max(s.max_ms, v);
        }
        s.mean_ms = sum / static_cast<double>(s.iteration_ms.size());
        double var = 0;
        for (double v : s.iteration_ms) {
            var += (v - s.mean_ms) * (v - s.mean_ms);
        }
        s.stdev_ms = std::sqrt(var / static_cast<double>(s.iteration_ms.size()));
    }
    for (const StageResult& r : run.stages) {
        Summary::Stage st;
        st.pipeline = r.pipeline;
        st.stage = r.stage;
        int n = 0;
        double busy = 0;
        double wait = 0;
        double idle = 0;
        for (size_t it = static_cast<size_t>(w); it < r.iters.size(); ++it) {
            const IterReport& ir = r.iters[it];
            const double iter = ms(run.iter_end_ns[it] - run.iter_start_ns[it]);
            busy += ms(ir.busy_ns);
            wait += ms(ir.wait_ns);
            idle += iter - ms(ir.busy_ns);
            ++n;
        }
        if (n > 0) {
            st.busy_ms = busy / n;
            st.wait_ms = wait / n;
            st.idle_ms = idle / n;
            st.idle_pct =
                st.busy_ms + st.idle_ms > 0 ? 100.0 * st.idle_ms / (st.busy_ms + st.idle_ms) : 0;
        }
        s.stages.push_back(st);
    }
    s.links_whole_run = run.link_use_whole_run;
    // Links: every window lists the same directions in the same order (snapshotLinks).
    const size_t windows = run.link_use.size();
    for (size_t d = 0; windows > 0 && d < run.link_use.front().size(); ++d) {
        Summary::Link l;
        l.from = run.link_use.front()[d].from;
        l.to = run.link_use.front()[d].to;
        double wire = 0;
        double cap = 0;
        bool capped = true;
        for (const auto& win : run.link_use) {
            l.queue_drops += static_cast<double>(win[d].queue_drops);
            l.loss_drops += static_cast<double>(win[d].loss_drops);
            wire += static_cast<double>(win[d].wire_bytes);
            cap += win[d].capacity_bytes;
            capped = capped && win[d].utilization >= 0;
        }
        // Per iteration: a whole-run window (--no-barrier) spans every iteration.
        const size_t iters = run.link_use_whole_run ? run.iter_end_ns.size() : windows;
        const double mib = static_cast<double>(1u << 20) * static_cast<double>(iters);
        l.wire_mib = wire / mib;
        l.queue_drops /= static_cast<double>(iters);
        l.loss_drops /= static_cast<double>(iters);
        l.capacity_mib = capped ? cap / mib : 0;
        l.utilization = capped && cap > 0 ? wire / cap : -1;
        s.links.push_back(l);
    }
    return s;
}

std::string renderTable(const BenchConfig& cfg, const Summary& s) {
    std::string out;
    out += "atlas-pipeline-bench" + (cfg.label.empty() ? std::string() : " [" + cfg.label + "]") +
           ": D=" + std::to_string(cfg.pipelines) + " P=" + std::to_string(cfg.stages) +
           " M=" + std::to_string(cfg.microbatches) + " " + scheduleName(cfg.schedule) + ", fwd " +
           fmt("%.1f", ms(cfg.fwd_ns)) + " ms, bwd " + fmt("%.1f", ms(cfg.bwd_ns)) + " ms, act " +
           bytesText(cfg.act_bytes) + ", grad " + bytesText(cfg.gradBytes()) + ", compute " +
           computeText(cfg) + ", receives posted " + recvPostName(cfg.recv_post) + "\n";
    out += "iteration time (" + std::to_string(s.iteration_ms.size()) + " measured, " +
           std::to_string(cfg.warmup) + " warm-up): mean " + fmt("%.1f", s.mean_ms) + " ms, min " +
           fmt("%.1f", s.min_ms) + ", max " + fmt("%.1f", s.max_ms) + ", stdev " +
           fmt("%.1f", s.stdev_ms) + "\n\n";
    out += "| pipeline | stage | busy ms/iter | recv wait ms/iter | idle ms/iter | idle % |\n";
    out += "|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& st : s.stages) {
        out += "| " + std::to_string(st.pipeline) + " | " + std::to_string(st.stage) + " | " +
               fmt("%.1f", st.busy_ms) + " | " + fmt("%.1f", st.wait_ms) + " | " +
               fmt("%.1f", st.idle_ms) + " | " + fmt("%.1f", st.idle_pct) + " |\n";
    }
    if (!s.links.empty()) {
        out += std::string(
                   "\nlink utilization (atlas-wanem counters: bytes carried / what the rate "
                   "could carry, over ") +
               (s.links_whole_run ? "the whole run, warm-up included" : "the measured iterations") +
               "):\n\n";
        out +=
            "| link direction | carried MiB/iter | capacity MiB/iter | utilization | "
            "buffer drops/iter | loss drops/iter |\n";
        out += "|---|---:|---:|---:|---:|---:|\n";
        for (const auto& l : s.links) {
            out += "| " + l.from + " -> " + l.to + " | " + fmt("%.1f", l.wire_mib) + " | " +
                   (l.utilization < 0 ? std::string("uncapped") : fmt("%.1f", l.capacity_mib)) +
                   " | " + (l.utilization < 0 ? std::string("-") : fmt("%.3f", l.utilization)) +
                   " | " + fmt("%.1f", l.queue_drops) + " | " + fmt("%.1f", l.loss_drops) + " |\n";
        }
    }
    return out;
}

nlohmann::json toJson(const BenchConfig& cfg, const Summary& s, const RunResult& run) {
    nlohmann::json j;
    j["tool"] = "atlas-pipeline-bench";
    j["label"] = cfg.label;
    j["config"] = {
        {"pipelines", cfg.pipelines},
        {"stages", cfg.stages},
        {"microbatches", cfg.microbatches},
        {"iterations", cfg.iterations},
        {"warmup", cfg.warmup},
        {"schedule", scheduleName(cfg.schedule)},
        {"fwd_ms", ms(cfg.fwd_ns)},
        {"bwd_ms", ms(cfg.bwd_ns)},
        {"act_bytes", cfg.act_bytes},
        {"grad_bytes", cfg.gradBytes()},
        {"compute", computeText(cfg)},
        {"recv_post", recvPostName(cfg.recv_post)},
        {"barrier", cfg.barrier},
        {"traffic_class", cfg.traffic_class},
        {"netns", cfg.stage_netns},
    };
    nlohmann::json costs = nlohmann::json::array();
    for (int st = 0; st < cfg.stages; ++st) {
        costs.push_back({{"stage", st},
                         {"fwd_ms", ms(cfg.cost(st).fwd_ns)},
                         {"bwd_ms", ms(cfg.cost(st).bwd_ns)}});
    }
    j["config"]["stage_costs"] = costs;
    nlohmann::json env = nlohmann::json::array();
    for (const EnvSetting& e : cfg.env) {
        env.push_back({{"stage", e.stage},
                       {"pipeline", e.pipeline},
                       {"key", e.key},
                       {"value", e.key.find("KEY") != std::string::npos ? "***" : e.value}});
    }
    j["config"]["env"] = env;
    j["iteration_ms"] = s.iteration_ms;
    j["mean_iteration_ms"] = s.mean_ms;
    j["min_iteration_ms"] = s.min_ms;
    j["max_iteration_ms"] = s.max_ms;
    j["stdev_iteration_ms"] = s.stdev_ms;
    nlohmann::json stages = nlohmann::json::array();
    for (size_t i = 0; i < s.stages.size(); ++i) {
        const auto& st = s.stages[i];
        nlohmann::json iters = nlohmann::json::array();
        for (const IterReport& ir : run.stages[i].iters) {
            iters.push_back({{"iteration", ir.iteration},
                             {"start_ns", ir.start_ns},
                             {"end_ns", ir.end_ns},
                             {"busy_ns", ir.busy_ns},
                             {"wait_ns", ir.wait_ns},
                             {"drain_ns", ir.drain_ns}});
        }
        stages.push_back({{"pipeline", st.pipeline},
                          {"stage", st.stage},
                          {"busy_ms", st.busy_ms},
                          {"wait_ms", st.wait_ms},
                          {"idle_ms", st.idle_ms},
                          {"idle_pct", st.idle_pct},
                          {"iterations", iters},
                          {"timeline", run.stages[i].timeline}});
    }
    j["stages"] = stages;
    if (!run.link_use.empty()) {
        nlohmann::json links = nlohmann::json::array();
        for (size_t d = 0; d < s.links.size(); ++d) {
            const auto& l = s.links[d];
            nlohmann::json per = nlohmann::json::array();
            for (const auto& w : run.link_use) {
                per.push_back({{"wire_bytes", w[d].wire_bytes},
                               {"queue_drops", w[d].queue_drops},
                               {"loss_drops", w[d].loss_drops},
                               {"capacity_bytes", w[d].capacity_bytes},
                               {"utilization", w[d].utilization}});
            }
            links.push_back({{"from", l.from},
                             {"to", l.to},
                             {"wire_mib_per_iteration", l.wire_mib},
                             {"capacity_mib_per_iteration", l.capacity_mib},
                             {"utilization", l.utilization},
                             {"queue_drops_per_iteration", l.queue_drops},
                             {"loss_drops_per_iteration", l.loss_drops},
                             {"windows", per}});
        }
        j["links"] = links;
        j["links_window"] = run.link_use_whole_run
                                ? "the whole run, warm-up included (--no-barrier)"
                                : "each measured iteration";
    }
    j["timeline_format"] =
        "[iteration, kind, micro-batch, start_ns, end_ns]; kind F forward, "
        "B backward, A waiting for an activation, G waiting for a gradient, "
        "D draining sends; CLOCK_MONOTONIC";
    return j;
}

nlohmann::json toChromeTrace(const BenchConfig& cfg, const RunResult& run) {
    nlohmann::json ev = nlohmann::json::array();
    int64_t t0 = run.iter_start_ns.empty() ? 0 : run.iter_start_ns.front();
    for (const StageResult& r : run.stages) {
        ev.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r.pipeline},
                      {"args", {{"name", "pipeline " + std::to_string(r.pipeline)}}}});
        ev.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", r.pipeline},
                      {"tid", r.stage},
                      {"args", {{"name", "stage " + std::to_string(r.stage)}}}});
        for (const auto& e : r.timeline) {
            const int it = e[0].get<int>();
            const std::string kind = e[1].get<std::string>();
            const int mb = e[2].get<int>();
            const int64_t start = e[3].get<int64_t>();
            const int64_t end = e[4].get<int64_t>();
            std::string name;
            std::string cat = "compute";
            if (kind == "F" || kind == "B") {
                name = kind + std::to_string(mb);
            } else if (kind == "D") {
                name = "drain sends";
                cat = "wait";
            } else {
                name = std::string("wait ") + (kind == "A" ? "act " : "grad ") + std::to_string(mb);
                cat = "wait";
            }
            ev.push_back({{"name", name},
                          {"cat", cat},
                          {"ph", "X"},
                          {"pid", r.pipeline},
                          {"tid", r.stage},
                          {"ts", static_cast<double>(start - t0) / 1e3},
                          {"dur", static_cast<double>(end - start) / 1e3},
                          {"args", {{"iteration", it}, {"warmup", it < cfg.warmup}}}});
        }
    }
    nlohmann::json j;
    j["traceEvents"] = ev;
    j["displayTimeUnit"] = "ms";
    return j;
}

}  // namespace atlas::pipebench
