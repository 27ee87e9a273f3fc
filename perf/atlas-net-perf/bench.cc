// Roles, the plan handshake, and the plugin measurements (raw TCP is in raw_tcp.cc).
#include "perf/atlas-net-perf/bench.h"

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "perf/atlas-net-perf/raw_tcp.h"

namespace atlas::netperf {

using abi::CommPair;
using abi::Endpoint;
using abi::MappedBuffer;
using abi::NetApi;
using abi::Registration;

namespace {

// Memory cap for the in-flight message buffers of one direction.
constexpr size_t kBufferMemoryCap = size_t{1} << 30;

Status annotate(const Status& st, const std::string& what) {
    return st.isOk() ? st : Status(st.code(), what + ": " + st.message());
}

uint64_t messageSeed(size_t size, int index) {
    return (static_cast<uint64_t>(size) << 24) ^ static_cast<uint64_t>(index);
}

// One side's plugin state: the loaded endpoint and one comm in each direction.
struct PluginSide {
    std::unique_ptr<Endpoint> ep;
    CommPair comms;
    MappedBuffer ack_buf;
    Registration ack_send_mr;
    Registration ack_recv_mr;

    ~PluginSide() {
        ack_send_mr = Registration();
        ack_recv_mr = Registration();
        if (ep != nullptr) {
            (void)abi::closePair(ep->net(), &comms);
            (void)ep->finalizeAndClose();
        }
    }
    NetApi& net() { return ep->net(); }
};

Status setupPlugin(Channel& chan, const RoleConfig& cfg, int dev, PluginSide* side) {
    Result<std::unique_ptr<Endpoint>> ep = Endpoint::open(cfg.plugin_path, 11);
    if (!ep.isOk()) {
        return annotate(ep.status(), "loading " + cfg.plugin_path);
    }
    side->ep = std::move(ep).value();
    if (dev >= side->ep->ndev()) {
        return Status(Code::kInvalidArgument, "--dev " + std::to_string(dev) + ": the plugin has " +
                                                  std::to_string(side->ep->ndev()) + " devices");
    }
    NetApi& net = side->net();
    abi::Handle mine{};
    ATLAS_RETURN_IF_ERROR(abi::ncclStatus(
        net.listen(side->ep->ctx(), dev, mine.data(), &side->comms.listen_comm), "listen"));
    ATLAS_RETURN_IF_ERROR(chan.send(MsgType::kHandle,
                                    std::string(reinterpret_cast<char*>(mine.data()), mine.size()),
                                    cfg.deadline));
    Result<std::string> theirs = chan.recv(MsgType::kHandle, cfg.deadline);
    if (!theirs.isOk()) {
        return theirs.status();
    }
    if (theirs->size() != NCCL_NET_HANDLE_MAXSIZE) {
        return Status(Code::kRemote, "bootstrap: the peer's handle has the wrong size");
    }
    abi::Handle peer{};
    std::memcpy(peer.data(), theirs->data(), peer.size());
    // Connect to the peer and accept the peer's connection, interleaved, both non-blocking.
    abi::Backoff backoff;
    while (side->comms.send_comm == nullptr || side->comms.recv_comm == nullptr) {
        if (side->comms.send_comm == nullptr) {
            ATLAS_RETURN_IF_ERROR(abi::ncclStatus(
                net.connect(side->ep->ctx(), dev, peer.data(), &side->comms.send_comm), "connect"));
        }
        if (side->comms.recv_comm == nullptr) {
            ATLAS_RETURN_IF_ERROR(abi::ncclStatus(
                net.accept(side->comms.listen_comm, &side->comms.recv_comm), "accept"));
        }
        if (cfg.deadline.expired()) {
            return Status(Code::kTimeout, "connect/accept with the peer timed out");
        }
        backoff.idle();
    }
    Result<MappedBuffer> ack = MappedBuffer::create(64);
    if (!ack.isOk()) {
        return ack.status();
    }
    side->ack_buf = std::move(ack).value();
    Result<Registration> s =
        Registration::create(net, side->comms.send_comm, side->ack_buf.data(), 64);
    Result<Registration> r =
        Registration::create(net, side->comms.recv_comm, side->ack_buf.data(), 64);
    if (!s.isOk() || !r.isOk()) {
        return s.isOk() ? r.status() : s.status();
    }
    side->ack_send_mr = std::move(s).value();
    side->ack_recv_mr = std::move(r).value();
    return Status::ok();
}

// `count` registered buffers of `size` bytes on one comm: the message buffers of one direction.
struct Buffers {
    std::vector<MappedBuffer> bufs;
    std::vector<Registration> regs;
};

Result<Buffers> makeBuffers(NetApi& net, void* comm, size_t size, int count) {
    Buffers s;
    for (int i = 0; i < count; ++i) {
        Result<MappedBuffer> b = MappedBuffer::create(size);
        if (!b.isOk()) {
            return b.status();
        }
        // Touch every page now, so page faults are not measured.
        std::memset(b->data(), 0x5a, size);
        Result<Registration> r =
            Registration::create(net, comm, b->data(), std::max<size_t>(size, 1));
        if (!r.isOk()) {
            return r.status();
        }
        s.bufs.push_back(std::move(b).value());
        s.regs.push_back(std::move(r).value());
    }
    return s;
}

int bufferCount(const Plan& plan, size_t size) {
    size_t fit = size == 0 ? static_cast<size_t>(plan.window) : kBufferMemoryCap / size;
    return static_cast<int>(std::clamp<size_t>(fit, 1, static_cast<size_t>(plan.window)));
}

// Between test() calls that found nothing done. yield: like NCCL's proxy thread, never
// sleeps, so latency stays honest; spin: a caller that never gives the core away; sleep: one
// that does (a 20 us nanosleep, timer slack included in what it costs).
void idle(Poll poll) {
    switch (poll) {
        case Poll::kYield:
            sched_yield();
            return;
        case Poll::kSpin:
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            return;
        case Poll::kSleep: {
            const timespec ts{0, 20 * 1000};
            nanosleep(&ts, nullptr);
            return;
        }
    }
}

// One direction of NCCL-style posting: at most `window` requests in flight, oldest tested.
struct Lane {
    bool is_send = false;
    void* comm = nullptr;
    Buffers* buffers = nullptr;
    std::vector<void*> ring;
    int posted = 0;
    int done = 0;
};

// Moves `n` messages of `size` bytes in each active direction. Message i (counting from
// `first`) carries messageSeed(size, first + i) when `check` is set, and the receiver
// verifies it.
Status moveMessages(NetApi& net, Lane* send, Lane* recv, size_t size, int n, int window, bool check,
                    int first, Poll poll, const Deadline& deadline) {
    Lane* lanes[2] = {send, recv};
    for (Lane* l : lanes) {
        if (l != nullptr) {
            l->ring.assign(static_cast<size_t>(window), nullptr);
            l->posted = 0;
            l->done = 0;
        }
    }
    auto busy = [n](const Lane* l) { return l != nullptr && l->done < n; };
    while (busy(send) || busy(recv)) {
        bool progressed = false;
        for (Lane* l : lanes) {
            if (!busy(l)) {
                continue;
            }
            const int nbuf = static_cast<int>(l->buffers->bufs.size());
            // With --check a buffer may hold only one message at a time.
            const int depth = check ? std::min(window, nbuf) : window;
            while (l->posted < n && l->posted - l->done < depth) {
                const int b = l->posted % nbuf;
                uint8_t* buf = l->buffers->bufs[static_cast<size_t>(b)].data();
                void* mh = l->buffers->regs[static_cast<size_t>(b)].mhandle();
                void* req = nullptr;
                ncclResult_t rc;
                if (l->is_send) {
                    if (check) {
                        abi::fillPattern(buf, size, messageSeed(size, first + l->posted));
                    }
                    rc = net.isend(l->comm, buf, size, 0, mh, &req);
                } else {
                    rc = net.irecv(l->comm, buf, size, 0, mh, &req);
                }
                if (rc != ncclSuccess) {
                    return abi::ncclStatus(rc, l->is_send ? "isend" : "irecv");
                }
                if (req == nullptr) {
                    break;  // back-pressure: retry after testing
                }
                l->ring[static_cast<size_t>(l->posted % window)] = req;
                ++l->posted;
                progressed = true;
            }
            if (l->done < l->posted) {
                int d = 0;
                int got = -1;
                void* req = l->ring[static_cast<size_t>(l->done % window)];
                ncclResult_t rc = net.test(req, &d, &got);
                if (rc != ncclSuccess) {
                    return abi::ncclStatus(rc, l->is_send ? "test(send)" : "test(recv)");
                }
                if (d != 0) {
                    if (!l->is_send && got != static_cast<int>(size)) {
                        return Status(Code::kInternal, "received " + std::to_string(got) +
                                                           " B, expected " + std::to_string(size));
                    }
                    if (!l->is_send && check) {
                        const int b = l->done % nbuf;
                        std::string bad = abi::describePatternMismatch(
                            l->buffers->bufs[static_cast<size_t>(b)].data(), size,
                            messageSeed(size, first + l->done));
                        if (!bad.empty()) {
                            return Status(
                                Code::kInternal,
                                "--check: message " + std::to_string(first + l->done) + ": " + bad);
                        }
                    }
                    ++l->done;
                    progressed = true;
                }
            }
        }
        if (!progressed) {
            if (deadline.expired()) {
                return Status(Code::kTimeout, "messages not done before the deadline");
            }
            idle(poll);
        }
    }
    return Status::ok();
}

Status waitRequest(NetApi& net, void* req, size_t* size_out, Poll poll, const Deadline& deadline) {
    while (true) {
        int d = 0;
        int sz = -1;
        ATLAS_RETURN_IF_ERROR(abi::ncclStatus(net.test(req, &d, &sz), "test"));
        if (d != 0) {
            if (size_out != nullptr) {
                *size_out = static_cast<size_t>(std::max(sz, 0));
            }
            return Status::ok();
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout, "request not done before the deadline");
        }
        idle(poll);
    }
}

Result<void*> post(NetApi& net, bool is_send, void* comm, void* buf, size_t size, void* mh,
                   Poll poll, const Deadline& deadline) {
    while (true) {
        void* req = nullptr;
        ncclResult_t rc = is_send ? net.isend(comm, buf, size, 0, mh, &req)
                                  : net.irecv(comm, buf, size, 0, mh, &req);
        ATLAS_RETURN_IF_ERROR(abi::ncclStatus(rc, is_send ? "isend" : "irecv"));
        if (req != nullptr) {
            return req;
        }
        if (deadline.expired()) {
            return Status(Code::kTimeout, "no free request before the deadline");
        }
        idle(poll);
    }
}

Status barrierClient(Channel& chan, const Deadline& deadline) {
    ATLAS_RETURN_IF_ERROR(chan.send(MsgType::kBarrier, "", deadline));
    return chan.recv(MsgType::kBarrierAck, deadline).status();
}

Status barrierServer(Channel& chan, const Deadline& deadline) {
    ATLAS_RETURN_IF_ERROR(chan.recv(MsgType::kBarrier, deadline).status());
    return chan.send(MsgType::kBarrierAck, "", deadline);
}

// Bandwidth of one size. Client: sends (and receives in bidir), keeps the clock.
Status pluginBandwidth(PluginSide& side, Channel& chan, const Plan& plan, size_t size,
                       bool is_client, Row* row, const Deadline& deadline) {
    NetApi& net = side.net();
    const bool bidir = plan.direction == Direction::kBidir;
    const bool sending = is_client || bidir;
    const bool receiving = !is_client || bidir;
    const int nbuf = bufferCount(plan, size);
    Buffers send_buffers;
    Buffers recv_buffers;
    Lane send_lane;
    Lane recv_lane;
    if (sending) {
        Result<Buffers> s = makeBuffers(net, side.comms.send_comm, size, nbuf);
        if (!s.isOk()) {
            return s.status();
        }
        send_buffers = std::move(s).value();
        send_lane = Lane{true, side.comms.send_comm, &send_buffers, {}, 0, 0};
    }
    if (receiving) {
        Result<Buffers> r = makeBuffers(net, side.comms.recv_comm, size, nbuf);
        if (!r.isOk()) {
            return r.status();
        }
        recv_buffers = std::move(r).value();
        recv_lane = Lane{false, side.comms.recv_comm, &recv_buffers, {}, 0, 0};
    }
    Lane* sl = sending ? &send_lane : nullptr;
    Lane* rl = receiving ? &recv_lane : nullptr;
    if (plan.warmup > 0) {
        ATLAS_RETURN_IF_ERROR(annotate(moveMessages(net, sl, rl, size, plan.warmup, plan.window,
                                                    plan.check, 0, plan.poll, deadline),
                                       "warm-up"));
    }
    if (is_client) {
        ATLAS_RETURN_IF_ERROR(barrierClient(chan, deadline));
        const Nanos t0 = monotonicNowNs();
        ATLAS_RETURN_IF_ERROR(moveMessages(net, sl, rl, size, plan.iters, plan.window, plan.check,
                                           plan.warmup, plan.poll, deadline));
        // The server's completion message: every byte has arrived there.
        Result<void*> ack = post(net, false, side.comms.recv_comm, side.ack_buf.data(), 8,
                                 side.ack_recv_mr.mhandle(), plan.poll, deadline);
        if (!ack.isOk()) {
            return ack.status();
        }
        ATLAS_RETURN_IF_ERROR(
            annotate(waitRequest(net, *ack, nullptr, plan.poll, deadline), "ack"));
        const Nanos elapsed = monotonicNowNs() - t0;
        row->size = size;
        row->count = plan.iters;
        row->time_us = static_cast<double>(elapsed) / 1e3 / plan.iters;
        row->algbw_GBps = row->time_us > 0 ? static_cast<double>(size) / (row->time_us * 1e3) : 0;
        row->gbps = row->algbw_GBps * 8;
        return Status::ok();
    }
    ATLAS_RETURN_IF_ERROR(barrierServer(chan, deadline));
    ATLAS_RETURN_IF_ERROR(moveMessages(net, sl, rl, size, plan.iters, plan.window, plan.check,
                                       plan.warmup, plan.poll, deadline));
    Result<void*> ack = post(net, true, side.comms.send_comm, side.ack_buf.data(), 8,
                             side.ack_send_mr.mhandle(), plan.poll, deadline);
    if (!ack.isOk()) {
        return ack.status();
    }
    return annotate(waitRequest(net, *ack, nullptr, plan.poll, deadline), "ack");
}

// Ping-pong of one size. The client records every round trip after the warm-up.
Status pluginLatency(PluginSide& side, Channel& chan, const Plan& plan, size_t size, bool is_client,
                     Row* row, const Deadline& deadline) {
    NetApi& net = side.net();
    Result<Buffers> s = makeBuffers(net, side.comms.send_comm, size, 1);
    Result<Buffers> r = makeBuffers(net, side.comms.recv_comm, size, 1);
    if (!s.isOk() || !r.isOk()) {
        return s.isOk() ? r.status() : s.status();
    }
    void* sbuf = s->bufs[0].data();
    void* rbuf = r->bufs[0].data();
    void* smh = s->regs[0].mhandle();
    void* rmh = r->regs[0].mhandle();
    if (is_client) {
        ATLAS_RETURN_IF_ERROR(barrierClient(chan, deadline));
    } else {
        ATLAS_RETURN_IF_ERROR(barrierServer(chan, deadline));
    }
    std::vector<double> samples;
    samples.reserve(static_cast<size_t>(plan.iters));
    const int total = plan.warmup + plan.iters;
    for (int i = 0; i < total; ++i) {
        if (is_client) {
            // The reply's receive is pre-posted, as NCCL keeps receives posted ahead.
            Result<void*> rreq =
                post(net, false, side.comms.recv_comm, rbuf, size, rmh, plan.poll, deadline);
            if (!rreq.isOk()) {
                return rreq.status();
            }
            const Nanos t0 = monotonicNowNs();
            Result<void*> sreq =
                post(net, true, side.comms.send_comm, sbuf, size, smh, plan.poll, deadline);
            if (!sreq.isOk()) {
                return sreq.status();
            }
            ATLAS_RETURN_IF_ERROR(waitRequest(net, *sreq, nullptr, plan.poll, deadline));
            size_t got = 0;
            ATLAS_RETURN_IF_ERROR(waitRequest(net, *rreq, &got, plan.poll, deadline));
            const Nanos dt = monotonicNowNs() - t0;
            if (got != size) {
                return Status(Code::kInternal, "pong of " + std::to_string(got) + " B, expected " +
                                                   std::to_string(size));
            }
            if (i >= plan.warmup) {
                samples.push_back(static_cast<double>(dt) / 1e3);
            }
        } else {
            Result<void*> rreq =
                post(net, false, side.comms.recv_comm, rbuf, size, rmh, plan.poll, deadline);
            if (!rreq.isOk()) {
                return rreq.status();
            }
            ATLAS_RETURN_IF_ERROR(waitRequest(net, *rreq, nullptr, plan.poll, deadline));
            Result<void*> sreq =
                post(net, true, side.comms.send_comm, sbuf, size, smh, plan.poll, deadline);
            if (!sreq.isOk()) {
                return sreq.status();
            }
            ATLAS_RETURN_IF_ERROR(waitRequest(net, *sreq, nullptr, plan.poll, deadline));
        }
    }
    if (is_client) {
        row->size = size;
        row->count = plan.iters;
        row->p50_us = percentile(samples, 50);
        row->p99_us = percentile(samples, 99);
        row->mean_us = std::accumulate(samples.begin(), samples.end(), 0.0) /
                       static_cast<double>(std::max<size_t>(samples.size(), 1));
        row->min_us = *std::min_element(samples.begin(), samples.end());
        row->max_us = *std::max_element(samples.begin(), samples.end());
    }
    return Status::ok();
}

Status runPlugin(Channel& chan, const Plan& plan, const RoleConfig& cfg, bool is_client,
                 std::vector<Row>* rows) {
    PluginSide side;
    ATLAS_RETURN_IF_ERROR(setupPlugin(chan, cfg, plan.dev, &side));
    for (size_t size : plan.sizes) {
        Row row;
        Status st = plan.measure == Measure::kLatency
                        ? pluginLatency(side, chan, plan, size, is_client, &row, cfg.deadline)
                        : pluginBandwidth(side, chan, plan, size, is_client, &row, cfg.deadline);
        ATLAS_RETURN_IF_ERROR(annotate(st, "size " + formatSize(size)));
        if (is_client) {
            rows->push_back(row);
        }
    }
    // Close only after both sides are done with the data path.
    if (is_client) {
        ATLAS_RETURN_IF_ERROR(chan.send(MsgType::kDone, "", cfg.deadline));
        ATLAS_RETURN_IF_ERROR(chan.recv(MsgType::kDone, cfg.deadline).status());
    } else {
        ATLAS_RETURN_IF_ERROR(chan.recv(MsgType::kDone, cfg.deadline).status());
        ATLAS_RETURN_IF_ERROR(chan.send(MsgType::kDone, "", cfg.deadline));
    }
    return Status::ok();
}

Status hello(Channel& chan, const Deadline& deadline) {
    ATLAS_RETURN_IF_ERROR(chan.send(MsgType::kHello, kProtocolVersion, deadline));
    Result<std::string> peer = chan.recv(MsgType::kHello, deadline);
    if (!peer.isOk()) {
        return peer.status();
    }
    if (*peer != kProtocolVersion) {
        return Status(Code::kRemote, "peer speaks '" + *peer + "', this is " + kProtocolVersion);
    }
    return Status::ok();
}

}  // namespace

double percentile(std::vector<double> samples, double p) {
    if (samples.empty()) {
        return 0;
    }
    std::sort(samples.begin(), samples.end());
    double rank = p / 100.0 * static_cast<double>(samples.size());
    size_t idx = rank <= 1 ? 0 : static_cast<size_t>(std::ceil(rank)) - 1;
    return samples[std::min(idx, samples.size() - 1)];
}

Result<std::vector<Row>> runClient(Channel& chan, const Plan& plan, const RoleConfig& cfg) {
    std::vector<Row> rows;
    Status st = hello(chan, cfg.deadline);
    if (st.isOk()) {
        st = chan.send(MsgType::kPlan, encodePlan(plan), cfg.deadline);
    }
    if (st.isOk()) {
        st = plan.kind == Kind::kPlugin ? runPlugin(chan, plan, cfg, true, &rows)
                                        : runRawTcp(chan, plan, cfg, true, &rows);
    }
    if (!st.isOk()) {
        chan.sendError("client: " + st.toString());
        return st;
    }
    return rows;
}

Status runServer(Channel& chan, const RoleConfig& cfg) {
    Status st = hello(chan, cfg.deadline);
    Result<Plan> plan = Status(Code::kInternal, "no plan");
    if (st.isOk()) {
        Result<std::string> text = chan.recv(MsgType::kPlan, cfg.deadline);
        st = text.status();
        if (st.isOk()) {
            plan = decodePlan(*text);
            st = plan.status();
        }
    }
    if (st.isOk()) {
        st = plan->kind == Kind::kPlugin ? runPlugin(chan, *plan, cfg, false, nullptr)
                                         : runRawTcp(chan, *plan, cfg, false, nullptr);
    }
    if (!st.isOk()) {
        chan.sendError("server: " + st.toString());
    }
    return st;
}

}  // namespace atlas::netperf
