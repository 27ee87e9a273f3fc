#include "netstat/render.h"

#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <functional>
#include <sstream>

namespace atlas::netstat {
namespace {

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, f);
    std::vsnprintf(buf, sizeof(buf), f, ap);
    va_end(ap);
    return buf;
}

std::string bytesText(uint64_t b) {
    if (b >= (1ull << 30)) {
        return fmt("%.2fG", static_cast<double>(b) / (1ull << 30));
    }
    if (b >= (1ull << 20)) {
        return fmt("%.1fM", static_cast<double>(b) / (1ull << 20));
    }
    if (b >= (1ull << 10)) {
        return fmt("%.1fK", static_cast<double>(b) / (1ull << 10));
    }
    return fmt("%" PRIu64, b);
}

const char* roleName(Role r) {
    return r == kRoleRecv ? "recv" : "send";
}

const char* trafficName(Traffic t) {
    switch (t) {
        case kTrafficPipeline:
            return "pipeline";
        case kTrafficDataParallel:
            return "data-parallel";
        default:
            return "unknown";
    }
}

std::string sessionText(uint64_t s) {
    return fmt("%016" PRIx64, s);
}

}  // namespace

std::string escapeLabel(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\') {
            out += "\\\\";
        } else if (c == '"') {
            out += "\\\"";
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

std::string renderTable(const std::vector<ProcessView>& processes, Nanos now_ns) {
    std::ostringstream os;
    if (processes.empty()) {
        os << "no Atlas process on this node (no stats segment found)\n";
    }
    for (const ProcessView& p : processes) {
        // start_mono_ns comes from a segment another process wrote: compare unsigned, so a
        // start beyond INT64_MAX reads as "not started yet" instead of overflowing.
        const auto now_u = static_cast<uint64_t>(now_ns > 0 ? now_ns : 0);
        const double up =
            now_u > p.start_mono_ns ? static_cast<double>(now_u - p.start_mono_ns) / 1e9 : 0.0;
        os << fmt("pid %" PRId64 " (%s) on %s, up %.1f s, %zu comm(s)", p.pid, p.process.c_str(),
                  p.host.c_str(), up, p.comms.size());
        if (p.auth_failures > 0) {
            os << fmt(", %" PRIu64 " auth failure(s)", p.auth_failures);
        }
        if (p.comms_dropped > 0) {
            os << fmt(", %" PRIu64 " comm(s) without stats (segment full)", p.comms_dropped);
        }
        os << (p.closed ? " [closed]" : !p.alive ? " [process gone]" : "") << "\n";
        for (const CommView& c : p.comms) {
            os << fmt("  %s %s %s %s  session %s  comm 0x%" PRIx64 "  dev %u  %u stream(s)%s%s\n",
                      roleName(c.role), c.local.c_str(), c.role == kRoleSend ? "->" : "<-",
                      c.peer.c_str(), sessionText(c.session_id).c_str(), c.comm_id, c.dev,
                      c.nstreams, c.wan ? "  wan " : "", c.wan ? c.link.c_str() : "");
            os << fmt("    %s traffic (priority %u)  handshake rtt %.2f ms  %s in %" PRIu64
                      " msg(s)  gate waits %" PRIu64 " grants %" PRIu64,
                      trafficName(c.traffic), c.priority,
                      static_cast<double>(c.handshake_rtt_ns) / 1e6, bytesText(c.bytes).c_str(),
                      c.messages, c.gate_waits, c.gate_grants);
            if (c.resets + c.rejoins > 0) {
                os << fmt("  resets %" PRIu64 " rejoins %" PRIu64 " resent %s", c.resets, c.rejoins,
                          bytesText(c.resent_bytes).c_str());
            }
            os << "\n";
            os << "    stream      bytes      rtt   rttvar  cwnd   mss  unacked  retrans  "
                  "delivery\n";
            for (const StreamView& s : c.streams) {
                const std::string name = s.stream == 0 ? "ctl" : std::to_string(s.stream);
                if (!s.valid) {
                    os << fmt("    %6s %10s  (no sample yet)\n", name.c_str(),
                              bytesText(s.bytes).c_str());
                    continue;
                }
                os << fmt("    %6s %10s %6.1fms %6.1fms %5" PRIu64 " %5" PRIu64 " %8" PRIu64
                          " %8" PRIu64 " %7.1fMbit/s%s\n",
                          name.c_str(), bytesText(s.bytes).c_str(),
                          static_cast<double>(s.rtt_us) / 1e3,
                          static_cast<double>(s.rttvar_us) / 1e3, s.snd_cwnd, s.snd_mss, s.unacked,
                          s.total_retrans, static_cast<double>(s.delivery_rate) * 8 / 1e6,
                          s.app_limited ? " (app-limited)" : "");
            }
        }
    }
    return os.str();
}

std::string renderPrometheus(const std::vector<ProcessView>& processes) {
    std::ostringstream os;
    struct Family {
        const char* name;
        const char* type;
        const char* help;
    };
    auto header = [&os](const Family& f) {
        os << "# HELP " << f.name << " " << f.help << "\n# TYPE " << f.name << " " << f.type
           << "\n";
    };
    auto value = [](double v) {
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.17g", v);
        return std::string(buf);
    };
    auto commLabels = [](const ProcessView& p, const CommView& c) {
        return fmt("pid=\"%" PRId64 "\",comm=\"%s\",role=\"%s\",peer=\"", p.pid,
                   sessionText(c.session_id).c_str(), roleName(c.role)) +
               escapeLabel(c.peer) + "\",link=\"" + escapeLabel(c.link) + "\"";
    };
    auto eachComm = [&](const Family& f, const std::function<double(const CommView&)>& get) {
        header(f);
        for (const ProcessView& p : processes) {
            for (const CommView& c : p.comms) {
                os << f.name << "{" << commLabels(p, c) << "} " << value(get(c)) << "\n";
            }
        }
    };
    auto eachStream = [&](const Family& f, const std::function<double(const StreamView&)>& get,
                          bool needs_sample) {
        header(f);
        for (const ProcessView& p : processes) {
            for (const CommView& c : p.comms) {
                for (const StreamView& s : c.streams) {
                    if (needs_sample && !s.valid) {
                        continue;
                    }
                    os << f.name << "{" << commLabels(p, c) << ",stream=\"" << s.stream << "\"} "
                       << value(get(s)) << "\n";
                }
            }
        }
    };
    header({"atlas_process_auth_failures_total", "counter",
            "Connections dropped by this process's listeners for failed authentication."});
    for (const ProcessView& p : processes) {
        os << "atlas_process_auth_failures_total{pid=\"" << p.pid << "\"} "
           << value(static_cast<double>(p.auth_failures)) << "\n";
    }
    header({"atlas_process_comms_without_stats_total", "counter",
            "Comms that found the stats segment full (raise ATLAS_NETSTAT_COMMS)."});
    for (const ProcessView& p : processes) {
        os << "atlas_process_comms_without_stats_total{pid=\"" << p.pid << "\"} "
           << value(static_cast<double>(p.comms_dropped)) << "\n";
    }
    auto d = [](uint64_t v) { return static_cast<double>(v); };
    eachComm({"atlas_comm_bytes_total", "counter", "Bytes of completed messages."},
             [&](const CommView& c) { return d(c.bytes); });
    eachComm({"atlas_comm_messages_total", "counter", "Completed messages."},
             [&](const CommView& c) { return d(c.messages); });
    eachComm({"atlas_comm_streams", "gauge", "Data streams of the comm."},
             [&](const CommView& c) { return d(c.nstreams); });
    eachComm({"atlas_comm_handshake_rtt_seconds", "gauge",
              "Round-trip time measured during the connection handshake."},
             [&](const CommView& c) { return d(c.handshake_rtt_ns) / 1e9; });
    eachComm({"atlas_comm_gate_waits_total", "counter",
              "Times WAN admission made the comm wait for its link."},
             [&](const CommView& c) { return d(c.gate_waits); });
    eachComm({"atlas_comm_gate_grants_total", "counter", "Times WAN admission granted the link."},
             [&](const CommView& c) { return d(c.gate_grants); });
    eachComm({"atlas_comm_stream_resets_total", "counter", "Stream resets survived by the comm."},
             [&](const CommView& c) { return d(c.resets); });
    eachComm({"atlas_comm_stream_rejoins_total", "counter", "Streams re-established."},
             [&](const CommView& c) { return d(c.rejoins); });
    eachComm({"atlas_comm_resent_bytes_total", "counter", "Bytes resent after stream resets."},
             [&](const CommView& c) { return d(c.resent_bytes); });
    eachStream(
        {"atlas_stream_bytes_total", "counter", "Payload bytes the stream moved."},
        [&](const StreamView& s) { return d(s.bytes); }, false);
    eachStream(
        {"atlas_stream_rtt_seconds", "gauge", "Smoothed RTT (TCP_INFO tcpi_rtt)."},
        [&](const StreamView& s) { return d(s.rtt_us) / 1e6; }, true);
    eachStream(
        {"atlas_stream_rtt_variance_seconds", "gauge", "RTT mean deviation (tcpi_rttvar)."},
        [&](const StreamView& s) { return d(s.rttvar_us) / 1e6; }, true);
    eachStream(
        {"atlas_stream_min_rtt_seconds", "gauge", "Windowed minimum RTT (tcpi_min_rtt)."},
        [&](const StreamView& s) { return d(s.min_rtt_us) / 1e6; }, true);
    eachStream(
        {"atlas_stream_cwnd_segments", "gauge", "Congestion window (tcpi_snd_cwnd)."},
        [&](const StreamView& s) { return d(s.snd_cwnd); }, true);
    eachStream(
        {"atlas_stream_cwnd_bytes", "gauge", "Congestion window times the MSS."},
        [&](const StreamView& s) { return d(s.snd_cwnd) * d(s.snd_mss); }, true);
    eachStream(
        {"atlas_stream_retransmits_total", "counter",
         "Segments retransmitted (tcpi_total_retrans)."},
        [&](const StreamView& s) { return d(s.total_retrans); }, true);
    eachStream(
        {"atlas_stream_retransmitted_bytes_total", "counter",
         "Bytes retransmitted (tcpi_bytes_retrans)."},
        [&](const StreamView& s) { return d(s.bytes_retrans); }, true);
    eachStream(
        {"atlas_stream_delivery_rate_bytes_per_second", "gauge",
         "The kernel's latest delivery-rate sample (tcpi_delivery_rate)."},
        [&](const StreamView& s) { return d(s.delivery_rate); }, true);
    eachStream(
        {"atlas_stream_pacing_rate_bytes_per_second", "gauge", "Pacing rate (tcpi_pacing_rate)."},
        [&](const StreamView& s) { return d(s.pacing_rate); }, true);
    return os.str();
}

}  // namespace atlas::netstat
