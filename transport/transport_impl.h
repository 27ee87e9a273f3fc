// Transport::Impl and the comm wrappers' private state (transport/ only).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "transport/comm_core.h"
#include "transport/engine.h"
#include "transport/net.h"
#include "transport/rejoiner.h"

namespace atlas::transport {

struct Transport::Impl {
    TransportConfig config;
    std::vector<std::unique_ptr<Engine>> engines;
    std::unique_ptr<Rejoiner> rejoiner;  // destroyed before the engines it delivers to
    std::atomic<uint32_t> next_engine{0};
    std::atomic<int> live_comms{0};
    std::atomic<uint64_t> auth_failures{0};  // listeners' dropped unauthenticated connections

    Engine& pickEngine();
    // Wrap connected, handshaken sockets ([0] = control) into a comm owned by an engine and
    // registered with the rejoiner. `params` recovery fields are filled from the config here.
    std::unique_ptr<SendComm> makeSendComm(CommParams params, std::vector<Fd> fds);
    std::unique_ptr<RecvComm> makeRecvComm(CommParams params, std::vector<Fd> fds);
    void fillRecovery(CommParams* params) const;
};

// Shared by SendComm and RecvComm.
struct CommHandle {
    Transport::Impl* transport = nullptr;
    std::unique_ptr<CommCore> core;
    bool closed = false;

    Status close();
};

struct SendComm::Impl : CommHandle {};
struct RecvComm::Impl : CommHandle {};

}  // namespace atlas::transport
