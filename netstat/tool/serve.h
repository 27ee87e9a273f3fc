// `atlas-netstat --serve ADDR`: a minimal HTTP/1.1 exporter on plain sockets. GET /metrics
// answers the Prometheus text of every segment read at request time; anything else is 404
// (405 for other methods). One connection at a time, each bounded by a 5 s deadline and a
// 8 KiB request limit, so a stuck or hostile client cannot hold the exporter.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "atlas/common/status.h"

namespace atlas::netstat {

// "HOST:PORT", "[V6]:PORT" or ":PORT" (all interfaces). Port 0 picks a free one.
Status serveMetrics(const std::string& addr, const std::function<std::string()>& metrics,
                    const std::atomic<bool>& stop, const std::function<void(int port)>& ready);

}  // namespace atlas::netstat
