// DcMap: which datacenter an address belongs to (ATLAS_DC_MAP), and the WAN classifier.
//
// Syntax: comma-separated PREFIX=NAME entries, e.g. "10.1.0.0/16=east,10.2.0.0/16=west".
// PREFIX is an IPv4 or IPv6 network in CIDR form (host bits must be zero); NAME is 1..15
// characters [A-Za-z0-9_.-]. A name may appear in several entries; the longest matching
// prefix wins. DC order is the order of first appearance (used by the automatic flow class:
// earlier DC = earlier pipeline stage). IPv4-mapped IPv6 addresses match IPv4 prefixes.
//
// Threads: immutable after parse(); any thread may call lookup().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"
#include "transport/net.h"

namespace atlas::plugin::wan {

class DcMap {
  public:
    // An empty or all-blank text gives an empty map. Errors (kInvalidUsage) name the entry.
    static Result<DcMap> parse(std::string_view text);

    bool empty() const { return entries_.empty(); }
    // Index into names() of the DC that `addr` belongs to, or nullopt.
    std::optional<size_t> lookup(const transport::SocketAddress& addr) const;
    const std::vector<std::string>& names() const { return names_; }

  private:
    struct Entry {
        int family = 0;  // AF_INET / AF_INET6
        uint8_t addr[16] = {};
        int prefix = 0;
        size_t dc = 0;
    };
    std::vector<Entry> entries_;
    std::vector<std::string> names_;
};

// Whether a send comm crosses the WAN, and the name of the link it shares.
struct WanVerdict {
    bool wan = false;
    std::string link;  // "<localDC>-><peerDC>", or "wan-><peer network>" without a map
    std::optional<size_t> local_dc;
    std::optional<size_t> peer_dc;
    std::string reason;  // for the INFO line: "dc east->west", "rtt 50.3 ms > 2 ms", ...
};

// The rule (docs/arbitration.md): with a non-empty map, WAN = both ends map to different DCs
// (an end outside the map is not WAN); without one, WAN = handshake RTT >= rtt_threshold_ns
// (0: every send comm is WAN; the loopback handshake measures 0).
WanVerdict classify(const DcMap& map, Nanos rtt_threshold_ns, const transport::CommInfo& info);

// "10.2.0.0/16" for an IPv4 address, "2001:db8:1::/48" for IPv6: the link key without a map.
std::string networkOf(const transport::SocketAddress& addr);

}  // namespace atlas::plugin::wan
