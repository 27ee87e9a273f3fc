// bubbletea-load: an open-loop load generator for bubbletea (or any OpenAI-compatible
// prefill server). Requests arrive as a Poisson process at --rate, independent of how fast
// the server answers (open loop: a slow server builds a backlog instead of slowing the
// generator down). TTFT is measured from each request's *scheduled* arrival to its
// response, so time spent waiting for a free connection counts (no coordinated omission).
//
// Reports TTFT p50/p90/p99 of successful requests, goodput under an SLO (successful
// requests with TTFT <= --slo-ms per second), responses by status, transport errors, and
// the server-reported queue/prefill time; table on stdout, JSON with --json FILE.
//
// Threads: one io_context thread drives all connections (Boost.Beast); the main thread
// waits for it.
#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "perf/bubbletea-load/options.h"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using atlas::bubbletea_load::Options;

// Prompt-length distribution.
class LengthDist {
  public:
    bool parse(const std::string& spec, int64_t max_len) {
        max_ = std::max<int64_t>(1, max_len);
        const auto d = atlas::bubbletea_load::parsePromptDist(spec);
        if (!d) {
            return false;
        }
        kind_ = d->kind;
        a_ = d->a;
        b_ = d->b;
        return true;
    }
    int64_t sample(std::mt19937_64& rng) const {
        double v = a_;
        if (kind_ == "uniform") {
            v = std::uniform_real_distribution<double>(a_, b_ + 1)(rng);
        } else if (kind_ == "lognormal") {
            v = std::lognormal_distribution<double>(std::log(a_), b_)(rng);
        }
        return std::clamp<int64_t>(static_cast<int64_t>(v), 1, max_);
    }

  private:
    std::string kind_;
    double a_ = 1, b_ = 1;
    int64_t max_ = 1;
};

struct Sample {
    int status = 0;      // 0: transport error
    double ttft_ms = 0;  // scheduled arrival -> response complete
    double wait_ms = 0;  // scheduled arrival -> sent (client-side queueing)
    double server_queue_ms = -1;
    double server_prefill_ms = -1;
    bool measured = false;  // arrived after the warm-up
    int64_t prompt = 0;
};

struct Pending {
    Clock::time_point scheduled;
    std::string body;
    bool measured;
    int64_t prompt;
};

class Generator;

class Conn : public std::enable_shared_from_this<Conn> {
  public:
    Conn(net::io_context& ioc, Generator& g) : stream_(ioc), gen_(g) {}
    void send(Pending p);
    bool busy() const { return busy_; }

  private:
    void connectThenWrite();
    void write();
    void onResponse(beast::error_code ec);
    void finish(int status, const std::string& body);

    beast::tcp_stream stream_;
    Generator& gen_;
    bool connected_ = false;
    bool busy_ = false;
    Pending cur_;
    Clock::time_point sent_;
    http::request<http::string_body> req_;
    http::response<http::string_body> res_;
    beast::flat_buffer buffer_;
};

class Generator {
  public:
    Generator(net::io_context& ioc, Options o, tcp::resolver::results_type endpoints)
        : ioc_(ioc),
          o_(std::move(o)),
          endpoints_(std::move(endpoints)),
          timer_(ioc),
          rng_(o_.seed) {}

    bool init() {
        if (!dist_.parse(o_.prompt_dist, o_.max_prompt)) {
            std::fprintf(stderr, "bubbletea-load: bad --prompt-dist '%s'\n",
                         o_.prompt_dist.c_str());
            return false;
        }
        for (int i = 0; i < o_.connections; ++i) {
            conns_.push_back(std::make_shared<Conn>(ioc_, *this));
        }
        return true;
    }

    void start() {
        start_ = Clock::now();
        measure_from_ = start_ + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(o_.warmup_s));
        end_ = measure_from_ + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(o_.duration_s));
        next_arrival_ = start_;
        scheduleNext();
    }

    const Options& options() const { return o_; }
    const tcp::resolver::results_type& endpoints() const { return endpoints_; }
    std::vector<Sample>& samples() { return samples_; }
    Clock::time_point measureFrom() const { return measure_from_; }
    Clock::time_point end() const { return end_; }
    uint64_t sent() const { return sent_; }

    void record(const Sample& s) {
        samples_.push_back(s);
        --outstanding_;
        dispatch();
        maybeFinish();
    }

    void connectionIdle() { dispatch(); }

  private:
    void scheduleNext() {
        const double gap = std::exponential_distribution<double>(o_.rate)(rng_);
        next_arrival_ +=
            std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap));
        if (next_arrival_ >= end_) {
            arrivals_done_ = true;
            maybeFinish();
            return;
        }
        timer_.expires_at(next_arrival_);
        timer_.async_wait([this](beast::error_code ec) {
            if (ec) {
                return;
            }
            arrive(next_arrival_);
            scheduleNext();
        });
    }

    void arrive(Clock::time_point scheduled) {
        const int64_t n = dist_.sample(rng_);
        json body = {{"model", o_.model}, {"max_tokens", 1}, {"stream", false}};
        std::vector<int32_t> prompt(static_cast<size_t>(n));
        std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(o_.vocab - 1));
        for (auto& t : prompt) {
            t = tok(rng_);
        }
        body["prompt"] = prompt;
        if (o_.ttft_deadline_ms > 0) {
            body["ttft_deadline_ms"] = o_.ttft_deadline_ms;
        }
        if (!o_.kv_push.empty()) {
            // --kv-push was checked as HOST:PORT by the options table.
            const atlas::options::HostPort hp =
                atlas::options::parseHostPort(o_.kv_push).value_or(atlas::options::HostPort{});
            body["kv_transfer_params"] = {
                {"do_remote_decode", true}, {"remote_host", hp.host}, {"remote_port", hp.port}};
        } else if (o_.kv_pull) {
            body["kv_transfer_params"] = {{"do_remote_decode", true}};
        }
        queue_.push_back({scheduled, body.dump(), scheduled >= measure_from_, n});
        ++outstanding_;
        ++sent_;
        dispatch();
    }

    void dispatch() {
        for (auto& c : conns_) {
            if (queue_.empty()) {
                return;
            }
            if (!c->busy()) {
                Pending p = std::move(queue_.front());
                queue_.pop_front();
                c->send(std::move(p));
            }
        }
    }

    void maybeFinish() {
        if (arrivals_done_ && outstanding_ == 0) {
            ioc_.stop();
        }
    }

    net::io_context& ioc_;
    Options o_;
    tcp::resolver::results_type endpoints_;
    net::steady_timer timer_;
    std::mt19937_64 rng_;
    LengthDist dist_;
    std::vector<std::shared_ptr<Conn>> conns_;
    std::deque<Pending> queue_;
    std::vector<Sample> samples_;
    Clock::time_point start_, measure_from_, end_, next_arrival_;
    bool arrivals_done_ = false;
    int64_t outstanding_ = 0;
    uint64_t sent_ = 0;
};

void Conn::send(Pending p) {
    busy_ = true;
    cur_ = std::move(p);
    req_ = {};
    req_.method(http::verb::post);
    req_.target("/v1/completions");
    req_.version(11);
    req_.set(http::field::host, gen_.options().host);
    req_.set(http::field::content_type, "application/json");
    req_.keep_alive(true);
    req_.body() = cur_.body;
    req_.prepare_payload();
    if (!connected_) {
        connectThenWrite();
    } else {
        write();
    }
}

void Conn::connectThenWrite() {
    stream_.expires_after(std::chrono::seconds(10));
    stream_.async_connect(gen_.endpoints(),
                          [self = shared_from_this()](beast::error_code ec, const tcp::endpoint&) {
                              if (ec) {
                                  self->finish(0, "");
                                  return;
                              }
                              self->connected_ = true;
                              beast::error_code opt;
                              self->stream_.socket().set_option(tcp::no_delay(true), opt);
                              self->write();
                          });
}

void Conn::write() {
    sent_ = Clock::now();
    stream_.expires_after(std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(gen_.options().timeout_s)));
    http::async_write(stream_, req_, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) {
            self->finish(0, "");
            return;
        }
        self->res_ = {};
        http::async_read(self->stream_, self->buffer_, self->res_,
                         [self](beast::error_code rec, size_t) { self->onResponse(rec); });
    });
}

void Conn::onResponse(beast::error_code ec) {
    if (ec) {
        finish(0, "");
        return;
    }
    const int status = static_cast<int>(res_.result_int());
    const std::string body = std::move(res_.body());
    if (!res_.keep_alive()) {
        // Close before finish(): finish() may hand this connection the next request.
        beast::error_code ignored;
        stream_.socket().close(ignored);
        connected_ = false;
        buffer_.clear();
    }
    finish(status, body);
}

void Conn::finish(int status, const std::string& body) {
    const auto now = Clock::now();
    Sample s;
    s.status = status;
    s.ttft_ms = std::chrono::duration<double, std::milli>(now - cur_.scheduled).count();
    s.wait_ms = std::chrono::duration<double, std::milli>(sent_ - cur_.scheduled).count();
    s.measured = cur_.measured;
    s.prompt = cur_.prompt;
    if (status == 200) {
        const json j = json::parse(body, nullptr, false);
        if (j.is_object() && j.contains("bubbletea") && j["bubbletea"].is_object()) {
            s.server_queue_ms = j["bubbletea"].value("queue_ms", -1.0);
            s.server_prefill_ms = j["bubbletea"].value("prefill_ms", -1.0);
        }
    }
    if (status == 0) {
        beast::error_code ignored;
        stream_.socket().close(ignored);
        connected_ = false;
        buffer_.clear();
    }
    busy_ = false;
    gen_.record(s);
}

double pct(std::vector<double> v, double q) {
    if (v.empty()) {
        return std::nan("");
    }
    std::sort(v.begin(), v.end());
    const double pos = q * static_cast<double>(v.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string fetchModel(net::io_context& ioc, const tcp::resolver::results_type& eps,
                       const std::string& host) {
    beast::tcp_stream s(ioc);
    beast::error_code ec;
    s.connect(eps, ec);
    if (ec) {
        return "";
    }
    http::request<http::empty_body> req(http::verb::get, "/v1/models", 11);
    req.set(http::field::host, host);
    http::write(s, req, ec);
    beast::flat_buffer b;
    http::response<http::string_body> res;
    http::read(s, b, res, ec);
    if (ec) {
        return "";
    }
    const json j = json::parse(res.body(), nullptr, false);
    if (j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty()) {
        return j["data"][0].value("id", "");
    }
    return "";
}

}  // namespace

int main(int argc, char** argv) {
    auto parsed =
        atlas::bubbletea_load::parseOptions(std::vector<std::string>(argv + 1, argv + argc));
    if (!parsed.isOk()) {
        std::fprintf(stderr, "bubbletea-load: %s\n", parsed.status().message().c_str());
        return 2;
    }
    Options o = parsed.value();
    if (o.help) {
        std::fputs(atlas::bubbletea_load::usageText().c_str(), stdout);
        return 0;
    }
    net::io_context ioc;
    tcp::resolver resolver(ioc);
    beast::error_code ec;
    auto eps = resolver.resolve(o.host, o.port, ec);
    if (ec) {
        std::fprintf(stderr, "bubbletea-load: resolve %s: %s\n", o.host.c_str(),
                     ec.message().c_str());
        return 1;
    }
    if (o.model.empty()) {
        o.model = fetchModel(ioc, eps, o.host);
        if (o.model.empty()) {
            std::fprintf(stderr, "bubbletea-load: GET /v1/models failed; pass --model\n");
            return 1;
        }
    }
    Generator gen(ioc, o, eps);
    if (!gen.init()) {
        return 2;
    }
    gen.start();
    ioc.run();

    std::vector<double> ttft, wait, server_queue, server_prefill, overhead;
    std::map<int, uint64_t> by_status;
    uint64_t errors = 0, measured = 0, good = 0;
    for (const Sample& s : gen.samples()) {
        if (!s.measured) {
            continue;
        }
        ++measured;
        if (s.status == 0) {
            ++errors;
            continue;
        }
        ++by_status[s.status];
        if (s.status == 200) {
            ttft.push_back(s.ttft_ms);
            wait.push_back(s.wait_ms);
            if (s.ttft_ms <= o.slo_ms) {
                ++good;
            }
            if (s.server_queue_ms >= 0) {
                server_queue.push_back(s.server_queue_ms);
                server_prefill.push_back(s.server_prefill_ms);
                // What the server did not account for: HTTP, parsing, hand-offs, network.
                overhead.push_back(s.ttft_ms - s.wait_ms - s.server_queue_ms - s.server_prefill_ms);
            }
        }
    }
    const double secs = o.duration_s;
    std::printf(
        "bubbletea-load: %s:%s model %s, %.1f req/s Poisson for %.1f s (+%.1f s "
        "warm-up), %d connections, prompts %s\n",
        o.host.c_str(), o.port.c_str(), o.model.c_str(), o.rate, o.duration_s, o.warmup_s,
        o.connections, o.prompt_dist.c_str());
    std::printf("\n%-22s %10s\n", "metric", "value");
    std::printf("%-22s %10llu\n", "requests (measured)", static_cast<unsigned long long>(measured));
    std::printf("%-22s %10.1f\n", "offered req/s", static_cast<double>(measured) / secs);
    std::printf("%-22s %10zu\n", "ok (200)", ttft.size());
    std::printf("%-22s %10.3f\n", "TTFT p50 ms", pct(ttft, 0.5));
    std::printf("%-22s %10.3f\n", "TTFT p90 ms", pct(ttft, 0.9));
    std::printf("%-22s %10.3f\n", "TTFT p99 ms", pct(ttft, 0.99));
    std::printf("%-22s %10.3f\n", "TTFT max ms", pct(ttft, 1.0));
    std::printf("%-22s %10.3f\n", "client wait p99 ms", pct(wait, 0.99));
    std::printf("%-22s %10.3f\n", "server queue p50 ms", pct(server_queue, 0.5));
    std::printf("%-22s %10.3f\n", "server prefill p50 ms", pct(server_prefill, 0.5));
    std::printf("%-22s %10.3f\n", "unaccounted p50 ms", pct(overhead, 0.5));
    std::printf("%-22s %10.3f\n", "unaccounted p99 ms", pct(overhead, 0.99));
    std::printf("%-22s %10.1f\n", "goodput req/s", static_cast<double>(good) / secs);
    std::printf("%-22s %10.1f\n", "SLO ms", o.slo_ms);
    for (const auto& [status, n] : by_status) {
        if (status != 200) {
            std::printf("status %-15d %10llu\n", status, static_cast<unsigned long long>(n));
        }
    }
    std::printf("%-22s %10llu\n", "transport errors", static_cast<unsigned long long>(errors));

    if (!o.json_path.empty()) {
        json statuses = json::object();
        for (const auto& [status, n] : by_status) {
            statuses[std::to_string(status)] = n;
        }
        auto num = [](double v) { return std::isnan(v) ? json(nullptr) : json(v); };
        const json j = {
            {"host", o.host},
            {"port", o.port},
            {"model", o.model},
            {"rate", o.rate},
            {"duration_s", o.duration_s},
            {"warmup_s", o.warmup_s},
            {"connections", o.connections},
            {"prompt_dist", o.prompt_dist},
            {"requests", measured},
            {"ok", ttft.size()},
            {"ttft_ms",
             {{"p50", num(pct(ttft, 0.5))},
              {"p90", num(pct(ttft, 0.9))},
              {"p99", num(pct(ttft, 0.99))},
              {"max", num(pct(ttft, 1.0))}}},
            {"client_wait_ms_p99", num(pct(wait, 0.99))},
            {"server_queue_ms_p50", num(pct(server_queue, 0.5))},
            {"server_prefill_ms_p50", num(pct(server_prefill, 0.5))},
            {"unaccounted_ms",
             {{"p50", num(pct(overhead, 0.5))}, {"p99", num(pct(overhead, 0.99))}}},
            {"slo_ms", o.slo_ms},
            {"goodput_rps", static_cast<double>(good) / secs},
            {"statuses", statuses},
            {"transport_errors", errors},
        };
        std::ofstream out(o.json_path);
        out << j.dump(2) << "\n";
    }
    return 0;
}
