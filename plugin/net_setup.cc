// The setup entry points: init, finalize, setNetAttr, devices, getProperties, listen,
// connect and accept (contracts: net_impl.h). They run on NCCL's application and proxy
// service threads and may take g_mutex; the data path (net_data.cc) never does.
#include <algorithm>
#include <memory>
#include <mutex>

#include "plugin/log.h"
#include "plugin/state.h"

namespace atlas::plugin::core {

using namespace detail;

ncclResult_t init(void** ctx, uint64_t comm_id, int traffic_class, ncclDebugLogger_t log_fn,
                  ncclProfilerCallback_t prof_fn) {
    if (log_fn != nullptr) {
        setNcclLogger(log_fn);  // first, so a failing init is reported
    }
    if (prof_fn != nullptr) {
        setProfilerCallback(prof_fn);  // NCCL passes the same callback to every init
    }
    return guarded("init", [&]() -> Status {
        if (ctx == nullptr) {
            return misuse("ctx is NULL");
        }
        *ctx = nullptr;
        std::lock_guard<std::mutex> lock(g_mutex);
        ATLAS_RETURN_IF_ERROR(ensureStateLocked());
        try {
            auto c = std::make_unique<Ctx>();
            c->comm_id = comm_id;
            c->traffic_class = traffic_class;
            Status added = addHandle(HandleKind::kCtx, c.get());
            if (!added.isOk()) {
                (void)releaseIfUnusedLocked();
                return added;
            }
            try {
                g_state->contexts.insert(c.get());
            } catch (...) {
                (void)g_handles.remove(HandleKind::kCtx, c->token);
                throw;
            }
            ++g_state->refcount;
            *ctx = c->token;
            (void)c.release();
        } catch (...) {
            (void)releaseIfUnusedLocked();
            throw;
        }
        ATLAS_INFO("init commId 0x%llx trafficClass %d (%d reference(s))",
                   static_cast<unsigned long long>(comm_id), traffic_class, g_state->refcount);
        return Status::ok();
    });
}

ncclResult_t initLegacy(ncclDebugLogger_t log_fn, ncclProfilerCallback_t prof_fn) {
    if (log_fn != nullptr) {
        setNcclLogger(log_fn);
    }
    if (prof_fn != nullptr) {
        setProfilerCallback(prof_fn);
    }
    return guarded("init", [&]() -> Status {
        std::lock_guard<std::mutex> lock(g_mutex);
        if (g_state != nullptr && g_state->legacy_ref) {
            return Status::ok();
        }
        ATLAS_RETURN_IF_ERROR(ensureStateLocked());
        g_state->legacy_ref = true;
        ++g_state->refcount;
        return Status::ok();
    });
}

ncclResult_t finalize(void* ctx) {
    return guarded("finalize", [&]() -> Status {
        if (ctx == nullptr) {
            return Status::ok();  // NCCL calls finalize even when init failed
        }
        std::lock_guard<std::mutex> lock(g_mutex);
        auto* c = g_state != nullptr ? static_cast<Ctx*>(g_handles.remove(HandleKind::kCtx, ctx))
                                     : nullptr;
        if (c == nullptr) {
            return misuse(
                "finalize of an unknown context (not returned by init, or finalized "
                "twice)");
        }
        g_state->contexts.erase(c);
        // Connects NCCL gave up on under this communicator (an abort during setup).
        const int reclaimed = g_state->pending.reclaim(ctx, false, g_state->transport.get());
        if (reclaimed > 0) {
            ATLAS_INFO(
                "finalize commId 0x%llx: reclaimed %d connection attempt(s) that never "
                "completed",
                static_cast<unsigned long long>(c->comm_id), reclaimed);
        }
        delete c;
        --g_state->refcount;
        return releaseIfUnusedLocked();
    });
}

ncclResult_t setNetAttr(void* ctx, const NetHints* hints) {
    return guarded("setNetAttr", [&]() -> Status {
        if (ctx == nullptr || hints == nullptr) {
            return misuse("ctx or netAttr is NULL");
        }
        // Not under g_mutex: this runs on NCCL's progress thread, which must not wait for
        // another communicator's init. NCCL never calls it after finalize(ctx).
        Ctx* c = lookup<Ctx>(HandleKind::kCtx, ctx);
        if (c == nullptr) {
            return misuse("setNetAttr on a context init did not return (or finalized)");
        }
        TrafficKind kind;
        uint64_t calls;
        {
            std::lock_guard<std::mutex> lock(c->hints_mu);
            c->hints = *hints;
            calls = ++c->hint_calls;
            kind = trafficKindOf(true, hints->op);
        }
        // NCCL logs the same attributes at INFO (printNetAttrs); ours adds what they mean.
        ATLAS_INFO("setNetAttr commId 0x%llx (#%llu): %s -> %s traffic",
                   static_cast<unsigned long long>(c->comm_id),
                   static_cast<unsigned long long>(calls), describeHints(*hints).c_str(),
                   trafficKindName(kind));
        return Status::ok();
    });
}

ncclResult_t devices(int* ndev) {
    return guarded("devices", [&]() -> Status {
        if (ndev == nullptr) {
            return misuse("ndev is NULL");
        }
        std::lock_guard<std::mutex> lock(g_mutex);
        ATLAS_RETURN_IF_ERROR(requireStateLocked());
        *ndev = static_cast<int>(g_state->devices.size());
        return Status::ok();
    });
}

ncclResult_t getProperties(int dev, NetProperties* props) {
    return guarded("getProperties", [&]() -> Status {
        if (props == nullptr) {
            return misuse("props is NULL");
        }
        std::lock_guard<std::mutex> lock(g_mutex);
        ATLAS_RETURN_IF_ERROR(requireStateLocked());
        ATLAS_RETURN_IF_ERROR(checkDevLocked(dev));
        const Device& d = g_state->devices[dev];
        NetProperties p;
        p.name = g_state->names[dev];
        p.pci_path = g_state->pci_paths[dev];
        p.guid = static_cast<uint64_t>(dev);
        p.ptr_support = NCCL_PTR_HOST;
        p.reg_is_global = 0;
        p.force_flush = 0;
        p.speed_mbps = d.speed_mbps;
        p.port = 0;
        p.latency_us = 0;
        p.max_comms = kMaxComms;
        p.max_recvs = 1;
        p.net_device_type = NCCL_NET_DEVICE_HOST;
        p.net_device_version = NCCL_NET_DEVICE_INVALID_VERSION;
        p.vdev_count = 1;
        p.vdev = dev;
        p.max_p2p_bytes = NCCL_MAX_NET_SIZE_BYTES;
        p.max_coll_bytes = kMaxCollBytes;
        p.max_multi_request_size = 1;
        p.rail_id = NCCL_NET_ID_UNDEF;
        p.plane_id = NCCL_NET_ID_UNDEF;
        *props = p;
        return Status::ok();
    });
}

ncclResult_t listen(void* ctx, int dev, void* handle, void** listen_comm) {
    return guarded("listen", [&]() -> Status {
        if (handle == nullptr || listen_comm == nullptr) {
            return misuse("handle or listenComm is NULL");
        }
        *listen_comm = nullptr;
        transport::Transport* t = nullptr;
        transport::SocketAddress local;
        auto obj = std::make_unique<ListenObj>();
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            ATLAS_RETURN_IF_ERROR(requireStateLocked());
            const Ctx* c = nullptr;
            ATLAS_RETURN_IF_ERROR(findCtxLocked(ctx, &c));
            ATLAS_RETURN_IF_ERROR(checkDevLocked(dev));
            const Device& d = g_state->devices[dev];
            local.storage = d.addr;
            local.len = d.addr_len;
            obj->comm_id = c != nullptr ? c->comm_id : 0;
            obj->traffic_class = c != nullptr ? c->traffic_class : NCCL_NET_TRAFFIC_CLASS_UNDEF;
            // NCCL sets the connection's hints right before listen/accept as before connect.
            obj->traffic =
                c != nullptr ? const_cast<Ctx*>(c)->trafficKind() : TrafficKind::kUnknown;
            // The Transport outlives this call: a live context (or the legacy reference)
            // keeps the state, and NCCL does not finalize while it is listening.
            t = g_state->transport.get();
            obj->wan = g_state->wan.get();
            if (g_state->params.bubbles) {
                obj->bubbles = &g_state->idle_recorder;
            }
        }
        auto lc = t->listen(local, static_cast<uint8_t*>(handle));
        if (!lc) {
            return lc.status();
        }
        obj->transport = t;
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            obj->stats = g_state != nullptr ? g_state->stats.get() : nullptr;
        }
        obj->dev = dev;
        obj->comm = std::move(lc.value());
        ATLAS_RETURN_IF_ERROR(addHandle(HandleKind::kListen, obj.get()));
        g_live_comms.fetch_add(1, std::memory_order_acq_rel);
        *listen_comm = obj.release()->token;
        return Status::ok();
    });
}

ncclResult_t connect(void* ctx, int dev, const int* traffic_class, void* handle, void** send_comm) {
    return guarded("connect", [&]() -> Status {
        if (handle == nullptr || send_comm == nullptr) {
            return misuse("handle or sendComm is NULL");
        }
        *send_comm = nullptr;
        transport::Transport* t = nullptr;
        wan::WanAdmission* wan_admission = nullptr;  // lives as long as t
        uint64_t comm_id = 0;
        int tc = NCCL_NET_TRAFFIC_CLASS_UNDEF;
        netstat::StatsWriter* stats = nullptr;
        Nanos stats_interval = 0;
        TrafficKind kind = TrafficKind::kUnknown;
        PriorityOrder order = PriorityOrder::kPipelineFirst;
        auto* nccl_handle = static_cast<uint8_t*>(handle);
        PendingConnect* pc = nullptr;
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            ATLAS_RETURN_IF_ERROR(requireStateLocked());
            const Ctx* c = nullptr;
            ATLAS_RETURN_IF_ERROR(findCtxLocked(ctx, &c));
            ATLAS_RETURN_IF_ERROR(checkDevLocked(dev));
            ATLAS_RETURN_IF_ERROR(g_state->pending.resume(ctx, nccl_handle, &pc));
            if (c != nullptr) {
                comm_id = c->comm_id;
                tc = c->traffic_class;
                // The hints NCCL set right before this connect describe this connection.
                kind = const_cast<Ctx*>(c)->trafficKind();
            }
            t = g_state->transport.get();
            wan_admission = g_state->wan.get();
            order = g_state->priority_order;
            stats = g_state->stats.get();
            stats_interval = static_cast<Nanos>(g_state->params.netstat_interval_ms) * kNsPerMs;
        }
        if (traffic_class != nullptr) {
            tc = *traffic_class;
        }
        std::unique_ptr<transport::SendComm> sc;
        Status st = t->connect(pc->handle.data(), &sc);
        if (!st.isOk() || sc != nullptr) {
            // The transport freed its connector: the attempt is over, the buffer reusable.
            std::lock_guard<std::mutex> lock(g_mutex);
            g_state->pending.finish(pc, nccl_handle);
        }
        ATLAS_RETURN_IF_ERROR(st);
        if (sc == nullptr) {
            return Status::ok();  // not connected yet: NCCL calls again with the same handle
        }
        CommStatsInputs si;
        si.role = netstat::kRoleSend;
        si.comm_id = comm_id;
        si.dev = dev;
        si.traffic = kind;
        si.priority = admissionPriority(kind, order);
        if (wan_admission != nullptr) {
            // Before NCCL can isend on it: WAN flows get their admission gate here.
            const wan::TrafficHint hint{kind, si.priority};
            const wan::AttachResult wr = wan_admission->attach(*sc, comm_id, tc, hint);
            si.wan = wr.verdict.wan;
            si.link = wr.verdict.link;
            if (wr.verdict.wan) {
                ATLAS_INFO("WAN send comm to %s (%s): %s, %s (%s), %s traffic, priority %d",
                           sc->info().peer.toString().c_str(), wr.verdict.reason.c_str(),
                           wr.mode.c_str(), wan::describeClass(wr.cls).c_str(), wr.class_rule,
                           trafficKindName(wr.hint.kind), wr.hint.priority);
            }
        }
        auto obj = std::make_unique<SendObj>();
        obj->dev = dev;
        obj->comm_id = comm_id;
        obj->traffic_class = tc;
        obj->traffic = kind;
        obj->comm = std::move(sc);
        obj->requests = std::make_unique<RequestPool>(
            RequestOp::kSend, dev, obj->comm->info().nstreams, obj->comm->info().inline_bytes);
        obj->stats = stats;
        obj->requests->setStatsRecord(attachStats(stats, stats_interval, *obj->comm, si));
        obj->requests->setStreamEvents(&obj->comm->streamEvents());
        const transport::CommInfo& info = obj->comm->info();
        ATLAS_TRACE("connected dev %d to %s: %d stream(s), rtt %.3f ms%s", dev,
                    info.peer.toString().c_str(), info.nstreams,
                    static_cast<double>(info.rtt_ns) / 1e6,
                    info.authenticated ? ", authenticated" : "");
        return handOver(HandleKind::kSend, std::move(obj), send_comm);
    });
}

// Starts the bubble publisher on first use; false when it is off or could not start.
static bool bubblePublisherRunning() {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_state == nullptr) {
        return false;
    }
    startBubblesLocked(*g_state);
    return g_state->bubbles != nullptr;
}

ncclResult_t accept(void* listen_comm, void** recv_comm) {
    return guarded("accept", [&]() -> Status {
        if (recv_comm == nullptr) {
            return misuse("recvComm is NULL");
        }
        *recv_comm = nullptr;
        ListenObj* lobj = lookup<ListenObj>(HandleKind::kListen, listen_comm);
        if (lobj == nullptr) {
            return misuse("listenComm is not a live listen comm");
        }
        std::unique_ptr<transport::RecvComm> rc;
        ATLAS_RETURN_IF_ERROR(lobj->comm->accept(&rc));
        if (lobj->stats != nullptr) {
            // Strangers the listeners dropped: a process-wide figure, refreshed while NCCL
            // polls accept (the only time a listener exists).
            netstat::StatsWriter::setCounter(lobj->stats->header().auth_failures,
                                             lobj->transport->authFailures());
        }
        if (rc == nullptr) {
            return Status::ok();  // no connector finished the handshake yet
        }
        if (lobj->bubbles != nullptr && lobj->wan != nullptr && lobj->wan->isWanRecv(*rc) &&
            bubblePublisherRunning()) {
            // Only WAN receives are GPU waits worth predicting (docs/bubbles.md); set before
            // NCCL can post a receive on the comm (the observer's publication rule).
            rc->setObserver(
                std::make_unique<CommIdleObserver>(lobj->bubbles, CommIdleObserver::nextCommId()));
        }
        auto obj = std::make_unique<RecvObj>();
        obj->dev = lobj->dev;
        obj->comm_id = lobj->comm_id;
        obj->traffic_class = lobj->traffic_class;
        obj->traffic = lobj->traffic;
        obj->comm = std::move(rc);
        obj->requests =
            std::make_unique<RequestPool>(RequestOp::kRecv, lobj->dev, obj->comm->info().nstreams,
                                          obj->comm->info().inline_bytes);
        obj->requests->setStreamEvents(&obj->comm->streamEvents());
        {
            std::lock_guard<std::mutex> lock(g_mutex);
            if (g_state != nullptr && g_state->stats != nullptr) {
                obj->stats = g_state->stats.get();
                CommStatsInputs si;
                si.role = netstat::kRoleRecv;
                si.comm_id = obj->comm_id;
                si.dev = obj->dev;
                si.traffic = obj->traffic;
                si.priority = admissionPriority(obj->traffic, g_state->priority_order);
                if (lobj->wan != nullptr) {
                    const wan::WanVerdict v = lobj->wan->classifyRecv(obj->comm->info());
                    si.wan = v.wan;
                    si.link = v.link;
                }
                obj->requests->setStatsRecord(attachStats(
                    obj->stats, static_cast<Nanos>(g_state->params.netstat_interval_ms) * kNsPerMs,
                    *obj->comm, si));
            }
        }
        const transport::CommInfo& info = obj->comm->info();
        ATLAS_TRACE("accepted dev %d from %s: %d stream(s), rtt %.3f ms%s", lobj->dev,
                    info.peer.toString().c_str(), info.nstreams,
                    static_cast<double>(info.rtt_ns) / 1e6,
                    info.authenticated ? ", authenticated" : "");
        return handOver(HandleKind::kRecv, std::move(obj), recv_comm);
    });
}

}  // namespace atlas::plugin::core
