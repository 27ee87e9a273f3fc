// Waiting for a child process with a deadline, for tests that run the project's binaries.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace atlas::testing {

// Waits up to timeout_ms for `pid` (a pidfd poll, no sleeping), SIGKILLs it after that, and
// reaps it. Returns its exit status, or -1 when it was killed or died by a signal.
inline int waitOrKill(pid_t pid, int timeout_ms) {
    const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pidfd >= 0) {
        pollfd p{pidfd, POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) <= 0) {
            ::kill(pid, SIGKILL);
        }
        ::close(pidfd);
    }
    int status = 0;
    if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        return -1;
    }
    return WEXITSTATUS(status);
}

}  // namespace atlas::testing
