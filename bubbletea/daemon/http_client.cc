#include "bubbletea/daemon/http_client.h"

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <chrono>
#include <optional>

#include "options/value.h"

namespace atlas::bubbletea {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

ClientResponse toClientResponse(http::response<http::string_body>& res) {
    ClientResponse out;
    out.status = static_cast<int>(res.result_int());
    out.keep_alive = res.keep_alive();
    for (const auto& field : res) {
        out.headers[lower(std::string(field.name_string()))] = std::string(field.value());
    }
    out.body = std::move(res.body());
    return out;
}

Status netError(const std::string& what, const beast::error_code& ec) {
    if (ec == beast::error::timeout) {
        return {Code::kTimeout, what + ": timed out"};
    }
    return {Code::kRemote, what + ": " + ec.message()};
}

struct Forward : std::enable_shared_from_this<Forward> {
    Forward(net::io_context& ioc, HttpUrl u, Nanos t, std::function<void(Result<ClientResponse>)> d)
        : resolver(ioc), stream(ioc), url(std::move(u)), timeout(t), done(std::move(d)) {}

    void start(std::string body) {
        req.method(http::verb::post);
        req.target(url.path);
        req.version(11);
        req.set(http::field::host, url.host + ":" + std::to_string(url.port));
        req.set(http::field::content_type, "application/json");
        req.set(http::field::user_agent, "bubbletea-forward");
        req.body() = std::move(body);
        req.prepare_payload();
        resolver.async_resolve(
            url.host, std::to_string(url.port),
            [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type r) {
                if (ec) {
                    return self->finish(netError("resolve " + self->url.host, ec));
                }
                self->stream.expires_after(std::chrono::nanoseconds(self->timeout));
                self->stream.async_connect(r, [self](beast::error_code cec, const tcp::endpoint&) {
                    if (cec) {
                        return self->finish(netError("connect", cec));
                    }
                    http::async_write(self->stream, self->req,
                                      [self](beast::error_code wec, size_t) {
                                          if (wec) {
                                              return self->finish(netError("write", wec));
                                          }
                                          self->read();
                                      });
                });
            });
    }

    void read() {
        http::async_read(stream, buffer, res,
                         [self = shared_from_this()](beast::error_code ec, size_t) {
                             if (ec) {
                                 return self->finish(netError("read", ec));
                             }
                             self->finish(toClientResponse(self->res));
                         });
    }

    void finish(Result<ClientResponse> r) {
        beast::error_code ec;
        stream.socket().shutdown(tcp::socket::shutdown_both, ec);
        stream.close();
        if (done) {
            auto d = std::move(done);
            d(std::move(r));
        }
    }

    tcp::resolver resolver;
    beast::tcp_stream stream;
    HttpUrl url;
    Nanos timeout;
    std::function<void(Result<ClientResponse>)> done;
    http::request<http::string_body> req;
    http::response<http::string_body> res;
    beast::flat_buffer buffer;
};

}  // namespace

Result<HttpUrl> parseHttpUrl(const std::string& url) {
    const std::string prefix = "http://";
    if (url.rfind(prefix, 0) != 0) {
        return Status{Code::kInvalidArgument, "only http:// URLs are supported: '" + url + "'"};
    }
    std::string rest = url.substr(prefix.size());
    HttpUrl out;
    const size_t slash = rest.find('/');
    if (slash != std::string::npos) {
        out.path = rest.substr(slash);
        rest = rest.substr(0, slash);
    }
    const size_t colon = rest.rfind(':');
    if (colon != std::string::npos && rest.find(']') == std::string::npos) {
        const std::string port = rest.substr(colon + 1);
        const std::optional<uint64_t> p = options::parseUnsigned(port);  // strict: no sign, spaces
        if (!p || *p < 1 || *p > 65535) {
            return Status{Code::kInvalidArgument, "bad port in '" + url + "'"};
        }
        out.port = static_cast<uint16_t>(*p);
        rest = rest.substr(0, colon);
    }
    if (rest.empty()) {
        return Status{Code::kInvalidArgument, "no host in '" + url + "'"};
    }
    out.host = rest;
    return out;
}

void forwardHttp(net::io_context& ioc, const HttpUrl& url, std::string body, Nanos timeout_ns,
                 std::function<void(Result<ClientResponse>)> done) {
    auto f = std::make_shared<Forward>(ioc, url, timeout_ns, std::move(done));
    f->start(std::move(body));
}

struct SyncHttpClient::Impl {
    Impl(std::string h, uint16_t p, Nanos t) : host(std::move(h)), port(p), timeout(t) {}

    // Runs the io_context until `finished` or the timeout; on timeout closes the stream.
    bool runUntil(const bool& finished) {
        ioc.restart();
        ioc.run_for(std::chrono::nanoseconds(timeout));
        if (!finished) {
            stream.reset();
            ioc.restart();
            ioc.poll();  // let the cancelled handlers run
            return false;
        }
        return true;
    }

    Status connect() {
        stream.emplace(ioc);
        tcp::resolver resolver(ioc);
        beast::error_code ec;
        auto results = resolver.resolve(host, std::to_string(port), ec);
        if (ec) {
            stream.reset();
            return netError("resolve " + host, ec);
        }
        bool finished = false;
        beast::error_code cec;
        stream->async_connect(results, [&](beast::error_code e, const tcp::endpoint&) {
            cec = e;
            finished = true;
        });
        if (!runUntil(finished)) {
            return {Code::kTimeout, "connect timed out"};
        }
        if (cec) {
            stream.reset();
            return netError("connect " + host + ":" + std::to_string(port), cec);
        }
        stream->socket().set_option(tcp::no_delay(true), ec);
        return Status::ok();
    }

    Result<ClientResponse> readResponse() {
        bool finished = false;
        beast::error_code rec;
        http::response_parser<http::string_body> parser;
        parser.body_limit(1ull << 34);
        http::async_read(*stream, buffer, parser, [&](beast::error_code e, size_t) {
            rec = e;
            finished = true;
        });
        if (!runUntil(finished)) {
            return Status{Code::kTimeout, "response timed out"};
        }
        if (rec) {
            stream.reset();
            return netError("read", rec);
        }
        auto res = parser.release();
        ClientResponse out = toClientResponse(res);
        if (!out.keep_alive) {
            stream.reset();
        }
        return out;
    }

    Result<ClientResponse> writeThenRead(
        const std::function<void(std::function<void(beast::error_code)>)>& start_write) {
        if (!stream) {
            ATLAS_RETURN_IF_ERROR(connect());
        }
        bool finished = false;
        beast::error_code wec;
        start_write([&](beast::error_code e) {
            wec = e;
            finished = true;
        });
        if (!runUntil(finished)) {
            return Status{Code::kTimeout, "request write timed out"};
        }
        if (wec) {
            stream.reset();
            return netError("write", wec);
        }
        return readResponse();
    }

    std::string host;
    uint16_t port;
    Nanos timeout;
    net::io_context ioc;
    std::optional<beast::tcp_stream> stream;
    beast::flat_buffer buffer;
};

SyncHttpClient::SyncHttpClient(std::string host, uint16_t port, Nanos timeout_ns)
    : impl_(std::make_unique<Impl>(std::move(host), port, timeout_ns)) {}

SyncHttpClient::~SyncHttpClient() = default;

Status SyncHttpClient::connect() {
    impl_->buffer.clear();
    return impl_->connect();
}

void SyncHttpClient::close() {
    impl_->stream.reset();
    impl_->buffer.clear();
}

bool SyncHttpClient::connected() const {
    return impl_->stream.has_value();
}

Result<ClientResponse> SyncHttpClient::request(
    const std::string& method, const std::string& target, const std::string& body,
    const std::vector<std::pair<std::string, std::string>>& headers) {
    auto req = std::make_shared<http::request<http::string_body>>();
    req->method_string(method);
    req->target(target);
    req->version(11);
    req->set(http::field::host, impl_->host + ":" + std::to_string(impl_->port));
    req->keep_alive(true);
    bool has_type = false;
    for (const auto& [name, value] : headers) {
        req->set(name, value);
        has_type = has_type || lower(name) == "content-type";
    }
    if (!body.empty() && !has_type) {
        req->set(http::field::content_type, "application/json");
    }
    req->body() = body;
    req->prepare_payload();
    return impl_->writeThenRead([&, req](std::function<void(beast::error_code)> cb) {
        http::async_write(*impl_->stream, *req, [cb, req](beast::error_code e, size_t) { cb(e); });
    });
}

Result<ClientResponse> SyncHttpClient::raw(const std::string& bytes) {
    auto data = std::make_shared<std::string>(bytes);
    return impl_->writeThenRead([&, data](std::function<void(beast::error_code)> cb) {
        net::async_write(impl_->stream->socket(), net::buffer(*data),
                         [cb, data](beast::error_code e, size_t) { cb(e); });
    });
}

bool SyncHttpClient::rawExpectClose(const std::string& bytes) {
    if (!impl_->stream && !impl_->connect().isOk()) {
        return false;
    }
    beast::error_code ec;
    net::write(impl_->stream->socket(), net::buffer(bytes), ec);
    bool finished = false;
    auto buf = std::make_shared<std::array<char, 4096>>();
    std::function<void(beast::error_code, size_t)> on_read;
    on_read = [&, buf](beast::error_code e, size_t) {
        if (e) {
            finished = true;
            return;
        }
        impl_->stream->socket().async_read_some(net::buffer(*buf), on_read);
    };
    impl_->stream->socket().async_read_some(net::buffer(*buf), on_read);
    const bool closed = impl_->runUntil(finished);
    impl_->stream.reset();
    return closed;
}

}  // namespace atlas::bubbletea
