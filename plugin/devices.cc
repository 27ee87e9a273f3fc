#include "plugin/devices.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace atlas::plugin {
namespace {

bool startsWith(std::string_view s, std::string_view prefix) {
    return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool isIpv6LinkLocal(const sockaddr_storage& ss) {
    if (ss.ss_family != AF_INET6) {
        return false;
    }
    const auto& a = reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
    return a.s6_addr[0] == 0xfe && (a.s6_addr[1] & 0xc0) == 0x80;
}

bool familyAllowed(AddressFamily want, int family) {
    switch (want) {
        case AddressFamily::kAny:
            return family == AF_INET || family == AF_INET6;
        case AddressFamily::kInet:
            return family == AF_INET;
        case AddressFamily::kInet6:
            return family == AF_INET6;
    }
    return false;
}

const char* familyName(AddressFamily f) {
    switch (f) {
        case AddressFamily::kAny:
            return "any";
        case AddressFamily::kInet:
            return "AF_INET";
        case AddressFamily::kInet6:
            return "AF_INET6";
    }
    return "?";
}

std::string numericAddress(const sockaddr_storage& ss) {
    char buf[INET6_ADDRSTRLEN] = {};
    const void* src = nullptr;
    if (ss.ss_family == AF_INET) {
        src = &reinterpret_cast<const sockaddr_in&>(ss).sin_addr;
    } else if (ss.ss_family == AF_INET6) {
        src = &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr;
    } else {
        return "?";
    }
    return inet_ntop(ss.ss_family, src, buf, sizeof(buf)) != nullptr ? buf : "?";
}

std::string trim(std::string_view s) {
    size_t b = 0;
    size_t e = s.size();
    while (b < e && std::strchr(" \t\r\n", s[b]) != nullptr) {
        ++b;
    }
    while (e > b && std::strchr(" \t\r\n", s[e - 1]) != nullptr) {
        --e;
    }
    return std::string(s.substr(b, e - b));
}

}  // namespace

IfnameMatcher IfnameMatcher::parse(std::string_view spec) {
    IfnameMatcher m;
    if (!spec.empty() && spec.front() == '^') {
        m.exclude_ = true;
        spec.remove_prefix(1);
    }
    if (!spec.empty() && spec.front() == '=') {
        m.exact_ = true;
        spec.remove_prefix(1);
    }
    while (!spec.empty()) {
        size_t comma = spec.find(',');
        std::string_view token = spec.substr(0, comma);
        if (!token.empty()) {
            m.names_.emplace_back(token);
        }
        if (comma == std::string_view::npos) {
            break;
        }
        spec.remove_prefix(comma + 1);
    }
    return m;
}

bool IfnameMatcher::matches(std::string_view ifname) const {
    bool listed = false;
    for (const auto& n : names_) {
        if (exact_ ? ifname == n : startsWith(ifname, n)) {
            listed = true;
            break;
        }
    }
    return exclude_ ? !listed : listed;
}

IfAddr makeIfAddr(const std::string& name, unsigned flags, const std::string& ip) {
    IfAddr a;
    a.flags = flags;
    sockaddr_in v4{};
    sockaddr_in6 v6{};
    if (inet_pton(AF_INET, ip.c_str(), &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        std::memcpy(&a.addr, &v4, sizeof(v4));
        a.addr_len = sizeof(v4);
    } else if (inet_pton(AF_INET6, ip.c_str(), &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        std::memcpy(&a.addr, &v6, sizeof(v6));
        a.addr_len = sizeof(v6);
    } else {
        return a;  // empty name: unparsable address
    }
    a.name = name;
    return a;
}

Result<std::vector<IfAddr>> SystemInterfaceSource::list() const {
    ifaddrs* head = nullptr;
    if (getifaddrs(&head) != 0) {
        return Status::fromErrno("getifaddrs", errno);
    }
    std::vector<IfAddr> out;
    for (ifaddrs* it = head; it != nullptr; it = it->ifa_next) {
        if (it->ifa_addr == nullptr || it->ifa_name == nullptr) {
            continue;
        }
        int family = it->ifa_addr->sa_family;
        if (family != AF_INET && family != AF_INET6) {
            continue;
        }
        IfAddr a;
        a.name = it->ifa_name;
        a.flags = it->ifa_flags;
        a.addr_len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
        std::memcpy(&a.addr, it->ifa_addr, a.addr_len);
        out.push_back(std::move(a));
    }
    freeifaddrs(head);
    return out;
}

const SystemInterfaceSource& SystemInterfaceSource::instance() {
    static const SystemInterfaceSource source;
    return source;
}

std::string Device::addressString() const {
    return numericAddress(addr);
}

int parseSpeedMbps(std::string_view text) {
    std::string t = trim(text);
    long long v = 0;
    auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
    if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || v <= 0) {
        return kDefaultSpeedMbps;  // "-1" is what sysfs reports for a link without carrier
    }
    return v > INT_MAX ? INT_MAX : static_cast<int>(v);
}

int readSpeedMbps(const std::string& sysfs_net_root, const std::string& ifname) {
    std::ifstream in(sysfs_net_root + "/" + ifname + "/speed");
    if (!in) {
        return kDefaultSpeedMbps;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    // Reading speed of a down link fails with EINVAL; the stream is then empty.
    return parseSpeedMbps(ss.str());
}

std::string readPciPath(const std::string& sysfs_net_root, const std::string& ifname) {
    std::string link = sysfs_net_root + "/" + ifname + "/device";
    char* resolved = realpath(link.c_str(), nullptr);
    if (resolved == nullptr) {
        return {};
    }
    std::string out(resolved);
    std::free(resolved);
    return out;
}

Result<std::vector<Device>> discoverDevices(const DiscoveryOptions& options,
                                            const InterfaceSource& source) {
    auto listed = source.list();
    if (!listed) {
        return listed.status();
    }
    constexpr unsigned kUpRunning = IFF_UP | IFF_RUNNING;
    std::vector<const IfAddr*> eligible;
    for (const IfAddr& a : listed.value()) {
        if ((a.flags & kUpRunning) != kUpRunning ||
            !familyAllowed(options.family, a.addr.ss_family) || isIpv6LinkLocal(a.addr)) {
            continue;
        }
        eligible.push_back(&a);
    }

    std::vector<Device> devices;
    auto pick = [&](auto&& wanted) {
        for (const IfAddr* a : eligible) {
            if (static_cast<int>(devices.size()) >= kMaxDevices) {
                break;
            }
            if (!wanted(*a)) {
                continue;
            }
            bool seen = false;
            for (const Device& d : devices) {
                seen = seen || d.name == a->name;
            }
            if (seen) {
                continue;  // first address of an interface wins
            }
            Device d;
            d.name = a->name;
            d.addr = a->addr;
            d.addr_len = a->addr_len;
            devices.push_back(std::move(d));
        }
    };

    IfnameMatcher matcher = IfnameMatcher::parse(options.ifname_spec);
    if (!matcher.empty()) {
        pick([&](const IfAddr& a) { return matcher.matches(a.name); });
    } else {
        pick([](const IfAddr& a) {
            return (a.flags & IFF_LOOPBACK) == 0 && !startsWith(a.name, "docker") &&
                   !startsWith(a.name, "virbr");
        });
        if (devices.empty()) {
            pick([](const IfAddr& a) { return (a.flags & IFF_LOOPBACK) != 0; });
        }
    }

    if (devices.empty()) {
        std::string seen;
        for (const IfAddr& a : listed.value()) {
            seen += (seen.empty() ? "" : ", ") + a.name + "(" + numericAddress(a.addr) +
                    ((a.flags & kUpRunning) == kUpRunning ? "" : ", not up+running") + ")";
        }
        return Status(Code::kUnavailable,
                      "no usable network interface (ATLAS_SOCKET_IFNAME='" + options.ifname_spec +
                          "', ATLAS_SOCKET_FAMILY=" + familyName(options.family) +
                          "); interfaces seen: " + (seen.empty() ? "none" : seen));
    }
    for (size_t i = 0; i < devices.size(); ++i) {
        Device& d = devices[i];
        d.index = static_cast<int>(i);
        d.pci_path = readPciPath(options.sysfs_net_root, d.name);
        d.speed_mbps = readSpeedMbps(options.sysfs_net_root, d.name);
    }
    return devices;
}

}  // namespace atlas::plugin
