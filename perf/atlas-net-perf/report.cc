#include "perf/atlas-net-perf/report.h"

namespace atlas::netperf {

namespace {

bool isLatency(const RunInfo& info) {
    return info.plan.measure == Measure::kLatency;
}

const ConfigResult* findBaseline(const RunInfo& info, const std::vector<ConfigResult>& results) {
    for (const ConfigResult& r : results) {
        if (r.spec.name == info.baseline) {
            return &r;
        }
    }
    return results.empty() ? nullptr : &results.front();
}

std::string describeConfig(const ConfigSpec& c) {
    std::string s = c.kind == Kind::kRawTcp
                        ? "raw TCP, " + std::to_string(c.raw_streams) + " stream(s)"
                        : std::string("plugin");
    for (const auto& [k, v] : c.env) {
        s += " " + k + "=" + v;
    }
    return s;
}

nlohmann::json rowJson(const Row& r, bool latency) {
    nlohmann::json j;
    j["size"] = r.size;
    j["count"] = r.count;
    if (latency) {
        j["p50_us"] = r.p50_us;
        j["p99_us"] = r.p99_us;
        j["mean_us"] = r.mean_us;
        j["min_us"] = r.min_us;
        j["max_us"] = r.max_us;
    } else {
        j["time_us"] = r.time_us;
        j["algbw_GBps"] = r.algbw_GBps;
        j["gbps"] = r.gbps;
    }
    return j;
}

}  // namespace

double ratioFor(const RunInfo& info, const std::vector<ConfigResult>& results, const Row& row) {
    const ConfigResult* base = findBaseline(info, results);
    if (base == nullptr) {
        return 0;
    }
    for (const Row& b : base->rows) {
        if (b.size != row.size) {
            continue;
        }
        if (isLatency(info)) {
            return b.p50_us > 0 ? row.p50_us / b.p50_us : 0;
        }
        return b.algbw_GBps > 0 ? row.algbw_GBps / b.algbw_GBps : 0;
    }
    return 0;
}

void printTable(std::FILE* out, const RunInfo& info, const std::vector<ConfigResult>& results) {
    const Plan& p = info.plan;
    const bool latency = isLatency(info);
    std::fprintf(out,
                 "# atlas-net-perf  mode=%s  measure=%s  direction=%s  window=%d  iters=%d  "
                 "warmup=%d%s\n",
                 info.mode.c_str(), latency ? "latency(round trip)" : "bandwidth",
                 latency ? "ping-pong" : directionName(p.direction), p.window, p.iters, p.warmup,
                 p.check ? "  check=on" : "");
    std::fprintf(out, "# plugin: %s\n", info.plugin.c_str());
    for (const ConfigResult& r : results) {
        std::fprintf(out, "# config %-14s %s%s\n", r.spec.name.c_str(),
                     describeConfig(r.spec).c_str(),
                     r.spec.name == info.baseline ? "  [baseline]" : "");
    }
    std::fprintf(out, "#\n");
    if (latency) {
        std::fprintf(out, "# %10s  %-14s %7s %11s %11s %11s %8s\n", "size", "config", "count",
                     "p50_us", "p99_us", "mean_us", "ratio");
    } else {
        std::fprintf(out, "# %10s  %-14s %7s %11s %11s %9s %8s\n", "size", "config", "count",
                     "time_us", "algbw_GB/s", "Gbit/s", "ratio");
    }
    for (size_t s = 0; s < p.sizes.size(); ++s) {
        for (const ConfigResult& r : results) {
            if (!r.error.empty()) {
                continue;
            }
            for (const Row& row : r.rows) {
                if (row.size != p.sizes[s]) {
                    continue;
                }
                double ratio = ratioFor(info, results, row);
                if (latency) {
                    std::fprintf(out, "  %10zu  %-14s %7d %11.2f %11.2f %11.2f %8.2f\n", row.size,
                                 r.spec.name.c_str(), row.count, row.p50_us, row.p99_us,
                                 row.mean_us, ratio);
                } else {
                    std::fprintf(out, "  %10zu  %-14s %7d %11.2f %11.3f %9.3f %8.2f\n", row.size,
                                 r.spec.name.c_str(), row.count, row.time_us, row.algbw_GBps,
                                 row.gbps, ratio);
                }
                break;
            }
        }
    }
    for (const ConfigResult& r : results) {
        if (!r.error.empty()) {
            std::fprintf(out, "# config %s FAILED: %s\n", r.spec.name.c_str(), r.error.c_str());
        }
    }
    std::fflush(out);
}

nlohmann::json resultsJson(const RunInfo& info, const std::vector<ConfigResult>& results) {
    const Plan& p = info.plan;
    const bool latency = isLatency(info);
    nlohmann::json j;
    j["tool"] = "atlas-net-perf";
    j["format_version"] = 1;
    j["mode"] = info.mode;
    j["measure"] = latency ? "latency" : "bandwidth";
    j["direction"] = latency ? "ping-pong" : directionName(p.direction);
    j["window"] = p.window;
    j["iters"] = p.iters;
    j["warmup"] = p.warmup;
    j["check"] = p.check;
    j["sizes"] = p.sizes;
    j["plugin"] = info.plugin;
    j["baseline"] = info.baseline;
    j["ratio"] = latency ? "p50_us / baseline p50_us" : "algbw / baseline algbw";
    nlohmann::json configs = nlohmann::json::array();
    for (const ConfigResult& r : results) {
        nlohmann::json c;
        c["name"] = r.spec.name;
        c["kind"] = kindName(r.spec.kind);
        if (r.spec.kind == Kind::kRawTcp) {
            c["streams"] = r.spec.raw_streams;
        }
        nlohmann::json env = nlohmann::json::object();
        for (const auto& [k, v] : r.spec.env) {
            env[k] = v;
        }
        c["env"] = env;
        c["ok"] = r.error.empty();
        if (!r.error.empty()) {
            c["error"] = r.error;
        }
        nlohmann::json rows = nlohmann::json::array();
        for (const Row& row : r.rows) {
            nlohmann::json rj = rowJson(row, latency);
            rj["ratio"] = ratioFor(info, results, row);
            rows.push_back(rj);
        }
        c["rows"] = rows;
        configs.push_back(c);
    }
    j["configs"] = configs;
    return j;
}

std::string rowsToJson(const std::vector<Row>& rows) {
    nlohmann::json a = nlohmann::json::array();
    for (const Row& r : rows) {
        nlohmann::json j = rowJson(r, false);
        j.update(rowJson(r, true));
        a.push_back(j);
    }
    return a.dump();
}

std::string errorToJson(const std::string& text) {
    nlohmann::json j;
    j["error"] = text;
    return j.dump();
}

Result<std::vector<Row>> rowsFromJson(const std::string& text) {
    nlohmann::json a = nlohmann::json::parse(text, nullptr, false);
    if (a.is_object() && a.contains("error") && a["error"].is_string()) {
        return Status(Code::kRemote, a["error"].get<std::string>());
    }
    if (a.is_discarded() || !a.is_array()) {
        return Status(Code::kInternal, "client results are not a JSON array");
    }
    std::vector<Row> rows;
    for (const auto& j : a) {
        if (!j.is_object()) {
            return Status(Code::kInternal, "client results: a row is not an object");
        }
        Row r;
        r.size = j.value("size", size_t{0});
        r.count = j.value("count", 0);
        r.time_us = j.value("time_us", 0.0);
        r.algbw_GBps = j.value("algbw_GBps", 0.0);
        r.gbps = j.value("gbps", 0.0);
        r.p50_us = j.value("p50_us", 0.0);
        r.p99_us = j.value("p99_us", 0.0);
        r.mean_us = j.value("mean_us", 0.0);
        r.min_us = j.value("min_us", 0.0);
        r.max_us = j.value("max_us", 0.0);
        rows.push_back(r);
    }
    return rows;
}

}  // namespace atlas::netperf
