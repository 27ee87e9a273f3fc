#include "tests/package/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace atlas::package_test {

std::string CommandResult::describe() const {
    return "exit " + std::to_string(exit_code) + ": " + err + (err.empty() ? out : "");
}

std::string readFile(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void writeFile(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

bool haveProgram(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
    std::string dir;
    while (std::getline(dirs, dir, ':')) {
        if (!dir.empty() && ::access((dir + "/" + name).c_str(), X_OK) == 0) {
            return true;
        }
    }
    return false;
}

CommandResult runCommand(const std::vector<std::string>& argv,
                         const std::vector<std::pair<std::string, std::string>>& env,
                         int timeout_ms) {
    CommandResult r;
    char tmpl[] = "/tmp/atlas-package-cmd-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
        r.err = std::string("mkdtemp: ") + std::strerror(errno);
        return r;
    }
    const std::string dir = tmpl;
    const std::string out = dir + "/out", err = dir + "/err";

    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string kv = *e;
        bool overridden = false;
        for (const auto& [k, v] : env) {
            overridden = overridden || kv.rfind(k + "=", 0) == 0;
        }
        if (!overridden) {
            envs.push_back(kv);
        }
    }
    for (const auto& [k, v] : env) {
        envs.push_back(k + "=" + v);
    }
    std::vector<char*> envp, args;
    for (std::string& e : envs) {
        envp.push_back(e.data());
    }
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (std::string& a : argv_copy) {
        args.push_back(a.data());
    }
    args.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        r.err = "cannot start " + argv[0] + ": " + std::strerror(rc);
    } else {
        // Bounded wait on a pidfd: no polling loop, no sleep.
        const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
        bool exited = true;
        if (pidfd >= 0) {
            pollfd p{pidfd, POLLIN, 0};
            exited = ::poll(&p, 1, timeout_ms) == 1;
            ::close(pidfd);
        }
        if (!exited) {
            ::kill(pid, SIGKILL);
        }
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        r.exit_code = exited && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        r.out = readFile(out);
        r.err = readFile(err);
        if (!exited) {
            r.err += "\n(killed after " + std::to_string(timeout_ms) + " ms)";
        }
    }
    ::unlink(out.c_str());
    ::unlink(err.c_str());
    ::rmdir(dir.c_str());
    return r;
}

}  // namespace atlas::package_test
