// The plugin's process-wide state: created by the first init, torn down by the last
// finalize, the last comm's close, or the library destructor (net_impl.h, "Lifecycle").
#include "plugin/state.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <set>

#include "channel/channel_name.h"
#include "channel/local_rank.h"
#include "options/env.h"
#include "plugin/log.h"

#ifndef ATLAS_VERSION
#define ATLAS_VERSION "dev"
#endif

namespace atlas::plugin {

static_assert(transport::kHandleSize == NCCL_NET_HANDLE_MAXSIZE,
              "the transport's handle must be exactly the buffer NCCL provides");
static_assert(transport::kMaxRequests == NCCL_NET_MAX_REQUESTS);

namespace detail {

constinit HandleTable g_handles;
std::mutex g_mutex;
GlobalState* g_state = nullptr;
std::atomic<int> g_live_comms{0};
std::atomic<seams::FaultHook> g_fault_hook{nullptr};

namespace {

std::set<std::string>* g_interned = nullptr;      // guarded by g_mutex; strings given to NCCL
const InterfaceSource* g_iface_source = nullptr;  // guarded by g_mutex (test seam)
std::string* g_sysfs_root = nullptr;              // guarded by g_mutex (test seam)
std::atomic<bool> g_abort_on_error{false};

const char* internLocked(const std::string& s) {
    if (g_interned == nullptr) {
        g_interned = new std::set<std::string>();
    }
    return g_interned->insert(s).first->c_str();
}

}  // namespace

Status findCtxLocked(void* ctx, const Ctx** out) {
    *out = nullptr;
    if (ctx == nullptr) {
        return Status::ok();
    }
    const Ctx* c = lookup<Ctx>(HandleKind::kCtx, ctx);
    if (c == nullptr) {
        return misuse("unknown context " + std::to_string(reinterpret_cast<uintptr_t>(ctx)) +
                      " (not returned by init, or already finalized)");
    }
    *out = c;
    return Status::ok();
}

// The in-flight request behind NCCL's request handle, through its comm's table entry; nullptr
// for anything else (reads only the table and live pools).
PluginRequest* findRequest(const void* handle) {
    uint32_t owner = 0;
    if (!RequestPool::ownerIndex(handle, &owner)) {
        return nullptr;
    }
    HandleKind kind{};
    void* obj = g_handles.findAt(owner, &kind);
    RequestPool* pool = nullptr;
    if (kind == HandleKind::kSend) {
        pool = static_cast<SendObj*>(obj)->requests.get();
    } else if (kind == HandleKind::kRecv) {
        pool = static_cast<RecvObj*>(obj)->requests.get();
    }
    return pool != nullptr ? pool->find(handle) : nullptr;
}

Status requireStateLocked() {
    if (g_state == nullptr) {
        return misuse("the plugin is not initialized (init has not succeeded)");
    }
    return Status::ok();
}

Status checkDevLocked(int dev) {
    int n = static_cast<int>(g_state->devices.size());
    if (dev < 0 || dev >= n) {
        return misuse("device " + std::to_string(dev) + " out of range (" + std::to_string(n) +
                      " devices)");
    }
    return Status::ok();
}

// Bubble prediction is best effort: a channel that cannot be created is logged once and the
// plugin runs on without it. Started by the first WAN receive comm, so processes without WAN
// traffic (tests, intra-DC jobs, two ranks of one host on loopback) create no channel.
void startBubblesLocked(GlobalState& st) {
    if (!st.params.bubbles || st.bubbles_tried) {
        return;
    }
    st.bubbles_tried = true;
    BubbleConfig bc;
    auto rank = channel::resolveLocalRank(static_cast<int>(st.params.local_rank), processEnv());
    if (!rank) {
        ATLAS_WARN("%s; bubbles not published", rank.status().message().c_str());
        return;
    }
    auto name = channel::resolveChannelName(
        st.params.bubble_channel.empty() ? nullptr : st.params.bubble_channel.c_str(),
        rank.value().rank);
    if (!name) {
        ATLAS_WARN("ATLAS_BUBBLE_CHANNEL: %s; bubbles not published",
                   name.status().toString().c_str());
        return;
    }
    bc.channel_name = name.value();
    bc.pipeline.predictor.guard_ns = static_cast<Nanos>(st.params.bubble_guard_us) * kNsPerUs;
    auto pub = BubblePublisher::start(bc, &st.idle_recorder, st.clock, makeLibraryLogger());
    if (!pub) {
        ATLAS_WARN("bubble channel %s not published: %s", bc.channel_name.c_str(),
                   pub.status().toString().c_str());
        return;
    }
    st.bubbles = std::move(pub.value());
    ATLAS_INFO("bubble channel %s: publishing predicted idle windows (guard %llu us)",
               st.bubbles->channelName().c_str(),
               static_cast<unsigned long long>(st.params.bubble_guard_us));
}

// Creates the global state if there is none: registry, devices, engine pool.
Status ensureStateLocked() {
    if (g_state != nullptr) {
        return Status::ok();
    }
    auto st = std::make_unique<GlobalState>();
    ParamsParse parsed = parseParams(processEnv());
    // These two matter for reporting the parse errors themselves.
    setStderrMirror(parsed.params.debug_stderr);
    g_abort_on_error.store(parsed.params.abort_on_error, std::memory_order_relaxed);
    for (const std::string& w : parsed.warnings) {
        ATLAS_WARN("%s", w.c_str());
    }
    for (const std::string& w : options::unknownEnvWarningsOnce()) {
        ATLAS_WARN("%s", w.c_str());
    }
    ATLAS_RETURN_IF_ERROR(parsed.status());
    st->params = std::move(parsed.params);
    auto order = parsePriorityOrder(st->params.traffic_priority);
    if (!order) {
        return order.status();
    }
    st->priority_order = order.value();
    auto wan_config = wan::configFromParams(st->params);
    if (!wan_config) {
        return wan_config.status();
    }
    st->wan =
        std::make_unique<wan::WanAdmission>(std::move(wan_config.value()), makeLibraryLogger());
    for (const std::string& line : describeParams(st->params, false)) {
        ATLAS_INFO("%s", line.c_str());
    }
    for (const std::string& line : describeParams(st->params, true)) {
        ATLAS_TRACE("%s", line.c_str());
    }

    auto stats = createStatsWriter(st->params);
    if (!stats) {
        ATLAS_WARN("stats segment not published (%s); atlas-netstat will not see this process",
                   stats.status().toString().c_str());
    } else {
        st->stats = std::move(stats.value());
        if (st->stats != nullptr) {
            ATLAS_INFO("stats segment %s (atlas-netstat)", st->stats->path().c_str());
        }
    }

    DiscoveryOptions opts;
    opts.ifname_spec = st->params.socket_ifname;
    opts.family = st->params.socket_family;
    if (g_sysfs_root != nullptr && !g_sysfs_root->empty()) {
        opts.sysfs_net_root = *g_sysfs_root;
    }
    const InterfaceSource& source =
        g_iface_source != nullptr ? *g_iface_source : SystemInterfaceSource::instance();
    auto devs = discoverDevices(opts, source);
    if (!devs) {
        return devs.status();
    }
    st->devices = std::move(devs.value());
    int max_speed = 0;
    std::string summary;
    for (const Device& d : st->devices) {
        st->names.push_back(internLocked(d.name));
        st->pci_paths.push_back(d.pci_path.empty() ? nullptr : internLocked(d.pci_path));
        max_speed = std::max(max_speed, d.speed_mbps);
        summary += " [" + std::to_string(d.index) + "]" + d.name + ":" + d.addressString() + "/" +
                   std::to_string(d.speed_mbps) + "Mbps";
    }

    transport::TransportConfig config =
        makeTransportConfig(st->params, max_speed, st->wan->config().gatesWanFlows());
    config.logger = makeLibraryLogger();
    config.clock = &st->clock;
    // A comm on a WAN link another comm of this process already measured is planned from
    // that estimate, not the device speed (issue 17). The state owns both the admission and
    // the transport, and comms connect only while it lives.
    config.measured_path_bps = [wan = st->wan.get()](const transport::CommInfo& info) noexcept {
        try {
            return wan->measuredPathBps(info);
        } catch (...) {
            return uint64_t{0};  // no estimate: the configured rate, as before
        }
    };
    auto created = transport::Transport::create(config);
    if (!created) {
        return created.status();
    }
    st->transport = std::move(created.value());
    ATLAS_INFO("Atlas %s: %zu device(s):%s; io=%s engine_threads=%d streams=%s", ATLAS_VERSION,
               st->devices.size(), summary.c_str(),
               transport::ioBackendName(st->transport->backend()), config.engine_threads,
               config.nstreams == 0 ? "auto" : std::to_string(config.nstreams).c_str());
    g_state = st.release();
    return Status::ok();
}

// Destroys the state once nothing references it. Joining the engine threads happens here
// (Transport's destructor), under g_mutex: engine threads never take g_mutex.
Status releaseIfUnusedLocked() {
    if (g_state == nullptr || g_state->refcount > 0) {
        return Status::ok();
    }
    int open = g_live_comms.load(std::memory_order_acquire);
    if (open > 0 || g_state->transport->liveComms() > 0) {
        // Destroying the engine pool under open comms would free what NCCL still uses; keep
        // it, and let a later init reuse it or the library destructor retry.
        return misuse("last finalize with " + std::to_string(open) +
                      " comm(s) still open; keeping the engine threads alive");
    }
    // Attempts of the v8..v10 paths (no finalize of their own); none is left otherwise.
    (void)g_state->pending.reclaim(nullptr, true, g_state->transport.get());
    delete g_state;
    g_state = nullptr;
    ATLAS_INFO("last reference released: engine threads stopped");
    return Status::ok();
}

}  // namespace detail

namespace {

using namespace detail;

// Teardown at dlclose/exit. try_lock: at exit another thread may be stuck inside init.
bool unloadState() noexcept {
    try {
        std::unique_lock<std::mutex> lock(g_mutex, std::try_to_lock);
        if (!lock.owns_lock()) {
            return false;
        }
        if (g_state != nullptr) {
            int open = g_live_comms.load(std::memory_order_acquire);
            if (open > 0 || g_state->transport->liveComms() > 0) {
                ATLAS_WARN("unloading with %d comm(s) still open: engine threads left running",
                           open);
                return false;
            }
            (void)g_state->pending.reclaim(nullptr, true, g_state->transport.get());
            for (Ctx* c : g_state->contexts) {
                (void)g_handles.remove(HandleKind::kCtx, c->token);
                delete c;
            }
            delete g_state;
            g_state = nullptr;
        }
        // Registrations NCCL never released (their comms are closed); then the table's own
        // storage, which must not outlive the library.
        g_handles.removeAll(HandleKind::kMr, [](void* mr) { delete static_cast<MrHandle*>(mr); });
        (void)g_handles.releaseStorage();
        delete g_interned;
        g_interned = nullptr;
        return true;
    } catch (...) {
        return false;
    }
}

__attribute__((destructor)) void atlasPluginDestructor() {
    unloadState();
}

}  // namespace

ncclResult_t toNcclResult(Code code) {
    switch (code) {
        case Code::kOk:
            return ncclSuccess;
        case Code::kSystem:
            return ncclSystemError;
        case Code::kInternal:
            return ncclInternalError;
        case Code::kInvalidArgument:
            return ncclInvalidArgument;
        case Code::kInvalidUsage:
            return ncclInvalidUsage;
        case Code::kRemote:
            return ncclRemoteError;
        case Code::kTimeout:
            return ncclRemoteError;
        case Code::kUnavailable:
            return ncclSystemError;
    }
    return ncclInternalError;
}

namespace core {

ncclResult_t reject(const char* func, Code code, const char* fmt, ...) noexcept {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    logMessage(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__, "%s failed (%s): %s", func,
               codeName(code), msg);
    if (g_abort_on_error.load(std::memory_order_relaxed)) {
        logMessage(NCCL_LOG_WARN, NCCL_ALL, __FILE__, __LINE__,
                   "ATLAS_ABORT_ON_ERROR is set: aborting");
        std::abort();
    }
    return toNcclResult(code);
}

}  // namespace core

namespace seams {

using namespace detail;

void setFaultHook(FaultHook hook) {
    g_fault_hook.store(hook, std::memory_order_release);
}

void setInterfaceSource(const InterfaceSource* source, const std::string& sysfs_net_root) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_iface_source = source;
    if (g_sysfs_root == nullptr) {
        g_sysfs_root = new std::string();
    }
    *g_sysfs_root = sysfs_net_root;
}

StateSnapshot snapshot() {
    std::lock_guard<std::mutex> lock(g_mutex);
    StateSnapshot s;
    s.live_comms = g_live_comms.load(std::memory_order_acquire);
    if (g_state != nullptr) {
        s.alive = true;
        s.refcount = g_state->refcount;
        s.legacy_ref = g_state->legacy_ref;
        s.live_contexts = static_cast<int>(g_state->contexts.size());
        s.ndevs = static_cast<int>(g_state->devices.size());
    }
    return s;
}

bool unloadNow() {
    return unloadState();
}

}  // namespace seams

}  // namespace atlas::plugin
