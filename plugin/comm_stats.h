// Glue between the plugin's comms and the stats segment (netstat/, docs/netstat.md): each
// connected comm claims a record and gives its transport comm a sink, so the owner engine
// samples its streams (bytes, TCP_INFO) every ATLAS_NETSTAT_INTERVAL_MS; the request pool
// counts completed messages into the record; close releases it.
//
// Best effort like the bubble channel: no segment, or a full one, only means no stats.
#pragma once

#include <memory>
#include <string>

#include "netstat/writer.h"
#include "plugin/net_hints.h"
#include "transport/net.h"

namespace atlas::plugin {

struct Params;

// The process's segment per the ATLAS_NETSTAT* variables, or nullptr when they turn it off or
// it cannot be created (logged once by the caller with the returned status).
Result<std::unique_ptr<netstat::StatsWriter>> createStatsWriter(const Params& params);

struct CommStatsInputs {
    netstat::Role role = netstat::kRoleSend;
    uint64_t comm_id = 0;
    int dev = 0;
    TrafficKind traffic = TrafficKind::kUnknown;
    int priority = 1;
    bool wan = false;
    std::string link;
};

// Claims a record for `comm` and installs the sink; nullptr when `writer` is nullptr or full.
// Call before NCCL can post on the comm (from connect/accept).
template <typename Comm>
netstat::CommRecord* attachStats(netstat::StatsWriter* writer, Nanos interval_ns, Comm& comm,
                                 const CommStatsInputs& in) {
    if (writer == nullptr) {
        return nullptr;
    }
    const transport::CommInfo& info = comm.info();
    netstat::CommIdentity id;
    id.comm_id = in.comm_id;
    id.session_id = info.session_id;
    id.role = in.role;
    id.dev = in.dev;
    id.nstreams = info.nstreams;
    id.traffic = static_cast<netstat::Traffic>(in.traffic);
    id.priority = in.priority;
    id.wan = in.wan;
    id.handshake_rtt_ns = static_cast<uint64_t>(info.rtt_ns);
    id.open_ns = static_cast<uint64_t>(monotonicNowNs());
    id.peer = info.peer.toString();
    id.local = info.local.toString();
    id.link = in.wan ? in.link : "";
    netstat::CommRecord* rec = writer->claim(id);
    if (rec != nullptr) {
        comm.setStatsSink(std::make_unique<netstat::StreamSink>(writer, rec), interval_ns);
    }
    return rec;
}

}  // namespace atlas::plugin
