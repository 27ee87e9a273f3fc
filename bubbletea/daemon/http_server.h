// HttpServer: the daemon's HTTP/1.1 front end on Boost.Beast.
//
// Model: one io_context run by N threads; every connection is a session on its own strand,
// so a session's state needs no lock; nothing in a handler blocks. A session reads one
// request (header, then body; answers "Expect: 100-continue"), hands it to the HttpHandler
// and reads nothing more until the handler's Responder has been called (from any thread:
// the response is posted back to the session's strand). Keep-alive, HTTP pipelining
// handled in order.
// Limits: request body (413), header size (431), read timeout once a request has started
// (the connection is closed), idle keep-alive timeout, maximum open connections (503).
// Malformed HTTP gets 400 and the connection is closed; nothing a client sends can crash or
// stall the server.
// Drain: beginDrain() closes the listener and every idle connection; connections waiting
// for a response get it with "Connection: close".
//
// Beast stays inside http_server.cc: this header only forward-declares the io_context.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"
#include "bubbletea/daemon/metrics.h"

namespace boost::asio {
class io_context;
}

namespace atlas::bubbletea {

struct HttpRequest {
    std::string method;
    std::string target;
    std::string body;
    std::string request_id;  // X-Request-Id header, if any
    std::string content_type;
};

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
};

// Call exactly once, from any thread.
using Responder = std::function<void(HttpResponse)>;

class HttpHandler {
  public:
    virtual ~HttpHandler() = default;
    // Runs on an io_context thread (the session's strand); must not block.
    virtual void handle(HttpRequest request, Responder respond) = 0;
};

struct HttpServerConfig {
    size_t body_limit_bytes = 4 * 1024 * 1024;
    size_t header_limit_bytes = 16 * 1024;
    Nanos read_timeout_ns = 10 * kNsPerSec;
    Nanos idle_timeout_ns = 60 * kNsPerSec;
    size_t max_connections = 1024;
    std::string server_name = "bubbletea";
};

class HttpServer {
  public:
    // `ioc`, `handler` and `metrics` must outlive the server.
    HttpServer(boost::asio::io_context& ioc, HttpServerConfig config, HttpHandler& handler,
               Metrics& metrics);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts accepting (port 0: ephemeral). Returns the bound port.
    Result<uint16_t> listen(const std::string& host, uint16_t port);
    // Thread-safe.
    void beginDrain();
    bool draining() const;
    size_t openSessions() const;

    struct Core;

  private:
    std::shared_ptr<Core> core_;
};

}  // namespace atlas::bubbletea
