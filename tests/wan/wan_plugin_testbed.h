// Helpers for the plugin-across-the-WAN tests (wan_plugin_*_test.cc): a two-datacenter testbed
// brought up with scripts/wan-up and torn down with scripts/wan-down (the scripts users run),
// plugin peers running inside its namespaces, and probes of what a testbed left behind.
//
// Each PluginTestbed has a name prefix no other process uses ("awp<pid>x<n>") and its own state
// directory under the temp dir, so tests never touch another testbed. The emulator that wan-up
// starts is detached (setsid) and would outlive a crashed test: testbeds of dead test processes
// are torn down by the next pluginWanSkipReason() call.
//
// Threads: none are started here. Peers are forked processes (abi::ChildProcess); the parent
// never loads the plugin, so forking stays safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "atlas/common/status.h"
#include "plugin_host/plugin_host.h"
#include "tests/abi/isolate.h"

namespace atlas::wanem::test {

// The long-haul link both plugin suites run over: 100 ms RTT, 1 Gbit/s, 1 BDP of buffer, 1% loss.
inline constexpr const char* kLossyLongHaul = "rtt_ms=100 rate_mbit=1000 buf_ms=100 loss=0.01";

// Why these tests cannot run here (not root, no /dev/net/tun, `ip netns` unusable, no
// atlas-wanem, ping or ss missing, the plugin not built), or nullopt. Also sweeps testbeds
// left by crashed earlier runs.
std::optional<std::string> pluginWanSkipReason();

class PluginTestbed {
  public:
    // Brings up DCs <prefix>-dc0 and -dc1 joined by one link with these wan-up keys (e.g.
    // "rtt_ms=100 rate_mbit=1000 loss=0.01"), stock buffers, emulator rt_priority 10.
    static Result<std::unique_ptr<PluginTestbed>> up(const std::string& link_keys);
    // Tears down (wan-down) if still up; never throws.
    ~PluginTestbed();
    PluginTestbed(const PluginTestbed&) = delete;
    PluginTestbed& operator=(const PluginTestbed&) = delete;

    // scripts/wan-down; its output goes to *output when given.
    Status down(std::string* output = nullptr);
    // What of this testbed still exists after down(): namespaces, the emulator process,
    // processes inside the namespaces, TUN devices, the state directory. Empty when clean.
    std::vector<std::string> leftovers() const;

    std::string ns(int dc) const { return prefix_ + "-dc" + std::to_string(dc); }
    // dc1's end of the link: the address the plugin listens on in dc1.
    static constexpr const char* kDc1LinkAddr = "10.2.1.1";
    pid_t emulatorPid() const { return emulator_pid_; }
    // Congestion control in force in the namespaces (wan-up's DC0_CC).
    const std::string& congestionControl() const { return cc_; }
    // The emulator's counters now (SIGUSR1; waits for a newer document than the last one).
    Result<nlohmann::json> stats();

  private:
    PluginTestbed();
    int script(const std::string& name, const std::vector<std::string>& args,
               std::string* out) const;

    std::string prefix_;
    std::string run_dir_;
    std::string stats_path_;
    std::string cc_;
    pid_t emulator_pid_ = -1;
    uint64_t last_seq_ = 0;
    bool up_ = false;
};

// The plugin's environment inside the testbed: devices "to-dc*" (one per namespace in a
// 2-DC testbed), the given dead-peer bound, no bubble channel, then `extra` (later entries
// win).
abi::EnvVars wanPluginEnv(int timeout_ms, const abi::EnvVars& extra = {});

// Forks a peer that joins namespace `ns`, sets `env`, then runs body(fd) (fd: socketpair to
// the parent). The child exits 0 when body returns OK, else prints the error and exits 1.
Result<abi::ChildProcess> spawnPeerIn(const std::string& ns, const abi::EnvVars& env,
                                      const char* role, const std::function<Status(int fd)>& body);

// Reads the 128-byte listen handle the receiver published on its fd and hands it to the
// sender (as NCCL's bootstrap does between ranks).
Status relayHandle(abi::ChildProcess& receiver, abi::ChildProcess& sender,
                   const abi::Deadline& deadline);

// One established TCP connection of namespace `ns` towards `peer_addr`, as `ss` shows it.
struct TcpConn {
    uint16_t local_port = 0;
    uint16_t peer_port = 0;
    uint64_t send_q = 0;  // bytes not yet acknowledged
};
Result<std::vector<TcpConn>> establishedTo(const std::string& ns, const std::string& peer_addr);
// Destroys one socket with `ss -K` (SOCK_DESTROY: the local socket fails with ECONNABORTED
// and the kernel sends the peer a RST), as a middlebox reset or a crashed NIC queue would.
Status killConnection(const std::string& ns, const TcpConn& conn);

}  // namespace atlas::wanem::test
