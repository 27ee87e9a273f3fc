#include "perf/gpu-check/sweep_report.h"

#include <cmath>
#include <cstdio>

namespace atlas::gpucheck {
namespace {

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), f, v);
    return buf;
}

std::string num(double v) {
    if (!std::isfinite(v)) {
        return "null";
    }
    return fmt("%.6g", v);
}

}  // namespace

std::string formatTimeUs(double seconds) {
    const double us = seconds * 1e6;
    if (us >= 10000.0) {
        return fmt("%7.0f", us);
    }
    if (us >= 100.0) {
        return fmt("%7.1f", us);
    }
    return fmt("%7.2f", us);
}

std::string tableHeader() {
    char buf[512];
    std::string s;
    std::snprintf(buf, sizeof(buf), "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %5s\n", "",
                  "", "", "", "", "out-of-place", "", "", "", "");
    s += buf;
    std::snprintf(buf, sizeof(buf), "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %5s\n",
                  "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                  "iters");
    s += buf;
    std::snprintf(buf, sizeof(buf), "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %5s\n", "(B)",
                  "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "");
    s += buf;
    return s;
}

std::string tableRow(const PointResult& p, int nranks) {
    const Bandwidth bw = bandwidthFor(p.op, p.geom, p.time_s, nranks);
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%12zu  %12zu  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6zu  %5d\n",
                  p.geom.bytes(), p.geom.param_count, "float", redopName(p.op), -1,
                  formatTimeUs(p.time_s).c_str(), bw.algbw_gbs, bw.busbw_gbs, p.wrong,
                  p.iters == 0 ? 1 : p.iters);
    return buf;
}

double averageBusBw(const std::vector<PointResult>& points, int nranks) {
    double sum = 0;
    size_t n = 0;
    for (const PointResult& p : points) {
        sum += bandwidthFor(p.op, p.geom, p.time_s, nranks).busbw_gbs;
        ++n;
    }
    return n == 0 ? 0 : sum / static_cast<double>(n);
}

std::string tableFooter(const std::vector<PointResult>& points, int nranks) {
    size_t wrong = 0;
    for (const PointResult& p : points) {
        wrong += p.wrong;
    }
    char buf[256];
    std::string s;
    std::snprintf(buf, sizeof(buf), "# Out of bounds values : %zu %s\n", wrong,
                  wrong == 0 ? "OK" : "FAILED");
    s += buf;
    std::snprintf(buf, sizeof(buf), "# Avg bus bandwidth    : %g\n", averageBusBw(points, nranks));
    s += buf;
    return s;
}

std::string comparisonTable(const std::vector<PointResult>& a, const std::vector<PointResult>& b,
                            int nranks) {
    if (a.empty() || b.empty()) {
        return "";
    }
    const std::string na = a.front().net;
    const std::string nb = b.front().net;
    char buf[512];
    std::string s;
    std::snprintf(buf, sizeof(buf), "# %-14s %12s  %12s %12s  %10s %10s  %8s\n", "op", "size_B",
                  ("time_us " + na).c_str(), ("time_us " + nb).c_str(), "busbw a", "busbw b",
                  "a / b");
    s += buf;
    std::snprintf(buf, sizeof(buf), "#   a = %s, b = %s; busbw in GB/s\n", na.c_str(), nb.c_str());
    s += buf;
    for (Op op : kAllOps) {
        for (const PointResult& x : a) {
            if (x.op != op) {
                continue;
            }
            for (const PointResult& y : b) {
                if (y.op != x.op || y.requested_bytes != x.requested_bytes) {
                    continue;
                }
                const double bx = bandwidthFor(x.op, x.geom, x.time_s, nranks).busbw_gbs;
                const double by = bandwidthFor(y.op, y.geom, y.time_s, nranks).busbw_gbs;
                std::snprintf(buf, sizeof(buf), "  %-14s %12zu  %12s %12s  %10.4f %10.4f  %8s\n",
                              opName(x.op), x.geom.bytes(), formatTimeUs(x.time_s).c_str(),
                              formatTimeUs(y.time_s).c_str(), bx, by,
                              by > 0 ? fmt("%.2f", bx / by).c_str() : "-");
                s += buf;
            }
        }
    }
    return s;
}

std::string jsonEscape(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof(buf), "\\u%04x", c);
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

std::string pointJson(const PointResult& p, int nranks) {
    const Bandwidth bw = bandwidthFor(p.op, p.geom, p.time_s, nranks);
    std::string ranks = "[";
    for (size_t i = 0; i < p.rank_time_s.size(); ++i) {
        ranks += (i ? ", " : "") + num(p.rank_time_s[i] * 1e6);
    }
    ranks += "]";
    return "{\"net\": " + jsonEscape(p.net) + ", \"op\": \"" + opName(p.op) +
           "\", \"requested_B\": " + std::to_string(p.requested_bytes) +
           ", \"size_B\": " + std::to_string(p.geom.bytes()) +
           ", \"count\": " + std::to_string(p.geom.param_count) +
           ", \"type\": \"float\", \"redop\": \"" + redopName(p.op) +
           "\", \"root\": -1, \"time_us\": " + num(p.time_s * 1e6) +
           ", \"algbw_GBps\": " + num(bw.algbw_gbs) + ", \"busbw_GBps\": " + num(bw.busbw_gbs) +
           ", \"wrong\": " + std::to_string(p.wrong) + ", \"iters\": " + std::to_string(p.iters) +
           ", \"check_time_us\": " + num(p.check_s * 1e6) + ", \"rank_time_us\": " + ranks +
           ", \"detail\": " + jsonEscape(p.detail) + "}";
}

}  // namespace atlas::gpucheck
