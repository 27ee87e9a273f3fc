// Non-blocking connection setup (docs/protocol.md, "Handshake"). Driven by NCCL's service
// thread through repeated connect()/accept() calls; each call does whatever I/O is possible
// without blocking (poll with a zero timeout) and returns.
//
// Connector: control stream connect (retried while refused, until timeout_ms) -> Hello ->
// HelloAck (RTT measured, listener authenticated) -> stream plan from the RTT -> Config ->
// N data streams, each with a DataHello -> Ready -> SendComm.
// Listener: accepts any number of connections; each must open with a valid Hello (control)
// or DataHello (data) quoting this listen comm's id; anything else (wrong magic, garbage,
// failed authentication, silence past timeout_ms) is dropped with a warning and never
// affects another connection. Several connectors may use one listen comm concurrently.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transport/auth.h"
#include "transport/comm_core.h"
#include "transport/hs_conn.h"
#include "transport/net.h"
#include "transport/socket_util.h"
#include "transport/stream_plan.h"
#include "transport/wire.h"

namespace atlas::transport {

class Connector {
  public:
    Connector(Transport& transport, const wire::HandleInfo& info, Nanos now);
    // One non-blocking step; sets *out when the comm is up. A non-OK status is final.
    Status step(std::unique_ptr<SendComm>* out);

  private:
    enum class Phase { kConnectCtrl, kHello, kStreams, kReady };
    Status connectCtrl(Nanos now);
    Status onHelloAck(const wire::HelloAck& ack, Nanos now);
    Status stepStreams();
    Status finish(std::unique_ptr<SendComm>* out);
    Status timeoutError() const;

    Transport& t_;
    const TransportConfig& cfg_;
    wire::HandleInfo info_;
    SocketAddress peer_;
    Phase phase_ = Phase::kConnectCtrl;
    HsConn ctrl_;
    bool ctrl_connecting_ = false;
    std::vector<HsConn> data_;
    std::vector<bool> data_connected_;
    Nanos deadline_ = 0;
    Nanos connect_started_ = 0;
    Nanos hello_sent_ = 0;
    Nanos retry_at_ = 0;
    Nanos rtt_ns_ = 0;
    int attempts_ = 0;
    AuthContext auth_;
    uint16_t rejoin_port_ = 0;
    uint8_t modes_ = 0;  // as Session::modes
    wire::Config plan_;
    std::string plan_reason_;
};

struct ListenComm::Impl {
    Impl(Transport& t, Fd fd, const SocketAddress& addr, uint64_t listen_id, uint16_t rejoin_port);
    Status accept(std::unique_ptr<RecvComm>* out);

    struct Pending {
        HsConn conn;
        Nanos deadline = 0;
        bool has_data_hello = false;  // a data stream waiting for its session's Config
        wire::DataHello data_hello;
    };
    struct Session {
        HsConn ctrl;
        AuthContext auth;
        bool configured = false;
        bool ready_queued = false;
        wire::Config plan;
        std::vector<Fd> data;
        int joined = 0;
        Nanos deadline = 0;
        SocketAddress peer;
        uint8_t modes = 0;       // bit 0: the connector encrypts, bit 1: this side does
        std::string refuse_why;  // non-empty: HelloAck sent so the connector learns; then drop
    };

    // Returns false when the pending connection is finished with (moved or to be dropped).
    bool servePending(Pending& p, Nanos now);
    Status serveSession(Session& s, Nanos now, std::unique_ptr<RecvComm>* out, bool* drop);
    void warnDrop(int fd, const std::string& why);

    Transport& t_;
    Fd fd_;
    SocketAddress addr_;
    uint64_t listen_id_;
    uint16_t rejoin_port_;
    std::list<Pending> pending_;
    std::map<uint64_t, Session> sessions_;
    int warnings_ = 0;
};

}  // namespace atlas::transport
