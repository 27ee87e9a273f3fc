// scripts/wan-up and scripts/wan-down: a 3-DC testbed comes up (namespaces, emulators,
// routes between DC addresses), a second wan-up is a no-op, foreign namespaces are never
// touched, and wan-down leaves no namespace, emulator, process or state file behind.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "tests/wan/netns_fixture.h"

namespace atlas::wanem::test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

bool procAlive(pid_t pid) {
    std::ifstream st("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    if (!std::getline(st, line)) {
        return false;
    }
    const size_t close = line.rfind(')');
    return close != std::string::npos && line.at(close + 2) != 'Z';
}

std::map<std::string, std::string> parseEnv(const std::string& text) {
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

bool namespaceExists(const std::string& ns) {
    return fs::exists("/run/netns/" + ns);
}

// Runs a script with the testbed's environment; returns the exit status, output in `out`.
class Testbed {
  public:
    Testbed() : prefix_(uniquePrefix()), run_dir_(fs::temp_directory_path() / (prefix_ + "-run")) {}
    ~Testbed() {
        // Whatever happened, leave nothing behind.
        std::string ignored;
        script("wan-down", {}, &ignored);
        for (int i = 0; i < 4; ++i) {
            runCommand({"ip", "netns", "del", prefix_ + "-dc" + std::to_string(i)});
        }
        std::error_code ec;
        fs::remove_all(run_dir_, ec);
    }
    int script(const std::string& name, const std::vector<std::string>& args,
               std::string* out) const {
        std::vector<std::string> argv = {
            "env", "ATLAS_WAN_PREFIX=" + prefix_, "ATLAS_WAN_RUN_DIR=" + run_dir_.string(),
            "ATLAS_WANEM=" + wanemBinary(), sourceDir() + "/scripts/" + name};
        argv.insert(argv.end(), args.begin(), args.end());
        return runCommand(argv, out);
    }
    const std::string& prefix() const { return prefix_; }
    fs::path state() const { return run_dir_ / prefix_; }
    fs::path runDir() const { return run_dir_; }

  private:
    std::string prefix_;
    fs::path run_dir_;
};

TEST(WanScripts, UpIsIdempotentAndDownLeavesNothingBehind) {
    if (auto reason = wanSkipReason()) {
        GTEST_SKIP() << *reason;
    }
    if (runCommand({"sh", "-c", "command -v ping"}) != 0) {
        GTEST_SKIP() << "ping (iputils-ping) is not installed; scripts/deps installs it";
    }
    Testbed tb;
    const fs::path conf = tb.runDir().string() + ".conf";
    {
        std::ofstream c(conf);
        c << "# test testbed\ndcs=3 profile=tuned cc=cubic\n"
             "all rtt_ms=4 rate_mbit=0\n"
             "dc0 dc2 rtt_ms=10 paths=2 path_rate_mbit=500,100\n";
    }
    std::string out;
    ASSERT_EQ(tb.script("wan-up", {"--config", conf.string()}, &out), 0) << out;
    EXPECT_NE(out.find("dc0-dc2"), std::string::npos) << out;

    out.clear();
    ASSERT_EQ(tb.script("wan-up", {"--print-env"}, &out), 0) << out;
    auto env = parseEnv(out);
    EXPECT_EQ(env["ATLAS_WAN_DCS"], "3");
    EXPECT_EQ(env["DC2_NS"], tb.prefix() + "-dc2");
    EXPECT_EQ(env["DC2_ADDR"], "10.3.0.1");
    EXPECT_EQ(env["DC1_SUBNET"], "10.2.0.0/16");
    EXPECT_FALSE(env["DC0_CC"].empty()) << "the congestion control in force is recorded";
    std::vector<pid_t> emulators;
    for (const char* l : {"LINK_DC0_DC1_PID", "LINK_DC0_DC2_PID", "LINK_DC1_DC2_PID"}) {
        ASSERT_TRUE(env.count(l)) << l;
        emulators.push_back(static_cast<pid_t>(std::stol(env[l])));
        EXPECT_TRUE(procAlive(emulators.back()));
    }
    for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(namespaceExists(tb.prefix() + "-dc" + std::to_string(i)));
    }
    // Every DC reaches every other DC's address over its direct link.
    for (auto [from, to] : {std::pair{0, 2}, std::pair{2, 1}, std::pair{1, 0}}) {
        EXPECT_EQ(
            runCommand({"ip", "netns", "exec", tb.prefix() + "-dc" + std::to_string(from), "ping",
                        "-c", "1", "-W", "2", "10." + std::to_string(to + 1) + ".0.1"}),
            0)
            << "dc" << from << " -> dc" << to;
    }
    out.clear();
    runCommand({"ip", "netns", "exec", tb.prefix() + "-dc0", "sysctl", "-n", "net.ipv4.tcp_wmem"},
               &out);
    EXPECT_NE(out.find("67108864"), std::string::npos) << "tuned profile: 64 MiB tcp_wmem max";

    // A second wan-up with the same config changes nothing.
    out.clear();
    ASSERT_EQ(tb.script("wan-up", {"--config", conf.string()}, &out), 0) << out;
    EXPECT_NE(out.find("already up"), std::string::npos) << out;
    for (pid_t p : emulators) {
        EXPECT_TRUE(procAlive(p)) << "idempotent wan-up must keep the running emulators";
    }

    // A namespace wan-up did not create must survive wan-down, and blocks a foreign wan-up.
    const std::string foreign = tb.prefix() + "-dc3";
    ASSERT_EQ(runCommand({"ip", "netns", "add", foreign}), 0);
    // A process left running inside a testbed namespace (like an iperf3 server).
    std::string sleeper_out;
    ASSERT_EQ(runCommand({"sh", "-c",
                          "ip netns exec " + tb.prefix() +
                              "-dc1 setsid sleep 60 </dev/null "
                              ">/dev/null 2>&1 & echo $!"},
                         &sleeper_out),
              0);
    const pid_t sleeper = static_cast<pid_t>(std::stol(sleeper_out));
    std::this_thread::sleep_for(200ms);

    out.clear();
    ASSERT_EQ(tb.script("wan-down", {}, &out), 0) << out;
    for (int i = 0; i < 3; ++i) {
        EXPECT_FALSE(namespaceExists(tb.prefix() + "-dc" + std::to_string(i)));
    }
    EXPECT_TRUE(namespaceExists(foreign)) << "wan-down deleted a namespace it did not create";
    for (pid_t p : emulators) {
        EXPECT_FALSE(procAlive(p)) << "emulator " << p << " survived wan-down";
    }
    EXPECT_FALSE(procAlive(sleeper)) << "a process inside a testbed namespace survived";
    EXPECT_FALSE(fs::exists(tb.state())) << "state directory left behind";
    out.clear();
    runCommand({"ip", "-o", "link", "show"}, &out);
    EXPECT_EQ(out.find("to-dc"), std::string::npos)
        << "a TUN device leaked into the root namespace";

    // Down again: nothing to do, still fine; and the foreign namespace still untouched.
    out.clear();
    EXPECT_EQ(tb.script("wan-down", {}, &out), 0) << out;
    EXPECT_TRUE(namespaceExists(foreign));
    // wan-up refuses to adopt a namespace it did not create.
    out.clear();
    const fs::path conf4 = tb.runDir().string() + "-4.conf";
    {
        std::ofstream c(conf4);
        c << "dcs=4\nall rtt_ms=2\n";
    }
    EXPECT_NE(tb.script("wan-up", {"--config", conf4.string()}, &out), 0);
    EXPECT_NE(out.find("was not created by wan-up"), std::string::npos) << out;
    EXPECT_TRUE(namespaceExists(foreign));
    EXPECT_FALSE(namespaceExists(tb.prefix() + "-dc0"))
        << "a refused wan-up must not leave a partial testbed";
    runCommand({"ip", "netns", "del", foreign});
    fs::remove(conf);
    fs::remove(conf4);
}

TEST(WanScripts, RejectsBadConfigsBeforeCreatingAnything) {
    if (auto reason = wanSkipReason()) {
        GTEST_SKIP() << *reason;
    }
    if (runCommand({"sh", "-c", "command -v ping"}) != 0) {
        GTEST_SKIP() << "ping (iputils-ping) is not installed; scripts/deps installs it";
    }
    Testbed tb;
    const fs::path conf = tb.runDir().string() + "-bad.conf";
    for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
             {"all rtt_ms=50 rate_mbit=-3\n", "--rate-mbit='-3' is out of range"},
             {"all rtt_ms=50 colour=blue\n", "unknown link key 'colour'"},
             {"dcs=2\ndc0 dc5 rtt_ms=5\n", "needs dc5"},
             {"dcs=1\nall rtt_ms=5\n", "dcs must be 2..16"},
             {"profile=fast\nall rtt_ms=5\n", "profile must be 'stock' or 'tuned'"},
             {"dc0 rtt_ms=5\n", "bad DC name"},
         }) {
        std::ofstream(conf) << text;
        std::string out;
        EXPECT_NE(tb.script("wan-up", {"--config", conf.string()}, &out), 0) << text;
        EXPECT_NE(out.find(needle), std::string::npos) << text << "\n" << out;
        EXPECT_FALSE(namespaceExists(tb.prefix() + "-dc0"));
        EXPECT_FALSE(fs::exists(tb.state()));
    }
    std::string help;
    EXPECT_EQ(tb.script("wan-up", {"--help"}, &help), 0);
    EXPECT_NE(help.find("Config format"), std::string::npos);
    fs::remove(conf);
}

}  // namespace
}  // namespace atlas::wanem::test
