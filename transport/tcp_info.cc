#include "transport/tcp_info.h"

// The kernel's struct tcp_info (glibc's netinet/tcp.h lags behind: no delivery rate or
// retransmitted bytes).
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace atlas::transport {

Status readTcpInfo(int fd, Nanos now_ns, TcpInfoSample* out) {
    struct tcp_info ti;
    std::memset(&ti, 0, sizeof(ti));
    socklen_t len = sizeof(ti);
    if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) {
        return Status(Code::kSystem, std::string("getsockopt(TCP_INFO): ") + std::strerror(errno));
    }
    // An older kernel returns a shorter struct: read a field only when `len` covers it.
    auto has = [len](size_t end) { return static_cast<size_t>(len) >= end; };
#define ATLAS_TI_END(f) (offsetof(struct tcp_info, f) + sizeof(ti.f))
    *out = TcpInfoSample{};
    out->at_ns = now_ns;
    out->state = ti.tcpi_state;
    out->ca_state = ti.tcpi_ca_state;
    out->rtt_us = ti.tcpi_rtt;
    out->rttvar_us = ti.tcpi_rttvar;
    out->snd_cwnd = ti.tcpi_snd_cwnd;
    out->snd_mss = ti.tcpi_snd_mss;
    out->unacked = ti.tcpi_unacked;
    out->total_retrans = ti.tcpi_total_retrans;
    if (has(ATLAS_TI_END(tcpi_pacing_rate))) {
        out->pacing_rate = ti.tcpi_pacing_rate;
    }
    if (has(ATLAS_TI_END(tcpi_bytes_acked))) {
        out->bytes_acked = ti.tcpi_bytes_acked;
    }
    if (has(ATLAS_TI_END(tcpi_bytes_received))) {
        out->bytes_received = ti.tcpi_bytes_received;
    }
    if (has(ATLAS_TI_END(tcpi_min_rtt))) {
        out->min_rtt_us = ti.tcpi_min_rtt;
    }
    if (has(ATLAS_TI_END(tcpi_delivery_rate))) {
        out->delivery_rate = ti.tcpi_delivery_rate;
        out->delivery_rate_app_limited = ti.tcpi_delivery_rate_app_limited != 0;
    }
    if (has(ATLAS_TI_END(tcpi_bytes_retrans))) {
        out->bytes_retrans = ti.tcpi_bytes_retrans;
    }
    if (has(ATLAS_TI_END(tcpi_notsent_bytes))) {
        out->notsent_bytes = ti.tcpi_notsent_bytes;
    }
    if (has(ATLAS_TI_END(tcpi_rcv_ooopack))) {
        out->rcv_ooopack = ti.tcpi_rcv_ooopack;
    }
#undef ATLAS_TI_END
    return Status::ok();
}

}  // namespace atlas::transport
