// TUN devices created inside a network namespace. The device lives as long as the file
// descriptor: it is not persistent, so it vanishes when atlas-wanem exits or crashes, and a
// dead emulator leaves a dark link rather than a silent shortcut.
#pragma once

#include <string>

#include "atlas/common/status.h"

namespace atlas::wanem {

struct TunSettings {
    unsigned mtu = 1500;
    unsigned txqueuelen = 10000;
};

// Owns the TUN file descriptor (non-blocking, IFF_TUN | IFF_NO_PI | IFF_VNET_HDR with
// TUN_F_CSUM | TSO4 | TSO6 | TSO_ECN offload). Move-only.
class TunDevice {
  public:
    TunDevice() = default;
    TunDevice(int fd, std::string name) : fd_(fd), name_(std::move(name)) {}
    ~TunDevice();
    TunDevice(TunDevice&& other) noexcept;
    TunDevice& operator=(TunDevice&& other) noexcept;
    TunDevice(const TunDevice&) = delete;
    TunDevice& operator=(const TunDevice&) = delete;

    int fd() const { return fd_; }
    const std::string& name() const { return name_; }

  private:
    int fd_ = -1;
    std::string name_;
};

// Enters the namespace at `ns_path` (the calling thread only), creates device `dev` there,
// sets MTU and txqueuelen, brings it up, and returns to the caller's namespace. Call it
// before starting other threads. Errors say what is missing and how to fix it (no
// /dev/net/tun, no such namespace, not root, device name taken).
Result<TunDevice> createTunInNamespace(const std::string& ns_path, const std::string& ns_label,
                                       const std::string& dev, const TunSettings& settings);

}  // namespace atlas::wanem
