// GoogleTest glue for the ABI tests: every test body runs in its own forked process.
//
// Why: the plugin parses ATLAS_* env once per process at first init and keeps process-wide
// state (engine threads, io backend), and a broken plugin may hang or crash. A fresh child per
// test gives each test its own environment, and the parent enforces a wall-clock bound and
// survives crashes. The parent never loads the plugin, so fork() always happens from a
// single-threaded process.
//
// Inside the child the usual gtest assertions work; their results (failures, skips) are sent
// to the parent over a socketpair and re-reported there, so ctest/XML output shows them.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "plugin_host/plugin_host.h"

namespace atlas::abi {

using EnvVars = std::vector<std::pair<std::string, std::string>>;

// The plugin under test: the ATLAS_PLUGIN_PATH compile definition (the built .so), or
// $ATLAS_ABI_PLUGIN when set.
std::string pluginPath();

// Env for loopback tests: ATLAS_SOCKET_IFNAME=lo and a 10 s ATLAS_TIMEOUT_MS, then `extra`
// (later entries win).
EnvVars loopbackEnv(const EnvVars& extra = {});

// Scales a time budget for slow builds (sanitizers: x4) so bounds stay meaningful.
Nanos scaledBudget(Nanos ns);

// Runs `body` in a forked child with `env` set, waits at most `timeout` (then SIGKILLs the
// child and fails), and re-reports the child's failures/skips in this process.
void runIsolated(const EnvVars& env, Nanos timeout, const std::function<void()>& body);

// For the body of a peer process (ChildProcess::spawn): runs fn, prints a failure with the pid
// and returns the exit code (0 on success, 1 on failure).
int runPeer(const char* role, const std::function<Status()>& fn);

// Asserts (non-fatally) that a peer process exits 0 before the deadline.
void expectPeerSucceeded(ChildProcess& peer, const Deadline& deadline, const char* role);

// The plugin's io backend for a test parameter ("uring"/"epoll"); skips the calling test when
// "uring" is requested but the kernel refuses io_uring_setup (seccomp, sysctl).
bool skipIfBackendUnavailable(const std::string& io);

// Expects this (isolated, single-threaded) test process to have no thread besides its own:
// every plugin thread joined. Skipped under ThreadSanitizer, whose runtime adds threads of its
// own after fork (indistinguishable by name).
void expectOnlyTestThread(const char* when);

// Status / Result helpers for assertions.
inline Status statusOf(const Status& s) {
    return s;
}
template <typename T>
Status statusOf(const Result<T>& r) {
    return r.status();
}

}  // namespace atlas::abi

#define ATLAS_ASSERT_OK(expr)                                                     \
    do {                                                                          \
        const ::atlas::Status atlas_st_ = ::atlas::abi::statusOf(expr);           \
        ASSERT_TRUE(atlas_st_.isOk()) << #expr << " -> " << atlas_st_.toString(); \
    } while (0)

#define ATLAS_EXPECT_OK(expr)                                                     \
    do {                                                                          \
        const ::atlas::Status atlas_st_ = ::atlas::abi::statusOf(expr);           \
        EXPECT_TRUE(atlas_st_.isOk()) << #expr << " -> " << atlas_st_.toString(); \
    } while (0)

// Asserts an ncclResult_t call succeeded.
#define ATLAS_ASSERT_NCCL_OK(call)                                         \
    do {                                                                   \
        const ncclResult_t atlas_rc_ = (call);                             \
        ASSERT_EQ(atlas_rc_, ncclSuccess)                                  \
            << #call << " -> " << ::atlas::abi::ncclResultName(atlas_rc_); \
    } while (0)
