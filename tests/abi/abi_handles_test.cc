// Handles NCCL holds (docs/nccl-abi.md, "Handles"): a double close, a handle used after its
// comm closed or its context was finalized, a foreign pointer or one of the wrong kind is
// refused with ncclInternalError and one WARN line, without reading freed memory (run under
// ASan, a read of freed memory aborts the test) or unmapped memory (a crash fails it). A
// connect that NCCL gives up on is reclaimed at finalize, and the stale handle buffer is
// refused afterwards.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/abi/isolate.h"
#include "tests/abi/leak_check.h"
#include "tests/abi/suites.h"

namespace atlas::abi {
namespace {

const Nanos kBudget = scaledBudget(60 * kNsPerSec);

int warnCount() {
    int n = 0;
    for (const std::string& line : LogCapture::lines()) {
        n += line.rfind("WARN", 0) == 0 ? 1 : 0;
    }
    return n;
}

// `rc` is ncclInternalError and the call logged exactly one WARN naming `func` and `why`.
void expectRefused(ncclResult_t rc, int warns_before, const char* func, const char* why,
                   const char* what) {
    EXPECT_EQ(rc, ncclInternalError) << what;
    EXPECT_EQ(warnCount(), warns_before + 1) << what << ": one WARN per refused call";
    const std::vector<std::string> lines = LogCapture::lines();
    ASSERT_FALSE(lines.empty());
    EXPECT_NE(lines.back().find(std::string(func) + " failed"), std::string::npos)
        << what << ": " << lines.back();
    EXPECT_NE(lines.back().find(why), std::string::npos) << what << ": " << lines.back();
}

#define ATLAS_EXPECT_REFUSED(call, func, why)            \
    do {                                                 \
        const int warns_ = warnCount();                  \
        expectRefused((call), warns_, func, why, #call); \
    } while (0)

// A page that was mapped and is not any more: dereferencing it crashes.
void* unmappedAddress() {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    EXPECT_EQ(munmap(p, page), 0);
    return static_cast<uint8_t*>(p) + 64;
}

TEST(Handles, StaleDoubleClosedForeignAndWrongKindHandlesAreRefused) {
    runIsolated(loopbackEnv(), kBudget, [] {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        void* ctx = (*ep)->ctx();
        Deadline deadline(kBudget / 2);
        CommPair pair;
        ATLAS_ASSERT_OK(connectInProcess(net, ctx, 0, &pair, deadline));
        uint8_t src[64] = {1, 2, 3};
        uint8_t dst[64] = {};
        void* smr = nullptr;
        ASSERT_EQ(net.regMr(pair.send_comm, src, sizeof(src), NCCL_PTR_HOST, &smr), ncclSuccess);
        int done = 0;
        int size = 0;
        char buf[8];
        void* req = nullptr;

        // Wrong kinds: refused, and the comms stay usable.
        ATLAS_EXPECT_REFUSED(net.isend(pair.recv_comm, buf, 8, 0, nullptr, &req), "isend",
                             "not a live send comm");
        ATLAS_EXPECT_REFUSED(net.irecv(pair.send_comm, buf, 8, 0, nullptr, &req), "irecv",
                             "not a live recv comm");
        ATLAS_EXPECT_REFUSED(net.closeRecv(pair.send_comm), "closeRecv", "not a live recv comm");
        ATLAS_EXPECT_REFUSED(net.closeSend(pair.listen_comm), "closeSend", "not a live send comm");
        ATLAS_EXPECT_REFUSED(net.accept(pair.send_comm, &req), "accept", "not a live listen comm");
        ATLAS_EXPECT_REFUSED(net.test(pair.send_comm, &done, &size), "test", "not in flight");
        ATLAS_EXPECT_REFUSED(net.deregMr(pair.send_comm, pair.recv_comm), "deregMr",
                             "not a live registration");

        // A request reported done is not a request any more.
        Result<void*> r = postRecv(net, pair.recv_comm, dst, sizeof(dst), nullptr, deadline);
        ATLAS_ASSERT_OK(r);
        Result<void*> s = postSend(net, pair.send_comm, src, 8, smr, deadline);
        ATLAS_ASSERT_OK(s);
        Result<size_t> got = waitDone(net, *r, deadline);
        ATLAS_ASSERT_OK(got);
        EXPECT_EQ(*got, 8u);
        ATLAS_ASSERT_OK(waitDone(net, *s, deadline));
        ATLAS_EXPECT_REFUSED(net.test(*s, &done, &size), "test", "not in flight");

        // A receive in flight when its comm closes: every later use of the comm or the request
        // is refused (the comm and its requests are freed by then).
        Result<void*> pending = postRecv(net, pair.recv_comm, dst, sizeof(dst), nullptr, deadline);
        ATLAS_ASSERT_OK(pending);
        void* recv_comm = pair.recv_comm;
        ASSERT_EQ(net.closeRecv(recv_comm), ncclSuccess);
        pair.recv_comm = nullptr;
        ATLAS_EXPECT_REFUSED(net.test(*pending, &done, &size), "test", "not in flight");
        ATLAS_EXPECT_REFUSED(net.closeRecv(recv_comm), "closeRecv", "closed twice");
        ATLAS_EXPECT_REFUSED(net.irecv(recv_comm, buf, 8, 0, nullptr, &req), "irecv",
                             "not a live recv comm");
        ATLAS_EXPECT_REFUSED(net.regMr(recv_comm, buf, 8, NCCL_PTR_HOST, &req), "regMr",
                             "not a live send or recv comm");

        ASSERT_EQ(net.deregMr(pair.send_comm, smr), ncclSuccess);
        ATLAS_EXPECT_REFUSED(net.deregMr(pair.send_comm, smr), "deregMr", "deregistered twice");
        void* send_comm = pair.send_comm;
        ASSERT_EQ(net.closeSend(send_comm), ncclSuccess);
        pair.send_comm = nullptr;
        ATLAS_EXPECT_REFUSED(net.closeSend(send_comm), "closeSend", "closed twice");
        ATLAS_EXPECT_REFUSED(net.isend(send_comm, buf, 8, 0, nullptr, &req), "isend",
                             "not a live send comm");
        void* listen_comm = pair.listen_comm;
        ASSERT_EQ(net.closeListen(listen_comm), ncclSuccess);
        pair.listen_comm = nullptr;
        ATLAS_EXPECT_REFUSED(net.closeListen(listen_comm), "closeListen", "closed twice");
        ATLAS_EXPECT_REFUSED(net.accept(listen_comm, &req), "accept", "not a live listen comm");

        // Foreign pointers: a heap block of zeros, a stack address, unmapped memory, and
        // small integers. None is read.
        std::vector<uint64_t> heap(16, 0);
        uint64_t stack_word = 0;
        for (void* foreign : {static_cast<void*>(heap.data()), static_cast<void*>(&stack_word),
                              unmappedAddress(), reinterpret_cast<void*>(0x10),
                              reinterpret_cast<void*>(NCCL_NET_OPTIONAL_RECV_COMPLETION)}) {
            ATLAS_EXPECT_REFUSED(net.closeSend(foreign), "closeSend", "not a live send comm");
            ATLAS_EXPECT_REFUSED(net.closeRecv(foreign), "closeRecv", "not a live recv comm");
            ATLAS_EXPECT_REFUSED(net.closeListen(foreign), "closeListen", "not a live listen");
            ATLAS_EXPECT_REFUSED(net.isend(foreign, buf, 8, 0, nullptr, &req), "isend",
                                 "not a live send comm");
            ATLAS_EXPECT_REFUSED(net.irecv(foreign, buf, 8, 0, nullptr, &req), "irecv",
                                 "not a live recv comm");
            ATLAS_EXPECT_REFUSED(net.test(foreign, &done, &size), "test", "not in flight");
            ATLAS_EXPECT_REFUSED(net.accept(foreign, &req), "accept", "not a live listen comm");
            ATLAS_EXPECT_REFUSED(net.deregMr(nullptr, foreign), "deregMr",
                                 "not a live registration");
            const ncclNetAttr_v12_t attr{};
            ATLAS_EXPECT_REFUSED(net.setNetAttr(foreign, attr), "setNetAttr", "did not return");
            ATLAS_EXPECT_REFUSED(net.finalize(foreign), "finalize", "unknown context");
        }

        // A finalized context.
        ATLAS_ASSERT_OK((*ep)->finalize());
        ATLAS_EXPECT_REFUSED(net.finalize(ctx), "finalize", "finalized twice");
        const ncclNetAttr_v12_t attr{};
        ATLAS_EXPECT_REFUSED(net.setNetAttr(ctx, attr), "setNetAttr", "finalized");
        Handle h{};
        ATLAS_EXPECT_REFUSED(net.listen(ctx, 0, h.data(), &req), "listen", "not initialized");
        checkLeaks();
    });
}

// NCCL gives up on a connect (an abort during setup) by no longer calling it. finalize of its
// context frees the connector (its socket shows in the fd count); the stale handle buffer is
// refused afterwards, and the listener is unaffected.
TEST(Handles, AbandonedConnectIsReclaimedAtFinalizeOfItsContext) {
    runIsolated(loopbackEnv(), kBudget, [] {
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        void* ctx2 = nullptr;
        ASSERT_EQ(net.init(&ctx2, captureLogger), ncclSuccess);
        Deadline deadline(kBudget / 2);
        CommPair pair;
        Handle h{};
        ASSERT_EQ(net.listen((*ep)->ctx(), 0, h.data(), &pair.listen_comm), ncclSuccess);
        const Handle fresh = h;
        const ProcessResources before = sampleResources();
        void* sc = nullptr;
        ASSERT_EQ(net.connect(ctx2, 0, h.data(), &sc), ncclSuccess);
        ASSERT_EQ(sc, nullptr) << "no accept yet: the handshake cannot have completed";
        EXPECT_GT(sampleResources().fds, before.fds) << "the connector's socket";

        ASSERT_EQ(net.finalize(ctx2), ncclSuccess);
        EXPECT_TRUE(LogCapture::contains("reclaimed 1 connection attempt(s)"));
        EXPECT_EQ(sampleResources().fds, before.fds) << "the connector's socket is closed";
        ATLAS_EXPECT_REFUSED(net.connect((*ep)->ctx(), 0, h.data(), &sc), "connect",
                             "no longer has");
        EXPECT_EQ(sc, nullptr);

        Handle again = fresh;
        ATLAS_ASSERT_OK(connectAcceptInProcess(net, (*ep)->ctx(), 0, &again, &pair, deadline));
        uint8_t src[16] = {7};
        uint8_t dst[16] = {};
        ATLAS_ASSERT_OK(transferInProcess(net, pair, src, sizeof(src), dst, sizeof(dst), deadline));
        EXPECT_EQ(dst[0], 7);
        ATLAS_EXPECT_OK(closePair(net, &pair));
        ATLAS_EXPECT_OK((*ep)->finalize());
        h.fill(0);  // no stray copy of anything keeps a leak reachable
        checkLeaks();
    });
}

// The same through the last finalize, which stops the transport; a re-init then gets a new
// transport, and the stale handle buffer must not resume the old connector.
TEST(Handles, AbandonedConnectIsReclaimedAtLastFinalizeAndRefusedAfterReinit) {
    runIsolated(loopbackEnv(), kBudget, [] {
        const ProcessResources before = sampleResources();  // no engine threads yet
        Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(pluginPath());
        ATLAS_ASSERT_OK(ep);
        NetApi& net = (*ep)->net();
        Handle h{};
        void* lc = nullptr;
        ASSERT_EQ(net.listen((*ep)->ctx(), 0, h.data(), &lc), ncclSuccess);
        void* sc = nullptr;
        ASSERT_EQ(net.connect((*ep)->ctx(), 0, h.data(), &sc), ncclSuccess);
        ASSERT_EQ(sc, nullptr);
        ASSERT_EQ(net.closeListen(lc), ncclSuccess);
        ATLAS_ASSERT_OK((*ep)->finalize());
        EXPECT_EQ(sampleResources().fds, before.fds) << "sockets left after the last finalize";
        expectOnlyTestThread("after the last finalize");

        void* ctx = nullptr;
        ASSERT_EQ(net.init(&ctx, captureLogger), ncclSuccess);
        ATLAS_EXPECT_REFUSED(net.connect(ctx, 0, h.data(), &sc), "connect", "no longer has");
        EXPECT_EQ(sc, nullptr);
        ASSERT_EQ(net.finalize(ctx), ncclSuccess);
        h.fill(0);
        checkLeaks();
    });
}

}  // namespace
}  // namespace atlas::abi
