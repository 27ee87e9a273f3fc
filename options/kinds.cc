#include "options/kinds.h"

namespace atlas::options {

std::optional<HostPort> parseHostPort(std::string_view text) {
    std::string_view host;
    std::string_view port;
    if (!text.empty() && text.front() == '[') {
        const size_t close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
            return std::nullopt;
        }
        host = text.substr(1, close - 1);
        port = text.substr(close + 2);
    } else {
        const size_t colon = text.rfind(':');
        if (colon == std::string_view::npos) {
            return std::nullopt;
        }
        host = text.substr(0, colon);
        port = text.substr(colon + 1);
    }
    const auto p = parseUnsigned(port);
    if (host.empty() || !p || *p > 65535) {
        return std::nullopt;
    }
    return HostPort{std::string(host), static_cast<uint16_t>(*p)};
}

std::string formatHostPort(const HostPort& hp) {
    const bool v6 = hp.host.find(':') != std::string::npos;
    return (v6 ? "[" + hp.host + "]" : hp.host) + ":" + std::to_string(hp.port);
}

}  // namespace atlas::options
