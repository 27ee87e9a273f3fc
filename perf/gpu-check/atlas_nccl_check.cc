// atlas-nccl-check: NCCL end to end through libnccl-net-atlas.so on ONE GPU.
//
// Two ranks run as two processes (fork, no MPI) on the same device, with different
// NCCL_HOSTID values so NCCL treats them as two hosts and routes every byte through the net
// plugin (docs/nccl-abi.md section 5.2). Each rank runs ncclSend/ncclRecv and ncclAllReduce
// (sum of float32, bfloat16 and int32) over a size sweep, checks every element, and times
// the operations; the parent then checks the NCCL logs for "Using network Atlas" and
// "via NET/Atlas" and prints a PASS/FAIL table. See docs/gpu-check.md.
//
//   atlas-nccl-check [--plugin PATH] [--device N] [--sizes 4,1K,64K,1M,16M,64M] [--iters N]
//                    [--timeout SEC] [--port N] [--logdir DIR]
// Exit status: 0 all checks passed, 1 a check failed, 2 setup problem (no GPU, no plugin).
//
// Process rules: the parent never touches CUDA (it does not survive fork); each rank sets its
// NCCL environment before its first CUDA/NCCL call. Every wait has a deadline: communicators
// are non-blocking and polled; a rank past the deadline aborts, the parent kills stragglers.
// libnccl.so.2 is resolved by the dynamic loader, so LD_LIBRARY_PATH selects which NCCL runs.
#include <cuda_runtime.h>
#include <nccl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "options/help.h"
#include "options/table.h"
#include "perf/gpu-check/gpu_check_util.h"

namespace {

using atlas::gpucheck::fileContains;
using atlas::gpucheck::findPlugin;
using atlas::gpucheck::freeLoopbackPort;

using SteadyClock = std::chrono::steady_clock;

struct Args {
    std::string plugin;
    int device = 0;
    std::vector<size_t> sizes = {4, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20};
    int iters = 5;
    int timeout_s = 240;
    int port = 0;
    std::string logdir;
    bool help = false;
};

using namespace atlas::options::kinds;
#define ATLAS_NCCL_CHECK_OPTIONS(X)                                                             \
    X("--plugin", Path, plugin, 0, 0, "PATH",                                                   \
      "libnccl-net-atlas.so (default: $ATLAS_PLUGIN, next to this program, the build tree's)")  \
    X("--device", Uint, device, 0, 1023, "N", "CUDA device both ranks use")                     \
    X("--sizes", List<Size>, sizes, 1, uint64_t{1} << 31, "LIST", "message sizes of the sweep") \
    X("--iters", Uint, iters, 1, 1000000, "N", "timed iterations per size")                     \
    X("--timeout", Uint, timeout_s, 10, 86400, "SEC", "whole run; ranks past it are killed")    \
    X("--port", Uint, port, 0, 65535, "N", "bootstrap port on 127.0.0.1 (0: a free one)")       \
    X("--logdir", Path, logdir, 0, 0, "DIR", "NCCL logs (default: a fresh /tmp directory)")     \
    X("--help", Switch, help, 0, 0, "", "this text")
#define ATLAS_NCCL_CHECK_ALIASES(X) X("-h", "--help", false)

const atlas::options::Table<Args>& argTable() {
    static const auto t =
        ATLAS_OPTIONS_TABLE(Args, ATLAS_NCCL_CHECK_OPTIONS, ATLAS_NCCL_CHECK_ALIASES);
    return t;
}

std::string usageText() {
    return "usage: atlas-nccl-check [options]\n"
           "Two ranks on one GPU through libnccl-net-atlas.so (docs/gpu-check.md).\n"
           "Exit status: 0 all checks passed, 1 a check failed, 2 setup problem.\n\n" +
           atlas::options::flagHelp(argTable());
}

[[noreturn]] void usageExit(const char* msg) {
    std::fprintf(stderr, "atlas-nccl-check: %s\n%s", msg, usageText().c_str());
    std::exit(2);
}

Args parseArgs(int argc, char** argv) {
    atlas::options::Parsed<Args> p;
    atlas::options::readArgs(argTable(), std::vector<std::string>(argv + 1, argv + argc), &p);
    for (const std::string& w : p.positional) {
        p.errors.push_back("unexpected argument '" + w + "'");
    }
    if (!p.errors.empty()) {
        usageExit(p.status().message().c_str());
    }
    if (p.config.help) {
        std::fputs(usageText().c_str(), stdout);
        std::exit(0);
    }
    return p.config;
}

// ---------------------------------------------------------------------------------------------
// Rank side

struct RankError {
    std::string what;
};

#define CUDA_OK(call)                                                            \
    do {                                                                         \
        cudaError_t e_ = (call);                                                 \
        if (e_ != cudaSuccess) {                                                 \
            throw RankError{std::string(#call) + ": " + cudaGetErrorString(e_)}; \
        }                                                                        \
    } while (0)

class Rank {
  public:
    Rank(const Args& a, int rank, SteadyClock::time_point deadline)
        : a_(a), rank_(rank), deadline_(deadline) {}

    // Runs every check; returns result lines "op type size ok time_us detail".
    std::vector<std::string> run() {
        CUDA_OK(cudaSetDevice(a_.device));
        CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        ncclUniqueId id;  // derived from NCCL_COMM_ID: identical on both ranks
        nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;
        ncclResult_t rc = ncclCommInitRankConfig(&comm_, 2, id, rank_, &config);
        if (rc != ncclSuccess && rc != ncclInProgress) {
            nccl(rc, "ncclCommInitRankConfig");
        }
        settle("ncclCommInitRankConfig");
        std::vector<std::string> lines;
        for (size_t size : a_.sizes) {
            lines.push_back(sendRecv(size));
            lines.push_back(allReduce(size, ncclFloat32, "float32"));
            lines.push_back(allReduce(size, ncclBfloat16, "bf16"));
            lines.push_back(allReduce(size, ncclInt32, "int32"));
        }
        nccl(ncclCommFinalize(comm_), "ncclCommFinalize");
        settle("ncclCommFinalize");
        nccl(ncclCommDestroy(comm_), "ncclCommDestroy");
        comm_ = nullptr;
        CUDA_OK(cudaStreamDestroy(stream_));
        return lines;
    }

    void abort() {
        if (comm_ != nullptr) {
            ncclCommAbort(comm_);
            comm_ = nullptr;
        }
    }

  private:
    void nccl(ncclResult_t rc, const char* what) {
        if (rc != ncclSuccess && rc != ncclInProgress) {
            std::string detail = comm_ != nullptr ? ncclGetLastError(comm_) : "";
            throw RankError{std::string(what) + ": " + ncclGetErrorString(rc) +
                            (detail.empty() ? "" : " (" + detail + ")")};
        }
    }

    // Non-blocking communicator: poll until the last call completed, with the deadline.
    void settle(const char* what) {
        while (true) {
            ncclResult_t st = ncclInProgress;
            nccl(ncclCommGetAsyncError(comm_, &st), "ncclCommGetAsyncError");
            if (st == ncclSuccess) {
                return;
            }
            nccl(st, what);
            if (SteadyClock::now() > deadline_) {
                throw RankError{std::string(what) + ": still in progress at the deadline"};
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
    }

    // Waits for the stream's work, watching the communicator's async errors meanwhile.
    void waitEvent(cudaEvent_t ev, const char* what) {
        while (true) {
            cudaError_t e = cudaEventQuery(ev);
            if (e == cudaSuccess) {
                return;
            }
            if (e != cudaErrorNotReady) {
                throw RankError{std::string(what) + ": " + cudaGetErrorString(e)};
            }
            ncclResult_t st = ncclSuccess;
            nccl(ncclCommGetAsyncError(comm_, &st), "ncclCommGetAsyncError");
            nccl(st, what);
            if (SteadyClock::now() > deadline_) {
                throw RankError{std::string(what) + ": not finished at the deadline"};
            }
            std::this_thread::sleep_for(std::chrono::microseconds(100));
        }
    }

    // Enqueues `op` once for warm-up and `iters` times timed; returns us per operation.
    template <typename Op>
    double timed(const Op& op, const char* what) {
        cudaEvent_t start, stop;
        CUDA_OK(cudaEventCreate(&start));
        CUDA_OK(cudaEventCreate(&stop));
        op();
        settle(what);
        CUDA_OK(cudaEventRecord(start, stream_));
        for (int i = 0; i < a_.iters; ++i) {
            op();
            settle(what);
        }
        CUDA_OK(cudaEventRecord(stop, stream_));
        waitEvent(stop, what);
        float ms = 0;
        CUDA_OK(cudaEventElapsedTime(&ms, start, stop));
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        return static_cast<double>(ms) * 1000.0 / a_.iters;
    }

    static std::string line(const char* op, const char* type, size_t size, bool ok, double us,
                            const std::string& detail) {
        char buf[512];
        std::snprintf(buf, sizeof(buf), "%s %s %zu %d %.3f %s", op, type, size, ok ? 1 : 0, us,
                      detail.empty() ? "-" : detail.c_str());
        return buf;
    }

    static uint8_t pattern(int rank, size_t i) {
        return static_cast<uint8_t>((i * 7 + static_cast<size_t>(rank) * 13 + 1) & 0xff);
    }

    std::string sendRecv(size_t size) {
        const int peer = 1 - rank_;
        std::vector<uint8_t> host(size);
        for (size_t i = 0; i < size; ++i) {
            host[i] = pattern(rank_, i);
        }
        void* sbuf = nullptr;
        void* rbuf = nullptr;
        CUDA_OK(cudaMalloc(&sbuf, size));
        CUDA_OK(cudaMalloc(&rbuf, size));
        CUDA_OK(cudaMemcpy(sbuf, host.data(), size, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(rbuf, 0, size));
        double us = timed(
            [&] {
                nccl(ncclGroupStart(), "ncclGroupStart");
                nccl(ncclSend(sbuf, size, ncclInt8, peer, comm_, stream_), "ncclSend");
                nccl(ncclRecv(rbuf, size, ncclInt8, peer, comm_, stream_), "ncclRecv");
                nccl(ncclGroupEnd(), "ncclGroupEnd");
            },
            "sendrecv");
        CUDA_OK(cudaMemcpy(host.data(), rbuf, size, cudaMemcpyDeviceToHost));
        size_t bad = size;
        for (size_t i = 0; i < size; ++i) {
            if (host[i] != pattern(peer, i)) {
                bad = i;
                break;
            }
        }
        cudaFree(sbuf);
        cudaFree(rbuf);
        return line("sendrecv", "int8", size, bad == size, us,
                    bad == size ? "" : "first-bad-byte=" + std::to_string(bad));
    }

    static uint16_t toBf16(float f) {
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        return static_cast<uint16_t>(bits >> 16);  // exact for the small integers used here
    }
    static float fromBf16(uint16_t h) {
        uint32_t bits = static_cast<uint32_t>(h) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    }

    // Inputs are small integers, so every sum is exact in every type.
    static double input(ncclDataType_t t, int rank, size_t i) {
        switch (t) {
            case ncclFloat32:
                return static_cast<double>(i % 13) + rank + 1;
            case ncclBfloat16:
                return static_cast<double>(i % 5) + rank;
            default:
                return static_cast<double>((i % 1000) * static_cast<size_t>(rank + 1));
        }
    }

    std::string allReduce(size_t size, ncclDataType_t type, const char* type_name) {
        const size_t esize = type == ncclBfloat16 ? 2 : 4;
        const size_t count = size / esize;
        if (count == 0) {
            return line("allreduce", type_name, size, true, 0, "skipped(<1_element)");
        }
        const size_t bytes = count * esize;
        std::vector<uint8_t> host(bytes);
        for (size_t i = 0; i < count; ++i) {
            double v = input(type, rank_, i);
            if (type == ncclFloat32) {
                float f = static_cast<float>(v);
                std::memcpy(&host[i * 4], &f, 4);
            } else if (type == ncclBfloat16) {
                uint16_t h = toBf16(static_cast<float>(v));
                std::memcpy(&host[i * 2], &h, 2);
            } else {
                int32_t x = static_cast<int32_t>(v);
                std::memcpy(&host[i * 4], &x, 4);
            }
        }
        void* sbuf = nullptr;
        void* rbuf = nullptr;
        CUDA_OK(cudaMalloc(&sbuf, bytes));
        CUDA_OK(cudaMalloc(&rbuf, bytes));
        CUDA_OK(cudaMemcpy(sbuf, host.data(), bytes, cudaMemcpyHostToDevice));
        // Out of place, so repeated runs compute the same result.
        double us = timed(
            [&] {
                nccl(ncclAllReduce(sbuf, rbuf, count, type, ncclSum, comm_, stream_),
                     "ncclAllReduce");
            },
            "allreduce");
        CUDA_OK(cudaMemcpy(host.data(), rbuf, bytes, cudaMemcpyDeviceToHost));
        size_t bad = count;
        double got_bad = 0;
        for (size_t i = 0; i < count && bad == count; ++i) {
            double want = input(type, 0, i) + input(type, 1, i);
            double got;
            if (type == ncclFloat32) {
                float f;
                std::memcpy(&f, &host[i * 4], 4);
                got = f;
            } else if (type == ncclBfloat16) {
                uint16_t h;
                std::memcpy(&h, &host[i * 2], 2);
                got = fromBf16(h);
            } else {
                int32_t x;
                std::memcpy(&x, &host[i * 4], 4);
                got = x;
            }
            if (got != want) {
                bad = i;
                got_bad = got;
            }
        }
        cudaFree(sbuf);
        cudaFree(rbuf);
        std::string detail;
        if (bad != count) {
            // No spaces: the parent reads results as whitespace-separated fields.
            detail = "element=" + std::to_string(bad) + ",got=" + std::to_string(got_bad) +
                     ",want=" + std::to_string(input(type, 0, bad) + input(type, 1, bad));
        }
        return line("allreduce", type_name, bytes, bad == count, us, detail);
    }

    const Args& a_;
    int rank_;
    SteadyClock::time_point deadline_;
    ncclComm_t comm_ = nullptr;
    cudaStream_t stream_ = nullptr;
};

void setDefault(const char* key, const std::string& value) {
    if (std::getenv(key) == nullptr) {
        setenv(key, value.c_str(), 1);
    }
}

// Child process body: environment, then the checks; results go to `fd` as lines.
int rankMain(const Args& a, int rank, int fd, SteadyClock::time_point deadline) {
    setenv("NCCL_COMM_ID", ("127.0.0.1:" + std::to_string(a.port)).c_str(), 1);
    setenv("NCCL_HOSTID", rank == 0 ? "hostA" : "hostB", 1);
    setenv("NCCL_NET_PLUGIN", a.plugin.c_str(), 1);
    setenv("NCCL_NET", "Atlas", 1);
    setenv("NCCL_NET_PLUGIN_REF_COUNT", "1", 1);
    setenv("NCCL_DEBUG", "INFO", 1);
    setenv("NCCL_DEBUG_SUBSYS", "INIT,NET,ENV", 1);
    setenv("NCCL_DEBUG_FILE", (a.logdir + "/nccl-rank" + std::to_string(rank) + ".log").c_str(), 1);
    setDefault("NCCL_SOCKET_IFNAME", "lo");
    setDefault("ATLAS_SOCKET_IFNAME", "lo");
    Rank r(a, rank, deadline);
    std::string out;
    int code = 0;
    try {
        for (const std::string& l : r.run()) {
            out += l + "\n";
        }
    } catch (const RankError& e) {
        r.abort();
        out += "error " + e.what + "\n";
        code = e.what.find("cudaSetDevice") != std::string::npos ? 2 : 1;
    }
    size_t off = 0;
    while (off < out.size()) {
        ssize_t w = write(fd, out.data() + off, out.size() - off);
        if (w <= 0) {
            break;
        }
        off += static_cast<size_t>(w);
    }
    return code;
}

// ---------------------------------------------------------------------------------------------
// Parent side

struct Child {
    pid_t pid = -1;
    int fd = -1;
    int status = -1;
    std::string output;
};

std::string readAllFd(int fd) {
    std::string s;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        s.append(buf, static_cast<size_t>(n));
    }
    return s;
}

std::string describe(int status) {
    if (WIFEXITED(status)) {
        return "exited " + std::to_string(WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        return std::string("killed by ") + strsignal(WTERMSIG(status));
    }
    return "?";
}

}  // namespace

int main(int argc, char** argv) {
    Args a = parseArgs(argc, argv);
    a.plugin = findPlugin(a.plugin);
    if (a.plugin.empty()) {
        usageExit("libnccl-net-atlas.so not found (use --plugin PATH or ATLAS_PLUGIN)");
    }
    if (a.port == 0) {
        a.port = freeLoopbackPort();
    }
    if (a.logdir.empty()) {
        char tmpl[] = "/tmp/atlas-nccl-check-XXXXXX";
        if (mkdtemp(tmpl) == nullptr) {
            usageExit("cannot create a log directory");
        }
        a.logdir = tmpl;
    } else {
        mkdir(a.logdir.c_str(), 0755);
    }
    for (int r = 0; r < 2; ++r) {
        std::remove((a.logdir + "/nccl-rank" + std::to_string(r) + ".log").c_str());
    }
    std::printf(
        "# atlas-nccl-check: 2 ranks (NCCL_HOSTID hostA/hostB) on GPU %d, NCCL_COMM_ID "
        "127.0.0.1:%d\n# plugin: %s\n# logs: %s\n",
        a.device, a.port, a.plugin.c_str(), a.logdir.c_str());
    std::fflush(stdout);

    const auto start = SteadyClock::now();
    const auto deadline = start + std::chrono::seconds(a.timeout_s);
    Child kids[2];
    for (int r = 0; r < 2; ++r) {
        int p[2];
        if (pipe(p) != 0) {
            usageExit("pipe failed");
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            _exit(rankMain(a, r, p[1], deadline));
        }
        close(p[1]);
        kids[r].pid = pid;
        kids[r].fd = p[0];
    }
    // Reap both; if one fails, give the other a short grace period, then kill it.
    auto grace_end = SteadyClock::time_point::max();
    int alive = 2;
    while (alive > 0) {
        for (Child& k : kids) {
            if (k.pid > 0 && waitpid(k.pid, &k.status, WNOHANG) == k.pid) {
                k.pid = -1;
                --alive;
                if (!(WIFEXITED(k.status) && WEXITSTATUS(k.status) == 0)) {
                    grace_end = std::min(grace_end, SteadyClock::now() + std::chrono::seconds(10));
                }
            }
        }
        const auto now = SteadyClock::now();
        if (alive > 0 && (now > deadline + std::chrono::seconds(15) || now > grace_end)) {
            for (Child& k : kids) {
                if (k.pid > 0) {
                    kill(k.pid, SIGKILL);
                    waitpid(k.pid, &k.status, 0);
                    k.pid = -1;
                    --alive;
                }
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (Child& k : kids) {
        k.output = readAllFd(k.fd);
        close(k.fd);
    }
    const double wall_s = std::chrono::duration<double>(SteadyClock::now() - start).count();

    // Merge: a row passes only if both ranks computed the right result.
    struct Result {
        std::string op, type;
        size_t size;
        bool ok;
        double us;
        std::string detail;
    };
    std::vector<Result> rows[2];
    std::string errors;
    bool no_gpu = false;
    for (int r = 0; r < 2; ++r) {
        std::stringstream ss(kids[r].output);
        std::string l;
        while (std::getline(ss, l)) {
            if (l.rfind("error ", 0) == 0) {
                errors += "  rank " + std::to_string(r) + ": " + l.substr(6) + "\n";
                no_gpu |= l.find("cudaSetDevice") != std::string::npos;
                continue;
            }
            std::stringstream ls(l);
            Result x;
            int ok = 0;
            ls >> x.op >> x.type >> x.size >> ok >> x.us >> x.detail;
            x.ok = ok != 0;
            rows[r].push_back(x);
        }
        if (!(WIFEXITED(kids[r].status) && WEXITSTATUS(kids[r].status) == 0)) {
            errors += "  rank " + std::to_string(r) + " " + describe(kids[r].status) + "\n";
        }
    }
    bool pass = errors.empty() && !rows[0].empty() && rows[0].size() == rows[1].size();
    std::printf("#\n# %-10s %-8s %12s %12s %12s  %s\n", "op", "type", "size_B", "time_us",
                "algbw_GB/s", "result");
    for (size_t i = 0; i < rows[0].size(); ++i) {
        const Result& x = rows[0][i];
        bool ok = x.ok && i < rows[1].size() && rows[1][i].ok;
        pass &= ok;
        std::string detail = x.detail != "-" ? x.detail : "";
        if (i < rows[1].size() && rows[1][i].detail != "-") {
            detail += " rank1:" + rows[1][i].detail;
        }
        double bw = x.us > 0 ? static_cast<double>(x.size) / (x.us * 1e3) : 0;
        std::printf("  %-10s %-8s %12zu %12.1f %12.3f  %s %s\n", x.op.c_str(), x.type.c_str(),
                    x.size, x.us, bw, ok ? "PASS" : "FAIL", detail.c_str());
    }
    // The traffic must really have gone through the plugin.
    const char* needles[] = {"Using network Atlas", "via NET/Atlas"};
    for (int r = 0; r < 2; ++r) {
        std::string log = a.logdir + "/nccl-rank" + std::to_string(r) + ".log";
        for (const char* n : needles) {
            bool found = fileContains(log, n);
            pass &= found;
            std::printf("# rank %d log: \"%s\": %s\n", r, n, found ? "found" : "MISSING");
        }
        std::printf("# rank %d log: plugin loaded as v11: %s\n", r,
                    fileContains(log, "Loaded net plugin Atlas (v11)") || fileContains(log, "(v11)")
                        ? "yes"
                        : "not seen");
    }
    if (!errors.empty()) {
        std::printf("# errors:\n%s", errors.c_str());
    }
    std::printf("# wall time %.1f s\n%s\n", wall_s, pass ? "PASS" : "FAIL");
    if (no_gpu) {
        return 2;
    }
    return pass ? 0 : 1;
}
