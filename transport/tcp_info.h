// The TCP_INFO sampler: one getsockopt(TCP_INFO) into the plain TcpInfoSample of
// include/atlas/stream_stats.h. One mechanism for everyone who wants the kernel's view of a
// stream: the stats segment (docs/netstat.md) and the link-rate estimator (issue 17).
//
// Cost: one syscall (about a microsecond). Callers run it on the socket's owner engine thread,
// at a bounded rate and outside I/O completion handlers, never per message (CommCore does so
// every TransportConfig::stats_interval_ns).
#pragma once

#include "atlas/common/status.h"
#include "atlas/stream_stats.h"

namespace atlas::transport {

// Reads TCP_INFO of `fd` into *out (at_ns = now_ns). Fields a kernel's shorter struct tcp_info
// lacks are left 0. kSystem when getsockopt fails (not a TCP socket, closed).
Status readTcpInfo(int fd, Nanos now_ns, TcpInfoSample* out);

// Interval gate for periodic sampling: due(now) is true at most once per interval.
class SampleTimer {
  public:
    explicit SampleTimer(Nanos interval_ns) : interval_ns_(interval_ns) {}
    bool due(Nanos now_ns) {
        if (interval_ns_ <= 0 || now_ns < next_ns_) {
            return false;
        }
        next_ns_ = now_ns + interval_ns_;
        return true;
    }
    Nanos next() const { return next_ns_; }

  private:
    Nanos interval_ns_;
    Nanos next_ns_ = 0;
};

}  // namespace atlas::transport
