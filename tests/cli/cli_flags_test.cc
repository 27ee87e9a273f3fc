// Every binary's command line, from outside, as a user meets it: --help runs and exits 0
// with text, and an invalid number is refused (non-zero exit) with a message that names the
// flag and the bad value, never taken as 0 or as its leading digits (atoi, stoi and strtod
// did both). One parametrized case per binary; the table below is the list of binaries
// (a binary whose target is not built here, e.g. atlas-nccl-check without CUDA, is skipped).
// Plus the docs check of atlas-netstat's flag table.
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "netstat/tool/options.h"
#include "options/help.h"
#include "support/doc_blocks.h"
#include "support/subprocess.h"

extern char** environ;

namespace atlas {
namespace {

struct Binary {
    const char* name;
    const char* path;                    // "" when not built
    std::vector<std::string> bad_args;   // one invalid number
    std::vector<std::string> help_args;  // {"--help"} for most
};

// gtest prints a failing case's parameter by its name.
void PrintTo(const Binary& b, std::ostream* os) {
    *os << b.name;
}

// Appears in a message that names the option and the value given.
const char* const kBad = "12abc";

std::vector<Binary> binaries() {
    return {
        {"atlas_arbiter", ATLAS_EXE_atlas_arbiter, {"--slot-ms", kBad}, {"--help"}},
        {"bubbletea", ATLAS_EXE_bubbletea, {"--http-threads", kBad}, {"--help"}},
        {"atlas_sim", ATLAS_EXE_atlas_sim, {"--trace-iterations", kBad}, {"--help"}},
        {"atlas_net_perf", ATLAS_EXE_atlas_net_perf, {"--iters", kBad}, {"--help"}},
        {"atlas_pipeline_bench", ATLAS_EXE_atlas_pipeline_bench, {"--pipelines", kBad}, {"--help"}},
        {"atlas_wanem", ATLAS_EXE_atlas_wanem, {"--paths", kBad}, {"--help"}},
        {"atlas_bubbles",
         ATLAS_EXE_atlas_bubbles,
         {"record", "--out", "/tmp/atlas-cli-flags-unused", "--seconds", kBad},
         {"--help"}},
        {"kv_sink", ATLAS_EXE_kv_sink, {"--timeout-ms", kBad}, {"--help"}},
        {"bubbletea_load", ATLAS_EXE_bubbletea_load, {"--rate", kBad}, {"--help"}},
        {"atlas_netstat", ATLAS_EXE_atlas_netstat, {"--watch", kBad}, {"--help"}},
        {"atlas_nccl_sweep", ATLAS_EXE_atlas_nccl_sweep, {"--warmup", kBad}, {"--help"}},
        {"atlas_nccl_check", ATLAS_EXE_atlas_nccl_check, {"--iters", kBad}, {"--help"}},
        {"bubbletea_engine_check",
         ATLAS_EXE_bubbletea_engine_check,
         {"--device", kBad},
         {"--help"}},
        {"bubbletea_mkmodel", ATLAS_EXE_bubbletea_mkmodel, {"--seed", kBad}, {"--help"}},
        {"engine_bench", ATLAS_EXE_engine_bench, {"--threads=12abc"}, {"--help"}},
        {"tokenizer_bench", ATLAS_EXE_tokenizer_bench, {"--threads=12abc"}, {"--help"}},
    };
}

struct RunResult {
    int exit_code = -1;  // -1: killed at the deadline, or not started
    std::string output;  // stdout and stderr together
};

// Runs `path args` with the test's environment, output to a temporary file, for at most
// `timeout_ms` (killed after it).
RunResult runBinary(const std::string& path, const std::vector<std::string>& args, int timeout_ms) {
    RunResult r;
    char tmpl[] = "/tmp/atlas-cli-flags-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    if (fd < 0) {
        return r;
    }
    std::vector<std::string> copy = args;
    std::vector<char*> argv;
    std::string exe = path;
    argv.push_back(exe.data());
    for (std::string& a : copy) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fd, 1);
    posix_spawn_file_actions_adddup2(&actions, fd, 2);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    pid_t pid = -1;
    const int rc = ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc == 0) {
        r.exit_code = testing::waitOrKill(pid, timeout_ms);
    }
    std::ifstream in(tmpl);
    std::stringstream ss;
    ss << in.rdbuf();
    r.output = ss.str();
    ::close(fd);
    ::unlink(tmpl);
    return r;
}

class CliFlags : public ::testing::TestWithParam<Binary> {
  protected:
    void SetUp() override {
        if (std::string(GetParam().path).empty()) {
            GTEST_SKIP() << GetParam().name << " is not built in this configuration";
        }
    }
};

TEST_P(CliFlags, HelpRunsAndExitsZero) {
    const Binary& b = GetParam();
    const RunResult r = runBinary(b.path, b.help_args, 20000);
    EXPECT_EQ(r.exit_code, 0) << b.name << " --help:\n" << r.output;
    EXPECT_GT(r.output.size(), 40u) << b.name << " --help printed almost nothing:\n" << r.output;
    EXPECT_NE(r.output.find("-"), std::string::npos) << r.output;
}

TEST_P(CliFlags, InvalidNumberIsRefusedNamingTheFlag) {
    const Binary& b = GetParam();
    const RunResult r = runBinary(b.path, b.bad_args, 20000);
    EXPECT_GT(r.exit_code, 0) << b.name << " accepted '" << kBad << "' as a number:\n" << r.output;
    // The flag as written, and the value (so a user sees which of several flags was wrong).
    std::string flag = b.bad_args[b.bad_args.size() == 1 ? 0 : b.bad_args.size() - 2];
    flag = flag.substr(0, flag.find('='));
    EXPECT_NE(r.output.find(flag), std::string::npos)
        << b.name << ": the error does not name " << flag << ":\n"
        << r.output;
    EXPECT_NE(r.output.find(kBad), std::string::npos)
        << b.name << ": the error does not show the value:\n"
        << r.output;
}

INSTANTIATE_TEST_SUITE_P(EveryBinary, CliFlags, ::testing::ValuesIn(binaries()),
                         [](const ::testing::TestParamInfo<Binary>& i) { return i.param.name; });

// atlas-netstat's flags: strict values, the plugin's ATLAS_NETSTAT_DIR as --dir's variable.
TEST(NetstatOptions, ValuesEnvironmentAndErrors) {
    auto none = [](const char*) -> const char* { return nullptr; };
    auto d = netstat::parseToolOptions({}, none);
    ASSERT_TRUE(d.isOk()) << d.status().toString();
    EXPECT_EQ(d.value().dir, netstat::kDefaultSegmentDir);
    auto env = [](const char* k) -> const char* {
        return std::string(k) == "ATLAS_NETSTAT_DIR" ? "/run/x" : nullptr;
    };
    auto e = netstat::parseToolOptions({"--watch", "0.5", "--pid", "42"}, env);
    ASSERT_TRUE(e.isOk()) << e.status().toString();
    EXPECT_EQ(e.value().dir, "/run/x");
    EXPECT_EQ(e.value().watch_s, 0.5);
    EXPECT_EQ(e.value().pid, 42u);
    EXPECT_EQ(netstat::parseToolOptions({"--dir", "/a"}, env).value().dir, "/a");  // flag wins
    auto bad = netstat::parseToolOptions({"--pid", "-1", "--watch", "0", "--sevre", ":1"}, none);
    ASSERT_FALSE(bad.isOk());
    for (const char* part : {"--pid='-1' is invalid", "--watch='0' is out of range",
                             "unknown option '--sevre' (did you mean --serve?)"}) {
        EXPECT_NE(bad.status().message().find(part), std::string::npos) << bad.status().message();
    }
}

TEST(NetstatOptions, DocsTableIsTheRegistry) {
    EXPECT_TRUE(testing::docBlockMatches(std::string(ATLAS_SOURCE_DIR) + "/docs/netstat.md",
                                         "atlas-netstat",
                                         options::markdown(netstat::toolOptionTable())));
}

}  // namespace
}  // namespace atlas
