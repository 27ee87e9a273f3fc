#include "tests/abi/isolate.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace atlas::abi {

namespace {

constexpr int kSkipExit = 77;  // the automake/liburing "skipped" convention
constexpr int kFailExit = 1;

// One relayed test-part result: type byte, then "file\nline\nmessage".
struct Part {
    char type;  // 'F' failure, 'S' skip
    std::string file;
    int line;
    std::string message;
};

std::string encodeParts(const std::vector<Part>& parts) {
    std::string out;
    for (const Part& p : parts) {
        std::string rec =
            std::string(1, p.type) + p.file + '\n' + std::to_string(p.line) + '\n' + p.message;
        uint32_t len = static_cast<uint32_t>(rec.size());
        out.append(reinterpret_cast<const char*>(&len), sizeof(len));
        out += rec;
    }
    return out;
}

std::vector<Part> decodeParts(const std::string& blob) {
    std::vector<Part> parts;
    size_t off = 0;
    while (off + sizeof(uint32_t) <= blob.size()) {
        uint32_t len = 0;
        std::memcpy(&len, blob.data() + off, sizeof(len));
        off += sizeof(len);
        if (len == 0 || off + len > blob.size()) {
            break;
        }
        std::string rec = blob.substr(off, len);
        off += len;
        Part p{rec[0], "", 0, ""};
        size_t a = rec.find('\n', 1);
        size_t b = a == std::string::npos ? a : rec.find('\n', a + 1);
        if (b == std::string::npos) {
            p.message = rec.substr(1);
        } else {
            p.file = rec.substr(1, a - 1);
            p.line = std::atoi(rec.c_str() + a + 1);
            p.message = rec.substr(b + 1);
        }
        parts.push_back(std::move(p));
    }
    return parts;
}

std::vector<Part> partsSince(int first_index) {
    std::vector<Part> parts;
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    if (info == nullptr) {
        return parts;
    }
    const ::testing::TestResult* result = info->result();
    for (int i = first_index; i < result->total_part_count(); ++i) {
        const ::testing::TestPartResult& r = result->GetTestPartResult(i);
        if (r.failed()) {
            parts.push_back(
                {'F', r.file_name() != nullptr ? r.file_name() : "", r.line_number(), r.message()});
        } else if (r.skipped()) {
            parts.push_back(
                {'S', r.file_name() != nullptr ? r.file_name() : "", r.line_number(), r.message()});
        }
    }
    return parts;
}

int currentPartCount() {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    return info == nullptr ? 0 : info->result()->total_part_count();
}

}  // namespace

std::string pluginPath() {
#ifdef ATLAS_PLUGIN_PATH
    return pluginPathFromEnv(ATLAS_PLUGIN_PATH);
#else
    return pluginPathFromEnv("");
#endif
}

EnvVars loopbackEnv(const EnvVars& extra) {
    EnvVars env = {{"ATLAS_SOCKET_IFNAME", "lo"}, {"ATLAS_TIMEOUT_MS", "10000"}};
    for (const auto& kv : extra) {
        env.push_back(kv);
    }
    return env;
}

Nanos scaledBudget(Nanos ns) {
#if defined(ATLAS_SANITIZED)
    return ns * 4;
#else
    return ns;
#endif
}

int runPeer(const char* role, const std::function<Status()>& fn) {
    Status st = fn();
    if (!st.isOk()) {
        std::fprintf(stderr, "[%s pid %d] FAILED: %s\n", role, static_cast<int>(getpid()),
                     st.toString().c_str());
        return 1;
    }
    return 0;
}

void expectPeerSucceeded(ChildProcess& peer, const Deadline& deadline, const char* role) {
    Result<int> st = peer.wait(deadline);
    ASSERT_TRUE(st.isOk()) << role << ": " << st.status().toString();
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0)
        << role << " process " << describeWaitStatus(*st) << " (its error is printed above)";
}

void expectOnlyTestThread(const char* when) {
#if defined(__SANITIZE_THREAD__)
    (void)when;
    return;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    (void)when;
    return;
#endif
#endif
    EXPECT_EQ(sampleResources().threads, 1) << "threads still running " << when;
}

bool skipIfBackendUnavailable(const std::string& io) {
    return io == "uring" && !kernelHasIoUring();
}

void runIsolated(const EnvVars& env, Nanos timeout, const std::function<void()>& body) {
    const int first_part = currentPartCount();
    Result<ChildProcess> child = ChildProcess::spawn([&](int fd) {
        for (const auto& [k, v] : env) {
            setenv(k.c_str(), v.c_str(), 1);
        }
        body();
        std::vector<Part> parts = partsSince(first_part);
        std::string blob = encodeParts(parts);
        uint32_t len = static_cast<uint32_t>(blob.size());
        Deadline d = Deadline::afterMs(5000);
        (void)writeAll(fd, &len, sizeof(len), d);
        (void)writeAll(fd, blob.data(), blob.size(), d);
        bool failed = false;
        bool skipped = false;
        for (const Part& p : parts) {
            failed |= p.type == 'F';
            skipped |= p.type == 'S';
        }
        return failed ? kFailExit : skipped ? kSkipExit : 0;
    });
    ASSERT_TRUE(child.isOk()) << child.status().toString();
    Result<int> status = child->wait(Deadline(timeout));
    ASSERT_TRUE(status.isOk()) << "isolated test process: " << status.status().toString()
                               << " (budget " << timeout / kNsPerMs << " ms)";

    std::vector<Part> parts;
    uint32_t len = 0;
    Deadline d = Deadline::afterMs(2000);
    if (readAll(child->fd(), &len, sizeof(len), d).isOk() && len > 0 && len < (64u << 20)) {
        std::string blob(len, '\0');
        if (readAll(child->fd(), blob.data(), len, d).isOk()) {
            parts = decodeParts(blob);
        }
    }
    std::string skip_reason;
    for (const Part& p : parts) {
        if (p.type == 'F') {
            ADD_FAILURE_AT(p.file.c_str(), p.line) << "[isolated child] " << p.message;
        } else if (skip_reason.empty()) {
            skip_reason = p.message;
        }
    }
    int st = *status;
    if (WIFEXITED(st) && WEXITSTATUS(st) == kSkipExit) {
        GTEST_SKIP() << skip_reason;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == kFailExit && !parts.empty()) {
        return;  // failures already re-reported above
    }
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0)
        << "isolated test process " << describeWaitStatus(st);
}

}  // namespace atlas::abi
