#include "arbiter/metrics.h"

#include <cinttypes>
#include <cstdio>

namespace atlas::arbiter {
namespace {

class Out {
  public:
    void family(const char* name, const char* type, const char* help) {
        s_ += "# HELP ";
        s_ += name;
        s_ += ' ';
        s_ += help;
        s_ += "\n# TYPE ";
        s_ += name;
        s_ += ' ';
        s_ += type;
        s_ += '\n';
    }
    void sample(const char* name, const std::string& labels, double value) {
        char num[64];
        std::snprintf(num, sizeof(num), "%.9g", value);
        s_ += name;
        if (!labels.empty()) {
            s_ += '{';
            s_ += labels;
            s_ += '}';
        }
        s_ += ' ';
        s_ += num;
        s_ += '\n';
    }
    std::string take() { return std::move(s_); }

  private:
    std::string s_;
};

// Link names are restricted to [A-Za-z0-9._:>/-] (validLinkName): nothing to escape.
std::string linkLabel(const std::string& link) {
    return "link=\"" + link + "\"";
}

}  // namespace

std::string renderMetrics(const ArbiterCore& core, const ServerCounters& c, Nanos now_ns) {
    Out o;
    o.family("atlas_arbiter_sessions", "gauge", "Connected plugin sessions.");
    o.sample("atlas_arbiter_sessions", "", static_cast<double>(c.sessions_current));
    o.family("atlas_arbiter_sessions_total", "counter", "Sessions accepted since start.");
    o.sample("atlas_arbiter_sessions_total", "", static_cast<double>(c.sessions_total));
    o.family("atlas_arbiter_auth_failures_total", "counter",
             "Sessions rejected for a missing or wrong MAC.");
    o.sample("atlas_arbiter_auth_failures_total", "", static_cast<double>(c.auth_failures));
    o.family("atlas_arbiter_protocol_errors_total", "counter",
             "Connections closed for malformed or unexpected messages.");
    o.sample("atlas_arbiter_protocol_errors_total", "", static_cast<double>(c.protocol_errors));
    o.family("atlas_arbiter_liveness_drops_total", "counter",
             "Sessions dropped because they stayed silent past the lease.");
    o.sample("atlas_arbiter_liveness_drops_total", "", static_cast<double>(c.liveness_drops));
    o.family("atlas_arbiter_flows", "gauge", "Open flows.");
    o.sample("atlas_arbiter_flows", "", static_cast<double>(core.flowCount()));

    const auto links = core.links();
    struct Fam {
        const char* name;
        const char* type;
        const char* help;
    };
    const Fam fams[] = {
        {"atlas_arbiter_requests_total", "counter", "Transfers requested."},
        {"atlas_arbiter_grants_total", "counter", "Grants sent (renewals included)."},
        {"atlas_arbiter_waits_total", "counter", "Requests that had to wait for the link."},
        {"atlas_arbiter_wait_seconds_sum", "counter", "Time from request to first grant."},
        {"atlas_arbiter_wait_seconds_count", "counter", "Requests that received a grant."},
        {"atlas_arbiter_wait_seconds_max", "gauge", "Longest wait for a first grant."},
        {"atlas_arbiter_stale_releases_total", "counter",
         "Releases of a grant that was already renewed or preempted."},
        {"atlas_arbiter_cancels_total", "counter", "Transfers dropped by close or lost session."},
        {"atlas_arbiter_link_bytes_total", "counter", "Bytes reported sent under grants."},
        {"atlas_arbiter_link_busy_seconds_total", "counter", "Time the link had a holder."},
        {"atlas_arbiter_link_demand_seconds_total", "counter",
         "Time a flow waited for the link or held it (the link had work queued)."},
        {"atlas_arbiter_link_trains_total", "counter",
         "Message trains clients reported that were samples of the link's rate (protocol 3)."},
        {"atlas_arbiter_link_rate_bits_per_second", "gauge",
         "The link's measured rate over every session's trains, as grants carry it (0: "
         "unknown)."},
        {"atlas_arbiter_slot_utilization", "gauge",
         "Fraction of time since the link appeared during which it had a holder."},
    };
    for (size_t fi = 0; fi < sizeof(fams) / sizeof(fams[0]); ++fi) {
        o.family(fams[fi].name, fams[fi].type, fams[fi].help);
        for (const std::string& link : links) {
            const LinkStats* s = core.linkStats(link);
            const Nanos busy = core.busyNs(link, now_ns);
            const Nanos age = now_ns - core.createdNs(link);
            double v = 0;
            switch (fi) {
                case 0:
                    v = static_cast<double>(s->requests);
                    break;
                case 1:
                    v = static_cast<double>(s->grants);
                    break;
                case 2:
                    v = static_cast<double>(s->waited);
                    break;
                case 3:
                    v = static_cast<double>(s->wait_ns_sum) / 1e9;
                    break;
                case 4:
                    v = static_cast<double>(s->first_grants);
                    break;
                case 5:
                    v = static_cast<double>(s->wait_ns_max) / 1e9;
                    break;
                case 6:
                    v = static_cast<double>(s->stale_releases);
                    break;
                case 7:
                    v = static_cast<double>(s->cancels);
                    break;
                case 8:
                    v = static_cast<double>(s->bytes);
                    break;
                case 9:
                    v = static_cast<double>(busy) / 1e9;
                    break;
                case 10:
                    v = static_cast<double>(core.demandNs(link, now_ns)) / 1e9;
                    break;
                case 11:
                    v = static_cast<double>(s->trains);
                    break;
                case 12:
                    v = static_cast<double>(core.rateBps(link, now_ns));
                    break;
                default:
                    v = age > 0 ? static_cast<double>(busy) / static_cast<double>(age) : 0;
            }
            o.sample(fams[fi].name, linkLabel(link), v);
        }
    }

    o.family("atlas_arbiter_workload_picks_total", "counter",
             "workload policy: holder choices by mode (planned = learned order; fallback = FIFO "
             "while learning or after a broken pattern; aged = starvation bound).");
    for (const std::string& link : links) {
        if (auto w = core.workloadCounters(link)) {
            o.sample("atlas_arbiter_workload_picks_total", linkLabel(link) + ",kind=\"planned\"",
                     static_cast<double>(w->planned_picks));
            o.sample("atlas_arbiter_workload_picks_total", linkLabel(link) + ",kind=\"fallback\"",
                     static_cast<double>(w->fallback_picks));
            o.sample("atlas_arbiter_workload_picks_total", linkLabel(link) + ",kind=\"aged\"",
                     static_cast<double>(w->aged_picks));
        }
    }

    const auto flows = core.flows();
    o.family("atlas_arbiter_flow_bytes_total", "counter", "Bytes a flow reported under grants.");
    for (const FlowView& f : flows) {
        char labels[256];
        std::snprintf(labels, sizeof(labels),
                      "link=\"%s\",session=\"%" PRIu64
                      "\",flow=\"%u\",pipeline=\"%d\","
                      "stage=\"%d\",direction=\"%s\",priority=\"%u\"",
                      f.link.c_str(), f.session, f.flow, f.cls.pipeline, f.cls.stage,
                      f.cls.direction == 0 ? "fwd" : "bwd", static_cast<unsigned>(f.cls.priority));
        o.sample("atlas_arbiter_flow_bytes_total", labels, static_cast<double>(f.bytes));
    }
    o.family("atlas_arbiter_flow_grants_total", "counter", "Grants a flow received.");
    for (const FlowView& f : flows) {
        char labels[128];
        std::snprintf(labels, sizeof(labels), "link=\"%s\",session=\"%" PRIu64 "\",flow=\"%u\"",
                      f.link.c_str(), f.session, f.flow);
        o.sample("atlas_arbiter_flow_grants_total", labels, static_cast<double>(f.grants));
    }
    return o.take();
}

}  // namespace atlas::arbiter
