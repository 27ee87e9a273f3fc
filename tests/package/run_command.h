// Runs a program to completion for the packaging tests: posix_spawn (the test may have
// threads), stdout and stderr captured, a wall-clock bound (SIGKILL after it), extra
// environment on top of this process's.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace atlas::package_test {

struct CommandResult {
    int exit_code = -1;  // -1: did not start, killed after the timeout, or killed by a signal
    std::string out, err;
    std::string describe() const;  // "exit 3: <stderr>"
};

// argv[0] is the program (a path, or a name looked up in PATH). `env` entries override or add
// variables; `timeout_ms` bounds the run.
CommandResult runCommand(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& env = {},
                         int timeout_ms = 120000);

// Whether `name` is an executable in PATH.
bool haveProgram(const std::string& name);

std::string readFile(const std::string& path);
void writeFile(const std::string& path, const std::string& text);

}  // namespace atlas::package_test
