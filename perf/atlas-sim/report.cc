#include "perf/atlas-sim/report.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace atlas::sim {

namespace {

double ms(Nanos ns) {
    return static_cast<double>(ns) / 1e6;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), f, v);
    return buf;
}

}  // namespace

double percentileMs(std::vector<Nanos> samples, double p) {
    if (samples.empty()) {
        return 0.0;
    }
    std::sort(samples.begin(), samples.end());
    const double rank = std::ceil(p / 100.0 * static_cast<double>(samples.size()));
    const size_t idx = static_cast<size_t>(std::clamp(rank, 1.0, double(samples.size()))) - 1;
    return ms(samples[idx]);
}

Result<RunReport> runConfig(const SimConfig& config, const RunFlags& flags) {
    const auto t0 = std::chrono::steady_clock::now();
    Result<Layout> layout = placeStages(config);
    if (!layout.isOk()) {
        return layout.status();
    }
    RunReport rep;
    rep.config = config;
    rep.layout = layout.value();
    const bool bt = config.bubbletea.enabled;
    RunOptions base;
    base.record_timeline = flags.record_timeline && !bt;
    base.record_from_iteration = std::max(0, config.iterations - flags.record_iterations);
    base.record_idle = bt && config.bubbletea.windows == WindowSource::kOracle;
    base.record_link_rates = flags.record_link_rates;
    Result<RunResult> a = simulate(config, rep.layout, base);
    if (!a.isOk()) {
        return a.status();
    }
    rep.base = std::move(a.value());
    if (bt) {
        RunOptions with = base;
        with.bubbletea = true;
        with.record_timeline = flags.record_timeline;
        with.record_idle = false;
        with.oracle = &rep.base.idle;
        Result<RunResult> b = simulate(config, rep.layout, with);
        if (!b.isOk()) {
            return b.status();
        }
        rep.bt = std::move(b.value());
    }
    rep.summary = summarize(config, rep.layout, rep.base, rep.bt ? &*rep.bt : nullptr);
    rep.summary.sim_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rep;
}

Summary summarize(const SimConfig& c, const Layout& l, const RunResult& base,
                  const RunResult* with_bt) {
    Summary s;
    s.name = c.name;
    s.placement = std::string(placementName(c.placement.kind)) + " " + l.summary;
    s.dp = l.dp;
    s.pp = l.pp;
    s.tp = l.tp;
    s.gpus = l.dp * l.pp * l.tp;
    s.dcs = l.dcsUsed();
    s.events = base.events + (with_bt != nullptr ? with_bt->events : 0);

    Nanos prev = 0;
    for (size_t k = 0; k < base.iteration_end_ns.size(); ++k) {
        const double d = ms(base.iteration_end_ns[k] - prev);
        prev = base.iteration_end_ns[k];
        s.iteration_ms_all.push_back(d);
        if (k == 0) {
            s.first_iteration_ms = d;
        }
        if (static_cast<int>(k) >= c.warmup_iterations) {
            s.iteration_min_ms = s.measured_iterations == 0 ? d : std::min(s.iteration_min_ms, d);
            s.iteration_max_ms = std::max(s.iteration_max_ms, d);
            ++s.measured_iterations;
        }
    }
    const Nanos wall = base.end_ns - base.measure_start_ns;
    s.iteration_ms = ms(wall) / std::max(s.measured_iterations, 1);
    const double per_iter = static_cast<double>(l.dp) * c.job.micro_batches *
                            c.job.micro_batch_size * (c.job.has_model ? c.job.model.seq_len : 1);
    s.throughput_unit = c.job.has_model ? "tokens/s" : "samples/s";
    s.throughput = s.iteration_ms > 0 ? per_iter / (s.iteration_ms / 1e3) : 0.0;

    const Nanos wall_bt = with_bt != nullptr ? with_bt->end_ns - with_bt->measure_start_ns : 1;
    s.stages.resize(static_cast<size_t>(l.pp));
    for (int st = 0; st < l.pp; ++st) {
        StageSummary& ss = s.stages[static_cast<size_t>(st)];
        ss.stage = st;
        ss.dc = c.cluster.dcs[static_cast<size_t>(l.dcOf(0, st))].name;
        for (int d = 0; d < l.dp; ++d) {
            const size_t g = static_cast<size_t>(d) * l.pp + st;
            const GroupTotals& t = base.groups[g];
            const double w = static_cast<double>(std::max<Nanos>(wall, 1));
            ss.utilization += static_cast<double>(t.compute_ns) / w;
            ss.allreduce_fraction += static_cast<double>(t.allreduce_ns) / w;
            ss.bubble_fraction += static_cast<double>(wall - t.compute_ns - t.allreduce_ns) / w;
            if (with_bt != nullptr) {
                const GroupTotals& b = with_bt->groups[g];
                ss.utilization_bt += static_cast<double>(b.compute_ns + b.prefill_ns) /
                                     static_cast<double>(std::max<Nanos>(wall_bt, 1));
            }
        }
        ss.utilization /= l.dp;
        ss.allreduce_fraction /= l.dp;
        ss.bubble_fraction /= l.dp;
        ss.utilization_bt = with_bt != nullptr ? ss.utilization_bt / l.dp : ss.utilization;
        s.utilization += ss.utilization / l.pp;
        s.utilization_bt += ss.utilization_bt / l.pp;
        s.bubble_fraction += ss.bubble_fraction / l.pp;
        s.allreduce_fraction += ss.allreduce_fraction / l.pp;
    }

    const Nanos total = std::max<Nanos>(base.end_ns, 1);
    for (const LinkStats& ls : base.links) {
        LinkSummary x;
        x.from = c.cluster.dcs[static_cast<size_t>(ls.from)].name;
        x.to = c.cluster.dcs[static_cast<size_t>(ls.to)].name;
        x.capacity_gbps = ls.capacity_bytes_per_sec * 8 / 1e9;
        x.transfer_cap_gbps = ls.transfer_cap_bytes_per_sec * 8 / 1e9;
        x.bytes = ls.bytes;
        x.transfers = ls.transfers;
        x.busy_fraction = static_cast<double>(ls.busy_ns) / static_cast<double>(total);
        x.goodput_gbps = ls.busy_ns > 0
                             ? static_cast<double>(ls.bytes) * 8 / static_cast<double>(ls.busy_ns)
                             : 0.0;
        x.max_active = ls.max_active;
        x.loss_recoveries = ls.loss_recoveries;
        x.max_share_sum = ls.max_share_sum;
        x.planned_picks = ls.planned_picks;
        x.fallback_picks = ls.fallback_picks;
        x.aged_picks = ls.aged_picks;
        x.workload_plan = ls.workload_plan;
        s.links.push_back(x);
    }

    BubbleTeaSummary& b = s.bubbletea;
    b.enabled = with_bt != nullptr;
    if (with_bt != nullptr) {
        b.windows = windowSourceName(c.bubbletea.windows);
        b.stats = with_bt->prefill;
        b.prefill_tokens_per_s =
            static_cast<double>(b.stats.tokens) / (static_cast<double>(wall_bt) / 1e9);
        b.ttft_p50_ms = percentileMs(b.stats.ttft_ns, 50);
        b.ttft_p99_ms = percentileMs(b.stats.ttft_ns, 99);
        double sum = 0;
        for (Nanos t : b.stats.ttft_ns) {
            sum += ms(t);
        }
        b.ttft_mean_ms = b.stats.ttft_ns.empty() ? 0.0 : sum / b.stats.ttft_ns.size();
        b.slowdown =
            static_cast<double>(wall_bt) / static_cast<double>(std::max<Nanos>(wall, 1)) - 1.0;
        b.training_delay_ms = ms(with_bt->training_delay_ns);
        b.delayed_starts = with_bt->delayed_starts;
    }
    return s;
}

void printSummary(std::ostream& os, const Summary& s) {
    os << "== " << s.name << " ==\n";
    os << "layout      dp=" << s.dp << " pp=" << s.pp << " tp=" << s.tp << "  GPUs=" << s.gpus
       << "  DCs=" << s.dcs << "  placement: " << s.placement << "\n";
    os << "iteration   " << fmt("%.3f", s.iteration_ms) << " ms mean over " << s.measured_iterations
       << " (min " << fmt("%.3f", s.iteration_min_ms) << ", max " << fmt("%.3f", s.iteration_max_ms)
       << ", first " << fmt("%.3f", s.first_iteration_ms) << ")\n";
    os << "throughput  " << fmt("%.1f", s.throughput) << " " << s.throughput_unit << "\n";
    os << "GPU util    " << fmt("%.1f", 100 * s.utilization) << "% training";
    if (s.bubbletea.enabled) {
        os << ", " << fmt("%.1f", 100 * s.utilization_bt) << "% with BubbleTea";
    }
    os << "  (bubble " << fmt("%.1f", 100 * s.bubble_fraction) << "%, all-reduce "
       << fmt("%.1f", 100 * s.allreduce_fraction) << "%)\n";
    os << "\n stage  DC        util%   +BT util%  bubble%  allreduce%\n";
    for (const StageSummary& st : s.stages) {
        char line[160];
        std::snprintf(line, sizeof(line), " %5d  %-8s %6.1f   %9.1f  %7.1f  %10.1f\n", st.stage,
                      st.dc.c_str(), 100 * st.utilization, 100 * st.utilization_bt,
                      100 * st.bubble_fraction, 100 * st.allreduce_fraction);
        os << line;
    }
    if (!s.links.empty()) {
        os << "\n WAN link          cap Gb/s  per-xfer Gb/s   GB moved  busy%  goodput Gb/s"
              "  max flows  planned%  plan\n";
        for (const LinkSummary& l : s.links) {
            char line[200];
            const std::string name = l.from + "->" + l.to;
            const uint64_t picks = l.planned_picks + l.fallback_picks + l.aged_picks;
            std::snprintf(line, sizeof(line),
                          " %-16s %9.2f  %13.3f  %9.3f  %5.1f  %12.3f  %9zu  %8s  %s\n",
                          name.c_str(), l.capacity_gbps, l.transfer_cap_gbps,
                          static_cast<double>(l.bytes) / 1e9, 100 * l.busy_fraction, l.goodput_gbps,
                          l.max_active,
                          picks == 0 ? "-" : fmt("%.1f", 100.0 * l.planned_picks / picks).c_str(),
                          l.workload_plan.c_str());
            os << line;
        }
    }
    const BubbleTeaSummary& b = s.bubbletea;
    if (b.enabled) {
        os << "\nBubbleTea   windows=" << b.windows << "  requests " << b.stats.arrived
           << " arrived, " << b.stats.completed << " done, " << b.stats.dropped << " dropped, "
           << b.stats.unfinished << " unfinished\n";
        os << "            prefill " << fmt("%.0f", b.prefill_tokens_per_s)
           << " tokens/s  TTFT p50 " << fmt("%.1f", b.ttft_p50_ms) << " ms  p99 "
           << fmt("%.1f", b.ttft_p99_ms) << " ms\n";
        os << "            training slowdown " << fmt("%.4f", 100 * b.slowdown) << "%  (delay "
           << fmt("%.3f", b.training_delay_ms) << " ms over " << b.delayed_starts
           << " delayed starts)\n";
    }
    os << "sim         " << s.events << " events in " << fmt("%.2f", s.sim_seconds) << " s\n";
}

void printComparison(std::ostream& os, const std::vector<Summary>& runs) {
    if (runs.empty()) {
        return;
    }
    const double base = runs.front().iteration_ms;
    os << "\n variant                 iter ms    speed-up  util%   +BT util%  bubble%  "
          "prefill tok/s  slowdown%\n";
    for (const Summary& s : runs) {
        char line[240];
        std::snprintf(line, sizeof(line),
                      " %-22s %9.2f  %9.2fx  %5.1f   %9.1f  %7.1f  %13.0f  %9.4f\n", s.name.c_str(),
                      s.iteration_ms, s.iteration_ms > 0 ? base / s.iteration_ms : 0.0,
                      100 * s.utilization, 100 * s.utilization_bt, 100 * s.bubble_fraction,
                      s.bubbletea.prefill_tokens_per_s, 100 * s.bubbletea.slowdown);
        os << line;
    }
}

nlohmann::json toJson(const Summary& s) {
    using nlohmann::json;
    json j;
    j["name"] = s.name;
    j["layout"] = {{"dp", s.dp},     {"pp", s.pp},   {"tp", s.tp},
                   {"gpus", s.gpus}, {"dcs", s.dcs}, {"placement", s.placement}};
    j["iteration_ms"] = {{"mean", s.iteration_ms},    {"min", s.iteration_min_ms},
                         {"max", s.iteration_max_ms}, {"first", s.first_iteration_ms},
                         {"all", s.iteration_ms_all}, {"measured", s.measured_iterations}};
    j["throughput"] = {{"value", s.throughput}, {"unit", s.throughput_unit}};
    j["utilization"] = s.utilization;
    j["utilization_with_bubbletea"] = s.utilization_bt;
    j["bubble_fraction"] = s.bubble_fraction;
    j["allreduce_fraction"] = s.allreduce_fraction;
    json stages = json::array();
    for (const StageSummary& st : s.stages) {
        stages.push_back({{"stage", st.stage},
                          {"dc", st.dc},
                          {"utilization", st.utilization},
                          {"utilization_with_bubbletea", st.utilization_bt},
                          {"bubble_fraction", st.bubble_fraction},
                          {"allreduce_fraction", st.allreduce_fraction}});
    }
    j["stages"] = stages;
    json links = json::array();
    for (const LinkSummary& l : s.links) {
        links.push_back({{"from", l.from},
                         {"to", l.to},
                         {"capacity_gbps", l.capacity_gbps},
                         {"transfer_cap_gbps", l.transfer_cap_gbps},
                         {"bytes", l.bytes},
                         {"transfers", l.transfers},
                         {"busy_fraction", l.busy_fraction},
                         {"goodput_gbps", l.goodput_gbps},
                         {"max_active", l.max_active},
                         {"loss_recoveries", l.loss_recoveries},
                         {"max_share_sum", l.max_share_sum},
                         {"workload_planned_picks", l.planned_picks},
                         {"workload_fallback_picks", l.fallback_picks},
                         {"workload_aged_picks", l.aged_picks},
                         {"workload_plan", l.workload_plan}});
    }
    j["links"] = links;
    const BubbleTeaSummary& b = s.bubbletea;
    if (b.enabled) {
        j["bubbletea"] = {{"windows", b.windows},
                          {"arrived", b.stats.arrived},
                          {"completed", b.stats.completed},
                          {"dropped", b.stats.dropped},
                          {"unfinished", b.stats.unfinished},
                          {"prefill_tokens", b.stats.tokens},
                          {"chunks", b.stats.chunks},
                          {"prefill_tokens_per_s", b.prefill_tokens_per_s},
                          {"ttft_p50_ms", b.ttft_p50_ms},
                          {"ttft_p99_ms", b.ttft_p99_ms},
                          {"ttft_mean_ms", b.ttft_mean_ms},
                          {"training_slowdown", b.slowdown},
                          {"training_delay_ms", b.training_delay_ms},
                          {"delayed_starts", b.delayed_starts},
                          {"predictor_lookups_ok", b.stats.predictor_ok},
                          {"predictor_lookups_none", b.stats.predictor_none}};
    }
    j["events"] = s.events;
    return j;
}

}  // namespace atlas::sim
