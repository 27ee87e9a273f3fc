#include "perf/atlas-sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "perf/atlas-sim/event_queue.h"
#include "perf/atlas-sim/schedule.h"

namespace atlas::sim {

const char* activityName(ActivityKind kind) {
    switch (kind) {
        case ActivityKind::kForward:
            return "forward";
        case ActivityKind::kBackward:
            return "backward";
        case ActivityKind::kAllReduce:
            return "allreduce";
        case ActivityKind::kPrefill:
            return "prefill";
    }
    return "unknown";
}

namespace {

enum EventType : uint32_t {
    kTaskDone = 1,   // a = group
    kArrival,        // a = group, b = micro-batch << 1 | backward
    kLinkWake,       // a = link, b = version
    kArFlowDone,     // a = stage (one WAN flow of its all-reduce delivered)
    kAllReduceDone,  // a = stage
};

enum class Phase : uint8_t { kTasks, kWaitAllReduce, kAllReduce, kBarrier };

// WAN transfer tags: p2p = dst group | micro-batch << 20 | backward << 40; all-reduce flows
// carry kTagAllReduce | stage.
constexpr uint64_t kTagAllReduce = 1ULL << 63;
// Connection keys: p2p = src group << 1 | backward; all-reduce edges live above kConnAr.
constexpr uint64_t kConnAr = 1ULL << 62;

Nanos bytesNs(double bytes, double bytes_per_sec) {
    return bytes <= 0.0 ? 0 : static_cast<Nanos>(std::ceil(bytes / bytes_per_sec * 1e9 - 1e-6));
}

class Engine final : public PrefillHost {
  public:
    Engine(const SimConfig& c, const Layout& l, const RunOptions& o)
        : c_(c), l_(l), o_(o), pp_(l.pp), dp_(l.dp), m_(c.job.micro_batches) {}

    Status init();
    Result<RunResult> run();

    bool prefillAllowed(int g) const override {
        const Group& gr = groups_[static_cast<size_t>(g)];
        return !finished_ && !gr.busy && !gr.pending && !gr.ar_waiting;
    }
    Nanos waitStart(int g) const override { return groups_[static_cast<size_t>(g)].idle_since; }
    void prefillFinished(int g, Nanos now) override;
    void recordPrefill(int g, Nanos start, Nanos end, int32_t request) override;

  private:
    struct Group {
        int32_t pipeline = 0;
        int32_t stage = 0;
        int32_t dc = 0;
        uint32_t next_task = 0;
        Phase phase = Phase::kTasks;
        bool busy = false;        // a task or the all-reduce is running
        bool pending = false;     // a task is ready but waits for a prefill chunk
        bool ar_waiting = false;  // the all-reduce is ready; this group must join it
        Nanos idle_since = 0;     // end of the last training activity
        Nanos ready_at = 0;       // when the pending activity became ready
        Nanos task_start = 0;
        Task task;
    };
    struct StageAr {
        int done = 0;     // replicas that finished their backwards
        int blocked = 0;  // replicas still running a prefill chunk
        Nanos start = 0;
        Nanos intra_end = 0;
        int wan_pending = 0;
        Nanos wan_last = 0;
        Nanos wan_latency = 0;
    };

    int gid(int pipeline, int stage) const { return pipeline * pp_ + stage; }
    size_t flag(int g, int mb) const { return static_cast<size_t>(g) * m_ + mb; }
    Nanos taskNs(int g, const Group& gr, const Task& t) const;
    bool inputReady(int g, const Task& t) const;
    void tryAdvance(int g, Nanos now);
    void startTask(int g, Nanos ready, Nanos now);
    void onTaskDone(int g, Nanos now);
    Status send(int src, int dst, int mb, bool backward, uint64_t bytes, Nanos now);
    void observeIdle(int g, Nanos start, Nanos end);
    void notifyIdle(int g, Nanos now);
    void allReduceReady(int s, Nanos now);
    Status startAllReduce(int s, Nanos now);
    void onAllReduceDone(int s, Nanos now);
    void barrier(Nanos now);
    void account(int g, ActivityKind kind, int index, Nanos start, Nanos end);
    void deliver();
    void reschedule(int link);

    const SimConfig& c_;
    const Layout& l_;
    const RunOptions o_;
    const int pp_;
    const int dp_;
    const int m_;
    std::vector<StageCost> cost_;
    std::vector<std::vector<Task>> order_;
    std::vector<Group> groups_;
    std::vector<StageAr> ar_;
    std::vector<uint8_t> fwd_in_;
    std::vector<uint8_t> bwd_in_;
    std::unique_ptr<WanNetwork> wan_;
    std::vector<Nanos> link_wake_at_;
    std::vector<uint64_t> link_version_;
    std::vector<WanDelivery> deliveries_;
    std::unique_ptr<BubbleTea> bt_;
    EventQueue q_;
    Status error_;

    int iteration_ = 0;
    int reduced_ = 0;
    bool finished_ = false;
    Nanos measure_start_ = sched::kNever;
    RunResult r_;
};

Status Engine::init() {
    cost_ = stageCosts(c_);
    for (int s = 0; s < pp_; ++s) {
        order_.push_back(stageOrder(c_.job.schedule, s, pp_, m_));
    }
    groups_.resize(static_cast<size_t>(dp_) * pp_);
    for (int d = 0; d < dp_; ++d) {
        for (int s = 0; s < pp_; ++s) {
            Group& gr = groups_[static_cast<size_t>(gid(d, s))];
            gr.pipeline = d;
            gr.stage = s;
            gr.dc = l_.dcOf(d, s);
        }
    }
    ar_.resize(static_cast<size_t>(pp_));
    fwd_in_.assign(groups_.size() * m_, 0);
    bwd_in_.assign(groups_.size() * m_, 0);
    Result<std::unique_ptr<WanNetwork>> wan =
        WanNetwork::create(c_.cluster, c_.network, o_.record_link_rates);
    if (!wan.isOk()) {
        return wan.status();
    }
    wan_ = std::move(wan.value());
    link_wake_at_.assign(static_cast<size_t>(wan_->linkCount()), sched::kNever);
    link_version_.assign(static_cast<size_t>(wan_->linkCount()), 0);
    r_.groups.resize(groups_.size());
    if (o_.record_timeline) {
        r_.timeline.resize(groups_.size());
    }
    if (o_.record_idle) {
        r_.idle.resize(groups_.size());
    }
    if (o_.bubbletea) {
        if (c_.bubbletea.windows == WindowSource::kOracle &&
            (o_.oracle == nullptr || o_.oracle->size() != groups_.size())) {
            return Status(Code::kInternal, "simulate: oracle windows missing");
        }
        bt_ =
            std::make_unique<BubbleTea>(c_, static_cast<int>(groups_.size()), &q_, this, o_.oracle);
    }
    return Status::ok();
}

Nanos Engine::taskNs(int g, const Group& gr, const Task& t) const {
    const StageCost& sc = cost_[static_cast<size_t>(gr.stage)];
    const Nanos base = t.backward ? sc.backward_ns : sc.forward_ns;
    if (c_.jitter.compute <= 0.0) {
        return base;
    }
    const double u = hashUniform(c_.seed, static_cast<uint64_t>(iteration_),
                                 static_cast<uint64_t>(g), gr.next_task);
    const double f = 1.0 + c_.jitter.compute * (2.0 * u - 1.0);
    return static_cast<Nanos>(std::llround(static_cast<double>(base) * f));
}

bool Engine::inputReady(int g, const Task& t) const {
    const Group& gr = groups_[static_cast<size_t>(g)];
    if (!t.backward) {
        return gr.stage == 0 || fwd_in_[flag(g, t.micro_batch)] != 0;
    }
    return gr.stage == pp_ - 1 || bwd_in_[flag(g, t.micro_batch)] != 0;
}

void Engine::account(int g, ActivityKind kind, int index, Nanos start, Nanos end) {
    if (start >= measure_start_) {
        GroupTotals& t = r_.groups[static_cast<size_t>(g)];
        const Nanos d = end - start;
        switch (kind) {
            case ActivityKind::kForward:
            case ActivityKind::kBackward:
                t.compute_ns += d;
                break;
            case ActivityKind::kAllReduce:
                t.allreduce_ns += d;
                break;
            case ActivityKind::kPrefill:
                t.prefill_ns += d;
                break;
        }
    }
    if (o_.record_timeline && iteration_ >= o_.record_from_iteration) {
        r_.timeline[static_cast<size_t>(g)].push_back({start, end, iteration_, index, kind});
    }
}

void Engine::observeIdle(int g, Nanos start, Nanos end) {
    if (end <= start) {
        return;
    }
    if (o_.record_idle) {
        r_.idle[static_cast<size_t>(g)].push_back({start, end});
    }
    if (bt_) {
        bt_->observeIdle(g, {start, end});
    }
}

void Engine::notifyIdle(int g, Nanos now) {
    if (bt_ && prefillAllowed(g)) {
        bt_->onIdle(g, now);
    }
}

void Engine::tryAdvance(int g, Nanos now) {
    Group& gr = groups_[static_cast<size_t>(g)];
    if (gr.phase != Phase::kTasks || gr.busy || gr.pending) {
        return;
    }
    const Task& t = order_[static_cast<size_t>(gr.stage)][gr.next_task];
    if (!inputReady(g, t)) {
        notifyIdle(g, now);
        return;
    }
    observeIdle(g, gr.idle_since, now);
    if (bt_ && bt_->chunkRunning(g)) {
        gr.pending = true;
        gr.ready_at = now;
        return;
    }
    startTask(g, now, now);
}

void Engine::startTask(int g, Nanos ready, Nanos now) {
    Group& gr = groups_[static_cast<size_t>(g)];
    if (now > ready) {
        r_.training_delay_ns += now - ready;
        ++r_.delayed_starts;
    }
    gr.task = order_[static_cast<size_t>(gr.stage)][gr.next_task];
    gr.busy = true;
    gr.task_start = now;
    q_.push(now + taskNs(g, gr, gr.task), kTaskDone, static_cast<uint32_t>(g));
}

void Engine::reschedule(int link) {
    const Nanos next = wan_->nextEventNs(link);
    const auto li = static_cast<size_t>(link);
    if (next == link_wake_at_[li]) {
        return;
    }
    ++link_version_[li];
    link_wake_at_[li] = next;
    if (next != sched::kNever) {
        q_.push(next, kLinkWake, static_cast<uint32_t>(link), link_version_[li]);
    }
}

void Engine::deliver() {
    for (const WanDelivery& d : deliveries_) {
        if ((d.tag & kTagAllReduce) != 0) {
            q_.push(d.time_ns, kArFlowDone, static_cast<uint32_t>(d.tag & 0xffffffffu));
        } else {
            q_.push(d.time_ns, kArrival, static_cast<uint32_t>(d.tag & 0xfffff), d.tag >> 20);
        }
    }
    deliveries_.clear();
}

Status Engine::send(int src, int dst, int mb, bool backward, uint64_t bytes, Nanos now) {
    const Group& a = groups_[static_cast<size_t>(src)];
    const Group& b = groups_[static_cast<size_t>(dst)];
    const uint64_t payload = static_cast<uint64_t>(mb) << 1 | (backward ? 1 : 0);
    if (a.dc == b.dc) {
        const Nanos t =
            now + bytesNs(static_cast<double>(bytes) / l_.tp, c_.cluster.intra_bytes_per_sec) +
            c_.cluster.intra_latency_ns;
        q_.push(t, kArrival, static_cast<uint32_t>(dst), payload);
        return Status::ok();
    }
    const int link = wan_->linkIndex(a.dc, b.dc);
    if (bytes == 0) {
        q_.push(now + wan_->oneWayNs(link), kArrival, static_cast<uint32_t>(dst), payload);
        return Status::ok();
    }
    const sched::FlowClass cls{
        a.pipeline, a.stage, backward ? sched::Direction::kBackward : sched::Direction::kForward,
        sched::admissionPriority(sched::TrafficKind::kPipeline, c_.network.traffic_priority)};
    const uint64_t conn = static_cast<uint64_t>(src) << 1 | (backward ? 1 : 0);
    const uint64_t tag = static_cast<uint64_t>(dst) | payload << 20;
    ATLAS_RETURN_IF_ERROR(wan_->send(link, conn, cls, bytes, tag, now, &deliveries_));
    deliver();
    reschedule(link);
    return Status::ok();
}

void Engine::onTaskDone(int g, Nanos now) {
    Group& gr = groups_[static_cast<size_t>(g)];
    gr.busy = false;
    gr.idle_since = now;
    const Task t = gr.task;
    account(g, t.backward ? ActivityKind::kBackward : ActivityKind::kForward, t.micro_batch,
            gr.task_start, now);
    Status s;
    if (!t.backward && gr.stage + 1 < pp_) {
        s = send(g, g + 1, t.micro_batch, false,
                 cost_[static_cast<size_t>(gr.stage)].activation_bytes, now);
    } else if (t.backward && gr.stage > 0) {
        s = send(g, g - 1, t.micro_batch, true,
                 cost_[static_cast<size_t>(gr.stage - 1)].activation_bytes, now);
    }
    if (!s.isOk() && error_.isOk()) {
        error_ = s;
    }
    ++gr.next_task;
    if (gr.next_task < order_[static_cast<size_t>(gr.stage)].size()) {
        tryAdvance(g, now);
        return;
    }
    gr.phase = Phase::kWaitAllReduce;
    StageAr& ar = ar_[static_cast<size_t>(gr.stage)];
    if (++ar.done == dp_) {
        allReduceReady(gr.stage, now);
    } else {
        notifyIdle(g, now);
    }
}

void Engine::allReduceReady(int s, Nanos now) {
    StageAr& ar = ar_[static_cast<size_t>(s)];
    ar.blocked = 0;
    for (int d = 0; d < dp_; ++d) {
        const int g = gid(d, s);
        Group& gr = groups_[static_cast<size_t>(g)];
        observeIdle(g, gr.idle_since, now);
        gr.ar_waiting = true;
        gr.ready_at = now;
        if (bt_ && bt_->chunkRunning(g)) {
            ++ar.blocked;
        }
    }
    if (ar.blocked == 0) {
        Status st = startAllReduce(s, now);
        if (!st.isOk() && error_.isOk()) {
            error_ = st;
        }
    }
}

Status Engine::startAllReduce(int s, Nanos now) {
    StageAr& ar = ar_[static_cast<size_t>(s)];
    ar.start = now;
    for (int d = 0; d < dp_; ++d) {
        Group& gr = groups_[static_cast<size_t>(gid(d, s))];
        if (now > gr.ready_at) {
            r_.training_delay_ns += now - gr.ready_at;
            ++r_.delayed_starts;
        }
        gr.ar_waiting = false;
        gr.busy = true;
        gr.phase = Phase::kAllReduce;
    }
    const StageCost& sc = cost_[static_cast<size_t>(s)];
    const double per_gpu = static_cast<double>(sc.grad_bytes) / l_.tp;
    const double bw = c_.cluster.intra_bytes_per_sec;
    // Ring order = pipeline order; every place where consecutive replicas sit in different
    // DCs is a WAN edge of the ring.
    std::vector<std::pair<int, int>> edges;
    for (int d = 0; d < dp_ && dp_ > 1; ++d) {
        const int a = l_.dcOf(d, s);
        const int b = l_.dcOf((d + 1) % dp_, s);
        if (a != b) {
            edges.emplace_back(a, b);
        }
    }
    if (edges.empty() || sc.grad_bytes == 0) {
        const Nanos dur =
            ringAllReduceNs(static_cast<uint64_t>(per_gpu), dp_, bw, c_.cluster.intra_latency_ns);
        q_.push(now + dur, kAllReduceDone, static_cast<uint32_t>(s));
        return Status::ok();
    }
    // Bandwidth term inside the DCs, WAN edges as flows on the links (all tp rings of the
    // stage cross the same link), then the ring's 2(n-1) steps of WAN latency.
    ar.intra_end = now + ringAllReduceNs(static_cast<uint64_t>(per_gpu), dp_, bw, 0);
    ar.wan_pending = static_cast<int>(edges.size());
    ar.wan_last = now;
    const auto wan_bytes =
        static_cast<uint64_t>(2.0 * (dp_ - 1) / dp_ * static_cast<double>(sc.grad_bytes));
    Nanos max_one_way = 0;
    for (size_t i = 0; i < edges.size(); ++i) {
        const int link = wan_->linkIndex(edges[i].first, edges[i].second);
        max_one_way = std::max(max_one_way, wan_->oneWayNs(link));
        const sched::FlowClass cls{dp_, s, sched::Direction::kBackward,
                                   sched::admissionPriority(sched::TrafficKind::kDataParallel,
                                                            c_.network.traffic_priority)};
        ATLAS_RETURN_IF_ERROR(wan_->send(link, kConnAr | static_cast<uint64_t>(s) << 16 | i, cls,
                                         wan_bytes, kTagAllReduce | static_cast<uint64_t>(s), now,
                                         &deliveries_));
        deliver();
        reschedule(link);
    }
    ar.wan_latency = (2 * (dp_ - 1) - 1) * max_one_way;
    return Status::ok();
}

void Engine::onAllReduceDone(int s, Nanos now) {
    StageAr& ar = ar_[static_cast<size_t>(s)];
    for (int d = 0; d < dp_; ++d) {
        const int g = gid(d, s);
        Group& gr = groups_[static_cast<size_t>(g)];
        gr.busy = false;
        gr.phase = Phase::kBarrier;
        gr.idle_since = now;
        account(g, ActivityKind::kAllReduce, s, ar.start, now);
    }
    if (++reduced_ == pp_) {
        barrier(now);
        return;
    }
    for (int d = 0; d < dp_; ++d) {
        notifyIdle(gid(d, s), now);
    }
}

void Engine::barrier(Nanos now) {
    r_.iteration_end_ns.push_back(now);
    ++iteration_;
    if (iteration_ == c_.warmup_iterations) {
        measure_start_ = now;
        if (bt_) {
            bt_->start(now);
        }
    }
    if (iteration_ == c_.iterations) {
        finished_ = true;
        r_.end_ns = now;
        return;
    }
    std::fill(ar_.begin(), ar_.end(), StageAr{});
    reduced_ = 0;
    std::fill(fwd_in_.begin(), fwd_in_.end(), 0);
    std::fill(bwd_in_.begin(), bwd_in_.end(), 0);
    for (Group& gr : groups_) {
        gr.phase = Phase::kTasks;
        gr.next_task = 0;
    }
    for (size_t g = 0; g < groups_.size(); ++g) {
        tryAdvance(static_cast<int>(g), now);
    }
}

void Engine::prefillFinished(int g, Nanos now) {
    Group& gr = groups_[static_cast<size_t>(g)];
    if (finished_) {
        return;
    }
    if (gr.pending) {
        gr.pending = false;
        startTask(g, gr.ready_at, now);
        return;
    }
    if (gr.ar_waiting) {
        StageAr& ar = ar_[static_cast<size_t>(gr.stage)];
        if (ar.blocked > 0 && --ar.blocked == 0) {
            Status st = startAllReduce(gr.stage, now);
            if (!st.isOk() && error_.isOk()) {
                error_ = st;
            }
        }
        return;
    }
    notifyIdle(g, now);
}

void Engine::recordPrefill(int g, Nanos start, Nanos end, int32_t request) {
    account(g, ActivityKind::kPrefill, request, start, end);
}

Result<RunResult> Engine::run() {
    if (c_.warmup_iterations == 0) {
        measure_start_ = 0;
        if (bt_) {
            bt_->start(0);
        }
    }
    for (size_t g = 0; g < groups_.size(); ++g) {
        tryAdvance(static_cast<int>(g), 0);
    }
    uint64_t events = 0;
    while (!finished_ && !q_.empty() && error_.isOk()) {
        const Event e = q_.pop();
        ++events;
        switch (e.type) {
            case kTaskDone:
                onTaskDone(static_cast<int>(e.a), e.time_ns);
                break;
            case kArrival: {
                const int g = static_cast<int>(e.a);
                const int mb = static_cast<int>(e.b >> 1);
                ((e.b & 1) != 0 ? bwd_in_ : fwd_in_)[flag(g, mb)] = 1;
                tryAdvance(g, e.time_ns);
                break;
            }
            case kLinkWake: {
                if (e.b != link_version_[e.a]) {
                    break;  // superseded
                }
                link_wake_at_[e.a] = sched::kNever;
                Status s = wan_->advance(static_cast<int>(e.a), e.time_ns, &deliveries_);
                if (!s.isOk()) {
                    error_ = s;
                }
                deliver();
                reschedule(static_cast<int>(e.a));
                break;
            }
            case kArFlowDone: {
                StageAr& ar = ar_[e.a];
                ar.wan_last = std::max(ar.wan_last, e.time_ns);
                if (--ar.wan_pending == 0) {
                    q_.push(std::max(ar.intra_end, ar.wan_last) + ar.wan_latency, kAllReduceDone,
                            e.a);
                }
                break;
            }
            case kAllReduceDone:
                onAllReduceDone(static_cast<int>(e.a), e.time_ns);
                break;
            default:
                if (bt_) {
                    bt_->handle(e);
                }
                break;
        }
    }
    if (!error_.isOk()) {
        return error_;
    }
    if (!finished_) {
        return Status(Code::kInternal,
                      "simulate: ran out of events before the last iteration "
                      "ended (a dependency can never be met)");
    }
    if (bt_) {
        bt_->stop();
        // A chunk still running when training ended only counts up to the end.
        for (size_t g = 0; g < groups_.size(); ++g) {
            if (bt_->chunkRunning(static_cast<int>(g)) &&
                bt_->chunkEnd(static_cast<int>(g)) > r_.end_ns) {
                const Nanos excess = bt_->chunkEnd(static_cast<int>(g)) - r_.end_ns;
                r_.groups[g].prefill_ns -= excess;
                if (o_.record_timeline && !r_.timeline[g].empty() &&
                    r_.timeline[g].back().kind == ActivityKind::kPrefill) {
                    r_.timeline[g].back().end_ns = r_.end_ns;
                }
            }
        }
        r_.prefill = bt_->finish();
    }
    r_.measure_start_ns = measure_start_;
    r_.links = wan_->stats();
    r_.events = events;
    return std::move(r_);
}

}  // namespace

Result<RunResult> simulate(const SimConfig& config, const Layout& layout, const RunOptions& opts) {
    if (layout.dp != config.par.dp || layout.pp != config.par.pp ||
        layout.group_dc.size() != static_cast<size_t>(layout.groups())) {
        return Status(Code::kInvalidArgument, "simulate: layout does not match the config");
    }
    Engine engine(config, layout, opts);
    ATLAS_RETURN_IF_ERROR(engine.init());
    return engine.run();
}

}  // namespace atlas::sim
