#include "bubbletea/daemon/http_server.h"

#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "bubbletea/daemon/api.h"

namespace atlas::bubbletea {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

class Session;

std::chrono::nanoseconds dur(Nanos ns) {
    return std::chrono::nanoseconds(ns);
}

HttpResponse errorResponse(int status, const std::string& message, const std::string& code) {
    ApiError e;
    e.status = status;
    e.message = message;
    e.code = code;
    HttpResponse r;
    r.status = status;
    r.body = errorJson(e);
    return r;
}

}  // namespace

struct HttpServer::Core : std::enable_shared_from_this<HttpServer::Core> {
    Core(net::io_context& io, HttpServerConfig cfg, HttpHandler& h, Metrics& m)
        : ioc(io), config(std::move(cfg)), handler(h), metrics(m), strand(net::make_strand(io)) {}

    void doAccept();
    void registerSession(Session* s, const std::shared_ptr<Session>& sp) {
        std::lock_guard<std::mutex> lock(mu);
        sessions.emplace(s, sp);
    }
    void unregisterSession(Session* s) {
        std::lock_guard<std::mutex> lock(mu);
        sessions.erase(s);
    }
    void beginDrain();

    net::io_context& ioc;
    const HttpServerConfig config;
    HttpHandler& handler;
    Metrics& metrics;
    net::strand<net::io_context::executor_type> strand;  // serializes the acceptor
    std::optional<tcp::acceptor> acceptor;
    std::atomic<bool> draining{false};
    mutable std::mutex mu;
    std::unordered_map<Session*, std::weak_ptr<Session>> sessions;  // guarded by mu
};

namespace {

// One connection. Every member function runs on the session's strand.
class Session : public std::enable_shared_from_this<Session> {
  public:
    Session(tcp::socket&& socket, std::shared_ptr<HttpServer::Core> core, bool reject)
        : stream_(std::move(socket)), core_(std::move(core)), reject_(reject) {
        core_->metrics.connections.fetch_add(1, std::memory_order_relaxed);
        core_->metrics.open_connections.fetch_add(1, std::memory_order_relaxed);
    }
    ~Session() {
        core_->metrics.open_connections.fetch_sub(1, std::memory_order_relaxed);
        core_->unregisterSession(this);
    }

    void start() {
        core_->registerSession(this, shared_from_this());
        net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
            if (self->reject_) {
                self->keep_alive_ = false;
                HttpResponse r = errorResponse(503, "too many open connections", "overloaded");
                r.headers.emplace_back("Retry-After", "1");
                self->write(std::move(r));
                return;
            }
            self->waitForRequest();
        });
    }

    // Posted by the server on drain: idle connections close now; busy ones close after
    // their response (write() sees the draining flag).
    void drain() {
        net::dispatch(stream_.get_executor(), [self = shared_from_this()] {
            if (self->state_ == State::kIdle) {
                self->close();
            }
        });
    }

  private:
    enum class State { kIdle, kReading, kBusy, kWriting, kClosed };

    void waitForRequest() {
        if (core_->draining.load(std::memory_order_acquire)) {
            close();
            return;
        }
        if (buffer_.size() > 0) {  // a pipelined request is already buffered
            readHeader();
            return;
        }
        state_ = State::kIdle;
        stream_.expires_after(dur(core_->config.idle_timeout_ns));
        stream_.async_read_some(buffer_.prepare(4096),
                                [self = shared_from_this()](beast::error_code ec, size_t n) {
                                    self->buffer_.commit(n);
                                    if (ec || n == 0) {
                                        self->close();
                                        return;
                                    }
                                    self->readHeader();
                                });
    }

    void readHeader() {
        state_ = State::kReading;
        parser_.emplace();
        parser_->body_limit(core_->config.body_limit_bytes);
        parser_->header_limit(static_cast<uint32_t>(core_->config.header_limit_bytes));
        stream_.expires_after(dur(core_->config.read_timeout_ns));
        http::async_read_header(
            stream_, buffer_, *parser_,
            [self = shared_from_this()](beast::error_code ec, size_t) { self->onHeader(ec); });
    }

    void onHeader(beast::error_code ec) {
        if (ec) {
            onReadError(ec);
            return;
        }
        const auto& req = parser_->get();
        if (req[http::field::expect] == "100-continue" && !parser_->is_done()) {
            // curl sends this for bodies over 1 KiB and otherwise waits a second for it.
            auto cont = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
            net::async_write(stream_, net::buffer(*cont),
                             [self = shared_from_this(), cont](beast::error_code wec, size_t) {
                                 if (wec) {
                                     self->close();
                                     return;
                                 }
                                 self->readBody();
                             });
            return;
        }
        readBody();
    }

    void readBody() {
        http::async_read(stream_, buffer_, *parser_,
                         [self = shared_from_this()](beast::error_code ec, size_t) {
                             if (ec) {
                                 self->onReadError(ec);
                                 return;
                             }
                             self->dispatchRequest();
                         });
    }

    void onReadError(beast::error_code ec) {
        keep_alive_ = false;
        if (ec == http::error::end_of_stream || ec == beast::error::timeout ||
            ec == net::error::operation_aborted || ec == net::error::eof ||
            ec == net::error::connection_reset) {
            close();
            return;
        }
        core_->metrics.http_requests.fetch_add(1, std::memory_order_relaxed);
        if (ec == http::error::body_limit) {
            core_->metrics.countRejection("body_too_large");
            write(errorResponse(
                413,
                "request body exceeds " + std::to_string(core_->config.body_limit_bytes) + " bytes",
                "body_too_large"));
            return;
        }
        if (ec == http::error::header_limit) {
            core_->metrics.countRejection("header_too_large");
            write(errorResponse(431, "request header fields too large", "header_too_large"));
            return;
        }
        if (ec.category() == http::make_error_code(http::error::bad_method).category()) {
            core_->metrics.countRejection("malformed_http");
            write(errorResponse(400, "malformed HTTP request: " + ec.message(), "malformed_http"));
            return;
        }
        close();
    }

    void dispatchRequest() {
        core_->metrics.http_requests.fetch_add(1, std::memory_order_relaxed);
        auto msg = parser_->release();
        parser_.reset();
        keep_alive_ = msg.keep_alive();
        version_ = msg.version();
        state_ = State::kBusy;
        stream_.expires_never();
        HttpRequest req;
        req.method = std::string(msg.method_string());
        req.target = std::string(msg.target());
        req.body = std::move(msg.body());
        req.request_id = std::string(msg["X-Request-Id"]);
        req.content_type = std::string(msg[http::field::content_type]);
        auto self = shared_from_this();
        core_->handler.handle(std::move(req), [self](HttpResponse response) {
            net::post(self->stream_.get_executor(),
                      [self, response = std::move(response)]() mutable {
                          self->write(std::move(response));
                      });
        });
    }

    void write(HttpResponse r) {
        if (state_ == State::kClosed) {
            return;
        }
        state_ = State::kWriting;
        core_->metrics.countResponse(r.status);
        auto res = std::make_shared<http::response<http::string_body>>(
            static_cast<http::status>(r.status), version_);
        res->set(http::field::server, core_->config.server_name);
        res->set(http::field::content_type, r.content_type);
        for (const auto& [name, value] : r.headers) {
            res->set(name, value);
        }
        res->keep_alive(keep_alive_ && !core_->draining.load(std::memory_order_acquire));
        res->body() = std::move(r.body);
        res->prepare_payload();
        stream_.expires_after(dur(core_->config.read_timeout_ns));
        http::async_write(stream_, *res,
                          [self = shared_from_this(), res](beast::error_code ec, size_t) {
                              if (ec) {
                                  self->close();
                                  return;
                              }
                              if (res->need_eof()) {
                                  self->lingeringClose();
                                  return;
                              }
                              self->waitForRequest();
                          });
    }

    // Half-closes, then reads and discards what the client still sends (e.g. the rest of
    // a body we refused) until it closes or a second passes. Closing a socket with unread
    // data makes the kernel send a reset, which can destroy the response before the
    // client reads it.
    void lingeringClose() {
        state_ = State::kWriting;
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
        stream_.expires_after(std::chrono::seconds(1));
        discard_ = std::make_shared<std::array<char, 4096>>();
        drainInput();
    }

    void drainInput() {
        stream_.async_read_some(net::buffer(*discard_),
                                [self = shared_from_this()](beast::error_code ec, size_t) {
                                    if (ec) {
                                        self->close();
                                        return;
                                    }
                                    self->drainInput();
                                });
    }

    void close() {
        if (state_ == State::kClosed) {
            return;
        }
        state_ = State::kClosed;
        beast::error_code ec;
        stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
        stream_.cancel();
        stream_.close();
    }

    beast::tcp_stream stream_;
    std::shared_ptr<HttpServer::Core> core_;
    beast::flat_buffer buffer_;
    std::optional<http::request_parser<http::string_body>> parser_;
    std::shared_ptr<std::array<char, 4096>> discard_;
    State state_ = State::kIdle;
    bool keep_alive_ = true;
    unsigned version_ = 11;
    bool reject_;
};

}  // namespace

void HttpServer::Core::doAccept() {
    acceptor->async_accept(
        net::make_strand(ioc),
        net::bind_executor(strand, [self = shared_from_this()](beast::error_code ec,
                                                               tcp::socket socket) {
            if (self->draining.load(std::memory_order_acquire) || !self->acceptor->is_open()) {
                return;
            }
            if (!ec) {
                beast::error_code opt_ec;
                socket.set_option(tcp::no_delay(true), opt_ec);  // responses are small
                const bool reject = static_cast<size_t>(self->metrics.open_connections.load(
                                        std::memory_order_relaxed)) >= self->config.max_connections;
                std::make_shared<Session>(std::move(socket), self, reject)->start();
            }
            self->doAccept();
        }));
}

void HttpServer::Core::beginDrain() {
    if (draining.exchange(true, std::memory_order_acq_rel)) {
        return;
    }
    net::post(strand, [self = shared_from_this()] {
        if (self->acceptor && self->acceptor->is_open()) {
            beast::error_code ec;
            self->acceptor->close(ec);
        }
    });
    std::vector<std::shared_ptr<Session>> live;
    {
        std::lock_guard<std::mutex> lock(mu);
        for (auto& [raw, weak] : sessions) {
            if (auto s = weak.lock()) {
                live.push_back(std::move(s));
            }
        }
    }
    for (auto& s : live) {
        s->drain();
    }
}

HttpServer::HttpServer(net::io_context& ioc, HttpServerConfig config, HttpHandler& handler,
                       Metrics& metrics)
    : core_(std::make_shared<Core>(ioc, std::move(config), handler, metrics)) {}

HttpServer::~HttpServer() {
    core_->beginDrain();
}

Result<uint16_t> HttpServer::listen(const std::string& host, uint16_t port) {
    beast::error_code ec;
    const auto address = net::ip::make_address(host, ec);
    if (ec) {
        return Status{Code::kInvalidArgument, "listen address '" + host + "': " + ec.message()};
    }
    const tcp::endpoint endpoint(address, port);
    core_->acceptor.emplace(core_->strand);
    auto& a = *core_->acceptor;
    a.open(endpoint.protocol(), ec);
    if (!ec) {
        a.set_option(net::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
        a.bind(endpoint, ec);
    }
    if (!ec) {
        a.listen(net::socket_base::max_listen_connections, ec);
    }
    if (ec) {
        return Status{Code::kSystem,
                      "listen on " + host + ":" + std::to_string(port) + ": " + ec.message()};
    }
    const uint16_t bound = a.local_endpoint().port();
    net::post(core_->strand, [core = core_] { core->doAccept(); });
    return bound;
}

void HttpServer::beginDrain() {
    core_->beginDrain();
}

bool HttpServer::draining() const {
    return core_->draining.load(std::memory_order_acquire);
}

size_t HttpServer::openSessions() const {
    std::lock_guard<std::mutex> lock(core_->mu);
    return core_->sessions.size();
}

}  // namespace atlas::bubbletea
