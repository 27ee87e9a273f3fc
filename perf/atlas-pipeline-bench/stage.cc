#include "perf/atlas-pipeline-bench/stage.h"

#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "perf/atlas-pipeline-bench/control.h"
#include "perf/atlas-pipeline-bench/cuda_compute.h"
#include "perf/atlas-pipeline-bench/schedule.h"
#include "plugin_host/plugin_host.h"

namespace atlas::pipebench {
namespace {

using abi::Backoff;
using abi::MappedBuffer;

Status ncclOk(ncclResult_t rc, const char* what) {
    return abi::ncclStatus(rc, what);
}

Status joinNetns(const std::string& ns) {
    const std::string path = ns.find('/') == std::string::npos ? "/run/netns/" + ns : ns;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return Status::fromErrno("open " + path + " (is the WAN testbed up? scripts/wan-up)",
                                 errno);
    }
    const int rc = ::setns(fd, CLONE_NEWNET);
    const int err = errno;
    ::close(fd);
    if (rc != 0) {
        return Status::fromErrno("setns " + path + " (needs root)", err);
    }
    return Status::ok();
}

void computeFor(Nanos ns, Compute mode) {
    const Nanos end = monotonicNowNs() + ns;
    switch (mode) {
        case Compute::kSpin:
            while (monotonicNowNs() < end) {
            }
            break;
        case Compute::kYield:
            while (monotonicNowNs() < end) {
                sched_yield();
            }
            break;
        case Compute::kCuda:  // StageRunner::compute() runs it
            break;
        case Compute::kSleep: {
            timespec ts{};
            ts.tv_sec = end / kNsPerSec;
            ts.tv_nsec = end % kNsPerSec;
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
            }
            break;
        }
    }
}

// A region of M equal message buffers (one per micro-batch), registered with one comm.
struct MessageBuffers {
    MappedBuffer buf;
    void* mh = nullptr;
    size_t stride = 0;  // bytes per message, page-aligned
    uint8_t* at(int mb) const { return buf.data() + static_cast<size_t>(mb) * stride; }
};

class StageRunner {
  public:
    StageRunner(const BenchConfig& cfg, int pipeline, int stage, int fd)
        : cfg_(cfg), p_(pipeline), s_(stage), fd_(fd), last_(cfg.stages - 1) {}
    ~StageRunner() { teardown(); }

    Status run();

  private:
    Status setup();
    Status connectAll();
    Status pinComputeThread();
    Status makeBuffers(void* comm, size_t size, MessageBuffers* out);
    Status iteration(int it);
    Result<void*> postRecv(void* comm, MessageBuffers& buffers, int mb, size_t size);
    Result<void*> postSend(void* comm, MessageBuffers& buffers, int mb, size_t size);
    Status wait(void* req, char kind, int it, int mb);
    Status compute(Nanos ns);
    void teardown();

    const BenchConfig& cfg_;
    const int p_;
    const int s_;
    const int fd_;
    const int last_;
    Nanos deadline_ = 0;
    std::unique_ptr<abi::PluginLibrary> lib_;
    const ncclNet_v11_t* net_ = nullptr;
    void* ctx_fwd_ = nullptr;
    void* ctx_bwd_ = nullptr;
    void* act_listen_ = nullptr;
    void* grad_listen_ = nullptr;
    void* act_in_ = nullptr;    // from stage s-1
    void* grad_in_ = nullptr;   // from stage s+1
    void* act_out_ = nullptr;   // to stage s+1
    void* grad_out_ = nullptr;  // to stage s-1
    MessageBuffers act_send_, act_recv_, grad_send_, grad_recv_;
    std::unique_ptr<CudaCompute> cuda_;  // --compute cuda for this stage
    std::vector<TimelineEvent> events_;
    int64_t busy_ = 0;
    int64_t waited_ = 0;
};

Status StageRunner::makeBuffers(void* comm, size_t size, MessageBuffers* out) {
    out->stride = (size + 4095) & ~static_cast<size_t>(4095);
    auto b = MappedBuffer::create(out->stride * static_cast<size_t>(cfg_.microbatches));
    if (!b) {
        return b.status();
    }
    out->buf = std::move(b.value());
    // Touch every page now, so page faults never land inside a timed period.
    std::memset(out->buf.data(), 0x5a, out->buf.size());
    return ncclOk(net_->regMr(comm, out->buf.data(), out->buf.size(), NCCL_PTR_HOST, &out->mh),
                  "regMr");
}

Status StageRunner::compute(Nanos ns) {
    if (cuda_ != nullptr) {
        return cuda_->run(ns);
    }
    computeFor(ns, cfg_.computeOf(s_));
    return Status::ok();
}

Status StageRunner::setup() {
    if (cfg_.computeOf(s_) == Compute::kCuda) {
        // First, so a machine without a GPU fails before any connection is made.
        auto c = CudaCompute::create(0, cfg_.cuda_ns_per_gemm);
        if (!c) {
            return c.status();
        }
        cuda_ = std::move(c.value());
        std::fprintf(stderr,
                     "atlas-pipeline-bench: pipeline %d stage %d computes on CUDA: %s; "
                     "ns_per_gemm=%.1f\n",
                     p_, s_, cuda_->describe().c_str(), cuda_->nsPerGemm());
    }
    if (!cfg_.stage_netns.empty()) {
        const std::string& ns =
            cfg_.stage_netns[std::min(static_cast<size_t>(s_), cfg_.stage_netns.size() - 1)];
        ATLAS_RETURN_IF_ERROR(joinNetns(ns));
    } else if (std::getenv("ATLAS_SOCKET_IFNAME") == nullptr) {
        ::setenv("ATLAS_SOCKET_IFNAME", "lo", 1);  // one host: loopback
    }
    // Every stage process is its own "GPU": a distinct local rank keeps the plugin's per-rank
    // resources (the bubble channel) apart. --env ATLAS_LOCAL_RANK=... overrides it.
    ::setenv("ATLAS_LOCAL_RANK", std::to_string(p_ * cfg_.stages + s_).c_str(), 1);
    for (const EnvSetting& e : cfg_.env) {
        if ((e.stage < 0 || e.stage == s_) && (e.pipeline < 0 || e.pipeline == p_)) {
            ::setenv(e.key.c_str(), e.value.c_str(), 1);
        }
    }
    abi::LogCapture::setKeep(false);
    auto lib = abi::PluginLibrary::open(cfg_.plugin);
    if (!lib) {
        return lib.status();
    }
    lib_ = std::move(lib.value());
    net_ = lib_->v11();
    if (net_ == nullptr) {
        return {Code::kUnavailable, cfg_.plugin + " exports no ncclNetPlugin_v11"};
    }
    // One NCCL communicator per pipeline (its PP group); the direction is per comm, so each
    // direction gets its own context carrying its trafficClass, as NCCL would per config.
    const uint64_t comm_id = 0x41746c6100000000ull + static_cast<uint64_t>(p_);
    ncclNetCommConfig_v11_t fwd{cfg_.traffic_class ? trafficClassOf(p_, s_, 0)
                                                   : NCCL_NET_TRAFFIC_CLASS_UNDEF};
    ncclNetCommConfig_v11_t bwd{cfg_.traffic_class ? trafficClassOf(p_, s_, 1)
                                                   : NCCL_NET_TRAFFIC_CLASS_UNDEF};
    ATLAS_RETURN_IF_ERROR(
        ncclOk(net_->init(&ctx_fwd_, comm_id, &fwd, abi::captureLogger, nullptr), "init"));
    ATLAS_RETURN_IF_ERROR(
        ncclOk(net_->init(&ctx_bwd_, comm_id, &bwd, abi::captureLogger, nullptr), "init"));
    int ndev = 0;
    ATLAS_RETURN_IF_ERROR(ncclOk(net_->devices(&ndev), "devices"));
    if (cfg_.dev >= ndev) {
        return {Code::kInvalidArgument, "--dev " + std::to_string(cfg_.dev) +
                                            " but the plugin has " + std::to_string(ndev) +
                                            " device(s)"};
    }
    ATLAS_RETURN_IF_ERROR(connectAll());
    return pinComputeThread();
}

// --stage-cpus pins this thread only, and only now: it computes (the "GPU"), while the
// plugin's threads, created above with the process's affinity, stay where they are, as
// NCCL's proxy and network threads run on host cores, not on the GPU.
Status StageRunner::pinComputeThread() {
    for (const StageCpus& sc : cfg_.stage_cpus) {
        if (sc.stage != s_) {
            continue;
        }
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int cpu : sc.cpus) {
            if (cpu < CPU_SETSIZE) {
                CPU_SET(cpu, &set);
            }
        }
        if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
            return Status::fromErrno(
                "--stage-cpus: sched_setaffinity for stage " + std::to_string(s_), errno);
        }
    }
    return Status::ok();
}

Status StageRunner::connectAll() {
    std::string handles(1 + 2 * NCCL_NET_HANDLE_MAXSIZE, '\0');
    if (s_ > 0) {
        ATLAS_RETURN_IF_ERROR(
            ncclOk(net_->listen(ctx_fwd_, cfg_.dev, handles.data() + 1, &act_listen_), "listen"));
    }
    if (s_ < last_) {
        ATLAS_RETURN_IF_ERROR(
            ncclOk(net_->listen(ctx_fwd_, cfg_.dev, handles.data() + 1 + NCCL_NET_HANDLE_MAXSIZE,
                                &grad_listen_),
                   "listen"));
    }
    ATLAS_RETURN_IF_ERROR(sendFrame(fd_, Msg::kHandles, handles));
    auto peers = recvFrame(fd_, deadline_);
    if (!peers) {
        return peers.status();
    }
    if (peers->type != Msg::kPeers || peers->payload.size() != 2 * NCCL_NET_HANDLE_MAXSIZE) {
        return {Code::kInternal, "expected the peers' handles"};
    }
    std::string next_act = peers->payload.substr(0, NCCL_NET_HANDLE_MAXSIZE);
    std::string prev_grad = peers->payload.substr(NCCL_NET_HANDLE_MAXSIZE);
    Backoff backoff;
    for (;;) {
        const bool done = (s_ == last_ || (act_out_ != nullptr && grad_in_ != nullptr)) &&
                          (s_ == 0 || (grad_out_ != nullptr && act_in_ != nullptr));
        if (done) {
            break;
        }
        if (monotonicNowNs() > deadline_) {
            return {Code::kTimeout, "connecting to the neighbouring stages timed out"};
        }
        ncclNetDeviceHandle_v11_t* dh = nullptr;
        if (s_ < last_ && act_out_ == nullptr) {
            ATLAS_RETURN_IF_ERROR(
                ncclOk(net_->connect(ctx_fwd_, cfg_.dev, next_act.data(), &act_out_, &dh),
                       "connect (activations)"));
        }
        if (s_ > 0 && grad_out_ == nullptr) {
            ATLAS_RETURN_IF_ERROR(
                ncclOk(net_->connect(ctx_bwd_, cfg_.dev, prev_grad.data(), &grad_out_, &dh),
                       "connect (gradients)"));
        }
        if (s_ > 0 && act_in_ == nullptr) {
            ATLAS_RETURN_IF_ERROR(ncclOk(net_->accept(act_listen_, &act_in_, &dh), "accept"));
        }
        if (s_ < last_ && grad_in_ == nullptr) {
            ATLAS_RETURN_IF_ERROR(ncclOk(net_->accept(grad_listen_, &grad_in_, &dh), "accept"));
        }
        backoff.idle();
    }
    const size_t act = cfg_.act_bytes;
    const size_t grad = cfg_.gradBytes();
    if (s_ < last_) {
        ATLAS_RETURN_IF_ERROR(makeBuffers(act_out_, act, &act_send_));
        ATLAS_RETURN_IF_ERROR(makeBuffers(grad_in_, grad, &grad_recv_));
    }
    if (s_ > 0) {
        ATLAS_RETURN_IF_ERROR(makeBuffers(act_in_, act, &act_recv_));
        ATLAS_RETURN_IF_ERROR(makeBuffers(grad_out_, grad, &grad_send_));
    }
    return Status::ok();
}

Result<void*> StageRunner::postRecv(void* comm, MessageBuffers& buffers, int mb, size_t size) {
    Backoff backoff;
    for (;;) {
        void* data = buffers.at(mb);
        size_t sz = size;
        int tag = 0;
        void* req = nullptr;
        void* mh = buffers.mh;
        ATLAS_RETURN_IF_ERROR(
            ncclOk(net_->irecv(comm, 1, &data, &sz, &tag, &mh, nullptr, &req), "irecv"));
        if (req != nullptr) {
            return req;
        }
        if (monotonicNowNs() > deadline_) {
            return Status(Code::kTimeout, "irecv back-pressure did not clear");
        }
        backoff.idle();
    }
}

Result<void*> StageRunner::postSend(void* comm, MessageBuffers& buffers, int mb, size_t size) {
    Backoff backoff;
    for (;;) {
        void* req = nullptr;
        ATLAS_RETURN_IF_ERROR(
            ncclOk(net_->isend(comm, buffers.at(mb), size, 0, buffers.mh, nullptr, &req), "isend"));
        if (req != nullptr) {
            return req;
        }
        if (monotonicNowNs() > deadline_) {
            return Status(Code::kTimeout, "isend back-pressure did not clear");
        }
        backoff.idle();
    }
}

Status StageRunner::wait(void* req, char kind, int it, int mb) {
    const Nanos t0 = monotonicNowNs();
    Backoff backoff;
    for (;;) {
        int done = 0;
        int size = 0;
        ATLAS_RETURN_IF_ERROR(ncclOk(net_->test(req, &done, &size), "test"));
        if (done) {
            break;
        }
        if (monotonicNowNs() > deadline_) {
            return {Code::kTimeout, std::string("waiting for ") +
                                        (kind == 'A'   ? "an activation"
                                         : kind == 'G' ? "a gradient"
                                                       : "a send") +
                                        " timed out"};
        }
        backoff.idle();
    }
    const Nanos t1 = monotonicNowNs();
    if (kind != 'D') {
        waited_ += t1 - t0;
    }
    if (t1 - t0 > 20 * kNsPerUs) {
        events_.push_back({it, kind, mb, t0, t1});
    }
    return Status::ok();
}

Status StageRunner::iteration(int it) {
    const int m = cfg_.microbatches;
    const StageCost cost = cfg_.cost(s_);
    std::vector<void*> act_req(static_cast<size_t>(m), nullptr);
    std::vector<void*> grad_req(static_cast<size_t>(m), nullptr);
    std::vector<void*> sends;
    busy_ = 0;
    waited_ = 0;
    const Nanos start = monotonicNowNs();
    // kAhead: every receive is posted up front, so a transfer can use the link as soon as its
    // sender has the grant. kNeeded: each is posted right before its wait (below).
    auto post = [&](bool activation, int mb) -> Status {
        std::vector<void*>& reqs = activation ? act_req : grad_req;
        auto r = activation ? postRecv(act_in_, act_recv_, mb, cfg_.act_bytes)
                            : postRecv(grad_in_, grad_recv_, mb, cfg_.gradBytes());
        if (!r) {
            return r.status();
        }
        reqs[static_cast<size_t>(mb)] = r.value();
        return Status::ok();
    };
    const bool ahead = cfg_.recv_post == RecvPost::kAhead;
    for (int mb = 0; ahead && mb < m; ++mb) {
        if (s_ > 0) {
            ATLAS_RETURN_IF_ERROR(post(true, mb));
        }
        if (s_ < last_) {
            ATLAS_RETURN_IF_ERROR(post(false, mb));
        }
    }
    for (const Op& op : stageOps(cfg_.schedule, s_, cfg_.stages, m)) {
        if (op.forward) {
            if (s_ > 0) {
                if (!ahead) {
                    ATLAS_RETURN_IF_ERROR(post(true, op.mb));
                }
                ATLAS_RETURN_IF_ERROR(wait(act_req[static_cast<size_t>(op.mb)], 'A', it, op.mb));
            }
            const Nanos t0 = monotonicNowNs();
            ATLAS_RETURN_IF_ERROR(compute(cost.fwd_ns));
            const Nanos t1 = monotonicNowNs();
            busy_ += t1 - t0;
            events_.push_back({it, 'F', op.mb, t0, t1});
            if (s_ < last_) {
                auto r = postSend(act_out_, act_send_, op.mb, cfg_.act_bytes);
                if (!r) {
                    return r.status();
                }
                sends.push_back(r.value());
            }
        } else {
            if (s_ < last_) {
                if (!ahead) {
                    ATLAS_RETURN_IF_ERROR(post(false, op.mb));
                }
                ATLAS_RETURN_IF_ERROR(wait(grad_req[static_cast<size_t>(op.mb)], 'G', it, op.mb));
            }
            const Nanos t0 = monotonicNowNs();
            ATLAS_RETURN_IF_ERROR(compute(cost.bwd_ns));
            const Nanos t1 = monotonicNowNs();
            busy_ += t1 - t0;
            events_.push_back({it, 'B', op.mb, t0, t1});
            if (s_ > 0) {
                auto r = postSend(grad_out_, grad_send_, op.mb, cfg_.gradBytes());
                if (!r) {
                    return r.status();
                }
                sends.push_back(r.value());
            }
        }
    }
    const Nanos drain0 = monotonicNowNs();
    for (void* req : sends) {
        ATLAS_RETURN_IF_ERROR(wait(req, 'D', it, -1));
    }
    const Nanos end = monotonicNowNs();
    IterReport r;
    r.iteration = static_cast<uint32_t>(it);
    r.start_ns = start;
    r.end_ns = end;
    r.busy_ns = busy_;
    r.wait_ns = waited_;
    r.drain_ns = end - drain0;
    return sendFrame(fd_, Msg::kIterDone,
                     std::string(reinterpret_cast<const char*>(&r), sizeof(r)));
}

Status StageRunner::run() {
    deadline_ = monotonicNowNs() + static_cast<Nanos>(cfg_.timeout_s) * kNsPerSec;
    ATLAS_RETURN_IF_ERROR(setup());
    ATLAS_RETURN_IF_ERROR(sendFrame(fd_, Msg::kReady, {}));
    const int total = cfg_.warmup + cfg_.iterations;
    for (int it = 0; it < total; ++it) {
        auto go = recvFrame(fd_, deadline_);
        if (!go) {
            return go.status();
        }
        if (go->type != Msg::kGo) {
            return {Code::kInternal, "expected GO"};
        }
        ATLAS_RETURN_IF_ERROR(iteration(it));
    }
    nlohmann::json tl = nlohmann::json::array();
    for (const TimelineEvent& e : events_) {
        tl.push_back({e.iteration, std::string(1, e.kind), e.mb, e.start_ns, e.end_ns});
    }
    ATLAS_RETURN_IF_ERROR(sendFrame(fd_, Msg::kResult, tl.dump()));
    teardown();
    return Status::ok();
}

void StageRunner::teardown() {
    if (net_ == nullptr) {
        return;
    }
    auto dereg = [&](void* comm, MessageBuffers& s) {
        if (comm != nullptr && s.mh != nullptr) {
            (void)net_->deregMr(comm, s.mh);
            s.mh = nullptr;
        }
    };
    dereg(act_out_, act_send_);
    dereg(grad_in_, grad_recv_);
    dereg(act_in_, act_recv_);
    dereg(grad_out_, grad_send_);
    for (void** c : {&act_out_, &grad_out_}) {
        if (*c != nullptr) {
            (void)net_->closeSend(*c);
            *c = nullptr;
        }
    }
    for (void** c : {&act_in_, &grad_in_}) {
        if (*c != nullptr) {
            (void)net_->closeRecv(*c);
            *c = nullptr;
        }
    }
    for (void** c : {&act_listen_, &grad_listen_}) {
        if (*c != nullptr) {
            (void)net_->closeListen(*c);
            *c = nullptr;
        }
    }
    for (void** c : {&ctx_fwd_, &ctx_bwd_}) {
        if (*c != nullptr) {
            (void)net_->finalize(*c);
            *c = nullptr;
        }
    }
    net_ = nullptr;
}

}  // namespace

int runStage(const BenchConfig& cfg, int pipeline, int stage, int ctrl_fd) {
    Status st;
    {
        StageRunner runner(cfg, pipeline, stage, ctrl_fd);
        st = runner.run();
    }
    if (!st.isOk()) {
        (void)sendFrame(ctrl_fd, Msg::kError,
                        "pipeline " + std::to_string(pipeline) + " stage " + std::to_string(stage) +
                            ": " + st.toString());
        return 1;
    }
    return 0;
}

}  // namespace atlas::pipebench
