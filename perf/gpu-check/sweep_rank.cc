#include "perf/gpu-check/sweep_rank.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <sstream>

#include "atlas/common/clock.h"

namespace atlas::gpucheck {
namespace {

// --simulate: what a correct collective returns, computed on the CPU, with the modelled time
// of a link. No waiting: the parent's clock for a simulated net advances by the reported
// times instead (sweep_main.cc).
class SimBackend final : public RankBackend {
  public:
    explicit SimBackend(const RankConfig& cfg) : cfg_(cfg) {}

    Result<std::string> init() override {
        char buf[128];
        std::snprintf(buf, sizeof(buf), "simulated link: %g Gbit/s, %g ms per op",
                      cfg_.sim_link.gbps, cfg_.sim_link.rtt_ms);
        return std::string(buf);
    }

    Result<double> checkRun(Op op, const Geometry& g, uint32_t seed, CheckResult* check) override {
        recv_.assign(g.recv_count, 0.0f);
        for (size_t j = 0; j < g.recv_count; ++j) {
            recv_[j] = expectedOutput(op, g, cfg_.rank, cfg_.nranks, seed, j);
        }
        const bool corrupt = std::find(cfg_.sim_corrupt.begin(), cfg_.sim_corrupt.end(), op) !=
                             cfg_.sim_corrupt.end();
        if (corrupt && !recv_.empty()) {
            recv_[recv_.size() / 2] += 1.0f;  // one element off by one
        }
        *check = checkOutput(op, g, cfg_.rank, cfg_.nranks, seed, recv_);
        return simulatedSeconds(op, g, cfg_.nranks, cfg_.sim_link);
    }

    Result<double> timedRuns(Op op, const Geometry& g, int iters) override {
        return iters > 0 ? simulatedSeconds(op, g, cfg_.nranks, cfg_.sim_link) : 0.0;
    }

    Status finish() override { return Status::ok(); }
    void abort() override {}

  private:
    RankConfig cfg_;
    std::vector<float> recv_;
};

std::string fmtSeconds(double s) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.9g", s);
    return buf;
}

}  // namespace

std::unique_ptr<RankBackend> makeSimBackend(const RankConfig& cfg) {
    return std::make_unique<SimBackend>(cfg);
}

Status writeLine(int fd, const std::string& line) {
    std::string s = line;
    std::replace(s.begin(), s.end(), '\n', ' ');
    s += '\n';
    size_t off = 0;
    while (off < s.size()) {
        const ssize_t w = ::write(fd, s.data() + off, s.size() - off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return Status::fromErrno("write to the control socket", errno, Code::kRemote);
        }
        off += static_cast<size_t>(w);
    }
    return Status::ok();
}

Result<std::string> readLine(int fd, std::string* buffer, int64_t deadline_ns) {
    for (;;) {
        const size_t nl = buffer->find('\n');
        if (nl != std::string::npos) {
            std::string line = buffer->substr(0, nl);
            buffer->erase(0, nl + 1);
            return line;
        }
        int timeout_ms = -1;
        if (deadline_ns > 0) {
            const int64_t left = deadline_ns - monotonicNowNs();
            if (left <= 0) {
                return Status(Code::kTimeout, "no answer before the deadline");
            }
            timeout_ms = static_cast<int>(std::min<int64_t>(left / kNsPerMs + 1, 1000));
        }
        pollfd p{fd, POLLIN, 0};
        const int rc = ::poll(&p, 1, timeout_ms);
        if (rc < 0 && errno != EINTR) {
            return Status::fromErrno("poll on the control socket", errno);
        }
        if (rc <= 0) {
            continue;
        }
        char buf[4096];
        const ssize_t n = ::read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return Status(Code::kRemote, "the other side closed the control socket");
        }
        buffer->append(buf, static_cast<size_t>(n));
    }
}

int rankMain(const RankConfig& cfg, RankBackend& backend, int fd) {
    auto fail = [&](const Status& st, int code) {
        backend.abort();
        (void)writeLine(fd, "error rank " + std::to_string(cfg.rank) + ": " + st.toString());
        return code;
    };
    auto desc = backend.init();
    if (!desc) {
        const Code c = desc.status().code();
        return fail(desc.status(), c == Code::kUnavailable ? 2 : 1);
    }
    if (!writeLine(fd, "ready " + desc.value()).isOk()) {
        backend.abort();
        return 1;
    }
    std::string buffer;
    for (;;) {
        auto line = readLine(fd, &buffer, 0);
        if (!line) {
            backend.abort();  // the parent is gone
            return 1;
        }
        std::istringstream in(line.value());
        std::string cmd, op_name;
        in >> cmd;
        if (cmd == "quit") {
            Status st = backend.finish();
            if (!st.isOk()) {
                return fail(st, 1);
            }
            (void)writeLine(fd, "bye");
            return 0;
        }
        size_t bytes = 0;
        uint64_t arg = 0;
        in >> op_name >> bytes >> arg;
        auto op = parseOp(op_name);
        if (!in || !op) {
            return fail(Status(Code::kInternal, "bad command '" + line.value() + "'"), 1);
        }
        const Geometry g = geometryFor(op.value(), bytes, cfg.nranks);
        if (cmd == "check") {
            CheckResult check;
            auto s = backend.checkRun(op.value(), g, static_cast<uint32_t>(arg), &check);
            if (!s) {
                return fail(s.status(), 1);
            }
            const size_t first = check.wrong == 0 ? 0 : check.first_bad;
            char buf[256];
            std::snprintf(buf, sizeof(buf), "check %s %zu %zu %.9g %.9g",
                          fmtSeconds(s.value()).c_str(), check.wrong, first,
                          static_cast<double>(check.got), static_cast<double>(check.want));
            (void)writeLine(fd, buf);
        } else if (cmd == "warmup" || cmd == "time") {
            auto s = backend.timedRuns(op.value(), g, static_cast<int>(arg));
            if (!s) {
                return fail(s.status(), 1);
            }
            (void)writeLine(fd, "ok " + fmtSeconds(s.value()));
        } else {
            return fail(Status(Code::kInternal, "unknown command '" + cmd + "'"), 1);
        }
    }
}

}  // namespace atlas::gpucheck
