#include "plugin/wan/dc_map.h"

#include <arpa/inet.h>

#include <cstring>

namespace atlas::plugin::wan {
namespace {

Status bad(std::string_view entry, const std::string& why) {
    return {Code::kInvalidUsage,
            "ATLAS_DC_MAP entry '" + std::string(entry) + "': " + why +
                " (expected PREFIX/LEN=NAME[,PREFIX/LEN=NAME...], e.g. 10.1.0.0/16=east)"};
}

bool validName(std::string_view n) {
    if (n.empty() || n.size() > 15) {
        return false;
    }
    for (char c : n) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-';
        if (!ok) {
            return false;
        }
    }
    return true;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

// The address bytes and family of a socket address; IPv4-mapped IPv6 becomes IPv4.
int addressBytes(const transport::SocketAddress& a, uint8_t out[16]) {
    if (a.family() == AF_INET) {
        const auto* sin = reinterpret_cast<const sockaddr_in*>(&a.storage);
        std::memcpy(out, &sin->sin_addr, 4);
        return AF_INET;
    }
    if (a.family() == AF_INET6) {
        const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
        if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
            std::memcpy(out, sin6->sin6_addr.s6_addr + 12, 4);
            return AF_INET;
        }
        std::memcpy(out, sin6->sin6_addr.s6_addr, 16);
        return AF_INET6;
    }
    return 0;
}

bool prefixMatch(const uint8_t* a, const uint8_t* net, int bits) {
    const int full = bits / 8;
    if (std::memcmp(a, net, static_cast<size_t>(full)) != 0) {
        return false;
    }
    const int rest = bits % 8;
    if (rest == 0) {
        return true;
    }
    const auto mask = static_cast<uint8_t>(0xff << (8 - rest));
    return (a[full] & mask) == (net[full] & mask);
}

}  // namespace

Result<DcMap> DcMap::parse(std::string_view text) {
    DcMap m;
    size_t start = 0;
    while (start <= text.size()) {
        size_t comma = text.find(',', start);
        if (comma == std::string_view::npos) {
            comma = text.size();
        }
        const std::string_view entry = trim(text.substr(start, comma - start));
        start = comma + 1;
        if (entry.empty()) {
            if (comma == text.size()) {
                break;
            }
            continue;
        }
        const size_t eq = entry.find('=');
        if (eq == std::string_view::npos) {
            return bad(entry, "missing '=NAME'");
        }
        const std::string_view prefix = trim(entry.substr(0, eq));
        const std::string_view name = trim(entry.substr(eq + 1));
        if (!validName(name)) {
            return bad(entry, "DC name must be 1..15 characters [A-Za-z0-9_.-]");
        }
        const size_t slash = prefix.find('/');
        if (slash == std::string_view::npos) {
            return bad(entry, "missing '/LEN' on the prefix");
        }
        const std::string addr(prefix.substr(0, slash));
        const std::string_view len_text = prefix.substr(slash + 1);
        Entry e;
        if (inet_pton(AF_INET, addr.c_str(), e.addr) == 1) {
            e.family = AF_INET;
        } else if (inet_pton(AF_INET6, addr.c_str(), e.addr) == 1) {
            e.family = AF_INET6;
        } else {
            return bad(entry, "'" + addr + "' is not an IPv4 or IPv6 address");
        }
        const int max_len = e.family == AF_INET ? 32 : 128;
        if (len_text.empty() || len_text.size() > 3) {
            return bad(entry, "bad prefix length");
        }
        int len = 0;
        for (char c : len_text) {
            if (c < '0' || c > '9') {
                return bad(entry, "bad prefix length");
            }
            len = len * 10 + (c - '0');
        }
        if (len > max_len) {
            return bad(entry, "prefix length above " + std::to_string(max_len));
        }
        e.prefix = len;
        // Host bits must be zero: "10.1.2.3/16" is almost certainly a typo.
        for (int bit = len; bit < max_len; ++bit) {
            if ((e.addr[bit / 8] >> (7 - bit % 8)) & 1) {
                return bad(entry, "host bits are set beyond /" + std::to_string(len));
            }
        }
        size_t dc = m.names_.size();
        for (size_t i = 0; i < m.names_.size(); ++i) {
            if (m.names_[i] == name) {
                dc = i;
            }
        }
        if (dc == m.names_.size()) {
            m.names_.emplace_back(name);
        }
        e.dc = dc;
        for (const Entry& other : m.entries_) {
            if (other.family == e.family && other.prefix == e.prefix &&
                std::memcmp(other.addr, e.addr, 16) == 0) {
                return bad(entry, "the same prefix is listed twice");
            }
        }
        m.entries_.push_back(e);
    }
    return m;
}

std::optional<size_t> DcMap::lookup(const transport::SocketAddress& a) const {
    uint8_t bytes[16] = {};
    const int family = addressBytes(a, bytes);
    int best_len = -1;
    std::optional<size_t> best;
    for (const Entry& e : entries_) {
        if (e.family == family && e.prefix > best_len && prefixMatch(bytes, e.addr, e.prefix)) {
            best_len = e.prefix;
            best = e.dc;
        }
    }
    return best;
}

std::string networkOf(const transport::SocketAddress& a) {
    uint8_t bytes[16] = {};
    const int family = addressBytes(a, bytes);
    char buf[INET6_ADDRSTRLEN] = {};
    if (family == AF_INET) {
        bytes[2] = bytes[3] = 0;
        inet_ntop(AF_INET, bytes, buf, sizeof(buf));
        return std::string(buf) + "/16";
    }
    if (family == AF_INET6) {
        std::memset(bytes + 6, 0, 10);
        inet_ntop(AF_INET6, bytes, buf, sizeof(buf));
        return std::string(buf) + "/48";
    }
    return "unknown";
}

WanVerdict classify(const DcMap& map, Nanos rtt_threshold_ns, const transport::CommInfo& info) {
    WanVerdict v;
    if (!map.empty()) {
        v.local_dc = map.lookup(info.local);
        v.peer_dc = map.lookup(info.peer);
        if (v.local_dc && v.peer_dc && *v.local_dc != *v.peer_dc) {
            v.wan = true;
            v.link = map.names()[*v.local_dc] + "->" + map.names()[*v.peer_dc];
            v.reason = "dc " + v.link;
        } else if (!v.local_dc || !v.peer_dc) {
            v.reason = std::string(v.local_dc ? "peer" : "local") + " address not in ATLAS_DC_MAP";
        } else {
            v.reason = "same dc " + map.names()[*v.local_dc];
        }
        return v;
    }
    char rtt[64];
    std::snprintf(rtt, sizeof(rtt), "rtt %.3f ms", static_cast<double>(info.rtt_ns) / 1e6);
    if (info.rtt_ns >= rtt_threshold_ns) {
        v.wan = true;
        v.link = "wan->" + networkOf(info.peer);
        v.reason = std::string(rtt) + " >= ATLAS_WAN_RTT_US";
    } else {
        v.reason = std::string(rtt) + " below ATLAS_WAN_RTT_US";
    }
    return v;
}

}  // namespace atlas::plugin::wan
