// File descriptors, child processes, environment and process resources.
#include <dirent.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "plugin_host/plugin_host.h"

namespace atlas::abi {

// ---------------------------------------------------------------------------------------------
// fd I/O

Status writeAll(int fd, const void* data, size_t size, const Deadline& deadline) {
    const auto* p = static_cast<const uint8_t*>(data);
    size_t off = 0;
    while (off < size) {
        pollfd pfd{fd, POLLOUT, 0};
        int n = poll(&pfd, 1, deadline.remainingMsForPoll());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return Status::fromErrno("poll", errno);
        }
        if (n == 0) {
            return Status(Code::kTimeout, "write: peer did not drain the fd before the deadline");
        }
        ssize_t w = send(fd, p + off, size - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == ENOTSOCK) {
            w = write(fd, p + off, size - off);
        }
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            return Status::fromErrno("write", errno,
                                     errno == EPIPE ? Code::kRemote : Code::kSystem);
        }
        off += static_cast<size_t>(w);
    }
    return Status::ok();
}

Status readAll(int fd, void* data, size_t size, const Deadline& deadline) {
    auto* p = static_cast<uint8_t*>(data);
    size_t off = 0;
    while (off < size) {
        pollfd pfd{fd, POLLIN, 0};
        int n = poll(&pfd, 1, deadline.remainingMsForPoll());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return Status::fromErrno("poll", errno);
        }
        if (n == 0) {
            return Status(Code::kTimeout, "read: nothing arrived before the deadline (" +
                                              std::to_string(off) + "/" + std::to_string(size) +
                                              " B)");
        }
        ssize_t r = recv(fd, p + off, size - off, MSG_DONTWAIT);
        if (r < 0 && errno == ENOTSOCK) {
            r = read(fd, p + off, size - off);
        }
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            return Status::fromErrno("read", errno, Code::kRemote);
        }
        if (r == 0) {
            return Status(Code::kRemote, "read: peer closed after " + std::to_string(off) + "/" +
                                             std::to_string(size) + " B");
        }
        off += static_cast<size_t>(r);
    }
    return Status::ok();
}

Status sendByte(int fd, uint8_t value, const Deadline& deadline) {
    return writeAll(fd, &value, 1, deadline);
}

Result<uint8_t> recvByte(int fd, const Deadline& deadline) {
    uint8_t v = 0;
    Status st = readAll(fd, &v, 1, deadline);
    if (!st.isOk()) {
        return st;
    }
    return v;
}

// ---------------------------------------------------------------------------------------------
// Processes

Result<ChildProcess> ChildProcess::spawn(const std::function<int(int fd)>& body) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        return Status::fromErrno("socketpair", errno);
    }
    std::fflush(stdout);
    std::fflush(stderr);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int err = errno;
        close(sv[0]);
        close(sv[1]);
        return Status::fromErrno("fork", err);
    }
    if (pid == 0) {
        close(sv[0]);
        // Die with the parent, so a test killed on timeout never leaves peers running.
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) {
            _exit(71);
        }
        int rc = 70;
        try {
            rc = body(sv[1]);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "[child %d] exception: %s\n", static_cast<int>(getpid()),
                         e.what());
        } catch (...) {
            std::fprintf(stderr, "[child %d] unknown exception\n", static_cast<int>(getpid()));
        }
        std::fflush(stdout);
        std::fflush(stderr);
        _exit(rc);
    }
    close(sv[1]);
    ChildProcess c;
    c.pid_ = pid;
    c.fd_ = sv[0];
    c.pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    return c;
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      fd_(std::exchange(other.fd_, -1)),
      pidfd_(std::exchange(other.pidfd_, -1)) {}

ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept {
    if (this != &other) {
        this->~ChildProcess();
        pid_ = std::exchange(other.pid_, -1);
        fd_ = std::exchange(other.fd_, -1);
        pidfd_ = std::exchange(other.pidfd_, -1);
    }
    return *this;
}

ChildProcess::~ChildProcess() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        int status = 0;
        while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
        }
        pid_ = -1;
    }
    if (fd_ >= 0) {
        close(fd_);
        fd_ = -1;
    }
    if (pidfd_ >= 0) {
        close(pidfd_);
        pidfd_ = -1;
    }
}

void ChildProcess::kill(int sig) {
    if (pid_ > 0) {
        ::kill(pid_, sig);
    }
}

Result<int> ChildProcess::wait(const Deadline& deadline) {
    if (pid_ <= 0) {
        return Status(Code::kInternal, "wait: no child");
    }
    Backoff backoff;
    while (true) {
        int status = 0;
        pid_t r = waitpid(pid_, &status, WNOHANG);
        if (r == pid_) {
            pid_ = -1;
            return status;
        }
        if (r < 0 && errno != EINTR) {
            return Status::fromErrno("waitpid", errno);
        }
        if (deadline.expired()) {
            ::kill(pid_, SIGKILL);
            while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
            }
            pid_ = -1;
            return Status(Code::kTimeout, "child did not exit before the deadline; SIGKILLed");
        }
        if (pidfd_ >= 0) {
            pollfd pfd{pidfd_, POLLIN, 0};
            (void)poll(&pfd, 1, std::min(deadline.remainingMsForPoll(), 1000));
        } else {
            backoff.idle();
        }
    }
}

std::string describeWaitStatus(int status) {
    if (WIFEXITED(status)) {
        return "exited with " + std::to_string(WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        return "killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
               strsignal(WTERMSIG(status)) + ")";
    }
    return "wait status " + std::to_string(status);
}

// ---------------------------------------------------------------------------------------------
// Environment

ScopedEnv::ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars) {
    for (const auto& [k, v] : vars) {
        set(k, v);
    }
}

ScopedEnv::~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
        if (it->second.first) {
            setenv(it->first.c_str(), it->second.second.c_str(), 1);
        } else {
            unsetenv(it->first.c_str());
        }
    }
}

void ScopedEnv::set(const std::string& key, const std::string& value) {
    const char* old = std::getenv(key.c_str());
    saved_.push_back({key, {old != nullptr, old != nullptr ? old : ""}});
    setenv(key.c_str(), value.c_str(), 1);
}

void ScopedEnv::unset(const std::string& key) {
    const char* old = std::getenv(key.c_str());
    saved_.push_back({key, {old != nullptr, old != nullptr ? old : ""}});
    unsetenv(key.c_str());
}

// ---------------------------------------------------------------------------------------------
// Process resources

namespace {

int countDirEntries(const char* path) {
    DIR* d = opendir(path);
    if (d == nullptr) {
        return -1;
    }
    int n = 0;
    while (dirent* e = readdir(d)) {
        if (e->d_name[0] != '.') {
            ++n;
        }
    }
    closedir(d);
    return n;
}

}  // namespace

ProcessResources sampleResources() {
    ProcessResources r;
    std::ifstream statm("/proc/self/statm");
    long size_pages = 0;
    statm >> size_pages >> r.rss_pages;
    // opendir itself holds one fd while counting.
    r.fds = countDirEntries("/proc/self/fd") - 1;
    r.threads = countDirEntries("/proc/self/task");
    return r;
}

std::vector<uint16_t> listeningPortsOfThisProcess() {
    std::set<std::string> inodes;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (dirent* e = readdir(d)) {
            char link[256];
            std::string p = std::string("/proc/self/fd/") + e->d_name;
            ssize_t n = readlink(p.c_str(), link, sizeof(link) - 1);
            if (n > 0) {
                link[n] = '\0';
                if (std::strncmp(link, "socket:[", 8) == 0) {
                    std::string ino(link + 8);
                    ino.pop_back();  // ']'
                    inodes.insert(ino);
                }
            }
        }
        closedir(d);
    }
    std::set<uint16_t> ports;
    for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
        std::ifstream in(table);
        std::string line;
        std::getline(in, line);  // header
        while (std::getline(in, line)) {
            std::istringstream ls(line);
            std::string sl, local, remote, state, txrx, trtm, retr, uid, timeout, inode;
            ls >> sl >> local >> remote >> state >> txrx >> trtm >> retr >> uid >> timeout >> inode;
            if (state != "0A" || inodes.count(inode) == 0) {
                continue;
            }
            size_t colon = local.rfind(':');
            if (colon != std::string::npos) {
                ports.insert(
                    static_cast<uint16_t>(std::stoul(local.substr(colon + 1), nullptr, 16)));
            }
        }
    }
    return {ports.begin(), ports.end()};
}

bool kernelHasIoUring() {
    io_uring_params params;
    std::memset(&params, 0, sizeof(params));
    long fd = syscall(__NR_io_uring_setup, 4, &params);
    if (fd < 0) {
        return false;
    }
    close(static_cast<int>(fd));
    return true;
}

}  // namespace atlas::abi
