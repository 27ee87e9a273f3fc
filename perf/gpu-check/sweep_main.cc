// atlas-nccl-sweep: nccl-tests-style sweeps of NCCL collectives through Atlas and through
// NCCL's socket transport, two ranks on one GPU (docs/gpu-check.md, "atlas-nccl-sweep").
//
// The parent never touches CUDA or NCCL (neither survives fork). Per net it forks two rank
// processes (each joins its network namespace and sets its NCCL environment before its first
// CUDA or NCCL call), then drives both in lock step over socketpairs (sweep_rank.h): warm-up,
// then size by size, op by op, a checked run and the timed runs. Driving both from here is
// also the barrier nccl-tests has between points, and lets one place decide the iteration
// count and the time budget for both ranks. Every wait has a deadline; stragglers are killed.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "atlas/common/clock.h"
#include "options/value.h"
#include "perf/gpu-check/gpu_check_util.h"
#include "perf/gpu-check/sweep_options.h"
#include "perf/gpu-check/sweep_rank.h"
#include "perf/gpu-check/sweep_report.h"

namespace atlas::gpucheck {
namespace {

constexpr int kRanks = 2;

struct LogCheck {
    int rank = 0;
    std::string line;
    bool found = false;
};

struct NetOutcome {
    NetSpec net;
    std::vector<std::string> descriptions;  // per rank, from "ready"
    std::vector<PointResult> points;
    std::vector<std::pair<Op, size_t>> skipped;  // over the budget
    std::vector<LogCheck> log_checks;
    std::string error;          // a rank failed: the first message
    bool setup_failed = false;  // no GPU / no NCCL
    double wall_s = 0;
};

Status joinNetns(const std::string& ns) {
    const std::string path = ns.find('/') == std::string::npos ? "/run/netns/" + ns : ns;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return Status::fromErrno("open " + path, errno, Code::kUnavailable);
    }
    const int rc = ::setns(fd, CLONE_NEWNET);
    const int err = errno;
    ::close(fd);
    return rc == 0 ? Status::ok() : Status::fromErrno("setns " + path + " (needs root)", err);
}

// Child: namespace, environment, backend, command loop. Never returns.
[[noreturn]] void rankProcess(const SweepOptions& o, const NetSpec& net, int rank, int port,
                              const std::string& plugin, const std::string& log, int fd) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (!o.netns.empty()) {
        Status st = joinNetns(o.netns[static_cast<size_t>(rank)]);
        if (!st.isOk()) {
            (void)writeLine(fd, "error rank " + std::to_string(rank) + ": " + st.toString());
            ::_exit(2);
        }
    }
    const RankEnv env = rankEnvironment(o, net, rank, port, plugin, log);
    for (const std::string& k : env.unset) {
        ::unsetenv(k.c_str());
    }
    for (const auto& [k, v] : env.set) {
        ::setenv(k.c_str(), v.c_str(), 1);
    }
    RankConfig cfg;
    cfg.rank = rank;
    cfg.nranks = kRanks;
    cfg.device = o.device;
    cfg.max_bytes = o.max_bytes;
    cfg.timeout_s = o.timeout_s;
    cfg.nccl_lib = o.nccl_lib;
    cfg.sim_link = o.sim_link;
    cfg.sim_corrupt = o.sim_corrupt;
    std::unique_ptr<RankBackend> backend;
    if (o.simulate) {
        backend = makeSimBackend(cfg);
    } else {
        auto b = makeNcclBackend(cfg);
        if (!b) {
            (void)writeLine(fd,
                            "error rank " + std::to_string(rank) + ": " + b.status().toString());
            ::_exit(2);
        }
        backend = std::move(b.value());
    }
    const int code = rankMain(cfg, *backend, fd);
    backend.reset();
    std::fflush(nullptr);
    ::_exit(code);
}

class NetRun {
  public:
    NetRun(const SweepOptions& o, const NetSpec& net, std::vector<size_t> sizes, std::string plugin,
           std::string logdir)
        : o_(o), sizes_(std::move(sizes)), plugin_(std::move(plugin)), logdir_(std::move(logdir)) {
        out_.net = net;
    }
    ~NetRun() { killAll(); }

    NetOutcome run() {
        const int64_t t0 = monotonicNowNs();
        deadline_ns_ = t0 + static_cast<int64_t>(o_.timeout_s) * kNsPerSec;
        wall0_ns_ = t0;
        Status st = sweep();
        if (!st.isOk() && out_.error.empty()) {
            out_.error = st.toString();
        }
        killAll();
        checkLogs();
        out_.wall_s = static_cast<double>(monotonicNowNs() - t0) / 1e9;
        return out_;
    }

  private:
    struct Rank {
        pid_t pid = -1;
        int fd = -1;
        std::string buffer;
    };

    std::string logPath(int r) const { return ncclLogPath(logdir_, out_.net, r); }

    // Seconds since the net started; with --simulate also the time the ranks reported, since
    // simulated ranks do not wait.
    double elapsed() const {
        return static_cast<double>(monotonicNowNs() - wall0_ns_) / 1e9 + virtual_s_;
    }

    Status spawn() {
        const int port = freeLoopbackPort();
        for (int r = 0; r < kRanks; ++r) {
            ::unlink(logPath(r).c_str());
        }
        for (int r = 0; r < kRanks; ++r) {
            int sv[2];
            if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
                return Status::fromErrno("socketpair", errno);
            }
            std::fflush(nullptr);
            const pid_t pid = ::fork();
            if (pid < 0) {
                return Status::fromErrno("fork", errno);
            }
            if (pid == 0) {
                ::close(sv[0]);
                for (const Rank& k : ranks_) {
                    ::close(k.fd);
                }
                rankProcess(o_, out_.net, r, port, plugin_, logPath(r), sv[1]);
            }
            ::close(sv[1]);
            ranks_[r].pid = pid;
            ranks_[r].fd = sv[0];
        }
        return Status::ok();
    }

    // One reply per rank; "error ..." fails the net with the rank's message.
    Result<std::vector<std::string>> replies(const std::string& expect) {
        std::vector<std::string> out;
        for (Rank& k : ranks_) {
            auto line = readLine(k.fd, &k.buffer, deadline_ns_);
            if (!line) {
                return Status(line.status().code(), "rank " + std::to_string(out.size()) + ": " +
                                                        line.status().message() +
                                                        " (waiting for '" + expect + "')");
            }
            if (line->rfind("error ", 0) == 0) {
                return Status(Code::kRemote, line->substr(6));
            }
            if (line->rfind(expect, 0) != 0) {
                return Status(Code::kInternal, "unexpected reply '" + line.value() + "'");
            }
            out.push_back(line->substr(expect.size()));
        }
        return out;
    }

    Result<std::vector<std::string>> command(const std::string& cmd, const std::string& expect) {
        for (Rank& k : ranks_) {
            ATLAS_RETURN_IF_ERROR(writeLine(k.fd, cmd));
        }
        return replies(expect);
    }

    // Seconds per run reported by each rank for "ok <s>" replies.
    Result<std::vector<double>> timed(const std::string& cmd) {
        auto r = command(cmd, "ok ");
        if (!r) {
            return r.status();
        }
        std::vector<double> s;
        for (const std::string& x : r.value()) {
            const auto v = atlas::options::parseDouble(x);
            if (!v || *v < 0) {
                return Status(Code::kInternal, "a rank replied '" + x + "', not seconds");
            }
            s.push_back(*v);
        }
        return s;
    }

    static double maxOf(const std::vector<double>& v) {
        double m = 0;
        for (double x : v) {
            m = x > m ? x : m;
        }
        return m;
    }
    static double meanOf(const std::vector<double>& v) {
        double s = 0;
        for (double x : v) {
            s += x;
        }
        return v.empty() ? 0 : s / static_cast<double>(v.size());
    }

    Status sweep() {
        ATLAS_RETURN_IF_ERROR(spawn());
        auto ready = replies("ready ");
        if (!ready) {
            out_.setup_failed = ready.status().message().find("unavailable") != std::string::npos;
            return ready.status();
        }
        out_.descriptions = ready.value();
        std::fprintf(stderr, "[%s] rank 0: %s\n", out_.net.label().c_str(),
                     out_.descriptions[0].c_str());
        const std::string big = std::to_string(sizes_.back());
        const std::string small = std::to_string(sizes_.front());
        for (Op op : o_.ops) {
            if (o_.warmup == 0) {
                break;
            }
            // As nccl-tests: warm up at the largest and the smallest size, which also makes
            // NCCL connect the op's channels (p2p ones connect lazily, over several RTTs).
            for (const std::string& sz : {big, small}) {
                auto w = timed("warmup " + std::string(opName(op)) + " " + sz + " " +
                               std::to_string(o_.warmup));
                if (!w) {
                    return w.status();
                }
                if (o_.simulate) {
                    virtual_s_ += maxOf(w.value()) * o_.warmup;
                }
            }
        }
        std::map<Op, double> last_point_s;
        std::map<Op, size_t> last_bytes;
        uint32_t seed = 0;
        for (size_t bytes : sizes_) {
            for (Op op : o_.ops) {
                const double ratio =
                    last_bytes.count(op) ? static_cast<double>(bytes) / last_bytes[op] : 1.0;
                if (!pointFitsBudget(elapsed(), o_.budget_s, last_point_s[op], ratio)) {
                    out_.skipped.emplace_back(op, bytes);
                    continue;
                }
                const double start = elapsed();
                ATLAS_RETURN_IF_ERROR(point(op, bytes, ++seed));
                last_point_s[op] = elapsed() - start;
                last_bytes[op] = bytes;
            }
        }
        auto bye = command("quit", "bye");
        if (!bye) {
            return bye.status();
        }
        reap();
        return Status::ok();
    }

    Status point(Op op, size_t bytes, uint32_t seed) {
        const std::string args = std::string(opName(op)) + " " + std::to_string(bytes) + " ";
        auto c = command("check " + args + std::to_string(seed), "check ");
        if (!c) {
            return c.status();
        }
        PointResult p;
        p.net = out_.net.label();
        p.op = op;
        p.requested_bytes = bytes;
        p.geom = geometryFor(op, bytes, kRanks);
        std::vector<double> check_s;
        for (size_t r = 0; r < c->size(); ++r) {
            std::istringstream in(c.value()[r]);
            double s = 0, got = 0, want = 0;
            size_t wrong = 0, first = 0;
            in >> s >> wrong >> first >> got >> want;
            check_s.push_back(s);
            p.wrong += wrong;
            if (wrong != 0 && p.detail.empty()) {
                char buf[160];
                std::snprintf(buf, sizeof(buf), "rank %zu: %zu wrong, first at %zu: got %g want %g",
                              r, wrong, first, got, want);
                p.detail = buf;
            }
        }
        if (o_.simulate) {
            virtual_s_ += maxOf(check_s);
        }
        p.check_s = meanOf(check_s);
        p.iters = timedIterations(maxOf(check_s), o_.iter_plan);
        if (p.iters > 0) {
            auto t = timed("time " + args + std::to_string(p.iters));
            if (!t) {
                return t.status();
            }
            p.rank_time_s = t.value();
            if (o_.simulate) {
                virtual_s_ += maxOf(t.value()) * p.iters;
            }
        } else {
            p.rank_time_s = check_s;
        }
        p.time_s = meanOf(p.rank_time_s);
        std::fprintf(stderr, "[%s] %-14s %10zu B: %s us x %d, %zu wrong\n", p.net.c_str(),
                     opName(op), p.geom.bytes(), formatTimeUs(p.time_s).c_str(),
                     p.iters == 0 ? 1 : p.iters, p.wrong);
        out_.points.push_back(p);
        return Status::ok();
    }

    void reap() {
        for (Rank& k : ranks_) {
            int st = 0;
            // Finalize already happened ("bye"); exit is quick. Bounded anyway.
            for (int i = 0; i < 400 && k.pid > 0; ++i) {
                if (::waitpid(k.pid, &st, WNOHANG) == k.pid) {
                    k.pid = -1;
                    break;
                }
                ::usleep(50 * 1000);
            }
        }
    }

    void killAll() {
        for (Rank& k : ranks_) {
            if (k.pid > 0) {
                ::kill(k.pid, SIGKILL);
                int st = 0;
                ::waitpid(k.pid, &st, 0);
                k.pid = -1;
            }
            if (k.fd >= 0) {
                ::close(k.fd);
                k.fd = -1;
            }
        }
    }

    // The traffic must really have gone through the transport under test.
    void checkLogs() {
        if (o_.simulate || out_.descriptions.size() != kRanks) {
            return;
        }
        for (int r = 0; r < kRanks; ++r) {
            LogCheck c;
            c.rank = r;
            c.line = expectedNetworkLine(out_.net);
            c.found = fileContains(logPath(r), c.line);
            out_.log_checks.push_back(c);
        }
    }

    const SweepOptions& o_;
    std::vector<size_t> sizes_;
    std::string plugin_;
    std::string logdir_;
    NetOutcome out_;
    Rank ranks_[kRanks];
    int64_t deadline_ns_ = 0;
    int64_t wall0_ns_ = 0;
    double virtual_s_ = 0;
};

bool netPassed(const NetOutcome& n) {
    bool ok = n.error.empty();
    for (const PointResult& p : n.points) {
        ok &= p.wrong == 0;
    }
    for (const LogCheck& c : n.log_checks) {
        ok &= c.found;
    }
    return ok;
}

std::string netJson(const NetOutcome& n) {
    std::string s = "{\"net\": " + jsonEscape(n.net.label()) + ", \"descriptions\": [";
    for (size_t i = 0; i < n.descriptions.size(); ++i) {
        s += (i ? ", " : "") + jsonEscape(n.descriptions[i]);
    }
    s += "], \"wall_s\": " + std::to_string(n.wall_s) +
         ", \"pass\": " + (netPassed(n) ? "true" : "false") +
         ", \"error\": " + (n.error.empty() ? "null" : jsonEscape(n.error)) +
         ",\n  \"log_checks\": [";
    for (size_t i = 0; i < n.log_checks.size(); ++i) {
        const LogCheck& c = n.log_checks[i];
        s += std::string(i ? ", " : "") + "{\"rank\": " + std::to_string(c.rank) +
             ", \"line\": " + jsonEscape(c.line) + ", \"found\": " + (c.found ? "true" : "false") +
             "}";
    }
    s += "],\n  \"skipped\": [";
    for (size_t i = 0; i < n.skipped.size(); ++i) {
        s += std::string(i ? ", " : "") + "{\"op\": \"" + opName(n.skipped[i].first) +
             "\", \"requested_B\": " + std::to_string(n.skipped[i].second) + "}";
    }
    s += "],\n  \"points\": [\n";
    for (size_t i = 0; i < n.points.size(); ++i) {
        s += "   " + pointJson(n.points[i], kRanks) + (i + 1 < n.points.size() ? ",\n" : "\n");
    }
    return s + "  ]}";
}

void printNet(const NetOutcome& n, const std::vector<Op>& ops) {
    std::printf("#\n# net %s: %s\n", n.net.label().c_str(),
                n.descriptions.empty() ? "-" : n.descriptions[0].c_str());
    for (Op op : ops) {
        std::vector<PointResult> mine;
        for (const PointResult& p : n.points) {
            if (p.op == op) {
                mine.push_back(p);
            }
        }
        std::printf("#\n# %s, net %s\n%s", opName(op), n.net.label().c_str(),
                    tableHeader().c_str());
        for (const PointResult& p : mine) {
            std::fputs(tableRow(p, kRanks).c_str(), stdout);
        }
        std::fputs(tableFooter(mine, kRanks).c_str(), stdout);
    }
    if (!n.skipped.empty()) {
        std::printf("# %zu points skipped: over the --budget-s of this net\n", n.skipped.size());
    }
    for (const LogCheck& c : n.log_checks) {
        std::printf("# rank %d log: \"%s\": %s\n", c.rank, c.line.c_str(),
                    c.found ? "found" : "MISSING");
    }
    if (!n.error.empty()) {
        std::printf("# error: %s\n", n.error.c_str());
    }
    std::printf("# net %s: %s (%.1f s)\n", n.net.label().c_str(), netPassed(n) ? "PASS" : "FAIL",
                n.wall_s);
    std::fflush(stdout);
}

int sweepMain(const SweepOptions& o) {
    std::string plugin;
    bool wants_atlas = false;
    for (const NetSpec& n : o.nets) {
        wants_atlas |= n.kind == NetSpec::Kind::kAtlas;
    }
    if (wants_atlas && !o.simulate) {
        plugin = findPlugin(o.plugin);
        if (plugin.empty()) {
            std::fprintf(stderr, "atlas-nccl-sweep: libnccl-net-atlas.so not found (--plugin)\n");
            return 2;
        }
    }
    std::string logdir = o.logdir;
    if (logdir.empty()) {
        char tmpl[] = "/tmp/atlas-nccl-sweep-XXXXXX";
        if (::mkdtemp(tmpl) == nullptr) {
            std::fprintf(stderr, "atlas-nccl-sweep: cannot create a log directory\n");
            return 2;
        }
        logdir = tmpl;
    } else {
        ::mkdir(logdir.c_str(), 0755);
    }
    const std::vector<size_t> sizes = sweepSizes(o.min_bytes, o.max_bytes, o.step_factor).value();
    std::printf(
        "# atlas-nccl-sweep: %d ranks (NCCL_HOSTID hostA/hostB) on GPU %d%s; sizes %zu..%zu"
        " B x%d; %zu ops; logs %s\n",
        kRanks, o.device, o.simulate ? " (--simulate: no GPU, modelled times)" : "", sizes.front(),
        sizes.back(), o.step_factor, o.ops.size(), logdir.c_str());
    std::fflush(stdout);
    std::vector<NetOutcome> outcomes;
    for (const NetSpec& net : o.nets) {
        NetRun run(o, net, sizes, plugin, logdir);
        outcomes.push_back(run.run());
        printNet(outcomes.back(), o.ops);
    }
    if (outcomes.size() >= 2) {
        std::printf("#\n# comparison (busbw ratio > 1: %s faster)\n%s",
                    outcomes[0].net.label().c_str(),
                    comparisonTable(outcomes[0].points, outcomes[1].points, kRanks).c_str());
    }
    bool pass = true;
    bool setup_failed = false;
    for (const NetOutcome& n : outcomes) {
        pass &= netPassed(n);
        setup_failed |= n.setup_failed;
    }
    if (!o.json_path.empty()) {
        std::ofstream f(o.json_path);
        f << "{\"tool\": \"atlas-nccl-sweep\", \"nranks\": " << kRanks
          << ", \"simulate\": " << (o.simulate ? "true" : "false")
          << ", \"pass\": " << (pass ? "true" : "false") << ", \"nets\": [\n ";
        for (size_t i = 0; i < outcomes.size(); ++i) {
            f << (i ? ",\n " : "") << netJson(outcomes[i]);
        }
        f << "]}\n";
        if (!f) {
            std::fprintf(stderr, "atlas-nccl-sweep: cannot write %s\n", o.json_path.c_str());
            return 1;
        }
    }
    std::printf("%s\n", pass ? "PASS" : "FAIL");
    return setup_failed ? 2 : pass ? 0 : 1;
}

}  // namespace
}  // namespace atlas::gpucheck

int main(int argc, char** argv) {
    using namespace atlas::gpucheck;
    auto parsed = parseSweepArgs(std::vector<std::string>(argv + 1, argv + argc));
    if (!parsed) {
        std::fprintf(stderr, "atlas-nccl-sweep: %s\n", parsed.status().message().c_str());
        return 2;
    }
    if (parsed->help) {
        std::fputs(sweepUsage().c_str(), stdout);
        return 0;
    }
    if (parsed->print_env_rank >= 0) {
        const SweepOptions& o = parsed.value();
        std::string plugin;
        if (o.nets.front().kind == NetSpec::Kind::kAtlas) {
            plugin = findPlugin(o.plugin);
            if (plugin.empty()) {
                std::fprintf(stderr,
                             "atlas-nccl-sweep: libnccl-net-atlas.so not found (--plugin)\n");
                return 2;
            }
        }
        const std::string dir = o.logdir.empty() ? "/tmp" : o.logdir;
        std::fputs(envFileText(o, o.print_env_rank, plugin,
                               ncclLogPath(dir, o.nets.front(), o.print_env_rank))
                       .c_str(),
                   stdout);
        return 0;
    }
    ::signal(SIGPIPE, SIG_IGN);
    return sweepMain(parsed.value());
}
