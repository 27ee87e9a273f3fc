// Network devices as NCCL sees them: one device per selected interface, chosen the way NCCL's
// socket transport chooses them (docs/env.md, ATLAS_SOCKET_IFNAME / ATLAS_SOCKET_FAMILY).
//
// The OS is reached through two seams so tests can run on fake data: an InterfaceSource
// (getifaddrs in production) and a sysfs root directory ("/sys/class/net" in production; a
// temp dir in tests). Nothing here keeps global state; discovery runs at the first init.
#pragma once

#include <net/if.h>
#include <sys/socket.h>

#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/status.h"

namespace atlas::plugin {

constexpr int kMaxDevices = 16;           // NCCL's MAX_IFS
constexpr int kDefaultSpeedMbps = 10000;  // when sysfs has no usable speed (NCCL's default)
constexpr const char* kSysfsNetRoot = "/sys/class/net";

enum class AddressFamily { kAny, kInet, kInet6 };

// ATLAS_SOCKET_IFNAME matcher, NCCL syntax: comma-separated interface-name prefixes; a
// leading '^' inverts the selection (exclude the listed ones); a leading '=' (after any '^')
// makes the names exact instead of prefixes. A spec with no names ("", "^", "=", ",") is
// empty(): the caller then applies the default selection. Names are taken literally (no
// "name:port" splitting).
class IfnameMatcher {
  public:
    static IfnameMatcher parse(std::string_view spec);

    bool empty() const { return names_.empty(); }
    bool matches(std::string_view ifname) const;
    bool exclude() const { return exclude_; }
    bool exact() const { return exact_; }
    const std::vector<std::string>& names() const { return names_; }

  private:
    bool exclude_ = false;
    bool exact_ = false;
    std::vector<std::string> names_;
};

// One address of one interface, as getifaddrs reports it (only AF_INET/AF_INET6 entries).
struct IfAddr {
    std::string name;
    unsigned flags = 0;  // IFF_*
    sockaddr_storage addr{};
    socklen_t addr_len = 0;
};

// Builds an IfAddr from a numeric address; for tests and the fake sources. Returns an empty
// name when `ip` does not parse.
IfAddr makeIfAddr(const std::string& name, unsigned flags, const std::string& ip);

// Seam over getifaddrs. Implementations must be callable from any thread.
class InterfaceSource {
  public:
    virtual ~InterfaceSource() = default;
    // Every AF_INET/AF_INET6 address in the order the OS reports them.
    virtual Result<std::vector<IfAddr>> list() const = 0;
};

class SystemInterfaceSource final : public InterfaceSource {
  public:
    Result<std::vector<IfAddr>> list() const override;
    static const SystemInterfaceSource& instance();
};

// A selected device. `index` is the NCCL device number (also its guid).
struct Device {
    int index = 0;
    std::string name;      // interface name
    std::string pci_path;  // realpath of <sysfs>/<if>/device; empty = virtual NIC (NULL to NCCL)
    sockaddr_storage addr{};
    socklen_t addr_len = 0;
    int speed_mbps = kDefaultSpeedMbps;

    std::string addressString() const;  // numeric, e.g. "10.0.0.2" or "fd00::2"
};

struct DiscoveryOptions {
    std::string ifname_spec;  // ATLAS_SOCKET_IFNAME ("" = default selection)
    AddressFamily family = AddressFamily::kAny;
    std::string sysfs_net_root = kSysfsNetRoot;
};

// Selection rule:
//  - only interfaces that are IFF_UP and IFF_RUNNING, and only their AF_INET addresses and
//    AF_INET6 addresses that are not link-local (fe80::/10), filtered by `family`;
//  - with a non-empty ATLAS_SOCKET_IFNAME: the interfaces it matches (loopback included if
//    named); otherwise every non-loopback interface except docker* and virbr*, and when
//    there is none, the loopback interfaces;
//  - one device per interface, its first eligible address wins, at most kMaxDevices, in the
//    order the interfaces first appear.
// Fails with kUnavailable (message lists what was seen) when nothing is selected.
Result<std::vector<Device>> discoverDevices(const DiscoveryOptions& options,
                                            const InterfaceSource& source);

// <root>/<ifname>/speed in Mbit/s; kDefaultSpeedMbps when missing, unparsable or <= 0.
int readSpeedMbps(const std::string& sysfs_net_root, const std::string& ifname);
// Parses the contents of a sysfs speed file (same defaults as readSpeedMbps).
int parseSpeedMbps(std::string_view text);
// realpath(<root>/<ifname>/device), or "" when it does not exist.
std::string readPciPath(const std::string& sysfs_net_root, const std::string& ifname);

}  // namespace atlas::plugin
