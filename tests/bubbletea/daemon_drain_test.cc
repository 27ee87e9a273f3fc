// SIGTERM drain of the real `bubbletea` executable, run as a child process: it stops
// accepting, finishes (or rejects) queued work, closes idle keep-alive connections and
// exits 0, all within bounds.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>

#include "daemon_test_util.h"
#include "engine_test_util.h"

namespace atlas::bubbletea {
namespace {

using testutil::completionBody;
using testutil::parseJson;
using testutil::postCompletion;
using testutil::tokenRange;
using testutil::waitUntil;

class Child {
  public:
    Child(const std::vector<std::string>& args, const std::filesystem::path& log) {
        std::vector<char*> argv;
        for (const auto& a : args) {
            argv.push_back(const_cast<char*>(a.c_str()));
        }
        argv.push_back(nullptr);
        // posix_spawn, not fork(): the test process has threads, and only exec-time actions
        // are safe in a child of a threaded parent.
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                         0644);
        if (::posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ) != 0) {
            pid_ = -1;
        }
        posix_spawn_file_actions_destroy(&actions);
    }
    ~Child() {
        if (pid_ > 0 && !reaped_) {
            ::kill(pid_, SIGKILL);
            int status = 0;
            ::waitpid(pid_, &status, 0);
        }
    }
    pid_t pid() const { return pid_; }
    bool started() const { return pid_ > 0; }
    // Waits (bounded) for the exit; returns the wait status or -1 if still running.
    int waitExit(std::chrono::milliseconds limit) {
        int status = -1;
        const bool exited = waitUntil(
            [&] {
                const pid_t r = ::waitpid(pid_, &status, WNOHANG);
                return r == pid_;
            },
            limit);
        if (!exited) {
            return -1;
        }
        reaped_ = true;
        return status;
    }

  private:
    pid_t pid_ = -1;
    bool reaped_ = false;
};

std::string binary() {
    const char* bin = std::getenv("BUBBLETEA_BIN");
    return bin != nullptr ? bin : "";
}

uint16_t readPort(const std::filesystem::path& file) {
    uint16_t port = 0;
    waitUntil(
        [&] {
            std::ifstream in(file);
            int p = 0;
            if (in >> p && p > 0) {
                port = static_cast<uint16_t>(p);
                return true;
            }
            return false;
        },
        std::chrono::milliseconds(20000));
    return port;
}

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(DaemonDrain, SigtermFinishesQueuedWorkAndExitsZero) {
    if (binary().empty()) {
        GTEST_SKIP() << "BUBBLETEA_BIN not set (run through ctest)";
    }
    testutil::TempDir dir;
    const auto port_file = dir.path() / "port";
    const auto log = dir.path() / "log";
    // A 5 ms window every second, the first 0.5 s after start-up: the request waits in the
    // queue for up to a second, long enough to send SIGTERM while it is queued.
    Child child({binary(), "--engine", "null", "--random-weights", "tiny", "--listen",
                 "127.0.0.1:0", "--port-file", port_file.string(), "--windows", "duty:1000:5:500",
                 "--drain", "finish", "--drain-timeout-ms", "5000", "--log-level", "warn"},
                log);
    ASSERT_TRUE(child.started());
    const uint16_t port = readPort(port_file);
    ASSERT_NE(port, 0) << slurp(log);

    SyncHttpClient idle("127.0.0.1", port);
    auto health = idle.request("GET", "/healthz");
    ASSERT_TRUE(health.isOk());
    ASSERT_EQ(health.value().status, 200);
    ASSERT_TRUE(idle.connected());

    SyncHttpClient poll("127.0.0.1", port);
    const auto prompt = tokenRange(6);
    auto queued = std::async(std::launch::async, [&] {
        SyncHttpClient c("127.0.0.1", port, 20 * kNsPerSec);
        return postCompletion(c, completionBody(prompt));
    });
    // Wait until the request is in the queue (it stays there until the next window).
    const bool in_queue = waitUntil([&] {
        if (queued.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
            return true;  // already served by a window: nothing left to observe
        }
        auto m = poll.request("GET", "/metrics");
        return m.isOk() && m.value().body.find("bubbletea_queue_depth 1") != std::string::npos;
    });
    ASSERT_TRUE(in_queue);
    poll.close();
    ASSERT_EQ(::kill(child.pid(), SIGTERM), 0);

    auto r = queued.get();
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r.value().status, 200) << r.value().body;
    EXPECT_EQ(parseJson(r.value().body)["choices"][0]["token_ids"].size(), 1u);

    const int status = child.waitExit(std::chrono::milliseconds(15000));
    ASSERT_NE(status, -1) << "daemon did not exit after SIGTERM\n" << slurp(log);
    EXPECT_TRUE(WIFEXITED(status)) << slurp(log);
    EXPECT_EQ(WEXITSTATUS(status), 0) << slurp(log);
    // The idle keep-alive connection was closed, and nothing listens any more.
    auto after = idle.request("GET", "/healthz");
    EXPECT_FALSE(after.isOk() && after.value().status == 200);
    SyncHttpClient fresh("127.0.0.1", port, 2 * kNsPerSec);
    EXPECT_FALSE(fresh.connect().isOk());
}

TEST(DaemonDrain, SigtermInRejectModeFailsQueuedWorkWith503) {
    if (binary().empty()) {
        GTEST_SKIP() << "BUBBLETEA_BIN not set (run through ctest)";
    }
    testutil::TempDir dir;
    const auto port_file = dir.path() / "port";
    const auto log = dir.path() / "log";
    Child child(
        {binary(), "--engine", "null", "--random-weights", "tiny", "--listen", "127.0.0.1:0",
         "--port-file", port_file.string(), "--windows", "duty:60000:1:30000", "--default-ttft-ms",
         "120000", "--drain", "reject", "--log-level", "warn"},
        log);
    ASSERT_TRUE(child.started());
    const uint16_t port = readPort(port_file);
    ASSERT_NE(port, 0) << slurp(log);
    auto queued = std::async(std::launch::async, [&] {
        SyncHttpClient c("127.0.0.1", port, 20 * kNsPerSec);
        return postCompletion(c, completionBody(tokenRange(6)));
    });
    SyncHttpClient poll("127.0.0.1", port);
    ASSERT_TRUE(waitUntil([&] {
        auto m = poll.request("GET", "/metrics");
        return m.isOk() && m.value().body.find("bubbletea_queue_depth 1") != std::string::npos;
    })) << slurp(log);
    poll.close();
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(::kill(child.pid(), SIGTERM), 0);
    auto r = queued.get();
    ASSERT_TRUE(r.isOk()) << r.status().toString();
    EXPECT_EQ(r.value().status, 503) << r.value().body;
    const int status = child.waitExit(std::chrono::milliseconds(10000));
    ASSERT_NE(status, -1) << slurp(log);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(DaemonDrain, HelpDocumentsTheFlags) {
    if (binary().empty()) {
        GTEST_SKIP() << "BUBBLETEA_BIN not set (run through ctest)";
    }
    testutil::TempDir dir;
    const auto out = dir.path() / "help";
    const std::string cmd = binary() + " --help > " + out.string() + " 2>&1";
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    const std::string text = slurp(out);
    EXPECT_NE(text.find("--engine"), std::string::npos);
    EXPECT_NE(text.find("--fallback-url"), std::string::npos);
    const std::string bad = binary() + " --engine tpu > " + out.string() + " 2>&1";
    EXPECT_NE(std::system(bad.c_str()), 0);
    EXPECT_NE(slurp(out).find("--engine"), std::string::npos);
}

}  // namespace
}  // namespace atlas::bubbletea
