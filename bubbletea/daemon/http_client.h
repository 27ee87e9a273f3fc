// Small HTTP/1.1 clients on Boost.Beast (kept out of this header):
//   - forwardHttp: asynchronous POST on the daemon's io_context, used to hand a request the
//     daemon cannot serve in time to --fallback-url. Never blocks its caller.
//   - SyncHttpClient: a blocking keep-alive client with a hard timeout per request, for
//     tests and tools (each call runs a private io_context for at most the timeout).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"

namespace boost::asio {
class io_context;
}

namespace atlas::bubbletea {

struct HttpUrl {
    std::string host;
    uint16_t port = 80;
    std::string path = "/";
};
// "http://host[:port][/path]"; https is not supported.
Result<HttpUrl> parseHttpUrl(const std::string& url);

struct ClientResponse {
    int status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // lower-case names
    bool keep_alive = false;
    std::string header(const std::string& lower_name) const {
        auto it = headers.find(lower_name);
        return it == headers.end() ? std::string() : it->second;
    }
};

// POSTs `body` (application/json) to `url`; calls `done` once on an io_context thread with
// the response or an error (kTimeout past timeout_ns, kRemote for connection problems).
void forwardHttp(boost::asio::io_context& ioc, const HttpUrl& url, std::string body,
                 Nanos timeout_ns, std::function<void(Result<ClientResponse>)> done);

class SyncHttpClient {
  public:
    SyncHttpClient(std::string host, uint16_t port, Nanos timeout_ns = 10 * kNsPerSec);
    ~SyncHttpClient();
    SyncHttpClient(const SyncHttpClient&) = delete;
    SyncHttpClient& operator=(const SyncHttpClient&) = delete;

    // One request on the kept-alive connection (connects first if needed). The connection is
    // dropped after an error or a response without keep-alive.
    Result<ClientResponse> request(
        const std::string& method, const std::string& target, const std::string& body = "",
        const std::vector<std::pair<std::string, std::string>>& headers = {});
    // Writes raw bytes, then reads one response (malformed-request tests).
    Result<ClientResponse> raw(const std::string& bytes);
    // Writes raw bytes and waits until the server closes the connection or the timeout.
    // True when it closed.
    bool rawExpectClose(const std::string& bytes);
    bool connected() const;
    // Times out if the server never accepts; kRemote when refused.
    Status connect();
    void close();

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace atlas::bubbletea
