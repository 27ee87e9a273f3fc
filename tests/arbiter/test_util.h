// Helpers shared by the arbiter tests: an in-process server thread, a counting waker, a
// bounded wait, a capturing logger, and the atlas-arbiter daemon as a child process.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "arbiter/server.h"
#include "atlas/common/log.h"

namespace atlas::arbiter::testing {

// Polls `pred` until true or `budget` passes (1 ms steps): for events on other threads and
// processes, where there is nothing to block on.
inline bool waitFor(const std::function<bool()>& pred,
                    std::chrono::milliseconds budget = std::chrono::milliseconds(5000)) {
    const auto end = std::chrono::steady_clock::now() + budget;
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) {
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return pred();
}

struct Waker {
    std::atomic<int> calls{0};
    std::function<void()> fn() {
        return [this] { calls.fetch_add(1); };
    }
};

// A blocking TCP connection to 127.0.0.1:port, or -1.
inline int connectLoopback(uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// Thread-safe logger that keeps every line (tests count WARNs).
class CaptureLog {
  public:
    Logger logger() {
        return Logger(
            [](void* ctx, LogLevel level, const char*, int, const char* msg) {
                auto* self = static_cast<CaptureLog*>(ctx);
                std::lock_guard<std::mutex> lock(self->mu_);
                self->lines_.emplace_back(level, msg);
            },
            this);
    }
    int count(LogLevel level, const std::string& needle) {
        std::lock_guard<std::mutex> lock(mu_);
        int n = 0;
        for (auto& [l, m] : lines_) {
            n += (l == level && m.find(needle) != std::string::npos) ? 1 : 0;
        }
        return n;
    }
    std::string all() {
        std::lock_guard<std::mutex> lock(mu_);
        std::string s;
        for (auto& [l, m] : lines_) {
            s += m + "\n";
        }
        return s;
    }

  private:
    std::mutex mu_;
    std::vector<std::pair<LogLevel, std::string>> lines_;
};

// ArbiterServer on 127.0.0.1 (ephemeral port unless given) served by a thread.
class ServerThread {
  public:
    explicit ServerThread(ServerConfig cfg) {
        cfg.host = "127.0.0.1";
        auto s = ArbiterServer::create(cfg);
        if (!s) {
            error_ = s.status().toString();
            return;
        }
        server_ = std::move(s.value());
        thread_ = std::thread([this] { (void)server_->run(); });
        // Serving once its metrics page answers (empty until run() is active): a test that
        // reads the page before anything connected must not race the server thread's start.
        if (!waitFor([this] { return !server_->metricsText().empty(); },
                     std::chrono::milliseconds(10000))) {
            error_ = "the arbiter did not start serving within 10 s";
        }
    }
    ~ServerThread() { stop(); }
    void stop() {
        if (server_) {
            server_->stop();
        }
        if (thread_.joinable()) {
            thread_.join();
        }
        server_.reset();
    }
    bool ok() const { return server_ != nullptr && error_.empty(); }
    const std::string& error() const { return error_; }
    uint16_t port() const { return server_->port(); }
    ArbiterServer& server() { return *server_; }

  private:
    std::unique_ptr<ArbiterServer> server_;
    std::thread thread_;
    std::string error_;
};

// The atlas-arbiter daemon in a child process (fork + exec), listening on 127.0.0.1.
class DaemonProcess {
  public:
    // Returns false with `why` set when the daemon did not come up within 10 s.
    bool start(const std::string& binary, std::vector<std::string> args, std::string* why) {
        port_file_ = "/tmp/atlas-arbiter-test." + std::to_string(::getpid()) + "." +
                     std::to_string(counter()++) + ".port";
        ::unlink(port_file_.c_str());
        args.insert(args.begin(), binary);
        args.push_back("--port-file");
        args.push_back(port_file_);
        args.push_back("--quiet");
        pid_ = ::fork();
        if (pid_ == 0) {
            std::vector<char*> argv;
            for (auto& a : args) {
                argv.push_back(a.data());
            }
            argv.push_back(nullptr);
            ::execv(binary.c_str(), argv.data());
            ::_exit(127);
        }
        if (pid_ < 0) {
            *why = "fork failed";
            return false;
        }
        const bool up = waitFor(
            [&] {
                std::ifstream f(port_file_);
                int p = 0;
                if (f >> p && p > 0) {
                    port_ = static_cast<uint16_t>(p);
                    return true;
                }
                return false;
            },
            std::chrono::milliseconds(10000));
        if (!up) {
            *why = "atlas-arbiter (" + binary + ") did not write its port file";
        }
        return up;
    }
    ~DaemonProcess() { kill(SIGKILL); }
    void kill(int sig) {
        if (pid_ > 0) {
            ::kill(pid_, sig);
            int st = 0;
            ::waitpid(pid_, &st, 0);
            pid_ = -1;
        }
        if (!port_file_.empty()) {
            ::unlink(port_file_.c_str());
        }
    }
    uint16_t port() const { return port_; }
    pid_t pid() const { return pid_; }

  private:
    static int& counter() {
        static int n = 0;
        return n;
    }
    pid_t pid_ = -1;
    uint16_t port_ = 0;
    std::string port_file_;
};

}  // namespace atlas::arbiter::testing
