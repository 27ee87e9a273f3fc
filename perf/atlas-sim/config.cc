#include "perf/atlas-sim/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "perf/atlas-sim/json_reader.h"

namespace atlas::sim {

using nlohmann::json;

const char* scheduleName(Schedule s) {
    return s == Schedule::kGpipe ? "gpipe" : "1f1b";
}

const char* placementName(PlacementKind p) {
    switch (p) {
        case PlacementKind::kAtlas:
            return "atlas";
        case PlacementKind::kSequential:
            return "sequential";
        case PlacementKind::kPipelineMajor:
            return "pipeline_major";
        case PlacementKind::kManual:
            return "manual";
    }
    return "unknown";
}

const char* transportName(TransportKind t) {
    switch (t) {
        case TransportKind::kSingle:
            return "single";
        case TransportKind::kMulti:
            return "multi";
        case TransportKind::kIdeal:
            return "ideal";
    }
    return "unknown";
}

const char* windowSourceName(WindowSource w) {
    return w == WindowSource::kOracle ? "oracle" : "predicted";
}

Result<GpuSpec> gpuPreset(std::string_view name) {
    std::string n(name);
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::toupper(c); });
    // Dense bf16 tensor-core peaks from the vendor data sheets (no sparsity).
    if (n == "A100") {
        return GpuSpec{"A100", 312e12, 0.5, 80e9};
    }
    if (n == "H100") {
        return GpuSpec{"H100", 989e12, 0.5, 80e9};
    }
    if (n == "H200") {
        return GpuSpec{"H200", 989e12, 0.5, 141e9};
    }
    return Status(Code::kInvalidUsage,
                  "unknown GPU preset '" + std::string(name) + "' (expected A100, H100, H200)");
}

namespace {

void parseGpu(const json* j, SimConfig* c, Status* err) {
    Reader r(j, "gpu", err);
    if (r.present("preset")) {
        Result<GpuSpec> preset = gpuPreset(r.str("preset", "A100"));
        if (!preset.isOk()) {
            r.fail("preset", preset.status().message());
            return;
        }
        c->gpu = preset.value();
    }
    c->gpu.peak_flops = r.num("peak_tflops", c->gpu.peak_flops / 1e12, 1e-3, 1e6) * 1e12;
    c->gpu.efficiency = r.num("efficiency", c->gpu.efficiency, 1e-3, 1.0);
    c->gpu.memory_bytes = r.num("memory_gb", c->gpu.memory_bytes / 1e9, 0.001, 1e6) * 1e9;
    r.finish();
}

void parseStage(const json& j, const std::string& path, StageOverride* s, Status* err) {
    Reader r(&j, path, err);
    s->forward_ns = r.duration("forward_ms", 0, 1e6, 1e7);
    s->backward_ns = r.duration("backward_ms", 0, 1e6, 1e7);
    s->activation_bytes = r.bytes("activation_bytes", 0);
    s->grad_bytes = r.bytes("grad_bytes", 0);
    r.finish();
}

void parseJob(const json* j, SimConfig* c, Status* err) {
    Reader r(j, "job", err);
    JobSpec& job = c->job;
    if (const json* m = r.raw("model")) {
        Reader mr(m, "job.model", err);
        job.has_model = true;
        job.model.layers = mr.integer("layers", 0, 1, 100000);
        job.model.hidden = mr.integer("hidden", 0, 1, 1 << 20);
        job.model.seq_len = mr.integer("seq_len", 0, 1, 1 << 24);
        job.model.vocab = mr.integer("vocab", 0, 0, 1 << 24);
        mr.finish();
    }
    if (const json* st = r.raw("stages")) {
        if (!st->is_array() || st->empty() || st->size() > 100000) {
            r.fail("stages", "must be a non-empty array of stage objects");
        } else {
            for (size_t i = 0; i < st->size(); ++i) {
                StageOverride s;
                parseStage((*st)[i], "job.stages." + std::to_string(i), &s, err);
                job.stages.push_back(s);
            }
        }
    }
    job.micro_batch_size = r.integer("micro_batch_size", job.micro_batch_size, 1, 1 << 16);
    job.micro_batches = r.integer("micro_batches", job.micro_batches, 1, kMaxMicroBatches);
    job.dtype_bytes = r.integer("dtype_bytes", job.dtype_bytes, 1, 16);
    job.schedule = choose(r, "schedule", job.schedule,
                          {{"gpipe", Schedule::kGpipe}, {"1f1b", Schedule::k1f1b}});
    r.finish();
    if (err->isOk() && job.has_model == !job.stages.empty()) {
        *err = Status(Code::kInvalidUsage, "job: give exactly one of 'model' and 'stages'");
    }
}

int dcIndex(const ClusterSpec& cl, const std::string& name) {
    for (size_t i = 0; i < cl.dcs.size(); ++i) {
        if (cl.dcs[i].name == name) {
            return static_cast<int>(i);
        }
    }
    return -1;
}

WanPath parsePath(const json* j, const std::string& path, const WanPath& def, Status* err,
                  std::vector<std::string>* between) {
    Reader r(j, path, err);
    WanPath p;
    p.bytes_per_sec = r.num("gbps", def.bytes_per_sec * 8 / 1e9, 1e-6, 1e6) * 1e9 / 8;
    p.rtt_ns = r.duration("rtt_ms", def.rtt_ns, 1e6, 1e5);
    p.loss = r.num("loss", def.loss, 0.0, 0.5);
    p.buffer_ns = r.duration("buffer_ms", def.buffer_ns, 1e6, 1e5);
    if (between != nullptr) {
        const json* b = r.raw("between");
        if (b == nullptr || !b->is_array() || b->size() != 2 || !(*b)[0].is_string() ||
            !(*b)[1].is_string()) {
            r.fail("between", "must be [\"DC\", \"DC\"]");
        } else {
            between->push_back((*b)[0].get<std::string>());
            between->push_back((*b)[1].get<std::string>());
        }
    }
    r.finish();
    return p;
}

void parseCluster(const json* j, SimConfig* c, Status* err) {
    Reader r(j, "cluster", err);
    ClusterSpec& cl = c->cluster;
    const json* dcs = r.raw("dcs");
    if (dcs == nullptr || !dcs->is_array() || dcs->empty() ||
        dcs->size() > static_cast<size_t>(kMaxDcs)) {
        r.fail("dcs", "must be an array of 1.." + std::to_string(kMaxDcs) + " DCs");
        return;
    }
    for (size_t i = 0; i < dcs->size(); ++i) {
        Reader dr(&(*dcs)[i], "cluster.dcs." + std::to_string(i), err);
        DcSpec dc;
        dc.name = dr.str("name", "DC" + std::to_string(i));
        dc.gpus = dr.integer("gpus", 0, 0, 1 << 22);
        dr.finish();
        if (dcIndex(cl, dc.name) >= 0) {
            dr.fail("name", "duplicate DC name '" + dc.name + "'");
        }
        cl.dcs.push_back(dc);
    }
    if (const json* intra = r.raw("intra_dc")) {
        Reader ir(intra, "cluster.intra_dc", err);
        cl.intra_bytes_per_sec =
            ir.num("gbps", cl.intra_bytes_per_sec * 8 / 1e9, 1e-3, 1e7) * 1e9 / 8;
        cl.intra_latency_ns = ir.duration("latency_us", cl.intra_latency_ns, 1e3, 1e6);
        ir.finish();
    }
    WanPath def{5e9 / 8, 20 * kNsPerMs, 0.0, 0};
    if (const json* wd = r.raw("wan_default")) {
        def = parsePath(wd, "cluster.wan_default", def, err, nullptr);
    }
    const size_t n = cl.dcs.size();
    cl.wan.assign(n * n, def);
    if (const json* wan = r.raw("wan")) {
        if (!wan->is_array()) {
            r.fail("wan", "must be an array of links");
        } else {
            for (size_t i = 0; i < wan->size() && err->isOk(); ++i) {
                std::vector<std::string> between;
                const std::string p = "cluster.wan." + std::to_string(i);
                const WanPath wp = parsePath(&(*wan)[i], p, def, err, &between);
                if (!err->isOk()) {
                    break;
                }
                const int a = dcIndex(cl, between[0]);
                const int b = dcIndex(cl, between[1]);
                if (a < 0 || b < 0 || a == b) {
                    *err = Status(Code::kInvalidUsage, p + ".between: unknown or equal DCs");
                    break;
                }
                cl.wan[static_cast<size_t>(a) * n + static_cast<size_t>(b)] = wp;
                cl.wan[static_cast<size_t>(b) * n + static_cast<size_t>(a)] = wp;
            }
        }
    }
    r.finish();
}

void parsePlacement(const json* j, SimConfig* c, Status* err) {
    Reader r(j, "placement", err);
    PlacementSpec& p = c->placement;
    p.kind = choose(r, "policy", p.kind,
                    {{"atlas", PlacementKind::kAtlas},
                     {"sequential", PlacementKind::kSequential},
                     {"varuna", PlacementKind::kSequential},
                     {"pipeline_major", PlacementKind::kPipelineMajor},
                     {"manual", PlacementKind::kManual}});
    p.order_chain = r.boolean("order_chain", p.order_chain);
    if (const json* sd = r.raw("stage_dcs")) {
        if (!sd->is_array()) {
            r.fail("stage_dcs", "must be an array of DC names");
        } else {
            for (const json& name : *sd) {
                const int idx =
                    name.is_string() ? dcIndex(c->cluster, name.get<std::string>()) : -1;
                if (idx < 0) {
                    r.fail("stage_dcs", "unknown DC " + name.dump());
                    break;
                }
                p.stage_dcs.push_back(idx);
            }
        }
    }
    r.finish();
}

void parseNetwork(const json* j, SimConfig* c, Status* err) {
    Reader r(j, "network", err);
    NetworkSpec& n = c->network;
    n.transport = choose(r, "transport", n.transport,
                         {{"single", TransportKind::kSingle},
                          {"multi", TransportKind::kMulti},
                          {"ideal", TransportKind::kIdeal}});
    n.streams = r.integer("streams", n.streams, 1, 4096);
    n.tcp_window_bytes = r.num("tcp_window_bytes", n.tcp_window_bytes, 1024, 1e12);
    n.mss_bytes = r.num("mss_bytes", n.mss_bytes, 64, 65536);
    n.header_bytes = r.num("header_bytes", n.header_bytes, 0, 1024);
    n.contention_queue_bdp = r.num("contention_queue_bdp", n.contention_queue_bdp, 0, 100);
    n.policy = choose(r, "policy", n.policy,
                      {{"fair", sched::PolicyKind::kFair},
                       {"temporal", sched::PolicyKind::kTemporal},
                       {"workload", sched::PolicyKind::kWorkload}});
    if (r.present("traffic_priority")) {
        // The names are the plugin's ATLAS_TRAFFIC_PRIORITY values (one parser, scheduler/).
        auto order = sched::parsePriorityOrder(r.str("traffic_priority", "equal"),
                                               "network.traffic_priority");
        if (order.isOk()) {
            n.traffic_priority = order.value();
        } else {
            r.fail("traffic_priority", "must be one of: pipeline, collective, equal");
        }
    }
    sched::PolicyConfig& pc = n.policy_config;
    pc.max_slot_ns = r.duration("max_slot_ms", pc.max_slot_ns, 1e6, 1e6);
    pc.min_slot_ns = r.duration("min_slot_ms", pc.min_slot_ns, 1e6, 1e6);
    pc.max_wait_ns = r.duration("max_wait_ms", pc.max_wait_ns, 1e6, 1e7);
    pc.min_confidence = r.num("min_confidence", pc.min_confidence, 0.0, 1.0);
    pc.detector.tolerance = r.num("detector_tolerance", pc.detector.tolerance, 0.001, 0.45);
    r.finish();
    if (err->isOk()) {
        Status s = sched::validate(pc);
        if (!s.isOk()) {
            *err = Status(Code::kInvalidUsage, "network: " + s.message());
        }
    }
}

void parseBubbleTea(const json* j, SimConfig* c, Status* err) {
    Reader r(j, "bubbletea", err);
    BubbleTeaSpec& b = c->bubbletea;
    b.enabled = r.boolean("enabled", j != nullptr);
    b.windows =
        choose(r, "windows", b.windows,
               {{"oracle", WindowSource::kOracle}, {"predicted", WindowSource::kPredicted}});
    b.arrival_rate_per_s = r.num("arrival_rate_per_s", b.arrival_rate_per_s, 0.0, 1e7);
    if (const json* pj = r.raw("prompt_tokens")) {
        Reader pr(pj, "bubbletea.prompt_tokens", err);
        PromptSpec& p = b.prompt;
        p.dist = choose(pr, "dist", p.dist,
                        {{"fixed", PromptDist::kFixed},
                         {"uniform", PromptDist::kUniform},
                         {"lognormal", PromptDist::kLognormal}});
        p.fixed = pr.integer("tokens", p.fixed, 1, 1 << 22);
        p.min = pr.integer("min", p.min, 1, 1 << 22);
        p.max = pr.integer("max", p.max, 1, 1 << 22);
        p.median = pr.num("median", p.median, 1, 1 << 22);
        p.sigma = pr.num("sigma", p.sigma, 0.0, 5.0);
        pr.finish();
        if (p.min > p.max) {
            pr.fail("min", "must be <= max");
        }
    }
    if (const json* mj = r.raw("model")) {
        Reader mr(mj, "bubbletea.model", err);
        b.model_params = mr.num("params_b", b.model_params / 1e9, 1e-3, 1e5) * 1e9;
        b.model_layers = mr.integer("layers", b.model_layers, 1, 100000);
        b.model_hidden = mr.integer("hidden", b.model_hidden, 1, 1 << 20);
        b.efficiency = mr.num("efficiency", b.efficiency, 1e-3, 1.0);
        mr.finish();
    }
    b.tokens_per_s = r.num("tokens_per_s", b.tokens_per_s, 0.0, 1e12);
    b.attention_s_per_token2 = r.num("attention_s_per_token2", b.attention_s_per_token2, -1, 1);
    b.guard_ns = r.duration("guard_us", b.guard_ns, 1e3, 1e9);
    b.chunk_tokens = r.integer("chunk_tokens", b.chunk_tokens, 1, 1 << 22);
    b.min_chunk_tokens = r.integer("min_chunk_tokens", b.min_chunk_tokens, 1, 1 << 22);
    b.prediction_error = r.num("prediction_error", b.prediction_error, -0.99, 100.0);
    b.min_confidence = r.num("min_confidence", b.min_confidence, 0.0, 1.0);
    b.max_wait_ns = r.duration("max_wait_ms", b.max_wait_ns, 1e6, 1e9);
    b.kv_handoff_ns = r.duration("kv_handoff_ms", b.kv_handoff_ns, 1e6, 1e9);
    if (const json* pj = r.raw("predictor")) {
        Reader pr(pj, "bubbletea.predictor", err);
        sched::BubblePredictorConfig& p = b.pipeline.predictor;
        p.detector.tolerance = pr.num("tolerance", p.detector.tolerance, 0.001, 0.45);
        p.detector.min_cycles = pr.integer("min_cycles", p.detector.min_cycles, 2, 64);
        p.horizon_iterations = pr.integer("horizon_iterations", p.horizon_iterations, 1, 16);
        p.duration_quantile = pr.num("duration_quantile", p.duration_quantile, 0.0, 1.0);
        p.min_idle_ns = pr.duration("min_idle_us", p.min_idle_ns, 1e3, 1e9);
        p.max_tracks = pr.integer("max_tracks", p.max_tracks, 1, 256);
        pr.finish();
    }
    b.pipeline.predictor.guard_ns = b.guard_ns;
    r.finish();
    if (err->isOk()) {
        Status s = sched::validate(b.pipeline);
        if (!s.isOk()) {
            *err = Status(Code::kInvalidUsage, "bubbletea.predictor: " + s.message());
        }
    }
}

std::vector<int> intList(Reader& r, const char* key, std::vector<int> def, int lo, int hi) {
    const json* v = r.raw(key);
    if (v == nullptr) {
        return def;
    }
    std::vector<int> out;
    if (!v->is_array() || v->empty() || v->size() > 64) {
        r.fail(key, "must be a non-empty array of integers");
        return def;
    }
    for (const json& x : *v) {
        if (!x.is_number_integer() || x.get<int64_t>() < lo || x.get<int64_t>() > hi) {
            r.fail(key, "entries must be integers in [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "]");
            return def;
        }
        out.push_back(x.get<int>());
    }
    return out;
}

void parsePlan(const json* j, SimConfig* c, Status* err) {
    Reader r(j, "plan", err);
    PlanSpec& p = c->plan;
    p.global_batch = r.integer("global_batch", p.global_batch, 0, 1 << 24);
    p.tp = intList(r, "tp", p.tp, 1, 1024);
    p.micro_batch_sizes = intList(r, "micro_batch_sizes", p.micro_batch_sizes, 1, 1 << 16);
    p.max_pp = r.integer("max_pp", p.max_pp, 1, 4096);
    p.top = r.integer("top", p.top, 1, 1000);
    p.iterations = r.integer("iterations", p.iterations, 1, 1000);
    p.memory_check = r.boolean("memory_check", p.memory_check);
    p.max_candidates = r.integer("max_candidates", p.max_candidates, 1, 10000000);
    r.finish();
}

void parseVariants(const json* j, SimConfig* c, Status* err) {
    if (j == nullptr) {
        return;
    }
    if (!j->is_array()) {
        *err = Status(Code::kInvalidUsage, "variants: must be an array");
        return;
    }
    for (size_t i = 0; i < j->size() && err->isOk(); ++i) {
        Reader r(&(*j)[i], "variants." + std::to_string(i), err);
        Variant v;
        v.name = r.str("name", "variant" + std::to_string(i));
        if (const json* set = r.raw("set")) {
            if (!set->is_object()) {
                r.fail("set", "must be an object of \"dotted.path\": value");
            }
            v.set = *set;
        } else {
            v.set = json::object();
        }
        r.finish();
        c->variants.push_back(std::move(v));
    }
}

Status crossCheck(const SimConfig& c) {
    const auto bad = [](const std::string& m) { return Status(Code::kInvalidUsage, m); };
    const int64_t groups = static_cast<int64_t>(c.par.dp) * c.par.pp;
    if (groups > kMaxGroups) {
        return bad("parallelism: dp * pp must be <= " + std::to_string(kMaxGroups));
    }
    if (c.job.has_model && c.job.model.layers < c.par.pp) {
        return bad("parallelism.pp: more stages than model layers");
    }
    if (!c.job.stages.empty() && c.job.stages.size() != 1 &&
        c.job.stages.size() != static_cast<size_t>(c.par.pp)) {
        return bad("job.stages: give 1 entry (all stages alike) or pp entries");
    }
    if (c.warmup_iterations >= c.iterations) {
        return bad("warmup_iterations must be < iterations");
    }
    if (c.placement.kind == PlacementKind::kManual &&
        c.placement.stage_dcs.size() != static_cast<size_t>(c.par.pp)) {
        return bad("placement.stage_dcs: manual placement needs one DC per stage");
    }
    if (groups * c.job.micro_batches > (int64_t{1} << 26)) {
        return bad("dp * pp * micro_batches must be <= 2^26");
    }
    if (static_cast<double>(c.iterations) * c.job.micro_batches * groups > 2e9) {
        return bad("iterations * micro_batches * dp * pp is too large to simulate");
    }
    if (c.bubbletea.min_chunk_tokens > c.bubbletea.chunk_tokens) {
        return bad("bubbletea.min_chunk_tokens must be <= chunk_tokens");
    }
    return Status::ok();
}

}  // namespace

Result<SimConfig> parseConfig(const json& j) {
    Status err;
    SimConfig c;
    Reader r(&j, "", &err);
    c.name = r.str("name", c.name);
    c.seed = static_cast<uint64_t>(r.num("seed", 1, 0, 9007199254740992.0));
    c.iterations = r.integer("iterations", c.iterations, 1, kMaxIterations);
    c.warmup_iterations = r.integer("warmup_iterations", c.warmup_iterations, 0, kMaxIterations);
    parseGpu(r.raw("gpu"), &c, &err);
    parseJob(r.raw("job"), &c, &err);
    if (const json* p = r.raw("parallelism")) {
        Reader pr(p, "parallelism", &err);
        c.par.dp = pr.integer("dp", 1, 1, kMaxGroups);
        c.par.pp = pr.integer("pp", 1, 1, kMaxGroups);
        c.par.tp = pr.integer("tp", 1, 1, 1024);
        pr.finish();
    }
    const json* cluster = r.raw("cluster");
    if (cluster == nullptr) {
        r.fail("cluster", "is required");
    } else {
        parseCluster(cluster, &c, &err);
    }
    if (err.isOk()) {
        parsePlacement(r.raw("placement"), &c, &err);
    }
    parseNetwork(r.raw("network"), &c, &err);
    if (const json* jt = r.raw("jitter")) {
        Reader jr(jt, "jitter", &err);
        c.jitter.compute = jr.num("compute", 0.0, 0.0, 0.9);
        jr.finish();
    }
    parseBubbleTea(r.raw("bubbletea"), &c, &err);
    parsePlan(r.raw("plan"), &c, &err);
    parseVariants(r.raw("variants"), &c, &err);
    r.finish();
    if (!err.isOk()) {
        return err;
    }
    ATLAS_RETURN_IF_ERROR(crossCheck(c));
    return c;
}

Result<SimConfig> parseConfigText(std::string_view text) {
    json j = json::parse(text.begin(), text.end(), nullptr, false);
    if (j.is_discarded()) {
        return Status(Code::kInvalidUsage, "config: not valid JSON");
    }
    return parseConfig(j);
}

Result<json> loadJsonFile(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
        return Status(Code::kInvalidUsage, path + ": cannot open");
    }
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    json j = json::parse(text, nullptr, false, /*ignore_comments=*/true);
    if (j.is_discarded()) {
        return Status(Code::kInvalidUsage, path + ": not valid JSON");
    }
    return j;
}

Status applyOverride(json* doc, std::string_view assignment) {
    const size_t eq = assignment.find('=');
    if (eq == std::string_view::npos || eq == 0) {
        return Status(Code::kInvalidUsage,
                      "--set expects path=value, got '" + std::string(assignment) + "'");
    }
    const std::string path(assignment.substr(0, eq));
    const std::string text(assignment.substr(eq + 1));
    json value = json::parse(text, nullptr, false);
    if (value.is_discarded()) {
        value = text;
    }
    return applyOverrides(doc, json{{path, value}});
}

Status applyOverrides(json* doc, const json& set) {
    if (!set.is_object()) {
        return Status(Code::kInvalidUsage, "overrides must be an object");
    }
    for (auto it = set.begin(); it != set.end(); ++it) {
        json* cur = doc;
        std::stringstream parts(it.key());
        std::string part;
        std::vector<std::string> path;
        while (std::getline(parts, part, '.')) {
            path.push_back(part);
        }
        if (path.empty()) {
            return Status(Code::kInvalidUsage, "empty override path");
        }
        for (size_t i = 0; i < path.size(); ++i) {
            const std::string& p = path[i];
            const bool last = i + 1 == path.size();
            if (cur->is_array()) {
                const bool digits = !p.empty() && std::all_of(p.begin(), p.end(), ::isdigit);
                const size_t idx = digits && p.size() < 9 ? std::stoul(p) : SIZE_MAX;
                if (idx >= cur->size()) {
                    return Status(Code::kInvalidUsage,
                                  "override " + it.key() + ": bad array index '" + p + "'");
                }
                cur = &(*cur)[idx];
            } else {
                if (!cur->is_object()) {
                    if (!cur->is_null()) {
                        return Status(Code::kInvalidUsage,
                                      "override " + it.key() + ": '" + p + "' is not an object");
                    }
                    *cur = json::object();
                }
                cur = &(*cur)[p];
            }
            if (last) {
                *cur = it.value();
            }
        }
    }
    return Status::ok();
}

}  // namespace atlas::sim
