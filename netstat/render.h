// The two views of atlas-netstat over parsed segments (netstat/reader.h):
//  - renderTable: every comm of every process with its streams, like `ss -ti`;
//  - renderPrometheus: the Prometheus text exposition format (version 0.0.4), base units
//    (seconds, bytes), one family per metric with HELP and TYPE, labels pid, comm (the
//    transport session, shared by both ends), role, peer, link and, per stream, stream.
// Pure functions of their input (now_ns only for ages).
#pragma once

#include <string>
#include <vector>

#include "atlas/common/clock.h"
#include "netstat/reader.h"

namespace atlas::netstat {

std::string renderTable(const std::vector<ProcessView>& processes, Nanos now_ns);
std::string renderPrometheus(const std::vector<ProcessView>& processes);

// Prometheus label-value escaping: backslash, double quote and newline.
std::string escapeLabel(const std::string& v);

}  // namespace atlas::netstat
