// NCCL's transfer hints (setNetAttr, v11/v12) and profiler events (v10+), driven through the
// loaded .so in the order NCCL uses them: init with a profiler callback, setNetAttr on the
// context with the connection's attributes, listen/connect/accept, then per-operation
// setNetAttr and transfers whose isend/irecv carry a phandle.
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fcntl.h>
#include <climits>
#include <cstring>
#include <mutex>
#include <vector>

#include "plugin/wan/shm_layout.h"
#include "tests/abi/isolate.h"
#include "tests/abi/suites.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(60 * kNsPerSec);

// ---------------------------------------------------------------------------------------------
// A recording profiler callback, standing in for NCCL's ncclProfilerCallback.

struct ProfEvent {
    int type = -1;
    void* handle = nullptr;   // the event handle the call refers to
    void* phandle = nullptr;  // Start: the parent
    int64_t plugin_id = 0;
    atlasProfilerNetDescr_v1_t descr{};
    bool has_descr = false;
};

std::mutex g_prof_mu;
std::vector<ProfEvent> g_prof;  // guarded by g_prof_mu
int g_prof_next = 1;            // guarded by g_prof_mu

extern "C" ncclResult_t recordingProfiler(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                          void* extData) {
    std::lock_guard<std::mutex> lock(g_prof_mu);
    ProfEvent e;
    e.type = type;
    e.phandle = pHandle;
    e.plugin_id = pluginId;
    if (type == ncclProfilerNetEventStart) {
        // NCCL's profiler allocates an event and stores it in *eHandle.
        *eHandle = reinterpret_cast<void*>(static_cast<uintptr_t>(0x1000 * g_prof_next++));
    }
    e.handle = eHandle != nullptr ? *eHandle : nullptr;
    if (extData != nullptr) {
        std::memcpy(&e.descr, extData, sizeof(e.descr));
        e.has_descr = true;
    }
    g_prof.push_back(e);
    return ncclSuccess;
}

std::vector<ProfEvent> profEvents() {
    std::lock_guard<std::mutex> lock(g_prof_mu);
    return g_prof;
}

// NCCL's phandle is the address of a proxy step's event field; any unique address will do.
int g_step_a = 0;
int g_step_b = 0;

// One transfer of `size` bytes with phandles; returns the bytes received.
Result<size_t> profiledTransfer(NetApi& net, const CommPair& pair, size_t size, void* send_ph,
                                void* recv_ph, const Deadline& deadline) {
    std::vector<uint8_t> src(size + 1), dst(size + 1);
    fillPattern(src.data(), size, 9);
    Result<Registration> smr = Registration::create(net, pair.send_comm, src.data(), src.size());
    Result<Registration> rmr = Registration::create(net, pair.recv_comm, dst.data(), dst.size());
    if (!smr.isOk() || !rmr.isOk()) {
        return smr.isOk() ? rmr.status() : smr.status();
    }
    void* rreq = nullptr;
    void* sreq = nullptr;
    Backoff backoff;
    while (rreq == nullptr) {
        ATLAS_RETURN_IF_ERROR(ncclStatus(
            net.irecv(pair.recv_comm, dst.data(), size, 0, rmr->mhandle(), &rreq, recv_ph),
            "irecv"));
        if (deadline.expired()) {
            return Status(Code::kTimeout, "irecv");
        }
        if (rreq == nullptr) {
            backoff.idle();  // back-pressure: let the engine threads run
        }
    }
    backoff.reset();
    while (sreq == nullptr) {
        ATLAS_RETURN_IF_ERROR(ncclStatus(
            net.isend(pair.send_comm, src.data(), size, 0, smr->mhandle(), &sreq, send_ph),
            "isend"));
        if (deadline.expired()) {
            return Status(Code::kTimeout, "isend");
        }
        if (sreq == nullptr) {
            backoff.idle();
        }
    }
    Result<size_t> sent = waitDone(net, sreq, deadline);
    Result<size_t> got = waitDone(net, rreq, deadline);
    if (!sent.isOk() || !got.isOk()) {
        return sent.isOk() ? got.status() : sent.status();
    }
    if (describePatternMismatch(dst.data(), *got, 9) != "") {
        return Status(Code::kInternal, "payload mismatch");
    }
    return *got;
}

ncclNetAttr_v12_t p2pConnectionAttr() {
    // What NCCL's populateCommNetAttrs sets for a p2p-only connection.
    ncclNetAttr_v12_t a;
    a.sendCommAttr = {2, 1, 2, 1};
    a.recvCommAttr = {2, 1, 2, 1};
    a.op = (1u << ncclFuncSend) | (1u << ncclFuncRecv) | (1u << ncclFuncAlltoAll) |
           (1u << ncclFuncScatter) | (1u << ncclFuncGather);
    a.algo = static_cast<uint32_t>(NCCL_NET_ATTR_UNDEF);
    a.proto = static_cast<uint32_t>(NCCL_NET_ATTR_UNDEF);
    return a;
}

ncclNetAttr_v12_t collectiveConnectionAttr() {
    // A ring/tree connection: op stays UNDEF.
    ncclNetAttr_v12_t a = p2pConnectionAttr();
    a.op = static_cast<uint32_t>(NCCL_NET_ATTR_UNDEF);
    return a;
}

// Every comm counts as WAN (RTT rule with threshold 0), so connect logs its traffic kind; no
// bubble channel and no gating (fair sharing) to keep the test self-contained.
EnvVars wanEveryCommEnv() {
    return loopbackEnv({{"ATLAS_WAN_RTT_US", "0"}, {"ATLAS_BUBBLES", "0"}});
}

class Hints : public ::testing::TestWithParam<int> {};

TEST_P(Hints, SetNetAttrThenTransfersClassifyTheConnection) {
    const int version = GetParam();
    runIsolated(wanEveryCommEnv(), kBudget, [version] {
        LogCapture::setEchoLevel(NCCL_LOG_WARN);
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath(), version);
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        ASSERT_TRUE(net.hasSetNetAttr()) << "v" << version << " table has no setNetAttr";
        Deadline deadline(kBudget / 2);

        // A p2p connection: NCCL sets its attributes on the context, then connects.
        ATLAS_ASSERT_NCCL_OK(net.setNetAttr((*ep)->ctx(), p2pConnectionAttr()));
        CommPair p2p;
        LogCapture::clear();
        ATLAS_ASSERT_OK(connectInProcess(net, (*ep)->ctx(), 0, &p2p, deadline));
        EXPECT_TRUE(LogCapture::contains("pipeline traffic, priority 0"))
            << "the p2p connection was not classified as pipeline traffic";
        // Per operation, before its transfers: a send (collAPI Send, no algo/proto).
        ncclNetAttr_v12_t send_op = p2pConnectionAttr();
        send_op.op = 1u << ncclFuncSend;
        ATLAS_ASSERT_NCCL_OK(net.setNetAttr((*ep)->ctx(), send_op));
        Result<size_t> got = profiledTransfer(net, p2p, 300000, nullptr, nullptr, deadline);
        ATLAS_ASSERT_OK(got);
        EXPECT_EQ(*got, 300000u);

        // A ring connection of the same communicator: op UNDEF -> data-parallel.
        ATLAS_ASSERT_NCCL_OK(net.setNetAttr((*ep)->ctx(), collectiveConnectionAttr()));
        CommPair ring;
        LogCapture::clear();
        ATLAS_ASSERT_OK(connectInProcess(net, (*ep)->ctx(), 0, &ring, deadline));
        EXPECT_TRUE(LogCapture::contains("data-parallel traffic, priority 2"))
            << "the collective connection was not classified as data-parallel";
        ncclNetAttr_v12_t allreduce = collectiveConnectionAttr();
        allreduce.op = 1u << ncclFuncAllReduce;
        allreduce.algo = 1u << 1;   // Ring
        allreduce.proto = 1u << 2;  // Simple
        LogCapture::clear();
        ATLAS_ASSERT_NCCL_OK(net.setNetAttr((*ep)->ctx(), allreduce));
        EXPECT_TRUE(LogCapture::contains("op=AllReduce algo=Ring proto=Simple"));
        got = profiledTransfer(net, ring, 70000, nullptr, nullptr, deadline);
        ATLAS_ASSERT_OK(got);
        // The p2p comm still works after the context's hints moved on.
        got = profiledTransfer(net, p2p, 1000, nullptr, nullptr, deadline);
        ATLAS_ASSERT_OK(got);
        ATLAS_EXPECT_OK(closePair(net, &p2p));
        ATLAS_EXPECT_OK(closePair(net, &ring));
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

TEST_P(Hints, PriorityOrderIsConfigurable) {
    const int version = GetParam();
    EnvVars env = wanEveryCommEnv();
    env.push_back({"ATLAS_TRAFFIC_PRIORITY", "collective"});
    runIsolated(env, kBudget, [version] {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath(), version);
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        Deadline deadline(kBudget / 2);
        ATLAS_ASSERT_NCCL_OK(net.setNetAttr((*ep)->ctx(), p2pConnectionAttr()));
        CommPair p2p;
        LogCapture::clear();
        ATLAS_ASSERT_OK(connectInProcess(net, (*ep)->ctx(), 0, &p2p, deadline));
        EXPECT_TRUE(LogCapture::contains("pipeline traffic, priority 2"));
        ATLAS_EXPECT_OK(closePair(net, &p2p));
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

TEST_P(Hints, BadArgumentsAreRejected) {
    const int version = GetParam();
    runIsolated(loopbackEnv(), kBudget, [version] {
        Result<std::unique_ptr<PluginLibrary>> lib = PluginLibrary::open(pluginPath());
        ATLAS_ASSERT_OK(lib);
        // The raw table entry (NetApi would catch the NULL arguments itself), called through
        // its own type: v11's takes the v11 struct (same layout, a distinct type).
        ASSERT_TRUE(version == 12 ? (*lib)->v12()->setNetAttr != nullptr
                                  : (*lib)->v11()->setNetAttr != nullptr);
        auto set_attr = [&lib, version](void* c, const ncclNetAttr_v12_t* a) {
            if (version == 12) {
                ncclNetAttr_v12_t copy{};
                if (a != nullptr) {
                    copy = *a;
                }
                return (*lib)->v12()->setNetAttr(c, a != nullptr ? &copy : nullptr);
            }
            ncclNetAttr_v11_t copy{};
            if (a != nullptr) {
                std::memcpy(&copy, a, sizeof(copy));
            }
            return (*lib)->v11()->setNetAttr(c, a != nullptr ? &copy : nullptr);
        };
        std::unique_ptr<NetApi> net = makeNetApi(**lib, version);
        void* ctx = nullptr;
        ATLAS_ASSERT_NCCL_OK(net->init(&ctx, captureLogger));
        ncclNetAttr_v12_t attr = p2pConnectionAttr();
        EXPECT_EQ(set_attr(ctx, nullptr), ncclInternalError);
        EXPECT_EQ(set_attr(nullptr, &attr), ncclInternalError);
        int not_a_ctx[16] = {};
        EXPECT_EQ(set_attr(not_a_ctx, &attr), ncclInternalError);
        EXPECT_EQ(set_attr(ctx, &attr), ncclSuccess);
        EXPECT_EQ(net->finalize(ctx), ncclSuccess);
    });
}

TEST(Hints, TablesBeforeV11HaveNoSetNetAttr) {
    runIsolated(loopbackEnv(), kBudget, [] {
        Result<std::unique_ptr<PluginLibrary>> lib = PluginLibrary::open(pluginPath());
        ATLAS_ASSERT_OK(lib);
        for (int v : {8, 9, 10}) {
            EXPECT_FALSE(makeNetApi(**lib, v)->hasSetNetAttr()) << "v" << v;
        }
    });
}

INSTANTIATE_TEST_SUITE_P(Citizen, Hints, ::testing::Values(11, 12),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                             return "v" + std::to_string(param_info.param);
                         });

// ---------------------------------------------------------------------------------------------
// Profiler events

class Profiler : public ::testing::TestWithParam<int> {};

TEST_P(Profiler, OneEventPerRequestWithStreamOpAndLength) {
    const int version = GetParam();
    runIsolated(loopbackEnv(), kBudget, [version] {
        InitOptions opts;
        opts.profiler = recordingProfiler;
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath(), version, opts);
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        Deadline deadline(kBudget / 2);
        CommPair pair;
        ATLAS_ASSERT_OK(connectInProcess(net, (*ep)->ctx(), 0, &pair, deadline));
        const size_t kSmall = 100;      // inline on the control stream
        const size_t kLarge = 3 << 20;  // striped over the data streams
        ATLAS_ASSERT_OK(profiledTransfer(net, pair, kSmall, &g_step_a, &g_step_b, deadline));
        ATLAS_ASSERT_OK(profiledTransfer(net, pair, kLarge, &g_step_a, &g_step_b, deadline));
        // No phandle (NCCL without a profiler parent): no event, and NCCL's callback is never
        // given a NULL parent to dereference.
        ATLAS_ASSERT_OK(profiledTransfer(net, pair, 5000, nullptr, nullptr, deadline));
        ATLAS_EXPECT_OK(closePair(net, &pair));
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());

        const std::vector<ProfEvent> ev = profEvents();
        int starts = 0;
        int stops = 0;
        for (const ProfEvent& e : ev) {
            SCOPED_TRACE("event type " + std::to_string(e.type));
            if (e.type == ncclProfilerNetEventStart) {
                ++starts;
                EXPECT_NE(e.phandle, nullptr);
                EXPECT_EQ(e.plugin_id, static_cast<int64_t>(ATLAS_PROFILER_NET_ID));
                ASSERT_TRUE(e.has_descr);
                EXPECT_EQ(e.descr.type, atlasProfileRequest);
                const bool send = e.phandle == &g_step_a;
                EXPECT_EQ(e.descr.req.op, send ? atlasProfileOpSend : atlasProfileOpRecv);
                EXPECT_GE(e.descr.req.nstreams, 1);
                EXPECT_EQ(e.descr.req.dev, 0);
            } else {
                EXPECT_EQ(e.type, ncclProfilerNetEventUpdateAndStop);
                ++stops;
                ASSERT_TRUE(e.has_descr);
                const size_t len = e.descr.req.length;
                EXPECT_TRUE(len == kSmall || len == kLarge) << len;
                EXPECT_EQ(e.descr.req.stream, len == kSmall ? ATLAS_PROFILER_STREAM_CONTROL
                                                            : ATLAS_PROFILER_STREAM_STRIPED);
            }
        }
        // Two profiled transfers: a send and a receive event each, each started and stopped.
        EXPECT_EQ(starts, 4);
        EXPECT_EQ(stops, 4);
        // Every stop closes an event that was started.
        for (const ProfEvent& e : ev) {
            if (e.type != ncclProfilerNetEventStart) {
                bool started = false;
                for (const ProfEvent& s : ev) {
                    started |= s.type == ncclProfilerNetEventStart && s.handle == e.handle;
                }
                EXPECT_TRUE(started) << "stop of an event never started";
            }
        }
    });
}

TEST_P(Profiler, CloseWithRequestInFlightStopsItsEvent) {
    const int version = GetParam();
    runIsolated(loopbackEnv(), kBudget, [version] {
        InitOptions opts;
        opts.profiler = recordingProfiler;
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath(), version, opts);
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        Deadline deadline(kBudget / 2);
        CommPair pair;
        ATLAS_ASSERT_OK(connectInProcess(net, (*ep)->ctx(), 0, &pair, deadline));
        std::vector<uint8_t> dst(4096);
        Result<Registration> rmr =
            Registration::create(net, pair.recv_comm, dst.data(), dst.size());
        ATLAS_ASSERT_OK(rmr);
        void* rreq = nullptr;
        while (rreq == nullptr) {
            ATLAS_ASSERT_NCCL_OK(net.irecv(pair.recv_comm, dst.data(), dst.size(), 0,
                                           rmr->mhandle(), &rreq, &g_step_b));
        }
        (void)rmr->release();
        ATLAS_EXPECT_OK(closePair(net, &pair));
        const std::vector<ProfEvent> ev = profEvents();
        ASSERT_EQ(ev.size(), 2u);
        EXPECT_EQ(ev[0].type, ncclProfilerNetEventStart);
        EXPECT_EQ(ev[1].type, ncclProfilerNetEventStop);
        EXPECT_EQ(ev[1].handle, ev[0].handle);
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
}

// A stream lost and rejoined mid-run (the test-only fault seam resets data stream 2 of the
// send comm after 8 MiB) is reported as atlasProfileStream Updates under open request events:
// the reset under a send event and under a receive event (each side saw it), and the rejoin.
TEST(ProfilerStreams, ResetAndRejoinAreReportedUnderOpenRequests) {
    runIsolated(loopbackEnv({{"ATLAS_NSTREAMS", "4"},
                             {"ATLAS_TEST_MODE", "1"},
                             {"ATLAS_FAULTS", "reset:stream=2,after=8M"}}),
                kBudget, [] {
                    InitOptions opts;
                    opts.profiler = recordingProfiler;
                    Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath(), 12, opts);
                    ATLAS_ASSERT_OK(ep);
                    NetApi& net = (*ep)->net();
                    Deadline deadline(kBudget / 2);
                    CommPair pair;
                    ATLAS_ASSERT_OK(connectInProcess(net, (*ep)->ctx(), 0, &pair, deadline));
                    bool send_reset = false;
                    bool rejoin = false;
                    bool recv_reset = false;
                    for (int i = 0; i < 64 && !(send_reset && rejoin && recv_reset); ++i) {
                        ATLAS_ASSERT_OK(
                            profiledTransfer(net, pair, 4 << 20, &g_step_a, &g_step_b, deadline));
                        const std::vector<ProfEvent> ev = profEvents();
                        for (const ProfEvent& e : ev) {
                            if (e.type != ncclProfilerNetEventUpdate || !e.has_descr ||
                                e.descr.type != atlasProfileStream) {
                                continue;
                            }
                            // The parent: a started request event, and which side it was.
                            const ProfEvent* parent = nullptr;
                            for (const ProfEvent& st : ev) {
                                if (st.type == ncclProfilerNetEventStart && st.handle == e.handle) {
                                    parent = &st;
                                }
                            }
                            ASSERT_NE(parent, nullptr) << "a stream event under no request";
                            EXPECT_EQ(e.descr.stream.stream, 2);
                            const bool send = parent->phandle == &g_step_a;
                            if (e.descr.stream.event == atlasStreamReset) {
                                (send ? send_reset : recv_reset) = true;
                            } else {
                                EXPECT_EQ(e.descr.stream.event, atlasStreamRejoin);
                                rejoin = true;
                            }
                        }
                    }
                    EXPECT_TRUE(send_reset) << "no reset event from the send comm";
                    EXPECT_TRUE(rejoin) << "no rejoin event";
                    EXPECT_TRUE(recv_reset) << "no reset event from the receive comm";
                    ATLAS_EXPECT_OK(closePair(net, &pair));
                    ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
                });
}

INSTANTIATE_TEST_SUITE_P(Citizen, Profiler, ::testing::Values(10, 11, 12),
                         [](const ::testing::TestParamInfo<int>& param_info) {
                             return "v" + std::to_string(param_info.param);
                         });

// ---------------------------------------------------------------------------------------------
// Admission priority through the real node-local arbiter (plugin/wan/shm_arbiter.h): NCCL's
// sequence (setNetAttr on the context, connect, per-operation setNetAttr, transfers on the
// comms), one collective and one pipeline send comm on one WAN link. Another process (this
// test, writing the segment as that process's ShmArbiter would) holds the link while the
// collective queues and then the pipeline transfer queues; when it lets go, the plugin's
// watcher hands the link on by the priority rule.

namespace shm = plugin::wan;

// Every entry of the segment that waits, in index order; under the segment lock.
std::vector<uint32_t> waitingEntries(shm::ShmSegment& s) {
    std::vector<uint32_t> out;
    pthread_mutex_lock(&s.lock);
    for (uint32_t i = 0; i < shm::kShmMaxFlows; ++i) {
        if (s.entries[i].state == sched::kEntryWaiting) {
            out.push_back(i);
        }
    }
    pthread_mutex_unlock(&s.lock);
    return out;
}

// Polls (bounded) until an entry not in `known` waits; returns it, or kNone at the deadline.
uint32_t nextWaiter(shm::ShmSegment& s, const std::vector<uint32_t>& known, const Deadline& d) {
    Backoff backoff;
    while (!d.expired()) {
        for (uint32_t e : waitingEntries(s)) {
            if (std::find(known.begin(), known.end(), e) == known.end()) {
                return e;
            }
        }
        backoff.idle();
    }
    return sched::TemporalCore::kNone;
}

class Priority : public ::testing::TestWithParam<const char*> {};

TEST_P(Priority, PipelineTransferIsAdmittedAheadOfAQueuedCollective) {
    const std::string order = GetParam();
    const std::string prefix = "atlas-prio-" + std::to_string(::getpid()) + "-" + order;
    const std::string path = "/dev/shm/" + prefix + ".wan-_127.0.0.0_16";
    EnvVars env =
        loopbackEnv({{"ATLAS_WAN_RTT_US", "0"},
                     {"ATLAS_BUBBLES", "0"},
                     {"ATLAS_SHARING", "temporal"},
                     {"ATLAS_NODE_SHM", prefix},
                     {"ATLAS_SLOT_MS", "0"},  // a grant lasts until the flow drains
                     {"ATLAS_NSTREAMS", "1"},
                     {"ATLAS_SOCKBUF_BYTES", "1048576"},  // autotuning off: a bounded kernel buffer
                     {"ATLAS_LEASE_MS", "600000"},        // the test's holder stays
                     {"ATLAS_MAX_WAIT_MS", "600000"},     // no aging in this test
                     {"ATLAS_TRAFFIC_PRIORITY", order}});
    runIsolated(env, kBudget, [&] {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath(), 12);
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        Deadline deadline(kBudget / 2);
        CommPair ring;
        CommPair p2p;
        ATLAS_ASSERT_NCCL_OK(net.setNetAttr((*ep)->ctx(), collectiveConnectionAttr()));
        ATLAS_ASSERT_OK(connectInProcess(net, (*ep)->ctx(), 0, &ring, deadline));
        ATLAS_ASSERT_NCCL_OK(net.setNetAttr((*ep)->ctx(), p2pConnectionAttr()));
        ATLAS_ASSERT_OK(connectInProcess(net, (*ep)->ctx(), 0, &p2p, deadline));

        const int fd = ::open(path.c_str(), O_RDWR);
        ASSERT_GE(fd, 0) << "no node-local segment " << path;
        void* m =
            ::mmap(nullptr, sizeof(shm::ShmSegment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        ::close(fd);
        ASSERT_NE(m, MAP_FAILED);
        auto& seg = *static_cast<shm::ShmSegment*>(m);

        // The other process: registered (alive: our parent), one flow of the last priority,
        // granted while the link is free.
        uint32_t other = sched::TemporalCore::kNone;
        int me = -1;
        pthread_mutex_lock(&seg.lock);
        {
            for (int q = 0; q < static_cast<int>(shm::kShmMaxProcs); ++q) {
                me = seg.procs[q].pid.load() == ::getpid() ? q : me;
            }
            int p = 0;
            while (p < static_cast<int>(shm::kShmMaxProcs) && seg.procs[p].pid.load() != 0) {
                ++p;
            }
            if (p == static_cast<int>(shm::kShmMaxProcs)) {
                pthread_mutex_unlock(&seg.lock);
                FAIL() << "no free process entry in the segment";
            }
            seg.procs[p].start_time.store(0);  // unknown: liveness by kill() alone
            seg.procs[p].alive_ns.store(monotonicNowNs());
            seg.procs[p].pid.store(static_cast<int32_t>(::getppid()));
            sched::TemporalCore f = shm::segmentFifo(seg);
            for (uint32_t e = 0; e < shm::kShmMaxFlows && other == sched::TemporalCore::kNone;
                 ++e) {
                if (f.open(e, sched::kPriorityLevels - 1)) {
                    other = e;
                }
            }
            seg.flows[other].proc = p;
            const Nanos now = monotonicNowNs();
            f.join(other, now);
            f.decidePriority(now, seg.slot_ns, seg.max_wait_ns);
            EXPECT_EQ(f.holder(), other);
        }
        pthread_mutex_unlock(&seg.lock);
        ASSERT_GE(me, 0) << "the plugin's process is not registered in the segment";

        // No receive is posted until the first grant is seen, and one stream's kernel buffers
        // (1 MiB each way, doubled by the kernel) cannot take this much: the first holder
        // cannot drain (and hand the link on) before the test has looked.
        constexpr size_t kSize = 16 << 20;
        std::vector<uint8_t> src_c(kSize), dst_c(kSize), src_p(kSize), dst_p(kSize);
        fillPattern(src_c.data(), kSize, 1);
        fillPattern(src_p.data(), kSize, 2);
        auto smr_c = Registration::create(net, ring.send_comm, src_c.data(), kSize);
        auto rmr_c = Registration::create(net, ring.recv_comm, dst_c.data(), kSize);
        auto smr_p = Registration::create(net, p2p.send_comm, src_p.data(), kSize);
        auto rmr_p = Registration::create(net, p2p.recv_comm, dst_p.data(), kSize);
        ATLAS_ASSERT_OK(smr_c);
        ATLAS_ASSERT_OK(rmr_c);
        ATLAS_ASSERT_OK(smr_p);
        ATLAS_ASSERT_OK(rmr_p);

        // The collective operation first: it queues behind the other process's grant.
        ncclNetAttr_v12_t allreduce = collectiveConnectionAttr();
        allreduce.op = 1u << ncclFuncAllReduce;
        ATLAS_ASSERT_NCCL_OK(net.setNetAttr((*ep)->ctx(), allreduce));
        auto sreq_c =
            postSend(net, ring.send_comm, src_c.data(), kSize, smr_c->mhandle(), deadline);
        ATLAS_ASSERT_OK(sreq_c);
        const uint32_t coll = nextWaiter(seg, {}, deadline);
        ASSERT_NE(coll, sched::TemporalCore::kNone) << "the collective never asked for the link";
        // Then a pipeline send: it queues after the collective.
        ncclNetAttr_v12_t send_op = p2pConnectionAttr();
        send_op.op = 1u << ncclFuncSend;
        ATLAS_ASSERT_NCCL_OK(net.setNetAttr((*ep)->ctx(), send_op));
        auto sreq_p = postSend(net, p2p.send_comm, src_p.data(), kSize, smr_p->mhandle(), deadline);
        ATLAS_ASSERT_OK(sreq_p);
        const uint32_t pipe = nextWaiter(seg, {coll}, deadline);
        ASSERT_NE(pipe, sched::TemporalCore::kNone) << "the pipeline send never asked";
        pthread_mutex_lock(&seg.lock);
        const sched::TemporalEntry c_entry = seg.entries[coll];
        const sched::TemporalEntry p_entry = seg.entries[pipe];
        pthread_mutex_unlock(&seg.lock);
        EXPECT_LT(c_entry.seq, p_entry.seq) << "arrival order";
        const bool by_kind = order != "equal";
        EXPECT_EQ(p_entry.priority, by_kind ? 0 : sched::kDefaultPriority);
        EXPECT_EQ(c_entry.priority, by_kind ? 2 : sched::kDefaultPriority);

        // The other process lets go and rings our doorbell: our watcher picks the next holder.
        pthread_mutex_lock(&seg.lock);
        shm::segmentFifo(seg).leave(other);
        pthread_mutex_unlock(&seg.lock);
        seg.procs[me].doorbell.fetch_add(1);
        ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seg.procs[me].doorbell), FUTEX_WAKE,
                  INT_MAX, nullptr, nullptr, 0);
        Backoff backoff;
        uint32_t first = sched::TemporalCore::kNone;
        uint32_t second_state = sched::kEntryUnused;
        while (first == sched::TemporalCore::kNone && !deadline.expired()) {
            pthread_mutex_lock(&seg.lock);
            first = shm::segmentFifo(seg).holder();
            second_state = seg.entries[first == pipe ? coll : pipe].state;
            pthread_mutex_unlock(&seg.lock);
            backoff.idle();
        }
        EXPECT_EQ(first, by_kind ? pipe : coll)
            << (by_kind ? "the pipeline transfer was not admitted ahead of the collective"
                        : "equal priorities: the collective (first in) goes first");
        EXPECT_EQ(second_state, sched::kEntryWaiting) << "the other flow still waits for the link";
        auto rreq_c =
            postRecv(net, ring.recv_comm, dst_c.data(), kSize, rmr_c->mhandle(), deadline);
        auto rreq_p = postRecv(net, p2p.recv_comm, dst_p.data(), kSize, rmr_p->mhandle(), deadline);
        ATLAS_ASSERT_OK(rreq_c);
        ATLAS_ASSERT_OK(rreq_p);

        for (auto* req : {*sreq_c, *sreq_p}) {
            ATLAS_EXPECT_OK(waitDone(net, req, deadline));
        }
        for (auto* req : {*rreq_c, *rreq_p}) {
            Result<size_t> n = waitDone(net, req, deadline);
            ATLAS_ASSERT_OK(n);
            EXPECT_EQ(*n, kSize);
        }
        EXPECT_EQ(describePatternMismatch(dst_c.data(), kSize, 1), "");
        EXPECT_EQ(describePatternMismatch(dst_p.data(), kSize, 2), "");
        pthread_mutex_lock(&seg.lock);
        shm::segmentFifo(seg).close(other);
        pthread_mutex_unlock(&seg.lock);
        ::munmap(m, sizeof(shm::ShmSegment));
        for (Result<Registration>* r : {&smr_c, &rmr_c, &smr_p, &rmr_p}) {
            ATLAS_EXPECT_OK((*r)->release());
        }
        ATLAS_EXPECT_OK(closePair(net, &ring));
        ATLAS_EXPECT_OK(closePair(net, &p2p));
        ATLAS_EXPECT_OK((*ep)->finalizeAndClose());
    });
    ::unlink(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Citizen, Priority, ::testing::Values("pipeline", "equal"),
                         [](const ::testing::TestParamInfo<const char*>& param_info) {
                             return std::string(param_info.param);
                         });

}  // namespace
}  // namespace atlas::abi
