#include "perf/atlas-wanem/tun_device.h"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace atlas::wanem {
namespace {

class Fd {
  public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) {
            close(fd_);
        }
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }
    int release() { return std::exchange(fd_, -1); }

  private:
    int fd_;
};

// Returns the calling thread to its original namespace when the setup scope ends, whatever
// happened inside. Failing to return would leave the process in the wrong namespace, so
// that is fatal.
class NamespaceGuard {
  public:
    explicit NamespaceGuard(int home_fd) : home_fd_(home_fd) {}
    ~NamespaceGuard() {
        if (setns(home_fd_, CLONE_NEWNET) != 0) {
            std::fprintf(stderr,
                         "atlas-wanem: cannot return to the original network namespace: %s\n",
                         std::strerror(errno));
            std::abort();
        }
    }
    NamespaceGuard(const NamespaceGuard&) = delete;
    NamespaceGuard& operator=(const NamespaceGuard&) = delete;

  private:
    int home_fd_;
};

Status ifreqIoctl(int sock, unsigned long req, ifreq& ifr, const std::string& what) {
    if (ioctl(sock, req, &ifr) != 0) {
        return Status::fromErrno(what, errno);
    }
    return Status::ok();
}

}  // namespace

TunDevice::~TunDevice() {
    if (fd_ >= 0) {
        close(fd_);
    }
}

TunDevice::TunDevice(TunDevice&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), name_(std::move(other.name_)) {}

TunDevice& TunDevice::operator=(TunDevice&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) {
            close(fd_);
        }
        fd_ = std::exchange(other.fd_, -1);
        name_ = std::move(other.name_);
    }
    return *this;
}

Result<TunDevice> createTunInNamespace(const std::string& ns_path, const std::string& ns_label,
                                       const std::string& dev, const TunSettings& settings) {
    if (access("/dev/net/tun", F_OK) != 0) {
        return Status(Code::kUnavailable,
                      "/dev/net/tun is missing: load the tun module (modprobe tun) or, in a "
                      "container, pass the device in (--device /dev/net/tun)");
    }
    Fd home(open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC));
    if (home.get() < 0) {
        return Status::fromErrno("open /proc/self/ns/net", errno);
    }
    Fd target(open(ns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (target.get() < 0) {
        const int err = errno;
        if (err == ENOENT) {
            return Status(Code::kUnavailable,
                          "network namespace '" + ns_label + "' not found (" + ns_path +
                              " does not exist); create it with `ip netns add " + ns_label + "`");
        }
        return Status::fromErrno("open network namespace " + ns_path, err);
    }
    if (setns(target.get(), CLONE_NEWNET) != 0) {
        const int err = errno;
        if (err == EPERM) {
            return Status(Code::kUnavailable, "setns into namespace '" + ns_label +
                                                  "' not permitted: run atlas-wanem as root");
        }
        if (err == EINVAL) {
            return Status(Code::kInvalidArgument, ns_path + " is not a network namespace");
        }
        return Status::fromErrno("setns into " + ns_path, err);
    }
    NamespaceGuard guard(home.get());

    if (if_nametoindex(dev.c_str()) != 0) {
        return Status(Code::kInvalidUsage,
                      "a device named '" + dev + "' already exists in namespace '" + ns_label +
                          "' (another atlas-wanem running, or a leftover?); pick another --dev");
    }
    Fd tun(open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC));
    if (tun.get() < 0) {
        const int err = errno;
        if (err == EACCES || err == EPERM) {
            return Status(Code::kUnavailable,
                          "permission denied opening /dev/net/tun: run atlas-wanem as root");
        }
        return Status::fromErrno("open /dev/net/tun", err);
    }
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, IFNAMSIZ, "%s", dev.c_str());
    // IFF_VNET_HDR + offloads: the kernel hands us 64 KB GSO packets with partial checksums,
    // which is what makes multi-Gbit/s forwarding possible with one syscall per packet.
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI | IFF_VNET_HDR;
    if (ioctl(tun.get(), TUNSETIFF, &ifr) != 0) {
        const int err = errno;
        if (err == EPERM) {
            return Status(
                Code::kUnavailable,
                "TUNSETIFF not permitted: creating TUN devices needs CAP_NET_ADMIN (root)");
        }
        return Status::fromErrno("TUNSETIFF " + dev + " in " + ns_label, err);
    }
    const unsigned offload = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
    if (ioctl(tun.get(), TUNSETOFFLOAD, offload) != 0) {
        return Status::fromErrno("TUNSETOFFLOAD on " + dev, errno);
    }
    Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (sock.get() < 0) {
        return Status::fromErrno("socket for device configuration in " + ns_label, errno);
    }
    ifreq cfg{};
    std::snprintf(cfg.ifr_name, IFNAMSIZ, "%s", dev.c_str());
    cfg.ifr_mtu = static_cast<int>(settings.mtu);
    ATLAS_RETURN_IF_ERROR(ifreqIoctl(sock.get(), SIOCSIFMTU, cfg, "set MTU of " + dev));
    cfg.ifr_qlen = static_cast<int>(settings.txqueuelen);
    ATLAS_RETURN_IF_ERROR(ifreqIoctl(sock.get(), SIOCSIFTXQLEN, cfg, "set txqueuelen of " + dev));
    ATLAS_RETURN_IF_ERROR(ifreqIoctl(sock.get(), SIOCGIFFLAGS, cfg, "get flags of " + dev));
    cfg.ifr_flags = static_cast<short>(cfg.ifr_flags | IFF_UP);
    ATLAS_RETURN_IF_ERROR(ifreqIoctl(sock.get(), SIOCSIFFLAGS, cfg, "bring up " + dev));
    return TunDevice(tun.release(), dev);
}

}  // namespace atlas::wanem
