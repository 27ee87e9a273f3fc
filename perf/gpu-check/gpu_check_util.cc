#include "perf/gpu-check/gpu_check_util.h"

#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <vector>

namespace atlas::gpucheck {

std::string exeDir() {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) {
        return ".";
    }
    buf[n] = '\0';
    const std::string p(buf);
    return p.substr(0, p.rfind('/'));
}

std::string findPlugin(const std::string& given) {
    std::vector<std::string> candidates;
    if (!given.empty()) {
        candidates.push_back(given);
    } else {
        if (const char* env = std::getenv("ATLAS_PLUGIN"); env != nullptr && *env != 0) {
            candidates.push_back(env);
        }
        candidates.push_back(exeDir() + "/libnccl-net-atlas.so");
        candidates.push_back(exeDir() + "/../../plugin/libnccl-net-atlas.so");
    }
    for (const std::string& c : candidates) {
        char real[PATH_MAX];
        if (::access(c.c_str(), R_OK) == 0 && ::realpath(c.c_str(), real) != nullptr) {
            return real;  // NCCL_NET_PLUGIN gets an absolute path
        }
    }
    return "";
}

int freeLoopbackPort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    int port = 0;
    if (fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
        port = ntohs(sa.sin_port);
    }
    if (fd >= 0) {
        ::close(fd);
    }
    return port;
}

bool fileContains(const std::string& path, const std::string& needle) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (line.find(needle) != std::string::npos) {
            return true;
        }
    }
    return false;
}

}  // namespace atlas::gpucheck
