#include "tests/wan/wan_plugin_testbed.h"

#include "perf/atlas-wanem/stats_reader.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "tests/wan/netns_fixture.h"

namespace atlas::wanem::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

constexpr const char* kPrefixTag = "awp";

bool processAlive(pid_t pid) {
    std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(st, line)) {
        return false;
    }
    const size_t close = line.rfind(')');
    return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

std::map<std::string, std::string> parseEnvText(const std::string& text) {
    std::map<std::string, std::string> env;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const size_t eq = line.find('=');
        if (eq != std::string::npos) {
            env[line.substr(0, eq)] = line.substr(eq + 1);
        }
    }
    return env;
}

int runScript(const std::string& prefix, const std::string& run_dir, const std::string& name,
              const std::vector<std::string>& args, std::string* out) {
    std::vector<std::string> argv = {"env", "ATLAS_WAN_PREFIX=" + prefix,
                                     "ATLAS_WAN_RUN_DIR=" + run_dir, "ATLAS_WANEM=" + wanemBinary(),
                                     sourceDir() + "/scripts/" + name};
    argv.insert(argv.end(), args.begin(), args.end());
    std::string ignored;
    return runCommand(argv, out != nullptr ? out : &ignored);
}

// Testbeds are named awp<pid>x<n>; their state lives in <tmp>/awp<pid>x<n>-run/. One whose
// test process is gone was left by a crash: wan-down removes it (emulator included).
void sweepStaleTestbeds() {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(fs::temp_directory_path(), ec)) {
        const std::string dir = entry.path().filename().string();
        const size_t run = dir.rfind("-run");
        if (dir.rfind(kPrefixTag, 0) != 0 || run == std::string::npos || run + 4 != dir.size()) {
            continue;
        }
        const pid_t pid = static_cast<pid_t>(std::atol(dir.c_str() + 3));
        if (pid <= 0 || pid == getpid() || processAlive(pid)) {
            continue;
        }
        runScript(dir.substr(0, run), entry.path().string(), "wan-down", {}, nullptr);
        fs::remove_all(entry.path(), ec);
    }
}

std::string nextPrefix() {
    static std::atomic<int> n{0};
    return std::string(kPrefixTag) + std::to_string(getpid()) + "x" + std::to_string(n++);
}

Status enterNamespace(const std::string& ns) {
    const std::string path = "/run/netns/" + ns;
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return Status::fromErrno("open " + path, errno);
    }
    const int rc = setns(fd, CLONE_NEWNET);
    const int err = errno;
    close(fd);
    return rc == 0 ? Status::ok() : Status::fromErrno("setns " + path, err);
}

}  // namespace

std::optional<std::string> pluginWanSkipReason() {
    if (auto reason = wanSkipReason()) {
        return reason;
    }
    for (const char* tool : {"ping", "ss"}) {
        if (runCommand({"sh", "-c", std::string("command -v ") + tool}) != 0) {
            return std::string(tool) + " is not installed (scripts/deps installs it)";
        }
    }
    if (access(abi::pluginPath().c_str(), R_OK) != 0) {
        return "the plugin is not built: " + abi::pluginPath();
    }
    static bool swept = false;
    if (!swept) {
        sweepStaleTestbeds();
        swept = true;
    }
    return std::nullopt;
}

PluginTestbed::PluginTestbed()
    : prefix_(nextPrefix()), run_dir_((fs::temp_directory_path() / (prefix_ + "-run")).string()) {}

PluginTestbed::~PluginTestbed() {
    if (up_) {
        (void)down();
    }
    std::error_code ec;
    fs::remove_all(run_dir_, ec);
}

int PluginTestbed::script(const std::string& name, const std::vector<std::string>& args,
                          std::string* out) const {
    return runScript(prefix_, run_dir_, name, args, out);
}

Result<std::unique_ptr<PluginTestbed>> PluginTestbed::up(const std::string& link_keys) {
    std::unique_ptr<PluginTestbed> tb(new PluginTestbed());
    std::error_code ec;
    fs::create_directories(tb->run_dir_, ec);
    const std::string conf = tb->run_dir_ + "/testbed.conf";
    {
        std::ofstream c(conf);
        c << "# plugin WAN test\ndcs=2 profile=stock cc=cubic rt_priority=10\ndc0 dc1 " << link_keys
          << "\n";
        if (!c) {
            return Status(Code::kSystem, "cannot write " + conf);
        }
    }
    std::string out;
    tb->up_ = true;  // from here on, the destructor runs wan-down whatever happens
    if (tb->script("wan-up", {"--config", conf, "--timeout", "30"}, &out) != 0) {
        return Status(Code::kSystem, "scripts/wan-up failed:\n" + out);
    }
    out.clear();
    if (tb->script("wan-up", {"--print-env"}, &out) != 0) {
        return Status(Code::kSystem, "scripts/wan-up --print-env failed:\n" + out);
    }
    auto env = parseEnvText(out);
    if (!env.count("LINK_DC0_DC1_PID") || !env.count("LINK_DC0_DC1_STATS")) {
        return Status(Code::kInternal, "wan-up's env lacks the dc0-dc1 link:\n" + out);
    }
    tb->emulator_pid_ = static_cast<pid_t>(std::atol(env["LINK_DC0_DC1_PID"].c_str()));
    tb->stats_path_ = env["LINK_DC0_DC1_STATS"];
    tb->cc_ = env["DC0_CC"];
    return tb;
}

Status PluginTestbed::down(std::string* output) {
    std::string out;
    const int rc = script("wan-down", {}, &out);
    up_ = false;
    if (output != nullptr) {
        *output = out;
    }
    return rc == 0 ? Status::ok()
                   : Status(Code::kSystem,
                            "scripts/wan-down exited " + std::to_string(rc) + ":\n" + out);
}

std::vector<std::string> PluginTestbed::leftovers() const {
    std::vector<std::string> left;
    for (int dc = 0; dc < 2; ++dc) {
        if (fs::exists("/run/netns/" + ns(dc))) {
            left.push_back("namespace " + ns(dc));
        }
    }
    // The TUN devices live inside the namespaces and belong to the emulator: with both gone
    // they are gone too.
    if (emulator_pid_ > 0 && processAlive(emulator_pid_)) {
        left.push_back("atlas-wanem pid " + std::to_string(emulator_pid_));
    }
    if (fs::exists(fs::path(run_dir_) / prefix_)) {
        left.push_back("state directory " + (fs::path(run_dir_) / prefix_).string());
    }
    return left;
}

Result<nlohmann::json> PluginTestbed::stats() {
    if (emulator_pid_ <= 0 || kill(emulator_pid_, SIGUSR1) != 0) {
        return Status(Code::kInternal, "the emulator is not running");
    }
    auto j = wanem::awaitStatsDocument(stats_path_, last_seq_, 5 * kNsPerSec);
    if (j) {
        last_seq_ = (*j)["seq"].get<uint64_t>();
    }
    return j;
}

abi::EnvVars wanPluginEnv(int timeout_ms, const abi::EnvVars& extra) {
    // Both ranks run on one machine: they would share one bubble channel (shared memory is
    // not per network namespace), which is not what these tests are about.
    abi::EnvVars env = {{"ATLAS_SOCKET_IFNAME", "to-dc"},
                        {"ATLAS_TIMEOUT_MS", std::to_string(timeout_ms)},
                        {"ATLAS_BUBBLES", "0"}};
    env.insert(env.end(), extra.begin(), extra.end());
    return env;
}

Result<abi::ChildProcess> spawnPeerIn(const std::string& ns, const abi::EnvVars& env,
                                      const char* role, const std::function<Status(int fd)>& body) {
    return abi::ChildProcess::spawn([ns, env, role, body](int fd) {
        return abi::runPeer(role, [&]() -> Status {
            // Before the plugin loads: it reads its environment and devices at init.
            ATLAS_RETURN_IF_ERROR(enterNamespace(ns));
            for (const auto& [k, v] : env) {
                setenv(k.c_str(), v.c_str(), 1);
            }
            return body(fd);
        });
    });
}

Status relayHandle(abi::ChildProcess& receiver, abi::ChildProcess& sender,
                   const abi::Deadline& deadline) {
    abi::Handle handle{};
    ATLAS_RETURN_IF_ERROR(abi::readAll(receiver.fd(), handle.data(), handle.size(), deadline));
    return abi::writeAll(sender.fd(), handle.data(), handle.size(), deadline);
}

Result<std::vector<TcpConn>> establishedTo(const std::string& ns, const std::string& peer_addr) {
    std::string out;
    const int rc = runCommand(
        {"ip", "netns", "exec", ns, "ss", "-Htn", "state", "established", "dst", peer_addr}, &out);
    if (rc != 0) {
        return Status(Code::kSystem, "ss failed: " + out);
    }
    // With a state filter ss prints: Recv-Q Send-Q Local:Port Peer:Port
    std::vector<TcpConn> conns;
    std::istringstream in(out);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream f(line);
        uint64_t recv_q = 0;
        TcpConn c;
        std::string local, peer;
        if (!(f >> recv_q >> c.send_q >> local >> peer)) {
            continue;
        }
        c.local_port = static_cast<uint16_t>(std::atoi(local.substr(local.rfind(':') + 1).c_str()));
        c.peer_port = static_cast<uint16_t>(std::atoi(peer.substr(peer.rfind(':') + 1).c_str()));
        conns.push_back(c);
    }
    return conns;
}

Status killConnection(const std::string& ns, const TcpConn& conn) {
    std::string out;
    const std::string filter = "( sport = :" + std::to_string(conn.local_port) +
                               " and dport = :" + std::to_string(conn.peer_port) + " )";
    const int rc = runCommand(
        {"ip", "netns", "exec", ns, "ss", "-K", "-Htn", "state", "established", filter}, &out);
    if (rc != 0) {
        return Status(Code::kSystem,
                      "ss -K failed (kernel without CONFIG_INET_DIAG_DESTROY?): " + out);
    }
    if (out.find(":" + std::to_string(conn.local_port)) == std::string::npos) {
        return Status(Code::kInternal, "ss -K killed nothing for local port " +
                                           std::to_string(conn.local_port) + ": " + out);
    }
    return Status::ok();
}

}  // namespace atlas::wanem::test
