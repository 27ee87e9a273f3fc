// atlas-pipeline-bench: orchestrates D x P stage processes (perf/atlas-pipeline-bench/stage.h).
//
// The parent forks every stage before starting any thread, relays the connection handles
// between neighbouring stages, releases each iteration with GO once every stage finished the
// previous one (the synchronous data-parallel step), collects the reports and prints them.
// It never loads the plugin itself.
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "atlas/nccl/net.h"
#include "options/env.h"
#include "perf/atlas-pipeline-bench/control.h"
#include "perf/atlas-pipeline-bench/report.h"
#include "perf/atlas-pipeline-bench/stage.h"

namespace atlas::pipebench {
namespace {

struct Child {
    int pipeline = 0;
    int stage = 0;
    pid_t pid = -1;
    int fd = -1;
    std::string act_in;   // handle of its activation listener (stage > 0)
    std::string grad_in;  // handle of its gradient listener (stage < P-1)
};

std::string defaultPlugin() {
    char exe[PATH_MAX] = {};
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    std::string dir = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
    dir = dir.substr(0, dir.rfind('/'));
    return dir + "/../../plugin/libnccl-net-atlas.so";
}

class Orchestrator {
  public:
    explicit Orchestrator(const BenchConfig& cfg) : cfg_(cfg) {}
    ~Orchestrator() { killAll(); }

    Status run(RunResult* out);

  private:
    Status spawn();
    Status exchangeHandles();
    Result<Frame> expect(Child& c, Msg type);
    // --link-stats: one snapshot of every link (empty without the flag).
    Status snapshotLinks(std::vector<wanem::LinkSnapshot>* out);
    // Snapshots again and appends what each link direction did since `before`.
    Status recordLinkUse(const std::vector<wanem::LinkSnapshot>& before, Nanos window_ns,
                         RunResult* out);
    void killAll();

    const BenchConfig& cfg_;
    std::vector<Child> kids_;
    Nanos deadline_ = 0;
};

Status Orchestrator::spawn() {
    for (int p = 0; p < cfg_.pipelines; ++p) {
        for (int s = 0; s < cfg_.stages; ++s) {
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
                for (const Child& k : kids_) {
                    ::close(k.fd);
                }
                ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a crashed parent
                const int rc = runStage(cfg_, p, s, sv[1]);
                std::fflush(nullptr);
                ::_exit(rc);
            }
            ::close(sv[1]);
            Child c;
            c.pipeline = p;
            c.stage = s;
            c.pid = pid;
            c.fd = sv[0];
            kids_.push_back(c);
        }
    }
    return Status::ok();
}

Result<Frame> Orchestrator::expect(Child& c, Msg type) {
    auto f = recvFrame(c.fd, deadline_);
    if (!f) {
        return Status(f.status().code(), "pipeline " + std::to_string(c.pipeline) + " stage " +
                                             std::to_string(c.stage) + ": " + f.status().message());
    }
    if (f->type == Msg::kError) {
        return Status(Code::kRemote, f->payload);
    }
    if (f->type != type) {
        return Status(Code::kInternal, "unexpected control message from pipeline " +
                                           std::to_string(c.pipeline) + " stage " +
                                           std::to_string(c.stage));
    }
    return f;
}

Status Orchestrator::exchangeHandles() {
    const size_t h = NCCL_NET_HANDLE_MAXSIZE;
    for (Child& c : kids_) {
        auto f = expect(c, Msg::kHandles);
        if (!f) {
            return f.status();
        }
        if (f->payload.size() != 1 + 2 * h) {
            return {Code::kInternal, "bad handles frame"};
        }
        c.act_in = f->payload.substr(1, h);
        c.grad_in = f->payload.substr(1 + h, h);
    }
    const int P = cfg_.stages;
    for (Child& c : kids_) {
        const size_t base = static_cast<size_t>(c.pipeline * P);
        std::string peers(2 * h, '\0');
        if (c.stage < P - 1) {
            peers.replace(0, h, kids_[base + static_cast<size_t>(c.stage + 1)].act_in);
        }
        if (c.stage > 0) {
            peers.replace(h, h, kids_[base + static_cast<size_t>(c.stage - 1)].grad_in);
        }
        ATLAS_RETURN_IF_ERROR(sendFrame(c.fd, Msg::kPeers, peers));
    }
    return Status::ok();
}

Status Orchestrator::run(RunResult* out) {
    deadline_ = monotonicNowNs() + static_cast<Nanos>(cfg_.timeout_s) * kNsPerSec;
    ATLAS_RETURN_IF_ERROR(spawn());
    ATLAS_RETURN_IF_ERROR(exchangeHandles());
    for (Child& c : kids_) {
        auto f = expect(c, Msg::kReady);
        if (!f) {
            return f.status();
        }
    }
    out->stages.resize(kids_.size());
    for (size_t i = 0; i < kids_.size(); ++i) {
        out->stages[i].pipeline = kids_[i].pipeline;
        out->stages[i].stage = kids_[i].stage;
    }
    const int total = cfg_.warmup + cfg_.iterations;
    std::vector<wanem::LinkSnapshot> before;
    if (!cfg_.barrier) {
        ATLAS_RETURN_IF_ERROR(snapshotLinks(&before));
        for (int it = 0; it < total; ++it) {
            for (Child& c : kids_) {
                ATLAS_RETURN_IF_ERROR(sendFrame(c.fd, Msg::kGo, std::string(4, '\0')));
            }
        }
    }
    for (int it = 0; it < total; ++it) {
        if (cfg_.barrier) {
            if (it >= cfg_.warmup) {
                ATLAS_RETURN_IF_ERROR(snapshotLinks(&before));
            }
            for (Child& c : kids_) {
                ATLAS_RETURN_IF_ERROR(sendFrame(c.fd, Msg::kGo, std::string(4, '\0')));
            }
        }
        int64_t start = INT64_MAX;
        int64_t end = 0;
        for (size_t i = 0; i < kids_.size(); ++i) {
            auto f = expect(kids_[i], Msg::kIterDone);
            if (!f) {
                return f.status();
            }
            IterReport r;
            if (f->payload.size() != sizeof(r)) {
                return {Code::kInternal, "bad iteration report"};
            }
            std::memcpy(&r, f->payload.data(), sizeof(r));
            out->stages[i].iters.push_back(r);
            start = std::min(start, r.start_ns);
            end = std::max(end, r.end_ns);
        }
        out->iter_start_ns.push_back(start);
        out->iter_end_ns.push_back(end);
        if (cfg_.barrier && it >= cfg_.warmup) {
            ATLAS_RETURN_IF_ERROR(recordLinkUse(before, end - start, out));
        }
        if (!cfg_.quiet) {
            std::fprintf(stderr, "iteration %d%s: %.1f ms\n", it,
                         it < cfg_.warmup ? " (warm-up)" : "",
                         static_cast<double>(end - start) / 1e6);
        }
    }
    if (!cfg_.barrier && total > 0) {
        out->link_use_whole_run = true;
        ATLAS_RETURN_IF_ERROR(
            recordLinkUse(before, out->iter_end_ns.back() - out->iter_start_ns.front(), out));
    }
    for (size_t i = 0; i < kids_.size(); ++i) {
        auto f = expect(kids_[i], Msg::kResult);
        if (!f) {
            return f.status();
        }
        out->stages[i].timeline = nlohmann::json::parse(f->payload, nullptr, false);
        if (out->stages[i].timeline.is_discarded()) {
            return {Code::kInternal, "bad timeline from a stage"};
        }
    }
    for (Child& c : kids_) {
        int st = 0;
        // Stages finalize the plugin after their result: bounded by the plugin's close timeout.
        for (int i = 0; i < 600 && ::waitpid(c.pid, &st, WNOHANG) == 0; ++i) {
            ::usleep(50 * 1000);
        }
        c.pid = -1;
        ::close(c.fd);
        c.fd = -1;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            return {Code::kInternal, "a stage process exited with status " + std::to_string(st)};
        }
    }
    return Status::ok();
}

Status Orchestrator::snapshotLinks(std::vector<wanem::LinkSnapshot>* out) {
    out->clear();
    for (const wanem::LinkSource& src : cfg_.link_stats) {
        // Between iterations, outside the timed region: a generous bound. 2 s timed out once
        // on the 2-core VM with a full CI build and test run beside the bench.
        auto snap = wanem::snapshotLink(src, 10 * kNsPerSec);
        if (!snap) {
            return snap.status();
        }
        out->push_back(std::move(snap.value()));
    }
    return Status::ok();
}

Status Orchestrator::recordLinkUse(const std::vector<wanem::LinkSnapshot>& before, Nanos window_ns,
                                   RunResult* out) {
    if (cfg_.link_stats.empty()) {
        return Status::ok();
    }
    std::vector<wanem::LinkSnapshot> after;
    ATLAS_RETURN_IF_ERROR(snapshotLinks(&after));
    std::vector<wanem::DirectionUse> use;
    for (size_t i = 0; i < after.size(); ++i) {
        auto u = wanem::linkUse(before[i], after[i], window_ns);
        if (!u) {
            return u.status();
        }
        use.insert(use.end(), u->begin(), u->end());
    }
    out->link_use.push_back(std::move(use));
    return Status::ok();
}

void Orchestrator::killAll() {
    for (Child& c : kids_) {
        if (c.pid > 0) {
            ::kill(c.pid, SIGKILL);
            int st = 0;
            ::waitpid(c.pid, &st, 0);
            c.pid = -1;
        }
        if (c.fd >= 0) {
            ::close(c.fd);
            c.fd = -1;
        }
    }
}

}  // namespace
}  // namespace atlas::pipebench

int main(int argc, char** argv) {
    using namespace atlas::pipebench;
    atlas::options::warnUnknownEnv("atlas-pipeline-bench");
    auto parsed = parseArgs(std::vector<std::string>(argv + 1, argv + argc), atlas::processEnv());
    if (!parsed) {
        std::fprintf(stderr, "atlas-pipeline-bench: %s\n", parsed.status().message().c_str());
        return 2;
    }
    BenchConfig cfg = parsed.value();
    if (cfg.help) {
        std::fputs(usageText().c_str(), stdout);
        return 0;
    }
    if (cfg.plugin.empty()) {
        cfg.plugin = defaultPlugin();
    }
    if (::access(cfg.plugin.c_str(), R_OK) != 0) {
        std::fprintf(stderr,
                     "atlas-pipeline-bench: plugin %s not found (--plugin or $ATLAS_PLUGIN)\n",
                     cfg.plugin.c_str());
        return 2;
    }
    ::signal(SIGPIPE, SIG_IGN);
    RunResult run;
    atlas::Status st;
    {
        Orchestrator o(cfg);
        st = o.run(&run);
    }
    if (!st.isOk()) {
        std::fprintf(stderr, "atlas-pipeline-bench: %s\n", st.toString().c_str());
        return 1;
    }
    const Summary s = summarize(cfg, run);
    std::fputs(renderTable(cfg, s).c_str(), stdout);
    if (!cfg.json_path.empty()) {
        std::ofstream f(cfg.json_path);
        f << toJson(cfg, s, run).dump(1) << "\n";
        if (!f) {
            std::fprintf(stderr, "atlas-pipeline-bench: cannot write %s\n", cfg.json_path.c_str());
            return 1;
        }
    }
    if (!cfg.trace_path.empty()) {
        std::ofstream f(cfg.trace_path);
        f << toChromeTrace(cfg, run).dump() << "\n";
        if (!f) {
            std::fprintf(stderr, "atlas-pipeline-bench: cannot write %s\n", cfg.trace_path.c_str());
            return 1;
        }
    }
    return 0;
}
