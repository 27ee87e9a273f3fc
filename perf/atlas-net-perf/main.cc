// atlas-net-perf: two processes load libnccl-net-atlas.so through dlopen and drive its v11
// table as NCCL would, measuring bandwidth (windowed isend/irecv) or latency (ping-pong), with
// a plain-TCP baseline and per-configuration comparisons. See docs/net-perf.md.
//
// Processes: `local` forks a server and a client per configuration (fresh processes, so the
// plugin parses that configuration's env at init) and collects the client's rows over a
// socketpair; `server`/`client` run one side each and meet on a TCP bootstrap address.
// Exit status: 0 success, 1 a run failed, 2 bad usage, 130 interrupted.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "options/env.h"
#include "perf/atlas-net-perf/bench.h"
#include "perf/atlas-net-perf/report.h"

namespace atlas::netperf {
namespace {

// Shared with the signal handler; lock-free atomics are async-signal-safe.
std::atomic<bool> g_interrupted{false};
std::atomic<pid_t> g_children[2] = {-1, -1};
static_assert(std::atomic<pid_t>::is_always_lock_free);

extern "C" void onSignal(int) {
    g_interrupted.store(true, std::memory_order_relaxed);
    for (const std::atomic<pid_t>& child : g_children) {
        pid_t pid = child.load(std::memory_order_relaxed);
        if (pid > 0) {
            kill(pid, SIGKILL);
        }
    }
}

void installSignalHandlers() {
    struct sigaction sa {};
    sa.sa_handler = onSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
}

std::string executableDir() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (n <= 0) {
        return ".";
    }
    buf[n] = '\0';
    std::string p(buf);
    size_t slash = p.rfind('/');
    return slash == std::string::npos ? "." : p.substr(0, slash);
}

// --plugin (or $ATLAS_PLUGIN, read by the options table), then the build tree's .so relative
// to this executable (<build>/perf/atlas-net-perf/atlas-net-perf -> <build>/plugin/...).
std::string resolvePlugin(const Options& o) {
    if (!o.plugin.empty()) {
        return o.plugin;
    }
    std::string rel = executableDir() + "/../../plugin/libnccl-net-atlas.so";
    char real[PATH_MAX];
    if (realpath(rel.c_str(), real) != nullptr) {
        return real;
    }
    return rel;
}

// The server learns the kind from the client's plan, so it checks the plugin only then.
bool needsPlugin(const Options& o) {
    if (o.role == Role::kServer) {
        return false;
    }
    if (o.role == Role::kClient || o.configs.empty()) {
        return o.plan.kind == Kind::kPlugin;
    }
    for (const ConfigSpec& c : o.configs) {
        if (c.kind == Kind::kPlugin) {
            return true;
        }
    }
    return false;
}

Status enterNetns(const std::string& name) {
    if (name.empty()) {
        return Status::ok();
    }
    std::string path = "/run/netns/" + name;
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return Status::fromErrno("open " + path, errno);
    }
    int rc = setns(fd, CLONE_NEWNET);
    int err = errno;
    close(fd);
    if (rc != 0) {
        return Status::fromErrno("setns " + path, err);
    }
    return Status::ok();
}

// Runs inside a fresh child before anything loads the plugin.
Status prepareChild(const Options& o, const ConfigSpec& cfg, const std::string& netns) {
    ATLAS_RETURN_IF_ERROR(enterNetns(netns));
    // Two local processes without namespaces talk over loopback unless told otherwise.
    if (o.server_netns.empty() && o.client_netns.empty() &&
        std::getenv("ATLAS_SOCKET_IFNAME") == nullptr) {
        setenv("ATLAS_SOCKET_IFNAME", "lo", 1);
    }
    for (const auto& [k, v] : cfg.env) {
        setenv(k.c_str(), v.c_str(), 1);
    }
    return Status::ok();
}

std::string localRawHost(const Options& o) {
    if (!o.raw_host.empty()) {
        return o.raw_host;
    }
    if (o.server_netns.empty()) {
        return "127.0.0.1";
    }
    const char* ifn = std::getenv("ATLAS_SOCKET_IFNAME");
    return interfaceAddress(ifn != nullptr ? ifn : "");
}

// One configuration in fresh server and client processes; returns the client's rows.
Result<std::vector<Row>> runLocalPair(const Options& o, const Plan& plan, const ConfigSpec& cfg,
                                      const std::string& plugin) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        return Status::fromErrno("socketpair", errno);
    }
    const Deadline deadline(static_cast<Nanos>(o.timeout_s) * kNsPerSec);
    Result<abi::ChildProcess> server = abi::ChildProcess::spawn([&](int) {
        close(sv[0]);
        Status st = prepareChild(o, cfg, o.server_netns);
        Channel chan(sv[1]);
        if (st.isOk()) {
            std::string raw_host = localRawHost(o);
            if (plan.kind == Kind::kRawTcp && raw_host.empty()) {
                st = Status(Code::kInvalidArgument,
                            "no IPv4 address for ATLAS_SOCKET_IFNAME in the server namespace; "
                            "pass --raw-host");
            } else {
                st = runServer(chan, RoleConfig{plugin, raw_host, deadline});
            }
        } else {
            chan.sendError("server: " + st.toString());
        }
        if (!st.isOk()) {
            std::fprintf(stderr, "atlas-net-perf: [%s] server: %s\n", cfg.name.c_str(),
                         st.toString().c_str());
        }
        return st.isOk() ? 0 : 1;
    });
    if (!server.isOk()) {
        close(sv[0]);
        close(sv[1]);
        return server.status();
    }
    g_children[0].store(server->pid(), std::memory_order_relaxed);
    Result<abi::ChildProcess> client = abi::ChildProcess::spawn([&](int result_fd) {
        close(sv[1]);
        Channel chan(sv[0]);
        Status st = prepareChild(o, cfg, o.client_netns);
        std::string text;
        if (st.isOk()) {
            Result<std::vector<Row>> rows = runClient(chan, plan, RoleConfig{plugin, "", deadline});
            st = rows.status();
            text = st.isOk() ? rowsToJson(*rows) : errorToJson(st.toString());
        } else {
            chan.sendError("client: " + st.toString());
            text = errorToJson(st.toString());
        }
        // The parent gets the rows, or the error text for the table and the JSON.
        uint64_t len = text.size();
        Status sent = abi::writeAll(result_fd, &len, sizeof(len), deadline);
        if (sent.isOk()) {
            sent = abi::writeAll(result_fd, text.data(), text.size(), deadline);
        }
        if (!st.isOk()) {
            std::fprintf(stderr, "atlas-net-perf: [%s] client: %s\n", cfg.name.c_str(),
                         st.toString().c_str());
        }
        return st.isOk() ? 0 : 1;
    });
    close(sv[0]);
    close(sv[1]);
    if (!client.isOk()) {
        return client.status();
    }
    g_children[1].store(client->pid(), std::memory_order_relaxed);

    Result<std::vector<Row>> rows = Status(Code::kInternal, "no results");
    uint64_t len = 0;
    Status st = abi::readAll(client->fd(), &len, sizeof(len), deadline);
    if (st.isOk() && len > (64u << 20)) {
        st = Status(Code::kInternal, "implausible result size");
    }
    std::string text(st.isOk() ? len : 0, '\0');
    if (st.isOk()) {
        st = abi::readAll(client->fd(), text.data(), text.size(), deadline);
    }
    bool client_error = false;
    if (st.isOk()) {
        rows = rowsFromJson(text);
        client_error = !rows.isOk() && rows.status().code() == Code::kRemote;
    }
    // Reap both; a child still running past the deadline is killed.
    const Deadline grace(std::max<Nanos>(deadline.remainingNs(), 5 * kNsPerSec));
    Result<int> cs = client->wait(grace);
    Result<int> ss = server->wait(grace);
    g_children[0].store(-1, std::memory_order_relaxed);
    g_children[1].store(-1, std::memory_order_relaxed);
    if (g_interrupted.load(std::memory_order_relaxed)) {
        return Status(Code::kInternal, "interrupted");
    }
    auto failed = [](const Result<int>& w) {
        return !w.isOk() || !WIFEXITED(w.value()) || WEXITSTATUS(w.value()) != 0;
    };
    if (client_error) {
        return Status(Code::kRemote, "client: " + rows.status().message());
    }
    if (failed(cs) || failed(ss)) {
        std::string what;
        if (failed(cs)) {
            what += "client " + (cs.isOk() ? abi::describeWaitStatus(*cs) : cs.status().toString());
        }
        if (failed(ss)) {
            what += std::string(what.empty() ? "" : "; ") + "server " +
                    (ss.isOk() ? abi::describeWaitStatus(*ss) : ss.status().toString());
        }
        return Status(Code::kInternal, what + " (see the messages above)");
    }
    if (!rows.isOk() && st.code() == Code::kTimeout) {
        return Status(Code::kTimeout,
                      "no results within --timeout " + std::to_string(o.timeout_s) + " s");
    }
    return rows;
}

void writeJson(const Options& o, const RunInfo& info, const std::vector<ConfigResult>& results) {
    if (o.json_path.empty()) {
        return;
    }
    std::ofstream out(o.json_path);
    out << resultsJson(info, results).dump(2) << "\n";
    if (!out) {
        std::fprintf(stderr, "atlas-net-perf: cannot write %s\n", o.json_path.c_str());
    }
}

int runLocal(const Options& o, const std::string& plugin) {
    installSignalHandlers();
    std::vector<ConfigSpec> configs = o.configs;
    if (configs.empty()) {
        ConfigSpec c;
        c.name = o.plan.kind == Kind::kRawTcp ? "raw-tcp" : "atlas";
        c.kind = o.plan.kind;
        c.raw_streams = o.plan.raw_streams;
        configs.push_back(c);
    }
    RunInfo info{"local", o.plan, plugin, o.baseline.empty() ? configs.front().name : o.baseline};
    std::vector<ConfigResult> results;
    bool all_ok = true;
    for (const ConfigSpec& cfg : configs) {
        Plan plan = o.plan;
        plan.kind = cfg.kind;
        plan.raw_streams = cfg.raw_streams;
        if (!o.quiet) {
            std::fprintf(stderr, "atlas-net-perf: running config '%s'\n", cfg.name.c_str());
        }
        Result<std::vector<Row>> rows = runLocalPair(o, plan, cfg, plugin);
        ConfigResult r{cfg, {}, ""};
        if (rows.isOk()) {
            r.rows = *rows;
        } else {
            r.error = rows.status().toString();
            all_ok = false;
        }
        results.push_back(r);
        if (g_interrupted.load(std::memory_order_relaxed)) {
            std::fprintf(stderr, "atlas-net-perf: interrupted; children killed and reaped\n");
            return 130;
        }
    }
    printTable(stdout, info, results);
    writeJson(o, info, results);
    return all_ok ? 0 : 1;
}

int runServerMode(const Options& o, const std::string& plugin) {
    Result<std::pair<std::string, uint16_t>> hp = parseHostPort(o.bootstrap);
    const Deadline deadline(static_cast<Nanos>(o.timeout_s) * kNsPerSec);
    Result<int> lfd = tcpListen(hp->first, hp->second, 1);
    if (!lfd.isOk()) {
        std::fprintf(stderr, "atlas-net-perf: server: %s\n", lfd.status().toString().c_str());
        return 1;
    }
    if (!o.quiet) {
        std::fprintf(stderr, "atlas-net-perf: server waiting for a client on %s (timeout %d s)\n",
                     o.bootstrap.c_str(), o.timeout_s);
    }
    Result<int> fd = tcpAccept(*lfd, deadline);
    close(*lfd);
    if (!fd.isOk()) {
        std::fprintf(stderr, "atlas-net-perf: server: %s\n", fd.status().toString().c_str());
        return 1;
    }
    Channel chan(*fd);
    Status st = runServer(chan, RoleConfig{plugin, o.raw_host, deadline});
    if (!st.isOk()) {
        std::fprintf(stderr, "atlas-net-perf: server: %s\n", st.toString().c_str());
        return 1;
    }
    if (!o.quiet) {
        std::fprintf(stderr, "atlas-net-perf: server done\n");
    }
    return 0;
}

int runClientMode(const Options& o, const std::string& plugin) {
    Result<std::pair<std::string, uint16_t>> hp = parseHostPort(o.bootstrap);
    const Deadline deadline(static_cast<Nanos>(o.timeout_s) * kNsPerSec);
    Result<int> fd = tcpConnect(hp->first, hp->second, deadline);
    if (!fd.isOk()) {
        std::fprintf(stderr, "atlas-net-perf: client: %s\n", fd.status().toString().c_str());
        return 1;
    }
    Channel chan(*fd);
    Result<std::vector<Row>> rows = runClient(chan, o.plan, RoleConfig{plugin, "", deadline});
    ConfigSpec spec;
    spec.name = o.plan.kind == Kind::kRawTcp ? "raw-tcp" : "atlas";
    spec.kind = o.plan.kind;
    spec.raw_streams = o.plan.raw_streams;
    ConfigResult r{spec, {}, ""};
    if (rows.isOk()) {
        r.rows = *rows;
    } else {
        r.error = rows.status().toString();
        std::fprintf(stderr, "atlas-net-perf: client: %s\n", r.error.c_str());
    }
    RunInfo info{"client", o.plan, plugin, spec.name};
    printTable(stdout, info, {r});
    writeJson(o, info, {r});
    return rows.isOk() ? 0 : 1;
}

}  // namespace
}  // namespace atlas::netperf

int main(int argc, char** argv) {
    using namespace atlas::netperf;
    // Every socket write uses MSG_NOSIGNAL, but a peer dying must never kill this process.
    signal(SIGPIPE, SIG_IGN);
    std::vector<std::string> args(argv + 1, argv + argc);
    atlas::options::warnUnknownEnv("atlas-net-perf");
    atlas::Result<Options> opts = parseOptions(args, atlas::processEnv());
    if (!opts.isOk()) {
        std::fprintf(stderr, "atlas-net-perf: %s\n(see atlas-net-perf --help)\n",
                     opts.status().message().c_str());
        return 2;
    }
    if (opts->help) {
        std::fputs(usage().c_str(), stdout);
        return 0;
    }
    const std::string plugin = resolvePlugin(*opts);
    if (needsPlugin(*opts) && access(plugin.c_str(), R_OK) != 0) {
        std::fprintf(stderr,
                     "atlas-net-perf: plugin not found at %s (use --plugin PATH or ATLAS_PLUGIN)\n",
                     plugin.c_str());
        return 2;
    }
    switch (opts->role) {
        case Role::kLocal:
            return runLocal(*opts, plugin);
        case Role::kServer:
            return runServerMode(*opts, plugin);
        case Role::kClient:
            return runClientMode(*opts, plugin);
    }
    return 2;
}
