#include "perf/atlas-net-perf/raw_tcp.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <latch>
#include <numeric>
#include <thread>

namespace atlas::netperf {

namespace {

using abi::MappedBuffer;

// The connected streams; closed on destruction.
struct Streams {
    std::vector<int> fds;
    ~Streams() {
        for (int fd : fds) {
            if (fd >= 0) {
                close(fd);
            }
        }
    }
};

std::string joinHostPort(const std::string& host, uint16_t port) {
    bool v6 = host.find(':') != std::string::npos;
    return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

Status setupServer(Channel& chan, const Plan& plan, const RoleConfig& cfg, Streams* out) {
    std::string host = cfg.raw_host;
    if (host.empty()) {
        // Bootstrap over TCP: the client reached us on that address, so it can reach this one.
        Result<std::pair<std::string, uint16_t>> local = localAddress(chan.fd());
        host = local.isOk() ? local->first : "127.0.0.1";
    }
    Result<int> lfd = tcpListen(host, 0, 128);
    if (!lfd.isOk()) {
        return lfd.status();
    }
    Streams listener;
    listener.fds.push_back(*lfd);
    Result<std::pair<std::string, uint16_t>> bound = localAddress(*lfd);
    if (!bound.isOk()) {
        return bound.status();
    }
    ATLAS_RETURN_IF_ERROR(
        chan.send(MsgType::kRawAddr, joinHostPort(host, bound->second), cfg.deadline));
    out->fds.assign(static_cast<size_t>(plan.raw_streams), -1);
    for (int i = 0; i < plan.raw_streams; ++i) {
        Result<int> fd = tcpAccept(*lfd, cfg.deadline);
        if (!fd.isOk()) {
            return fd.status();
        }
        uint32_t index = 0;
        Status st = abi::readAll(*fd, &index, sizeof(index), cfg.deadline);
        if (!st.isOk() || index >= out->fds.size() || out->fds[index] >= 0) {
            close(*fd);
            return st.isOk() ? Status(Code::kRemote, "raw TCP: bad stream index") : st;
        }
        out->fds[index] = *fd;
    }
    return Status::ok();
}

Status setupClient(Channel& chan, const Plan& plan, const RoleConfig& cfg, Streams* out) {
    Result<std::string> addr = chan.recv(MsgType::kRawAddr, cfg.deadline);
    if (!addr.isOk()) {
        return addr.status();
    }
    Result<std::pair<std::string, uint16_t>> hp = parseHostPort(*addr);
    if (!hp.isOk()) {
        return hp.status();
    }
    for (int i = 0; i < plan.raw_streams; ++i) {
        Result<int> fd = tcpConnect(hp->first, hp->second, cfg.deadline);
        if (!fd.isOk()) {
            return fd.status();
        }
        out->fds.push_back(*fd);
        uint32_t index = static_cast<uint32_t>(i);
        ATLAS_RETURN_IF_ERROR(abi::writeAll(*fd, &index, sizeof(index), cfg.deadline));
    }
    return Status::ok();
}

// Runs the jobs on their own threads, released together after *start_ns is taken.
Status runTogether(const std::vector<std::function<Status()>>& jobs, Nanos* start_ns) {
    std::latch go(1);
    std::vector<Status> results(jobs.size());
    std::vector<std::thread> threads;
    threads.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
        threads.emplace_back([&, i] {
            go.wait();
            results[i] = jobs[i]();
        });
    }
    *start_ns = monotonicNowNs();
    go.count_down();
    for (std::thread& t : threads) {
        t.join();
    }
    for (Status& s : results) {
        if (!s.isOk()) {
            return s;
        }
    }
    return Status::ok();
}

// Moves `n` messages: stream k carries bytes [offset_k, offset_k + part_k) of each message.
Status moveRaw(const Streams& streams, bool sending, bool receiving, const uint8_t* src,
               uint8_t* dst, size_t size, int n, Nanos* start_ns, const Deadline& deadline) {
    const size_t nstreams = streams.fds.size();
    std::vector<std::function<Status()>> jobs;
    size_t offset = 0;
    for (size_t k = 0; k < nstreams; ++k) {
        size_t part = size / nstreams + (k < size % nstreams ? 1 : 0);
        int fd = streams.fds[k];
        if (sending && part > 0) {
            jobs.emplace_back([=, &deadline]() -> Status {
                for (int m = 0; m < n; ++m) {
                    ATLAS_RETURN_IF_ERROR(abi::writeAll(fd, src + offset, part, deadline));
                }
                return Status::ok();
            });
        }
        if (receiving && part > 0) {
            jobs.emplace_back([=, &deadline]() -> Status {
                for (int m = 0; m < n; ++m) {
                    ATLAS_RETURN_IF_ERROR(abi::readAll(fd, dst + offset, part, deadline));
                }
                return Status::ok();
            });
        }
        offset += part;
    }
    return runTogether(jobs, start_ns);
}

Status barrier(Channel& chan, bool is_client, const Deadline& deadline) {
    if (is_client) {
        ATLAS_RETURN_IF_ERROR(chan.send(MsgType::kBarrier, "", deadline));
        return chan.recv(MsgType::kBarrierAck, deadline).status();
    }
    ATLAS_RETURN_IF_ERROR(chan.recv(MsgType::kBarrier, deadline).status());
    return chan.send(MsgType::kBarrierAck, "", deadline);
}

Status rawBandwidth(Channel& chan, const Streams& streams, const Plan& plan, size_t size,
                    bool is_client, Row* row, const Deadline& deadline) {
    const bool bidir = plan.direction == Direction::kBidir;
    const bool sending = is_client || bidir;
    const bool receiving = !is_client || bidir;
    Result<MappedBuffer> src = MappedBuffer::create(size);
    Result<MappedBuffer> dst = MappedBuffer::create(size);
    if (!src.isOk() || !dst.isOk()) {
        return src.isOk() ? dst.status() : src.status();
    }
    std::memset(src->data(), 0x5a, size);
    std::memset(dst->data(), 0, size);
    Nanos unused = 0;
    if (plan.warmup > 0) {
        ATLAS_RETURN_IF_ERROR(moveRaw(streams, sending, receiving, src->data(), dst->data(), size,
                                      plan.warmup, &unused, deadline));
    }
    ATLAS_RETURN_IF_ERROR(barrier(chan, is_client, deadline));
    Nanos t0 = 0;
    ATLAS_RETURN_IF_ERROR(moveRaw(streams, sending, receiving, src->data(), dst->data(), size,
                                  plan.iters, &t0, deadline));
    uint8_t ack = 1;
    if (!is_client) {
        return abi::writeAll(streams.fds[0], &ack, 1, deadline);
    }
    ATLAS_RETURN_IF_ERROR(abi::readAll(streams.fds[0], &ack, 1, deadline));
    const Nanos elapsed = monotonicNowNs() - t0;
    row->size = size;
    row->count = plan.iters;
    row->time_us = static_cast<double>(elapsed) / 1e3 / plan.iters;
    row->algbw_GBps = row->time_us > 0 ? static_cast<double>(size) / (row->time_us * 1e3) : 0;
    row->gbps = row->algbw_GBps * 8;
    return Status::ok();
}

Status rawLatency(Channel& chan, const Streams& streams, const Plan& plan, size_t size,
                  bool is_client, Row* row, const Deadline& deadline) {
    Result<MappedBuffer> buf = MappedBuffer::create(size);
    if (!buf.isOk()) {
        return buf.status();
    }
    std::memset(buf->data(), 0x5a, size);
    ATLAS_RETURN_IF_ERROR(barrier(chan, is_client, deadline));
    const int fd = streams.fds[0];
    std::vector<double> samples;
    for (int i = 0; i < plan.warmup + plan.iters; ++i) {
        if (is_client) {
            const Nanos t0 = monotonicNowNs();
            ATLAS_RETURN_IF_ERROR(abi::writeAll(fd, buf->data(), size, deadline));
            ATLAS_RETURN_IF_ERROR(abi::readAll(fd, buf->data(), size, deadline));
            if (i >= plan.warmup) {
                samples.push_back(static_cast<double>(monotonicNowNs() - t0) / 1e3);
            }
        } else {
            ATLAS_RETURN_IF_ERROR(abi::readAll(fd, buf->data(), size, deadline));
            ATLAS_RETURN_IF_ERROR(abi::writeAll(fd, buf->data(), size, deadline));
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

}  // namespace

Status runRawTcp(Channel& chan, const Plan& plan, const RoleConfig& cfg, bool is_client,
                 std::vector<Row>* rows) {
    Streams streams;
    ATLAS_RETURN_IF_ERROR(is_client ? setupClient(chan, plan, cfg, &streams)
                                    : setupServer(chan, plan, cfg, &streams));
    for (size_t size : plan.sizes) {
        Row row;
        Status st = plan.measure == Measure::kLatency
                        ? rawLatency(chan, streams, plan, size, is_client, &row, cfg.deadline)
                        : rawBandwidth(chan, streams, plan, size, is_client, &row, cfg.deadline);
        if (!st.isOk()) {
            return Status(st.code(), "raw TCP, size " + formatSize(size) + ": " + st.message());
        }
        if (is_client) {
            rows->push_back(row);
        }
    }
    if (is_client) {
        ATLAS_RETURN_IF_ERROR(chan.send(MsgType::kDone, "", cfg.deadline));
        return chan.recv(MsgType::kDone, cfg.deadline).status();
    }
    ATLAS_RETURN_IF_ERROR(chan.recv(MsgType::kDone, cfg.deadline).status());
    return chan.send(MsgType::kDone, "", cfg.deadline);
}

}  // namespace atlas::netperf
