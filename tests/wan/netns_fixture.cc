#include "tests/wan/netns_fixture.h"

#include "perf/atlas-wanem/stats_reader.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace atlas::wanem::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string envOr(const char* name, const char* fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : fallback;
}

bool pidAlive(pid_t pid) {
    std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(st, line)) {
        return false;
    }
    const size_t close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

// Namespaces named awt<pid>x<n>-* whose pid no longer runs were left by a crashed run.
void sweepStaleNamespaces() {
    std::string out;
    runCommand({"ip", "netns", "list"}, &out);
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        const std::string name = line.substr(0, line.find(' '));
        if (name.rfind("awt", 0) != 0) {
            continue;
        }
        const pid_t pid = static_cast<pid_t>(std::atol(name.c_str() + 3));
        if (pid > 0 && pid != getpid() && !pidAlive(pid)) {
            runCommand({"ip", "netns", "del", name});
        }
    }
}

}  // namespace

std::string wanemBinary() {
    return envOr("ATLAS_WANEM", ATLAS_WANEM_PATH);
}
std::string sourceDir() {
    return envOr("ATLAS_SOURCE_DIR", ATLAS_SOURCE_DIR);
}

std::string uniquePrefix() {
    static std::atomic<int> n{0};
    return "awt" + std::to_string(getpid()) + "x" + std::to_string(n++);
}

std::optional<std::string> wanSkipReason() {
    if (geteuid() != 0) {
        return "needs root (network namespaces and TUN devices)";
    }
    if (access("/dev/net/tun", R_OK | W_OK) != 0) {
        return "/dev/net/tun is missing or not accessible";
    }
    if (access(wanemBinary().c_str(), X_OK) != 0) {
        return "atlas-wanem binary not found at " + wanemBinary();
    }
    const std::string probe = uniquePrefix() + "-probe";
    if (runCommand({"ip", "netns", "add", probe}) != 0) {
        return "`ip netns add` does not work here";
    }
    runCommand({"ip", "netns", "del", probe});
    static bool swept = false;
    if (!swept) {
        sweepStaleNamespaces();
        swept = true;
    }
    return std::nullopt;
}

bool StealMeter::read(uint64_t& steal, uint64_t& total) {
    std::ifstream in("/proc/stat");
    std::string cpu;
    in >> cpu;
    if (cpu != "cpu") {
        return false;
    }
    // user nice system idle iowait irq softirq steal (guest time is inside user)
    uint64_t v[8] = {};
    for (uint64_t& x : v) {
        in >> x;
    }
    if (!in) {
        return false;
    }
    steal = v[7];
    total = 0;
    for (uint64_t x : v) {
        total += x;
    }
    return true;
}

StealMeter::StealMeter() : ok_(read(steal0_, total0_)) {}

double StealMeter::stolenFraction() const {
    uint64_t steal = 0, total = 0;
    if (!ok_ || !read(steal, total) || total <= total0_) {
        return 0;
    }
    return static_cast<double>(steal - steal0_) / static_cast<double>(total - total0_);
}

void TimedRound::describe(const char* fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    figures = buf;
}

TimedVerdict runTimedRounds(int max_rounds, const std::function<TimedRound()>& round,
                            std::string* log) {
    int failed = 0;
    for (int r = 0; r < max_rounds; ++r) {
        const StealMeter meter;
        const TimedRound res = round();
        const double stolen = meter.stolenFraction();
        const bool conclusive = res.premise && stolen < kMaxStealFraction;
        std::ostringstream line;
        line << "round " << r << ": " << res.figures << ", " << static_cast<int>(stolen * 100)
             << " % of the CPU stolen"
             << (conclusive ? (res.within ? "" : ", out of bounds") : ", inconclusive") << "\n";
        *log += line.str();
        if (conclusive && res.within) {
            return TimedVerdict::kPassed;
        }
        failed += conclusive ? 1 : 0;
    }
    return failed > 0 ? TimedVerdict::kFailed : TimedVerdict::kAllStolen;
}

int runCommand(const std::vector<std::string>& argv, std::string* output) {
    int pipefd[2] = {-1, -1};
    if (output != nullptr && pipe2(pipefd, O_CLOEXEC) != 0) {
        return -1;
    }
    const pid_t pid = fork();
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        if (output != nullptr) {
            dup2(pipefd[1], 1);
            dup2(pipefd[1], 2);
        } else {
            const int devnull = open("/dev/null", O_WRONLY);
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        std::vector<char*> args;
        for (const auto& a : argv) {
            args.push_back(const_cast<char*>(a.c_str()));
        }
        args.push_back(nullptr);
        execvp(args[0], args.data());
        _exit(127);
    }
    if (output != nullptr) {
        close(pipefd[1]);
        char buf[4096];
        ssize_t n;
        while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) {
            output->append(buf, static_cast<size_t>(n));
        }
        close(pipefd[0]);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0) {
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Status runInNamespace(const std::string& ns, const std::function<void()>& fn) {
    Status result;
    std::thread t([&] {
        const int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
            result = Status::fromErrno("setns into " + ns, errno);
            if (fd >= 0) {
                close(fd);
            }
            return;
        }
        close(fd);
        fn();
    });
    t.join();
    return result;
}

int tcpSocketIn(const std::string& ns) {
    int fd = -1;
    const Status st =
        runInNamespace(ns, [&] { fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0); });
    return st.isOk() ? fd : -1;
}

EmulatedLink::EmulatedLink(std::string prefix)
    : prefix_(std::move(prefix)), ns_a_(prefix_ + "-a"), ns_b_(prefix_ + "-b") {
    dir_ = (fs::temp_directory_path() / prefix_).string();
    fs::create_directories(dir_);
    for (const auto& ns : {ns_a_, ns_b_}) {
        runCommand({"ip", "netns", "add", ns});
        runCommand({"ip", "-n", ns, "link", "set", "lo", "up"});
        runCommand({"ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1", "net.ipv4.tcp_no_metrics_save=1"});
    }
}

EmulatedLink::~EmulatedLink() {
    if (pid_ > 0) {
        (void)stop();
    }
    runCommand({"ip", "netns", "del", ns_a_});
    runCommand({"ip", "netns", "del", ns_b_});
    std::error_code ec;
    fs::remove_all(dir_, ec);
}

Status EmulatedLink::start(const std::vector<std::string>& args) {
    const std::string ready = dir_ + "/ready";
    std::vector<std::string> argv = {
        wanemBinary(),        "--ns-a",       ns_a_, "--ns-b", ns_b_, "--stats",
        dir_ + "/stats.json", "--ready-file", ready};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = dir_ + "/wanem.log";
    const pid_t pid = fork();
    if (pid < 0) {
        return Status::fromErrno("fork", errno);
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        std::vector<char*> cargs;
        for (const auto& a : argv) {
            cargs.push_back(const_cast<char*>(a.c_str()));
        }
        cargs.push_back(nullptr);
        execv(cargs[0], cargs.data());
        _exit(127);
    }
    pid_ = pid;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!fs::exists(ready)) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            std::ifstream in(log);
            std::stringstream ss;
            ss << in.rdbuf();
            return Status(Code::kSystem, "atlas-wanem exited: " + ss.str());
        }
        if (std::chrono::steady_clock::now() > deadline) {
            return Status(Code::kTimeout, "atlas-wanem not ready after 5 s");
        }
        std::this_thread::sleep_for(10ms);
    }
    if (runCommand({"ip", "-n", ns_a_, "addr", "add", kAddrA, "peer", kAddrB, "dev", "wanem-a"}) !=
            0 ||
        runCommand({"ip", "-n", ns_b_, "addr", "add", kAddrB, "peer", kAddrA, "dev", "wanem-b"}) !=
            0) {
        return Status(Code::kSystem, "configuring addresses failed");
    }
    return Status::ok();
}

Result<nlohmann::json> EmulatedLink::readStats(uint64_t newer_than_seq) {
    auto j = awaitStatsDocument(dir_ + "/stats.json", newer_than_seq, 5 * kNsPerSec);
    if (j) {
        last_seq_ = (*j)["seq"].get<uint64_t>();
    }
    return j;
}

Result<nlohmann::json> EmulatedLink::stats() {
    if (pid_ <= 0 || kill(pid_, SIGUSR1) != 0) {
        return Status(Code::kInternal, "atlas-wanem is not running");
    }
    return readStats(last_seq_);
}

Result<nlohmann::json> EmulatedLink::stop() {
    if (pid_ <= 0) {
        return Status(Code::kInternal, "atlas-wanem is not running");
    }
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 500 && waitpid(pid_, &status, WNOHANG) == 0; ++i) {
        std::this_thread::sleep_for(10ms);
    }
    if (waitpid(pid_, &status, WNOHANG) == 0) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
    }
    pid_ = -1;
    return readStats(last_seq_);
}

sockaddr_in addrOf(const char* ip, uint16_t port) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    inet_pton(AF_INET, ip, &sa.sin_addr);
    return sa;
}

int listenIn(const EmulatedLink& link, uint16_t port) {
    const int fd = tcpSocketIn(link.nsB());
    if (fd < 0) {
        return -1;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const sockaddr_in sa = addrOf(EmulatedLink::kAddrB, port);
    if (bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0 || listen(fd, 256) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int connectFrom(const EmulatedLink& link, uint16_t port) {
    const int fd = tcpSocketIn(link.nsA());
    const sockaddr_in sa = addrOf(EmulatedLink::kAddrB, port);
    if (fd < 0 || connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof(sa)) != 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

}  // namespace atlas::wanem::test
