// The control channel between the atlas-net-perf server and client: the plugin's 128-byte
// listen handles, the measurement plan, barriers and errors travel over one stream fd (a
// socketpair in local mode, a plain TCP "bootstrap" connection otherwise), like NCCL's own
// bootstrap network carries handles between ranks.
//
// Wire format: frames of {u32 magic "ANPB", u32 type, u32 length} (little endian, host order
// on x86-64) + payload. Everything read from the peer is untrusted: headers and plans are
// validated (fuzzed by fuzz_net_perf_parse). Every call takes a deadline.
#pragma once

#include <cstdint>
#include <string>

#include "atlas/common/status.h"
#include "perf/atlas-net-perf/options.h"
#include "plugin_host/plugin_host.h"

namespace atlas::netperf {

using abi::Deadline;

enum class MsgType : uint32_t {
    kHello = 1,       // payload: protocol version text
    kHandle = 2,      // payload: a 128-byte plugin handle
    kPlan = 3,        // payload: JSON plan
    kBarrier = 4,     // empty
    kBarrierAck = 5,  // empty
    kRawAddr = 6,     // payload: "host:port" of the raw-TCP listener
    kError = 7,       // payload: the peer's error text
    kDone = 8,        // empty
};

constexpr uint32_t kFrameMagic = 0x42504e41;  // "ANPB"
constexpr uint32_t kMaxFramePayload = 1u << 20;
constexpr size_t kFrameHeaderSize = 12;
constexpr const char* kProtocolVersion = "atlas-net-perf/1";

struct FrameHeader {
    MsgType type;
    uint32_t length;
};

// Validates magic, type and length.
Result<FrameHeader> decodeFrameHeader(const uint8_t* bytes, size_t size);
std::string encodeFrame(MsgType type, const std::string& payload);

// Plan <-> JSON. decodePlan validates every field and its range.
std::string encodePlan(const Plan& plan);
Result<Plan> decodePlan(const std::string& json);

// Owns a connected stream fd.
class Channel {
  public:
    explicit Channel(int fd) : fd_(fd) {}
    ~Channel();
    Channel(const Channel&) = delete;
    Channel& operator=(const Channel&) = delete;

    int fd() const { return fd_; }
    Status send(MsgType type, const std::string& payload, const Deadline& deadline);
    // Receives one frame of type `expected`. A kError frame from the peer becomes a kRemote
    // Status carrying its text; any other type is a protocol error.
    Result<std::string> recv(MsgType expected, const Deadline& deadline);
    // Tells the peer why this side gives up (best effort, short deadline).
    void sendError(const std::string& text);

  private:
    int fd_;
};

// Plain TCP helpers for the bootstrap connection and the raw-TCP baseline. All sockets are
// CLOEXEC; connect retries until the deadline (the server may start later).
Result<int> tcpListen(const std::string& host, uint16_t port, int backlog);
Result<int> tcpAccept(int listen_fd, const Deadline& deadline);
Result<int> tcpConnect(const std::string& host, uint16_t port, const Deadline& deadline);
// The numeric address and port a socket is bound to ("10.0.0.1", 4242).
Result<std::pair<std::string, uint16_t>> localAddress(int fd);
// The first IPv4 address of an interface whose name starts with one of the comma-separated
// prefixes in `ifname_list` (NCCL_SOCKET_IFNAME style; '^' entries are skipped); "" if none.
std::string interfaceAddress(const std::string& ifname_list);

}  // namespace atlas::netperf
