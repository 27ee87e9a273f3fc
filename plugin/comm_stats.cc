#include "plugin/comm_stats.h"

#include "plugin/params.h"

namespace atlas::plugin {

Result<std::unique_ptr<netstat::StatsWriter>> createStatsWriter(const Params& params) {
    if (!params.netstat) {
        return std::unique_ptr<netstat::StatsWriter>();
    }
    netstat::WriterConfig wc;
    wc.dir = params.netstat_dir;
    wc.comm_capacity = static_cast<uint32_t>(params.netstat_comms);
    // Stream record 0 is the control stream; a comm has at most ATLAS_MAX_STREAMS data streams.
    wc.stream_capacity = static_cast<uint32_t>(params.max_streams) + 1;
    return netstat::StatsWriter::create(wc);
}

}  // namespace atlas::plugin
