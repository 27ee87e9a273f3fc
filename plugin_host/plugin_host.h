// Drives libnccl-net-atlas.so from the outside, exactly as NCCL 2.28-2.31 do: dlopen(RTLD_NOW |
// RTLD_LOCAL), dlsym of the ncclNetPlugin_vN tables, and the non-blocking call contracts of
// docs/nccl-abi.md (connect/accept return NULL until ready, isend/irecv may return a NULL
// request for back-pressure, test() polls). Only the ABI headers in include/atlas/nccl are used;
// nothing from plugin/ or transport/ is linked.
//
// Users: the ABI tests (tests/abi), atlas-net-perf and atlas-pipeline-bench. This library has
// no GoogleTest dependency; tests/abi/isolate.h holds the gtest glue. Sources: plugin_host.cc
// (loading, version adapters, errors, logging), plugin_host_data.cc (buffers, Endpoint, comm setup,
// data movement), plugin_host_process.cc (fd I/O, child processes, environment, resources).
//
// Threads: nothing here starts threads. A NetApi may be shared by threads as far as the plugin
// allows (NCCL calls it from several threads); the helpers that take a comm must be used by one
// thread at a time per comm, like NCCL does.
//
// Time: every wait takes a Deadline (CLOCK_MONOTONIC). Polling loops call test() without
// sleeping for a short burst and then back off in 50 us steps, because the plugin's engine
// threads share the CPUs with the polling thread (2-core CI machines).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "atlas/common/clock.h"
#include "atlas/common/status.h"
#include "atlas/nccl/net.h"

namespace atlas::abi {

// ---------------------------------------------------------------------------------------------
// Time

// A point in CLOCK_MONOTONIC time after which waits give up with Code::kTimeout.
class Deadline {
  public:
    explicit Deadline(Nanos budget_ns) : end_ns_(monotonicNowNs() + budget_ns) {}
    static Deadline afterMs(int64_t ms) { return Deadline(ms * kNsPerMs); }
    bool expired() const { return monotonicNowNs() >= end_ns_; }
    Nanos remainingNs() const;
    // Remaining time for poll(2): at least 0, at most INT32_MAX ms.
    int remainingMsForPoll() const;

  private:
    Nanos end_ns_;
};

// One step of a polling loop: spins for the first calls, then sleeps 50 us per call, so a
// long wait does not starve the plugin's own threads. Not a synchronisation primitive.
class Backoff {
  public:
    void idle();
    void reset() { idle_calls_ = 0; }

  private:
    int idle_calls_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Errors

// ncclResult_t -> Status. ncclSuccess -> OK; the others keep the numeric code in the message
// and map onto the Atlas codes (kSystem, kInternal, kInvalidArgument, kInvalidUsage, kRemote).
Status ncclStatus(ncclResult_t rc, const std::string& what);
// The ncclResult_t a non-OK Status came from, or -1 when it did not come from the plugin
// (e.g. a harness timeout).
int ncclCodeOf(const Status& status);
const char* ncclResultName(int rc);

// ---------------------------------------------------------------------------------------------
// Logging: the ncclDebugLogger_t handed to init(). Thread-safe; captured lines can be searched
// by tests ("init failed with a clear message"). WARN lines are echoed to stderr by default.

extern "C" void captureLogger(ncclDebugLogLevel level, unsigned long flags, const char* file,
                              int line, const char* fmt, ...) __attribute__((format(printf, 5, 6)));

class LogCapture {
  public:
    static std::vector<std::string> lines();
    // Case-insensitive substring search over every captured line.
    static bool contains(const std::string& needle);
    static void clear();
    // Whether lines are stored (echo is unaffected); off in leak checks, where a chatty
    // plugin would otherwise look like growth.
    static void setKeep(bool keep);
    // Lines at or below this level are echoed to stderr (NCCL_LOG_WARN by default,
    // ATLAS_ABI_LOG=info|trace raises it).
    static void setEchoLevel(int level);
};

// ---------------------------------------------------------------------------------------------
// Loading

// One dlopen() of the plugin. Destruction dlcloses.
class PluginLibrary {
  public:
    static Result<std::unique_ptr<PluginLibrary>> open(const std::string& path);
    ~PluginLibrary();
    PluginLibrary(const PluginLibrary&) = delete;
    PluginLibrary& operator=(const PluginLibrary&) = delete;

    // dlclose now; reports dlerror(). Tables must not be used afterwards.
    Status close();

    const std::string& path() const { return path_; }
    void* symbol(const char* name) const;
    // NULL when the symbol is not exported.
    const ncclNet_v8_t* v8() const;
    const ncclNet_v9_t* v9() const;
    const ncclNet_v10_t* v10() const;
    const ncclNet_v11_t* v11() const;
    const ncclNet_v12_t* v12() const;

  private:
    PluginLibrary(std::string path, void* handle) : path_(std::move(path)), handle_(handle) {}
    std::string path_;
    void* handle_;
};

// The plugin path for tests and tools: $ATLAS_ABI_PLUGIN when set, else `fallback`.
std::string pluginPathFromEnv(const std::string& fallback);

// ---------------------------------------------------------------------------------------------
// A version-agnostic view of one ncclNet table (v8..v12), so one test suite runs on all of
// them. Pre-v11 versions have no context: init ignores `ctx`, finalize is a no-op. Sizes that do
// not fit the version's types (v8: int) fail with ncclInvalidArgument without calling the plugin.

struct NetProps {
    std::string name;
    std::string pci_path;  // empty when the plugin reports NULL (virtual NIC)
    bool pci_path_null = true;
    uint64_t guid = 0;
    int ptr_support = 0;
    int reg_is_global = 0;
    int force_flush = -1;  // -1: the version has no such field (v8)
    int speed_mbps = 0;
    int port = 0;
    float latency_us = 0;
    int max_comms = 0;
    int max_recvs = 0;
    int device_type = -1;
    int device_version = -1;
    int vprops_ndevs = -1;    // -1: not in this version
    int vprops_capacity = 0;  // size of the version's vProps.devs (4 up to v11, 8 in v12)
    int vprops_devs[NCCL_NET_MAX_DEVS_PER_NIC_V12] = {};
    size_t max_p2p_bytes = 0;         // 0: not in this version
    size_t max_coll_bytes = 0;        // 0: not in this version
    int max_multi_request_size = -1;  // -1: not in this version (v11+)
    int rail_id = -2;                 // -2: not in this version (v12 only)
    int plane_id = -2;                // -2: not in this version (v12 only)
};

// What init() passes NCCL-style: the profiler callback NCCL hands every v10+ plugin (a stub
// that records nothing by default) and the communicator's trafficClass (v10 connect, v11+
// init). Tests install a recording callback to see the plugin's events.
struct InitOptions {
    ncclProfilerCallback_t profiler = nullptr;  // nullptr: the harness's no-op stub
    int traffic_class = NCCL_NET_TRAFFIC_CLASS_UNDEF;
};

class NetApi {
  public:
    virtual ~NetApi() = default;
    virtual int version() const = 0;
    virtual const char* name() const = 0;
    // Mandatory function pointers that are NULL, e.g. {"isend"}; empty when complete.
    virtual std::vector<std::string> missingMandatory() const = 0;

    ncclResult_t init(void** ctx, ncclDebugLogger_t logger) { return init(ctx, logger, {}); }
    virtual ncclResult_t init(void** ctx, ncclDebugLogger_t logger, const InitOptions& opts) = 0;
    // v11+: NCCL's hints on ctx (the v12 struct; v11 has the same layout). Earlier tables
    // have no setNetAttr: ncclInternalError without calling the plugin. A table whose
    // setNetAttr is NULL: ncclSuccess, as NCCL skips the call.
    virtual ncclResult_t setNetAttr(void* ctx, const ncclNetAttr_v12_t& attr) = 0;
    virtual bool hasSetNetAttr() const = 0;
    virtual ncclResult_t finalize(void* ctx) = 0;
    virtual ncclResult_t devices(int* ndev) = 0;
    virtual ncclResult_t getProperties(int dev, NetProps* props) = 0;
    virtual ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) = 0;
    virtual ncclResult_t connect(void* ctx, int dev, void* handle, void** send_comm) = 0;
    virtual ncclResult_t accept(void* listen_comm, void** recv_comm) = 0;
    virtual ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
    virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
    // phandle: the profiler parent NCCL passes (v10+; ignored by older tables).
    virtual ncclResult_t isend(void* send_comm, void* data, size_t size, int tag, void* mhandle,
                               void** request, void* phandle = nullptr) = 0;
    // One buffer (n = 1). *request is passed through unchanged, so callers can preset the
    // NCCL_NET_OPTIONAL_RECV_COMPLETION sentinel (v9+).
    virtual ncclResult_t irecv(void* recv_comm, void* data, size_t capacity, int tag, void* mhandle,
                               void** request, void* phandle = nullptr) = 0;
    virtual ncclResult_t test(void* request, int* done, int* size) = 0;
    virtual ncclResult_t closeSend(void* send_comm) = 0;
    virtual ncclResult_t closeRecv(void* recv_comm) = 0;
    virtual ncclResult_t closeListen(void* listen_comm) = 0;
};

// NULL when `lib` does not export that version. The NetApi borrows `lib`.
std::unique_ptr<NetApi> makeNetApi(const PluginLibrary& lib, int version);

// ---------------------------------------------------------------------------------------------
// Memory

// Anonymous private mapping (MAP_NORESERVE), at least one page even for size 0, so 1 GiB
// buffers cost nothing until touched. Move-only; unmapped on destruction.
class MappedBuffer {
  public:
    static Result<MappedBuffer> create(size_t size);
    MappedBuffer() = default;
    MappedBuffer(MappedBuffer&& other) noexcept;
    MappedBuffer& operator=(MappedBuffer&& other) noexcept;
    ~MappedBuffer();
    uint8_t* data() const { return data_; }
    size_t size() const { return size_; }
    void reset();

  private:
    uint8_t* data_ = nullptr;
    size_t size_ = 0;
    size_t mapped_ = 0;
};

// Position-dependent pattern: byte i of (seed) differs from byte i of (seed') and from byte
// i+k of (seed) for practical purposes, so misplaced, shifted or stale bytes are caught.
void fillPattern(void* data, size_t size, uint64_t seed);
// Byte i of the pattern for `seed`.
uint8_t patternByteAt(uint64_t seed, size_t i);
// Offset of the first byte that differs from the pattern, or `size` when all match.
size_t findPatternMismatch(const void* data, size_t size, uint64_t seed);
// "mismatch at offset N (got 0x.., want 0x..)" or "" when the pattern matches.
std::string describePatternMismatch(const void* data, size_t size, uint64_t seed);

// ---------------------------------------------------------------------------------------------
// Comm setup and data movement

// The plugin loaded, initialised, with at least one device: what one NCCL rank holds.
class Endpoint {
  public:
    // dlopen + version table + init(ctx) + devices() > 0. The default is the table NCCL
    // 2.30+ uses.
    static Result<std::unique_ptr<Endpoint>> open(const std::string& path, int version = 12,
                                                  const InitOptions& opts = {});
    // finalize(ctx) (v11) and dlclose. Comms must be closed before.
    ~Endpoint();
    // finalize(ctx) once (v11; a no-op before), keeping the library loaded.
    Status finalize();
    Status finalizeAndClose();

    NetApi& net() { return *net_; }
    PluginLibrary& library() { return *lib_; }
    void* ctx() const { return ctx_; }
    int ndev() const { return ndev_; }

  private:
    Endpoint() = default;
    std::unique_ptr<PluginLibrary> lib_;
    std::unique_ptr<NetApi> net_;
    void* ctx_ = nullptr;
    int ndev_ = 0;
    bool finalized_ = false;
};

using Handle = std::array<uint8_t, NCCL_NET_HANDLE_MAXSIZE>;

struct CommPair {
    void* listen_comm = nullptr;
    void* send_comm = nullptr;
    void* recv_comm = nullptr;
};

// listen on dev, then alternate connect/accept in this thread until both comms exist (the
// same-thread loop NCCL's GDR probe uses).
Status connectInProcess(NetApi& net, void* ctx, int dev, CommPair* out, const Deadline& deadline);
// Like connectInProcess for a listen comm that already exists (pair->listen_comm) and its
// handle: alternates connect/accept until both comms exist.
Status connectAcceptInProcess(NetApi& net, void* ctx, int dev, Handle* handle, CommPair* pair,
                              const Deadline& deadline);
// Closes whatever is non-NULL in `pair` and clears it; returns the first error.
Status closePair(NetApi& net, CommPair* pair);

// Two-process building blocks: the receiver listens and writes the handle to `fd`; the sender
// reads it from `fd` and loops on connect; the receiver loops on accept.
Status listenAndPublish(NetApi& net, void* ctx, int dev, int fd, void** listen_comm,
                        const Deadline& deadline);
Status readHandleAndConnect(NetApi& net, void* ctx, int dev, int fd, void** send_comm,
                            const Deadline& deadline);
Status connectLoop(NetApi& net, void* ctx, int dev, Handle* handle, void** send_comm,
                   const Deadline& deadline);
Status acceptLoop(NetApi& net, void* listen_comm, void** recv_comm, const Deadline& deadline);

// regMr(NCCL_PTR_HOST) / deregMr pair.
class Registration {
  public:
    static Result<Registration> create(NetApi& net, void* comm, void* data, size_t size);
    Registration() = default;
    Registration(Registration&& other) noexcept;
    Registration& operator=(Registration&& other) noexcept;
    ~Registration();
    void* mhandle() const { return mhandle_; }
    Status release();

  private:
    NetApi* net_ = nullptr;
    void* comm_ = nullptr;
    void* mhandle_ = nullptr;
};

// isend/irecv, retrying while the plugin answers *request == NULL (back-pressure).
// `preset` is stored into *request before every irecv call (NCCL stores 0x1 there for
// optional receive completion).
Result<void*> postSend(NetApi& net, void* send_comm, const void* data, size_t size, void* mhandle,
                       const Deadline& deadline, int tag = 0);
Result<void*> postRecv(NetApi& net, void* recv_comm, void* data, size_t capacity, void* mhandle,
                       const Deadline& deadline, int tag = 0, void* preset = nullptr);

// Polls test() until done; returns the reported size. `want_size` = false passes sizes=NULL
// (and then returns 0).
Result<size_t> waitDone(NetApi& net, void* request, const Deadline& deadline,
                        bool want_size = true);

// Registers both buffers, posts the receive then the send, polls both until done (single
// thread), deregisters. Returns the size the receiver reported; also checks the sender's
// reported size equals `size`.
Result<size_t> transferInProcess(NetApi& net, const CommPair& pair, const void* src, size_t size,
                                 void* dst, size_t capacity, const Deadline& deadline);

// ---------------------------------------------------------------------------------------------
// Processes, file descriptors, environment

// Blocking-with-deadline I/O on a stream fd (pipe, socketpair, TCP).
Status writeAll(int fd, const void* data, size_t size, const Deadline& deadline);
Status readAll(int fd, void* data, size_t size, const Deadline& deadline);
// One-byte messages for lock-step protocols between test processes.
Status sendByte(int fd, uint8_t value, const Deadline& deadline);
Result<uint8_t> recvByte(int fd, const Deadline& deadline);

// A forked child connected to the parent by a socketpair. The child runs body(fd) and
// _exit()s with its return value (stdio flushed first). Destruction SIGKILLs and reaps a child
// that is still running, so a failing test never leaves processes behind.
class ChildProcess {
  public:
    static Result<ChildProcess> spawn(const std::function<int(int fd)>& body);
    ChildProcess() = default;
    ChildProcess(ChildProcess&& other) noexcept;
    ChildProcess& operator=(ChildProcess&& other) noexcept;
    ~ChildProcess();

    pid_t pid() const { return pid_; }
    int fd() const { return fd_; }
    bool running() const { return pid_ > 0; }
    // Waits for exit (pidfd + poll). Returns the raw wait status; on timeout the child is
    // SIGKILLed, reaped, and kTimeout is returned.
    Result<int> wait(const Deadline& deadline);
    void kill(int sig);

  private:
    pid_t pid_ = -1;
    int fd_ = -1;
    int pidfd_ = -1;
};

// "exited with 3", "killed by signal 11 (Segmentation fault)".
std::string describeWaitStatus(int status);

// setenv in this process for the object's lifetime; restores the old values.
class ScopedEnv {
  public:
    ScopedEnv() = default;
    explicit ScopedEnv(const std::vector<std::pair<std::string, std::string>>& vars);
    ~ScopedEnv();
    ScopedEnv(const ScopedEnv&) = delete;
    ScopedEnv& operator=(const ScopedEnv&) = delete;
    void set(const std::string& key, const std::string& value);
    void unset(const std::string& key);

  private:
    std::vector<std::pair<std::string, std::pair<bool, std::string>>> saved_;
};

// What a leak shows up as: resident pages, open fds, threads of this process.
struct ProcessResources {
    long rss_pages = 0;
    int fds = 0;
    int threads = 0;
};
ProcessResources sampleResources();

// TCP ports this process listens on (from /proc/net/tcp{,6} and /proc/self/fd), sorted.
std::vector<uint16_t> listeningPortsOfThisProcess();

// Whether io_uring_setup(2) works here (not disabled by sysctl/seccomp/kernel config).
bool kernelHasIoUring();

}  // namespace atlas::abi
